// Cluster mode over TLS end to end: etcd serving its clients over TLS with
// client certificates, three real hourglassd with --tls_cert, --tls_key,
// --tls_client_ca and --tls_peer_ca (mutual TLS for clients and between
// nodes), and a client over TLS; a node whose --tls_peer_ca does not trust
// the others; and a node with TLS but no --tls_peer_ca, which does not
// start.
// Certificates are made by the openssl command for the suite.

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/channel.h"
#include "client/consumer.h"
#include "client/publisher.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "hourglass/v1/admin.grpc.pb.h"
#include "hourglass/v1/cluster.grpc.pb.h"
#include "tests/testing/certificates.h"
#include "tests/testing/daemon.h"
#include "tests/testing/etcd_server.h"
#include "tests/testing/eventually.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"

namespace hourglass {
namespace {

using ::hourglass::client::Channel;
using ::hourglass::client::ChannelOptions;
using ::hourglass::client::Consumer;
using ::hourglass::client::ConsumerOptions;
using ::hourglass::client::Delivery;
using ::hourglass::client::Message;
using ::hourglass::client::Publisher;
using ::hourglass::client::Receipt;
using ::hourglass::testing::Daemon;
using ::hourglass::testing::EtcdServer;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

constexpr absl::Duration kPatience = absl::Seconds(30);

// The suite's CA and what it signs: a certificate for each node (a server
// and, towards its peers and etcd, a client: 127.0.0.1 among its names,
// as Daemon's nodes advertise 127.0.0.1:PORT), etcd's, and a client's; and
// another CA.
class ClusterCertificates : public testing::Certificates {
 public:
  ClusterCertificates() : testing::Certificates(OPENSSL_PATH) {
    MakeCa("ca", "Hourglass cluster test CA");
    for (const char* node : {"a", "b", "c"}) {
      MakeCert(absl::StrCat("node-", node), "ca", absl::StrCat("node-", node),
               "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
               "extendedKeyUsage=serverAuth,clientAuth\n");
    }
    MakeCert("etcd", "ca", "etcd",
             "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
             "extendedKeyUsage=serverAuth\n");
    MakeCert("client", "ca", "hourglass-client",
             "extendedKeyUsage=clientAuth\n");
    MakeCa("other-ca", "Another CA");
  }
};

class ClusterTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { certs_ = new ClusterCertificates(); }
  static void TearDownTestSuite() {
    delete certs_;
    certs_ = nullptr;
  }

  // Starts etcd: over TLS with client certificates if `tls`, else
  // plaintext.
  void StartEtcd(bool tls) {
    absl::StatusOr<std::unique_ptr<EtcdServer>> etcd =
        tls ? EtcdServer::Start(EtcdServer::Tls{
                  .cert_file = certs_->Pem("etcd"),
                  .key_file = certs_->Key("etcd"),
                  .client_ca_file = certs_->Pem("ca"),
                  .credentials = certs_->Credentials("ca", "client")})
            : EtcdServer::Start();
    ASSERT_TRUE(etcd.ok()) << etcd.status();
    etcd_ = *std::move(etcd);
    etcd_tls_ = tls;
  }

  // Starts node `id` with mutual TLS (its own certificate, clients' and
  // peers' certificates from the suite's CA, named explicitly as
  // --tls_peer_ca unless `more` names another), TLS to etcd if etcd speaks
  // it, and `more` flags.
  void StartNode(const std::string& id, std::vector<std::string> more = {}) {
    const std::string name = "node-" + id;
    std::vector<std::string> flags = {"--etcd=" + etcd_->endpoint(),
                                      "--node_id=" + id,
                                      "--shards=1",
                                      "--lease_ttl=2s",
                                      "--shutdown_grace=500ms",
                                      "--tls_cert=" + certs_->Pem(name),
                                      "--tls_key=" + certs_->Key(name),
                                      "--tls_client_ca=" + certs_->Pem("ca")};
    if (etcd_tls_) {
      flags.insert(flags.end(), {"--etcd_ca=" + certs_->Pem("ca"),
                                 "--etcd_cert=" + certs_->Pem(name),
                                 "--etcd_key=" + certs_->Key(name)});
    }
    if (std::none_of(more.begin(), more.end(), [](const std::string& flag) {
          return flag.starts_with("--tls_peer_ca=");
        })) {
      flags.push_back("--tls_peer_ca=" + certs_->Pem("ca"));
    }
    flags.insert(flags.end(), more.begin(), more.end());
    absl::StatusOr<std::unique_ptr<Daemon>> node =
        Daemon::Start(HOURGLASSD_PATH, dir_.path() + "/" + id, flags);
    ASSERT_TRUE(node.ok()) << node.status();
    nodes_[id] = *std::move(node);
  }

  // A gRPC channel to node `id` over mutual TLS, as the suite's client.
  std::shared_ptr<grpc::Channel> ChannelTo(const std::string& id) {
    return nodes_.at(id)->Channel(certs_->Credentials("ca", "client"));
  }

  // The cluster map as node `id` sees it; an empty one if it does not
  // answer.
  v1::ClusterMap MapOf(const std::string& id) {
    auto stub = v1::Cluster::NewStub(ChannelTo(id));
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    v1::ClusterMap map;
    if (!stub->GetClusterMap(&context, v1::GetClusterMapRequest(), &map).ok()) {
      return v1::ClusterMap();
    }
    return map;
  }

  // The node among `candidates` that serves (GetStats answers OK), once one
  // does ("" if none does within the patience).
  std::string AwaitPrimary(const std::vector<std::string>& candidates) {
    std::string primary;
    testing::Eventually(
        [&] {
          for (const std::string& id : candidates) {
            auto stub = v1::Admin::NewStub(ChannelTo(id));
            grpc::ClientContext context;
            context.set_deadline(
                absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
            v1::GetStatsResponse response;
            if (stub->GetStats(&context, v1::GetStatsRequest(), &response)
                    .ok()) {
              primary = id;
              return true;
            }
          }
          return false;
        },
        kPatience);
    return primary;
  }

  // Whether node `id` sees shard 0's in-sync set as `isr` (in any order),
  // once it does (false if not within the patience).
  bool AwaitIsr(const std::string& id, std::vector<std::string> isr) {
    std::sort(isr.begin(), isr.end());
    return testing::Eventually(
        [&] {
          const v1::ClusterMap map = MapOf(id);
          if (map.shards_size() != 1) return false;
          std::vector<std::string> seen(map.shards(0).isr().begin(),
                                        map.shards(0).isr().end());
          std::sort(seen.begin(), seen.end());
          return seen == isr;
        },
        kPatience);
  }

  // hourglass_replication_refused_total of node `id` (-1 if its metrics
  // do not say).
  int Refused(const std::string& id) {
    const std::string metrics = nodes_.at(id)->ScrapeMetrics();
    const std::string name = "\nhourglass_replication_refused_total ";
    const size_t at = metrics.find(name);
    if (at == std::string::npos) return -1;
    const size_t start = at + name.size();
    int value = -1;
    if (!absl::SimpleAtoi(
            metrics.substr(start, metrics.find('\n', start) - start), &value)) {
      return -1;
    }
    return value;
  }

  // The client library over mutual TLS, to every node.
  std::shared_ptr<Channel> ClientChannel() {
    std::vector<std::string> addresses;
    for (const auto& [id, node] : nodes_) addresses.push_back(node->address());
    ChannelOptions options;
    options.address = absl::StrJoin(addresses, ",");
    options.tls.ca_file = certs_->Pem("ca");
    options.tls.cert_file = certs_->Pem("client");
    options.tls.key_file = certs_->Key("client");
    absl::StatusOr<std::shared_ptr<Channel>> channel = Channel::Create(options);
    EXPECT_TRUE(channel.ok()) << channel.status();
    return channel.ok() ? *channel : nullptr;
  }

  static ClusterCertificates* certs_;
  testing::TempDir dir_;
  std::unique_ptr<EtcdServer> etcd_;
  bool etcd_tls_ = false;
  std::map<std::string, std::unique_ptr<Daemon>> nodes_;
};

ClusterCertificates* ClusterTlsTest::certs_ = nullptr;

TEST_F(ClusterTlsTest, ReplicatesOverMutualTlsFailsOverAndRebuildsAWipedNode) {
  ASSERT_NO_FATAL_FAILURE(StartEtcd(/*tls=*/true));
  // No write-ahead log kept to catch up from: the wiped node below is
  // rebuilt from a checkpoint, sent over mutual TLS.
  const std::vector<std::string> no_log = {"--replication_log_keep=0"};
  for (const char* id : {"a", "b", "c"}) {
    ASSERT_NO_FATAL_FAILURE(StartNode(id, no_log));
  }
  EXPECT_THAT(
      nodes_.at("a")->process().output(),
      HasSubstr(absl::StrCat("as node a; peers over mutual TLS verified by ",
                             certs_->Pem("ca"), "; etcd over TLS verified by ",
                             certs_->Pem("ca"), " with a client certificate")));
  EXPECT_THAT(nodes_.at("a")->process().output(),
              HasSubstr("with a client certificate; peers prove who they are "
                        "by mutual TLS"));
  EXPECT_THAT(nodes_.at("a")->process().output(),
              HasSubstr("): mutual TLS, no authentication"));
  // One CA signs clients and nodes alike here: said at every start.
  EXPECT_THAT(
      nodes_.at("a")->process().output(),
      HasSubstr(absl::StrCat("WARNING: --tls_peer_ca is the --tls_client_ca (",
                             certs_->Pem("ca"),
                             "): every client certificate counts as a node")));
  ASSERT_EQ(AwaitPrimary({"a", "b", "c"}), "a");
  // Both backups follow a's log over TLS: the in-sync set is whole.
  ASSERT_TRUE(AwaitIsr("a", {"a", "b", "c"}))
      << nodes_.at("b")->process().output();

  std::shared_ptr<Channel> channel = ClientChannel();
  ASSERT_NE(channel, nullptr);
  EXPECT_TRUE(channel->tls());
  Publisher publisher(channel);
  Message before;
  before.topic = "orders";
  before.id = "before";
  before.payload = "published to a";
  before.delay = absl::Seconds(2);
  absl::StatusOr<Receipt> receipt = publisher.Publish(before);
  ASSERT_TRUE(receipt.ok()) << receipt.status();

  nodes_.at("a")->Kill();
  const std::string primary = AwaitPrimary({"b", "c"});
  ASSERT_FALSE(primary.empty()) << "no new primary";
  Message after = before;
  after.id = "after";
  after.payload = "published to " + primary;
  after.delay = absl::ZeroDuration();
  receipt = publisher.Publish(after);
  ASSERT_TRUE(receipt.ok()) << receipt.status();
  EXPECT_EQ(receipt->id, "after");

  ConsumerOptions options;
  options.topic = "orders";
  options.group = "g";
  options.rpc = ConsumerOptions::Rpc::kSubscribe;
  absl::StatusOr<std::unique_ptr<Consumer>> consumer =
      Consumer::Subscribe(channel, options, nullptr);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  std::vector<std::string> got;
  const absl::Time deadline = absl::Now() + kPatience;
  while (got.size() < 2 && absl::Now() < deadline) {
    for (const Delivery& d : (*consumer)->Receive(2, deadline)) {
      got.push_back(d.id);
      EXPECT_TRUE((*consumer)->Ack(d.id).ok());
    }
  }
  EXPECT_THAT(got, UnorderedElementsAre("before", "after"));

  // a comes back with its disk wiped: it fetches a checkpoint from the new
  // primary over TLS, follows its log and rejoins the in-sync set.
  std::filesystem::remove_all(dir_.path() + "/a");
  ASSERT_NO_FATAL_FAILURE(StartNode("a", no_log));
  EXPECT_TRUE(nodes_.at("a")->process().WaitForOutput(
      "cluster: node a rebuilt its copy of shard 0", kPatience))
      << nodes_.at("a")->process().output();
  EXPECT_TRUE(AwaitIsr(primary, {"a", "b", "c"}))
      << nodes_.at("a")->process().output();
}

TEST_F(ClusterTlsTest, ANodeWhosePeerCaTrustsNoOtherNodeIsKeptOutOfTheIsr) {
  ASSERT_NO_FATAL_FAILURE(StartEtcd(/*tls=*/false));
  ASSERT_NO_FATAL_FAILURE(StartNode("a"));
  ASSERT_NO_FATAL_FAILURE(StartNode("b"));
  // c's server takes clients of the suite's CA, but it counts as peers
  // only certificates of another CA: a's replication stream is refused.
  ASSERT_NO_FATAL_FAILURE(
      StartNode("c", {"--tls_peer_ca=" + certs_->Pem("other-ca")}));
  ASSERT_EQ(AwaitPrimary({"a", "b", "c"}), "a");
  const std::string why =
      "only the cluster's nodes may call this: the caller's certificate "
      "\"/CN=node-a\" is not signed by --tls_peer_ca (";
  // c says why it refuses a, and a why it cannot ship to c.
  EXPECT_TRUE(nodes_.at("c")->process().WaitForOutput(
      "cluster: node c refused a call to its Replication service from ",
      kPatience));
  EXPECT_TRUE(nodes_.at("c")->process().WaitForOutput(why, kPatience))
      << nodes_.at("c")->process().output();
  EXPECT_TRUE(nodes_.at("a")->process().WaitForOutput(
      absl::StrCat("replication: shipping shard 0 to c (",
                   nodes_.at("c")->address(), "): ", why),
      kPatience))
      << nodes_.at("a")->process().output();
  // The shard was created with every replica in sync. The first write
  // waits for c until the primary drops it (a backup that is behind and
  // makes no progress), then takes writes with a and b (--min_insync=2).
  std::shared_ptr<Channel> channel = ClientChannel();
  ASSERT_NE(channel, nullptr);
  Publisher publisher(channel);
  Message m;
  m.topic = "orders";
  m.id = "o1";
  m.payload = "x";
  m.delay = absl::Hours(1);
  absl::StatusOr<Receipt> receipt = publisher.Publish(m);
  ASSERT_TRUE(receipt.ok()) << receipt.status();
  ASSERT_TRUE(AwaitIsr("a", {"a", "b"}));
  const v1::ClusterMap map = MapOf("a");
  ASSERT_EQ(map.shards_size(), 1);
  EXPECT_THAT(map.shards(0).replicas(), UnorderedElementsAre("a", "b", "c"));
  m.id = "o2";
  receipt = publisher.Publish(m);
  ASSERT_TRUE(receipt.ok()) << receipt.status();

  // a keeps trying c, and c keeps refusing: it stays out.
  const int refused = Refused("c");
  EXPECT_GE(refused, 1);
  EXPECT_TRUE(
      testing::Eventually([&] { return Refused("c") > refused; }, kPatience));
  EXPECT_THAT(MapOf("a").shards(0).isr(), UnorderedElementsAre("a", "b"));
}

// With TLS, the nodes' CA must be named: by default it would be the
// clients', and every client certificate would count as a node.
TEST_F(ClusterTlsTest, ANodeWithTlsAndNoPeerCaDoesNotStart) {
  ASSERT_NO_FATAL_FAILURE(StartEtcd(/*tls=*/false));
  absl::StatusOr<std::unique_ptr<testing::Subprocess>> node =
      testing::Subprocess::Start({HOURGLASSD_PATH, "--listen=127.0.0.1:0",
                                  "--metrics_listen=127.0.0.1:0",
                                  "--data_dir=" + dir_.path() + "/a",
                                  "--etcd=" + etcd_->endpoint(), "--node_id=a",
                                  "--tls_cert=" + certs_->Pem("node-a"),
                                  "--tls_key=" + certs_->Key("node-a"),
                                  "--tls_client_ca=" + certs_->Pem("ca")});
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ((*node)->Wait(kPatience), 1) << (*node)->output();
  EXPECT_THAT((*node)->output(),
              HasSubstr("hourglassd: --tls_cert in cluster mode needs "
                        "--tls_peer_ca: the CAs that sign the nodes' "
                        "certificates, and only theirs"));
}

}  // namespace
}  // namespace hourglass
