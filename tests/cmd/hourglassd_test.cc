// Runs the real hourglassd binary and checks what an operator sees: exit
// codes, one-line reasons, health, graceful shutdown, flag files.

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "storage/keys.h"
#include "storage/rocksdb_store.h"
#include "tests/testing/daemon.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"

namespace hourglass {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;
using ::testing::UnorderedElementsAre;

constexpr absl::Duration kTimeout = absl::Seconds(30);

// hourglassd with `flags`, serving metrics on an OS-chosen port unless
// `flags` say otherwise (the last occurrence of a flag wins).
std::vector<std::string> Daemon(std::vector<std::string> flags) {
  flags.insert(flags.begin(),
               {HOURGLASSD_PATH, "--metrics_listen=127.0.0.1:0"});
  return flags;
}

// The port from the "listening on ... (port N)" log line.
int ListeningPort(const std::string& output) {
  const size_t at = output.find("(port ");
  if (at == std::string::npos) return 0;
  const size_t end = output.find(')', at);
  int port = 0;
  if (!absl::SimpleAtoi(output.substr(at + 6, end - at - 6), &port)) return 0;
  return port;
}

// The port from the "serving metrics on ... (port N)" log line.
int MetricsPort(const std::string& output) {
  const size_t at = output.find("serving metrics on");
  if (at == std::string::npos) return 0;
  return ListeningPort(output.substr(at));
}

// A socket listening on an OS-chosen loopback port, to make it busy.
class BusyPort {
 public:
  BusyPort() : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address = {};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&address), length) == 0 &&
        listen(fd_, 1) == 0 &&
        getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
      port_ = ntohs(address.sin_port);
    }
  }
  ~BusyPort() { close(fd_); }
  int port() const { return port_; }

 private:
  const int fd_;
  int port_ = 0;
};

TEST(HourglassdTest, RefusesABadDurabilityWithOneLine) {
  testing::TempDir dir;
  const testing::RunResult result = testing::Run(
      Daemon({"--durability=bogus", "--data_dir=" + dir.path()}), kTimeout);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.output,
              HasSubstr("--durability must be sync or async, not \"bogus\""));
}

TEST(HourglassdTest, RefusesAHorizonOutOfRange) {
  testing::TempDir dir;
  const testing::RunResult result = testing::Run(
      Daemon({"--horizon=-5s", "--data_dir=" + dir.path()}), kTimeout);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.output,
              HasSubstr("--horizon must be between 1s and 24h, not -5s"));
}

TEST(HourglassdTest, RefusesAnUnknownFlag) {
  const testing::RunResult result =
      testing::Run(Daemon({"--no_such_flag=1"}), kTimeout);
  EXPECT_NE(result.exit_code, 0);
  EXPECT_THAT(result.output, HasSubstr("no_such_flag"));
}

TEST(HourglassdTest, RefusesADataDirInUseAndLeavesItAlone) {
  testing::TempDir dir;
  auto holder = storage::RocksDbStore::Open({.path = dir.path()});
  ASSERT_TRUE(holder.ok()) << holder.status();
  const testing::RunResult result = testing::Run(
      Daemon({"--listen=127.0.0.1:0", "--data_dir=" + dir.path()}), kTimeout);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.output,
              HasSubstr(absl::StrCat("data dir ", dir.path(),
                                     " is in use by another hourglassd")));
  EXPECT_THAT(result.output, Not(HasSubstr("listening")));
}

TEST(HourglassdTest, RefusesATokenFileOthersMayReadWithOneLine) {
  testing::TempDir dir;
  const std::string tokens = dir.path() + "/tokens.txt";
  std::ofstream(tokens) << "producer-0123456789abcdef produce\n";
  ASSERT_EQ(chmod(tokens.c_str(), 0644), 0);
  const testing::RunResult result =
      testing::Run(Daemon({"--listen=127.0.0.1:0", "--auth_tokens=" + tokens,
                           "--data_dir=" + dir.path() + "/data"}),
                   kTimeout);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.output,
              HasSubstr(absl::StrCat("hourglassd: ", tokens,
                                     " is readable by group and others (mode "
                                     "0644); chmod 600 it\n")));
  EXPECT_EQ(std::count(result.output.begin(), result.output.end(), '\n'), 1)
      << result.output;
}

TEST(HourglassdTest, RefusesBadClusterFlagsNamingTheFlag) {
  testing::TempDir dir;
  const std::string missing = dir.path() + "/missing.pem";
  const std::string not_pem = dir.path() + "/not.pem";
  std::ofstream(not_pem) << "not a certificate\n";
  const std::string short_secret = dir.path() + "/short-secret";
  std::ofstream(short_secret) << "too short\n";
  ASSERT_EQ(chmod(short_secret.c_str(), 0600), 0);
  // No etcd needs to run: the flags are checked before it is reached.
  const std::string etcd = "--etcd=127.0.0.1:1";
  struct Case {
    std::vector<std::string> flags;
    std::string error;
  };
  const std::vector<Case> cases = {
      {{etcd, "--tls_peer_ca=" + not_pem},
       "--tls_peer_ca needs --tls_cert and --tls_key: nodes speak TLS to "
       "each other when their gRPC servers do"},
      {{etcd, "--tls_peer_server_name=node"},
       "--tls_peer_server_name needs --tls_cert and --tls_key"},
      {{etcd, "--tls_cert=" + not_pem, "--tls_key=" + not_pem},
       "--tls_cert in cluster mode needs --tls_peer_ca: the CAs that sign "
       "the nodes' certificates, and only theirs (not --tls_client_ca's: "
       "every client certificate would count as a node, and could replicate "
       "into and out of it)"},
      {{etcd, "--tls_cert=" + not_pem, "--tls_key=" + not_pem,
        "--tls_client_ca=" + not_pem},
       "--tls_cert in cluster mode needs --tls_peer_ca"},
      // Nodes prove who they are to one another, or say they do not.
      {{etcd},
       "cluster mode needs its nodes to prove who they are to one another, "
       "or anyone who reaches a node's port could replicate into and out of "
       "it: give --tls_cert, --tls_key and --tls_peer_ca (mutual TLS with "
       "the nodes' own CA), or --peer_token_file (a secret the nodes share); "
       "--insecure_peers starts without either"},
      {{etcd, "--peer_token_file=" + missing},
       absl::StrCat("cannot read peer token file \"", missing,
                    "\": No such file or directory")},
      {{etcd, "--peer_token_file=" + short_secret},
       absl::StrCat(short_secret,
                    ":1: a peer secret is 32 to 512 printable characters "
                    "without spaces")},
      {{etcd, "--tls_cert=" + not_pem},
       "TLS needs both --tls_cert and --tls_key"},
      {{etcd, "--tls_cert=" + not_pem, "--tls_key=" + not_pem,
        "--tls_peer_ca=" + missing},
       absl::StrCat("cannot read --tls_peer_ca \"", missing,
                    "\": No such file or directory")},
      {{etcd, "--tls_cert=" + not_pem, "--tls_key=" + not_pem,
        "--tls_client_ca=" + not_pem, "--tls_peer_ca=" + not_pem},
       absl::StrCat("--tls_peer_ca \"", not_pem,
                    "\" is not a PEM file with a CERTIFICATE")},
      {{etcd, "--etcd_cert=" + not_pem},
       "--etcd_cert: --etcd_cert and --etcd_key go together"},
      {{etcd, "--etcd_ca=" + missing},
       absl::StrCat("cannot read --etcd_ca \"", missing,
                    "\": No such file or directory")},
      {{etcd, "--etcd_ca=" + not_pem},
       absl::StrCat("--etcd_ca \"", not_pem,
                    "\" is not a PEM file with a CERTIFICATE")},
      // Checked before the count is agreed with etcd, which it would set
      // for a new cluster.
      {{etcd, "--insecure_peers", "--shards=0"},
       "--shards must be between 1 and 4096, not 0"},
      {{etcd, "--insecure_peers", "--shards=4097"},
       "--shards must be between 1 and 4096, not 4097"},
      // A single node has no peers and no etcd.
      {{"--tls_peer_ca=" + not_pem},
       "--tls_peer_ca is for cluster mode, which --etcd turns on; a single "
       "node has no peers and no etcd"},
      {{"--etcd_key=" + not_pem},
       "--etcd_key is for cluster mode, which --etcd turns on"},
      {{"--peer_token_file=" + short_secret},
       "--peer_token_file is for cluster mode, which --etcd turns on"},
      {{"--insecure_peers"},
       "--insecure_peers is for cluster mode, which --etcd turns on"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> flags = {"--listen=127.0.0.1:0",
                                      "--data_dir=" + dir.path() + "/data"};
    flags.insert(flags.end(), c.flags.begin(), c.flags.end());
    const testing::RunResult result = testing::Run(Daemon(flags), kTimeout);
    EXPECT_EQ(result.exit_code, 1) << c.error;
    EXPECT_THAT(result.output, HasSubstr("hourglassd: " + c.error))
        << result.output;
    EXPECT_THAT(result.output, Not(HasSubstr("listening")));
  }
}

TEST(HourglassdTest, RefusesASymlinkAtItsLockFileWithOneLine) {
  testing::TempDir dir;
  const std::string lock = dir.path() + "/hourglassd.lock";
  const std::string target = dir.path() + "/elsewhere";
  ASSERT_EQ(symlink(target.c_str(), lock.c_str()), 0);
  const testing::RunResult result = testing::Run(
      Daemon({"--listen=127.0.0.1:0", "--data_dir=" + dir.path()}), kTimeout);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.output,
              HasSubstr(absl::StrCat(
                  "hourglassd: cannot open ", lock,
                  ": it is a symbolic link, which hourglassd does not follow "
                  "(remove it; the lock file is made afresh)\n")));
  EXPECT_EQ(std::count(result.output.begin(), result.output.end(), '\n'), 1)
      << result.output;
  EXPECT_FALSE(std::filesystem::exists(target));
}

// Writes format version `version` into a new store at `path`.
void WriteFormatVersion(const std::string& path, uint32_t version) {
  auto store = storage::RocksDbStore::Open({.path = path});
  ASSERT_TRUE(store.ok()) << store.status();
  std::string encoded;
  storage::AppendU32(encoded, version);
  storage::WriteBatch batch;
  batch.Put(storage::Table::kMeta, std::string(storage::kFormatVersionKey),
            encoded);
  ASSERT_TRUE((*store)->Write(batch).ok());
}

// A data dir too old for this hourglassd (1), and one too new (4: as when
// an older hourglassd starts on it after an upgrade, a rollback).
TEST(HourglassdTest, RefusesAFormatVersionItDoesNotReadWithOneLine) {
  for (const auto& [version, advice] :
       {std::pair{2, "upgrade it with an older hourglassd first"},
        std::pair{5, "run the hourglassd that wrote it, or a newer one"}}) {
    testing::TempDir dir;
    WriteFormatVersion(dir.path(), version);
    const testing::RunResult result = testing::Run(
        Daemon({"--listen=127.0.0.1:0", "--data_dir=" + dir.path()}), kTimeout);
    EXPECT_EQ(result.exit_code, 1);
    EXPECT_THAT(result.output,
                HasSubstr(absl::StrCat("data dir ", dir.path(),
                                       " has format version ", version,
                                       "; this hourglassd reads format "
                                       "versions 3 to 4: ",
                                       advice, "\n")));
  }
}

TEST(HourglassdTest, VersionSaysTheDataFormatsItOpens) {
  const testing::RunResult result =
      testing::Run(Daemon({"--version"}), kTimeout);
  EXPECT_EQ(result.exit_code, 0);
  // The second line names the allocator hourglassd was linked with:
  // jemalloc, unless built with a sanitizer (cmd/hourglassd/allocator.h).
  EXPECT_THAT(result.output,
              MatchesRegex("hourglassd 0\\.1\\.0 \\(data format 4; opens "
                           "formats 3 to 4\\)\n"
                           "memory allocator: " HOURGLASSD_ALLOCATOR "\n"));
}

TEST(HourglassdTest, ServesHealthAndStopsCleanlyOnSigterm) {
  testing::TempDir dir;
  auto daemon = testing::Subprocess::Start(
      Daemon({"--listen=127.0.0.1:0", "--data_dir=" + dir.path() + "/data",
              "--shutdown_grace=500ms"}));
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  ASSERT_TRUE((*daemon)->WaitForOutput("listening on", kTimeout))
      << (*daemon)->output();
  const int port = ListeningPort((*daemon)->output());
  ASSERT_GT(port, 0) << (*daemon)->output();

  auto stub = grpc::health::v1::Health::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kTimeout));
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status =
      stub->Check(&context, grpc::health::v1::HealthCheckRequest(), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);

  // gRPC's shutdown lingers on client connections (about 5 s here) up to
  // --shutdown_grace; a short grace keeps the test quick.
  (*daemon)->Signal(SIGTERM);
  EXPECT_EQ((*daemon)->Wait(kTimeout), 0) << (*daemon)->output();
  EXPECT_THAT((*daemon)->output(), HasSubstr("received SIGTERM"));
  EXPECT_THAT((*daemon)->output(), HasSubstr("hourglassd stopped"));
}

// Server reflection, which grpcurl uses, lists every service hourglassd
// serves and describes them.
TEST(HourglassdTest, ServerReflectionListsAndDescribesItsServices) {
  namespace reflection = grpc::reflection::v1alpha;
  testing::TempDir dir;
  auto daemon = testing::Subprocess::Start(
      Daemon({"--listen=127.0.0.1:0", "--data_dir=" + dir.path() + "/data",
              "--shutdown_grace=500ms"}));
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  ASSERT_TRUE((*daemon)->WaitForOutput("listening on", kTimeout))
      << (*daemon)->output();
  const int port = ListeningPort((*daemon)->output());
  ASSERT_GT(port, 0) << (*daemon)->output();

  auto stub = reflection::ServerReflection::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kTimeout));
  auto stream = stub->ServerReflectionInfo(&context);

  reflection::ServerReflectionRequest request;
  request.set_list_services("");
  ASSERT_TRUE(stream->Write(request));
  reflection::ServerReflectionResponse response;
  ASSERT_TRUE(stream->Read(&response));
  std::vector<std::string> services;
  for (const reflection::ServiceResponse& service :
       response.list_services_response().service()) {
    services.push_back(service.name());
  }
  EXPECT_THAT(services,
              UnorderedElementsAre("hourglass.v1.Broker", "hourglass.v1.Admin",
                                   "hourglass.v1.Recurrences",
                                   "grpc.health.v1.Health",
                                   "grpc.reflection.v1alpha.ServerReflection"));

  // The file that defines the Broker service, with its RPCs.
  request.set_file_containing_symbol("hourglass.v1.Broker");
  ASSERT_TRUE(stream->Write(request));
  ASSERT_TRUE(stream->Read(&response));
  ASSERT_EQ(response.message_response_case(),
            reflection::ServerReflectionResponse::kFileDescriptorResponse)
      << response.DebugString();
  ASSERT_GE(response.file_descriptor_response().file_descriptor_proto_size(),
            1);
  google::protobuf::FileDescriptorProto file;
  ASSERT_TRUE(file.ParseFromString(
      response.file_descriptor_response().file_descriptor_proto(0)));
  EXPECT_EQ(file.name(), "hourglass/v1/broker.proto");
  EXPECT_EQ(file.package(), "hourglass.v1");
  ASSERT_EQ(file.service_size(), 1);
  EXPECT_EQ(file.service(0).name(), "Broker");
  std::vector<std::string> methods;
  for (const google::protobuf::MethodDescriptorProto& method :
       file.service(0).method()) {
    methods.push_back(method.name());
  }
  EXPECT_THAT(methods, ElementsAre("Publish", "PublishStream", "Cancel",
                                   "Subscribe", "SubscribeBatches"));

  EXPECT_TRUE(stream->WritesDone());
  const grpc::Status status = stream->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  (*daemon)->Signal(SIGTERM);
  EXPECT_EQ((*daemon)->Wait(kTimeout), 0) << (*daemon)->output();
}

// An API or a /metrics endpoint that other machines can reach is announced
// at start by one WARNING line for each thing that leaves it open: no TLS,
// no authentication, /metrics off loopback. On loopback there is none.
// (TLS and mutual TLS, which need certificates, are in tls_test.cc.)
TEST(HourglassdTest, WarnsOfEachWayItIsExposedOffLoopback) {
  testing::TempDir dir;
  const std::string tokens = dir.path() + "/tokens.txt";
  std::ofstream(tokens) << "all-roles-0123456789abcde produce,consume,admin\n";
  ASSERT_EQ(chmod(tokens.c_str(), 0600), 0);
  struct Case {
    std::string name;
    std::vector<std::string> flags;
    std::vector<std::string> warnings;
  };
  const Case cases[] = {
      {"loopback", {"--listen=127.0.0.1:0"}, {}},
      {"plaintext without tokens",
       {"--listen=0.0.0.0:0"},
       {"warning WARNING: --listen=0.0.0.0:0 is not loopback and TLS is off "
        "(--tls_cert, --tls_key): requests travel in plain text",
        "warning WARNING: --listen=0.0.0.0:0 is not loopback and "
        "authentication is off (--auth_tokens, --tls_client_ca): anyone who "
        "can connect may publish, consume and cancel"}},
      {"plaintext with tokens",
       {"--listen=0.0.0.0:0", "--auth_tokens=" + tokens},
       {"warning WARNING: --listen=0.0.0.0:0 is not loopback and TLS is off "
        "(--tls_cert, --tls_key): requests and tokens travel in plain text"}},
      {"metrics and the console",
       {"--listen=127.0.0.1:0", "--metrics_listen=0.0.0.0:0"},
       {"warning WARNING: --metrics_listen=0.0.0.0:0 is not loopback: "
        "/metrics is plain HTTP without authentication",
        "warning WARNING: --metrics_listen=0.0.0.0:0 is not loopback and "
        "serves the web console over plain HTTP: without --auth_tokens anyone "
        "who can connect may cancel, reschedule, redrive and purge; "
        "--console=false turns it off"}},
      {"metrics and the console with tokens",
       {"--listen=127.0.0.1:0", "--metrics_listen=0.0.0.0:0",
        "--auth_tokens=" + tokens},
       {"warning WARNING: --metrics_listen=0.0.0.0:0 is not loopback: "
        "/metrics is plain HTTP without authentication",
        "warning WARNING: --metrics_listen=0.0.0.0:0 is not loopback and "
        "serves the web console over plain HTTP: its admin tokens travel in "
        "plain text; --console=false turns it off"}},
      {"metrics without the console",
       {"--listen=127.0.0.1:0", "--metrics_listen=0.0.0.0:0",
        "--console=false"},
       {"warning WARNING: --metrics_listen=0.0.0.0:0 is not loopback: "
        "/metrics is plain HTTP without authentication"}},
  };
  int run = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<std::string> flags = c.flags;
    flags.push_back(absl::StrCat("--data_dir=", dir.path(), "/data-", ++run));
    flags.push_back("--shutdown_grace=500ms");
    auto daemon = testing::Subprocess::Start(Daemon(flags));
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    // The warnings come before the "listening on" line.
    ASSERT_TRUE((*daemon)->WaitForOutput("listening on", kTimeout))
        << (*daemon)->output();
    EXPECT_EQ(testing::Warnings((*daemon)->output()), c.warnings)
        << (*daemon)->output();
    (*daemon)->Signal(SIGTERM);
    EXPECT_EQ((*daemon)->Wait(kTimeout), 0) << (*daemon)->output();
  }
}

TEST(HourglassdTest, WarnsOfPlaintextToAnEtcdOffLoopback) {
  testing::TempDir dir;
  const std::string insecure =
      "warning WARNING: --insecure_peers: the nodes do not prove who they are "
      "to one another, so anyone who reaches a node's port can replicate "
      "into and out of it (write into its copies, read every message); give "
      "--peer_token_file or mutual TLS (--tls_peer_ca) outside a test";
  struct Case {
    std::string etcd;
    std::vector<std::string> warnings;
  };
  // Neither etcd answers (nothing listens at 127.0.0.1:1; 192.0.2.1 is a
  // documentation address): the warnings come before etcd is reached.
  const Case cases[] = {
      {"127.0.0.1:1", {insecure}},
      {"127.0.0.1:1,192.0.2.1:2379",
       {"warning WARNING: --etcd=192.0.2.1:2379 is not loopback and TLS to "
        "etcd is off (--etcd_ca): the cluster's records and leases travel in "
        "plain text, and whoever sits between may change who leads each "
        "shard",
        insecure}},
  };
  int run = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.etcd);
    auto daemon = testing::Subprocess::Start(
        Daemon({"--listen=127.0.0.1:0", "--etcd=" + c.etcd, "--insecure_peers",
                absl::StrCat("--data_dir=", dir.path(), "/data-", ++run)}));
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    // --insecure_peers's warning is the last of them.
    ASSERT_TRUE((*daemon)->WaitForOutput("WARNING: --insecure_peers", kTimeout))
        << (*daemon)->output();
    EXPECT_EQ(testing::Warnings((*daemon)->output()), c.warnings)
        << (*daemon)->output();
    (*daemon)->Signal(SIGTERM);
    EXPECT_EQ((*daemon)->Wait(kTimeout), 0) << (*daemon)->output();
  }
}

TEST(HourglassdTest, WarnsAboutADataDirGroupOrOthersMayEnter) {
  testing::TempDir dir;
  const std::string data = dir.path() + "/data";
  const std::string warning = "WARNING: data dir " + data + " has mode ";
  for (const bool open_to_others : {false, true}) {
    SCOPED_TRACE(open_to_others ? "mode 0755" : "made by hourglassd");
    // The first run makes the data dir; the second finds it opened up.
    if (open_to_others) {
      ASSERT_EQ(chmod(data.c_str(), 0755), 0);
    }
    auto daemon = testing::Subprocess::Start(
        Daemon({"--listen=127.0.0.1:0", "--data_dir=" + data}));
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    ASSERT_TRUE((*daemon)->WaitForOutput("listening on", kTimeout))
        << (*daemon)->output();
    if (open_to_others) {
      EXPECT_THAT(
          (*daemon)->output(),
          HasSubstr(warning + "0755: group or others may read its messages; "
                              "chmod 700 it\n"));
    } else {
      EXPECT_THAT((*daemon)->output(), Not(HasSubstr(warning)));
    }
    (*daemon)->Signal(SIGTERM);
    EXPECT_EQ((*daemon)->Wait(kTimeout), 0) << (*daemon)->output();
  }
}

TEST(HourglassdTest, ServesMetricsOnAnOsChosenPort) {
  testing::TempDir dir;
  const absl::Time before = absl::Now();
  auto daemon = testing::Subprocess::Start(
      Daemon({"--listen=127.0.0.1:0", "--metrics_listen=127.0.0.1:0",
              "--data_dir=" + dir.path() + "/data"}));
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  ASSERT_TRUE((*daemon)->WaitForOutput("serving metrics on", kTimeout))
      << (*daemon)->output();
  EXPECT_THAT((*daemon)->output(),
              HasSubstr("hourglassd serving metrics on 127.0.0.1:0 (port "));
  const int port = MetricsPort((*daemon)->output());
  ASSERT_GT(port, 0) << (*daemon)->output();
  EXPECT_NE(port, ListeningPort((*daemon)->output()));

  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(absl::ToInt64Seconds(kTimeout), 0);
  client.set_read_timeout(absl::ToInt64Seconds(kTimeout), 0);
  httplib::Result result = client.Get("/metrics");
  ASSERT_TRUE(result) << httplib::to_string(result.error());
  EXPECT_EQ(result->status, 200);
  EXPECT_EQ(result->get_header_value("Content-Type"),
            "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_THAT(
      result->body,
      HasSubstr("# TYPE hourglass_build_info gauge\n"
                "hourglass_build_info{version=\"" HOURGLASS_VERSION "\"} 1\n"));
  // The broker's own gauges are read at scrape time: a new broker holds
  // nothing.
  EXPECT_THAT(result->body, HasSubstr("\nhourglass_due_backlog 0\n"));
  EXPECT_THAT(result->body, HasSubstr("\nhourglass_loader_lag_seconds 0\n"));
  const std::string start_line = "\nhourglass_start_time_seconds ";
  const size_t at = result->body.find(start_line);
  ASSERT_NE(at, std::string::npos) << result->body;
  const size_t end = result->body.find('\n', at + 1);
  double start_seconds = 0;
  ASSERT_TRUE(absl::SimpleAtod(
      result->body.substr(at + start_line.size(), end - at - start_line.size()),
      &start_seconds))
      << result->body;
  // The start time has millisecond precision or better, within the run.
  EXPECT_GE(start_seconds,
            absl::ToDoubleSeconds(before - absl::UnixEpoch()) - 0.001);
  EXPECT_LE(start_seconds,
            absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));

  (*daemon)->Signal(SIGTERM);
  EXPECT_EQ((*daemon)->Wait(kTimeout), 0) << (*daemon)->output();
}

// The web console is on the metrics listener unless --console=false; the
// JSON API behind it is console_test's.
TEST(HourglassdTest, ServesTheConsoleBesideMetricsUnlessTurnedOff) {
  for (const bool on : {true, false}) {
    testing::TempDir dir;
    auto daemon = testing::Subprocess::Start(
        Daemon({"--listen=127.0.0.1:0", "--metrics_listen=127.0.0.1:0",
                "--data_dir=" + dir.path() + "/data",
                on ? "--console=true" : "--console=false"}));
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    ASSERT_TRUE((*daemon)->WaitForOutput("serving metrics on", kTimeout))
        << (*daemon)->output();
    const int port = MetricsPort((*daemon)->output());
    ASSERT_GT(port, 0) << (*daemon)->output();
    // Logged right after the metrics line: waited for when on. When off,
    // it never comes.
    const std::string console_line =
        absl::StrCat("hourglassd serving the web console on 127.0.0.1:0 (port ",
                     port, ") at /\n");
    if (on) {
      EXPECT_TRUE((*daemon)->WaitForOutput(console_line, kTimeout))
          << (*daemon)->output();
    } else {
      EXPECT_FALSE(absl::StrContains((*daemon)->output(), "web console"))
          << (*daemon)->output();
    }

    httplib::Client client("127.0.0.1", port);
    client.set_connection_timeout(absl::ToInt64Seconds(kTimeout), 0);
    client.set_read_timeout(absl::ToInt64Seconds(kTimeout), 0);
    for (const char* path : {"/", "/console.js", "/api/v1/topics"}) {
      httplib::Result result = client.Get(path);
      ASSERT_TRUE(result) << path << ": " << httplib::to_string(result.error());
      EXPECT_EQ(result->status, on ? 200 : 404) << path;
    }
    httplib::Result topics = client.Get("/api/v1/topics");
    ASSERT_TRUE(topics);
    EXPECT_EQ(topics->body, on ? R"({"topics":[]})" : "");
    httplib::Result metrics = client.Get("/metrics");
    ASSERT_TRUE(metrics);
    EXPECT_EQ(metrics->status, 200);

    (*daemon)->Signal(SIGTERM);
    EXPECT_EQ((*daemon)->Wait(kTimeout), 0) << (*daemon)->output();
  }
}

TEST(HourglassdTest, RefusesAMetricsAddressInUseWithOneLine) {
  testing::TempDir dir;
  BusyPort busy;
  ASSERT_GT(busy.port(), 0);
  const std::string address = absl::StrCat("127.0.0.1:", busy.port());
  const testing::RunResult result = testing::Run(
      Daemon({"--listen=127.0.0.1:0", "--metrics_listen=" + address,
              "--data_dir=" + dir.path() + "/data"}),
      kTimeout);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.output,
              HasSubstr(absl::StrCat("hourglassd: cannot serve metrics on \"",
                                     address, "\": Address already in use\n")));
  EXPECT_EQ(std::count(result.output.begin(), result.output.end(), '\n'), 1)
      << result.output;
}

TEST(HourglassdTest, RefusesAMalformedMetricsAddressWithOneLine) {
  testing::TempDir dir;
  const testing::RunResult result =
      testing::Run(Daemon({"--listen=127.0.0.1:0", "--metrics_listen=nonsense",
                           "--data_dir=" + dir.path() + "/data"}),
                   kTimeout);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.output,
              HasSubstr("hourglassd: metrics address \"nonsense\" is not "
                        "host:port (port 0-65535)\n"));
  EXPECT_EQ(std::count(result.output.begin(), result.output.end(), '\n'), 1)
      << result.output;
}

TEST(HourglassdTest, RefusesAMetricsRequestTimeoutBelow100msWithOneLine) {
  testing::TempDir dir;
  const testing::RunResult result = testing::Run(
      Daemon({"--listen=127.0.0.1:0", "--metrics_listen=127.0.0.1:0",
              "--metrics_request_timeout=50ms",
              "--data_dir=" + dir.path() + "/data"}),
      kTimeout);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.output,
              HasSubstr("hourglassd: --metrics_request_timeout must be at "
                        "least 100ms, not 50ms\n"));
  EXPECT_EQ(std::count(result.output.begin(), result.output.end(), '\n'), 1)
      << result.output;
}

TEST(HourglassdTest, ReadsAFlagFile) {
  testing::TempDir dir;
  const std::string flagfile = dir.path() + "/hourglassd.flags";
  std::ofstream(flagfile) << "--listen=127.0.0.1:0\n--durability=async\n"
                          << "--data_dir=" << dir.path() << "/data\n"
                          << "--block_cache_mb=8\n";
  auto daemon = testing::Subprocess::Start(Daemon({"--flagfile=" + flagfile}));
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  ASSERT_TRUE((*daemon)->WaitForOutput("listening on", kTimeout))
      << (*daemon)->output();
  EXPECT_THAT(
      (*daemon)->output(),
      HasSubstr(absl::StrCat("opened data dir ", dir.path(),
                             "/data (durability=async, block cache 8 MiB)")));
  (*daemon)->Signal(SIGINT);
  EXPECT_EQ((*daemon)->Wait(kTimeout), 0) << (*daemon)->output();
}

}  // namespace
}  // namespace hourglass
