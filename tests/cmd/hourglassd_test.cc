// Runs the real hourglassd binary and checks what an operator sees: exit
// codes, one-line reasons, health, graceful shutdown, flag files.

#include <signal.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "storage/keys.h"
#include "storage/rocksdb_store.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"

namespace hourglass {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr absl::Duration kTimeout = absl::Seconds(30);

std::vector<std::string> Daemon(std::vector<std::string> flags) {
  flags.insert(flags.begin(), HOURGLASSD_PATH);
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

TEST(HourglassdTest, RefusesAnUnknownFormatVersion) {
  testing::TempDir dir;
  {
    auto store = storage::RocksDbStore::Open({.path = dir.path()});
    ASSERT_TRUE(store.ok()) << store.status();
    std::string version;
    storage::AppendU32(version, 2);
    storage::WriteBatch batch;
    batch.Put(storage::Table::kMeta, std::string(storage::kFormatVersionKey),
              version);
    ASSERT_TRUE((*store)->Write(batch).ok());
  }
  const testing::RunResult result = testing::Run(
      Daemon({"--listen=127.0.0.1:0", "--data_dir=" + dir.path()}), kTimeout);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.output,
              HasSubstr(absl::StrCat("data dir ", dir.path(),
                                     " has format version 2; this hourglassd "
                                     "reads format version 1")));
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
