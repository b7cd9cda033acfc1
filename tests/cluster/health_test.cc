// What grpc.health.v1 says on each node of a real cluster (one etcd, three
// hourglassd on loopback): "" is SERVING on the primary and the in-sync
// backups, hourglass.v1.Primary only on the primary (node/node_health.h),
// through a failover and a hand-over. Kubernetes' probes ask these with the
// CLI (deploy/kubernetes/cluster/), so the CLI's answers are checked too.

#include <signal.h>

#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/testing/daemon.h"
#include "tests/testing/etcd_server.h"
#include "tests/testing/eventually.h"
#include "tests/testing/peer_secret.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"

namespace hourglass {
namespace {

using ::grpc::health::v1::Health;
using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;
using ::hourglass::testing::Daemon;
using ::hourglass::testing::EtcdServer;
using ::testing::HasSubstr;

constexpr absl::Duration kPatience = absl::Seconds(30);
constexpr char kPrimary[] = "hourglass.v1.Primary";

// A node's two statuses: the whole server's ("") and kPrimary's.
struct Statuses {
  std::string member;
  std::string primary;
  bool operator==(const Statuses&) const = default;
};

void PrintTo(const Statuses& s, std::ostream* out) {
  *out << "{\"\": " << s.member << ", " << kPrimary << ": " << s.primary << "}";
}

const Statuses kPrimaryNode = {"SERVING", "SERVING"};
const Statuses kInSyncBackup = {"SERVING", "NOT_SERVING"};
const Statuses kNotReady = {"NOT_SERVING", "NOT_SERVING"};

class ClusterHealthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<EtcdServer>> etcd = EtcdServer::Start();
    ASSERT_TRUE(etcd.ok()) << etcd.status();
    etcd_ = *std::move(etcd);
  }

  void StartNodes(const std::vector<std::string>& ids) {
    for (const std::string& id : ids) {
      absl::StatusOr<std::unique_ptr<Daemon>> node = Daemon::Start(
          HOURGLASSD_PATH, dir_.path() + "/" + id,
          {"--etcd=" + etcd_->endpoint(), "--node_id=" + id, "--shards=1",
           "--lease_ttl=2s", "--shutdown_grace=500ms",
           testing::PeerSecretFlag(dir_.path())});
      ASSERT_TRUE(node.ok()) << node.status();
      nodes_[id] = *std::move(node);
    }
  }

  // What `node`'s grpc.health.v1 says of `service`: the status's name, or
  // the call's error.
  std::string Check(const std::string& node, const std::string& service) {
    auto stub = Health::NewStub(nodes_.at(node)->Channel());
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    HealthCheckRequest request;
    request.set_service(service);
    HealthCheckResponse response;
    const grpc::Status status = stub->Check(&context, request, &response);
    if (!status.ok()) return absl::StrCat("error ", status.error_code());
    return HealthCheckResponse::ServingStatus_Name(response.status());
  }

  Statuses StatusesOf(const std::string& node) {
    return {Check(node, ""), Check(node, kPrimary)};
  }

  // Waits until the nodes' statuses are `want` (false if not within the
  // patience).
  bool AwaitStatuses(const std::map<std::string, Statuses>& want) {
    return testing::Eventually(
        [&] {
          for (const auto& [node, statuses] : want) {
            if (StatusesOf(node) != statuses) return false;
          }
          return true;
        },
        kPatience);
  }

  // The node among `candidates` whose kPrimary is SERVING, once one's is
  // ("" if none within the patience).
  std::string AwaitPrimary(const std::vector<std::string>& candidates) {
    std::string primary;
    testing::Eventually(
        [&] {
          for (const std::string& id : candidates) {
            if (Check(id, kPrimary) == "SERVING") {
              primary = id;
              return true;
            }
          }
          return false;
        },
        kPatience);
    return primary;
  }

  // `hourglass --addr=<node> health [--service=...]`, as the probes run it.
  testing::RunResult Cli(const std::string& node,
                         const std::string& service = "") {
    std::vector<std::string> argv = {HOURGLASS_PATH,
                                     "--addr=" + nodes_.at(node)->address(),
                                     "--timeout=3s", "health"};
    if (!service.empty()) argv.push_back("--service=" + service);
    return testing::Run(argv, kPatience);
  }

  testing::TempDir dir_;
  std::unique_ptr<EtcdServer> etcd_;
  std::map<std::string, std::unique_ptr<Daemon>> nodes_;
};

TEST_F(ClusterHealthTest, OnlyThePrimaryAndInSyncBackupsAreReady) {
  // Two of three nodes: the shard does not exist yet, so neither has a
  // part in it.
  StartNodes({"a", "b"});
  EXPECT_EQ(StatusesOf("a"), kNotReady);
  EXPECT_EQ(StatusesOf("b"), kNotReady);

  // The third creates it, with a primary (the first id) and both others
  // in sync.
  StartNodes({"c"});
  ASSERT_TRUE(AwaitStatuses(
      {{"a", kPrimaryNode}, {"b", kInSyncBackup}, {"c", kInSyncBackup}}));
  EXPECT_EQ(StatusesOf("a"), kPrimaryNode);
  EXPECT_EQ(StatusesOf("b"), kInSyncBackup);
  EXPECT_EQ(StatusesOf("c"), kInSyncBackup);

  // The CLI's answers, which are the probes' exit codes.
  testing::RunResult ready = Cli("b");
  EXPECT_EQ(ready.exit_code, 0) << ready.output;
  EXPECT_EQ(ready.output, "SERVING\n");
  testing::RunResult not_primary = Cli("b", kPrimary);
  EXPECT_EQ(not_primary.exit_code, 1) << not_primary.output;
  EXPECT_THAT(not_primary.output, HasSubstr("NOT_SERVING\n"));
  testing::RunResult primary = Cli("a", kPrimary);
  EXPECT_EQ(primary.exit_code, 0) << primary.output;
  EXPECT_EQ(primary.output, "SERVING\n");

  // kill -9 of the primary: once its lease ends, an in-sync backup is
  // promoted and says so; the other stays an in-sync backup.
  nodes_.at("a")->Kill();
  const std::string next = AwaitPrimary({"b", "c"});
  ASSERT_FALSE(next.empty());
  const std::string other = next == "b" ? "c" : "b";
  ASSERT_TRUE(AwaitStatuses({{next, kPrimaryNode}, {other, kInSyncBackup}}));
  EXPECT_EQ(StatusesOf(next), kPrimaryNode);
  EXPECT_EQ(StatusesOf(other), kInSyncBackup);

  // a comes back with its data as a backup, and is ready once the new
  // primary has it in sync again.
  StartNodes({"a"});
  ASSERT_TRUE(AwaitStatuses({{"a", kInSyncBackup}}));
  EXPECT_EQ(StatusesOf("a"), kInSyncBackup);
  EXPECT_EQ(StatusesOf(next), kPrimaryNode);
  EXPECT_EQ(StatusesOf(other), kInSyncBackup);
}

TEST_F(ClusterHealthTest, AStoppedPrimaryStopsBeingReadyBeforeItHandsOver) {
  StartNodes({"a", "b", "c"});
  ASSERT_TRUE(AwaitStatuses(
      {{"a", kPrimaryNode}, {"b", kInSyncBackup}, {"c", kInSyncBackup}}));

  // SIGTERM, as Kubernetes sends it: a says NOT_SERVING for both names as
  // it steps down, before it leaves the cluster, and exits 0.
  EXPECT_EQ(nodes_.at("a")->Stop(), 0);
  const std::string& log = nodes_.at("a")->process().output();
  const size_t not_serving = log.find(
      "hourglassd health: NOT_SERVING (\"\"), NOT_SERVING "
      "(hourglass.v1.Primary)");
  ASSERT_NE(not_serving, std::string::npos) << log;
  const size_t stepped_down = log.find("stops being the primary of shard 0");
  ASSERT_NE(stepped_down, std::string::npos) << log;
  EXPECT_LT(stepped_down, not_serving);
  EXPECT_EQ(log.find("hourglassd health: SERVING", not_serving),
            std::string::npos)
      << log;

  // The hand-over: an in-sync backup is the primary now.
  const std::string next = AwaitPrimary({"b", "c"});
  ASSERT_FALSE(next.empty());
  const std::string other = next == "b" ? "c" : "b";
  ASSERT_TRUE(AwaitStatuses({{next, kPrimaryNode}, {other, kInSyncBackup}}));
}

}  // namespace
}  // namespace hourglass
