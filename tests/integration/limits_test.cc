// hourglassd's limits against overload: --max_streams, --max_request_bytes
// and --max_publish_queue_bytes refuse with RESOURCE_EXHAUSTED and a clear
// message, and what was admitted keeps working; --max_streams_per_connection
// holds calls back; --grpc_memory_mb refuses what does not fit in it.

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "gtest/gtest.h"
#include "tests/testing/broker_client.h"
#include "tests/testing/daemon.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"

namespace hourglass {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kWait = absl::Seconds(30);

class LimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto daemon = testing::Daemon::Start(
        HOURGLASSD_PATH, dir_.path() + "/data",
        {"--max_streams=2", "--max_request_bytes=8192",
         "--max_publish_queue_bytes=4096", "--shutdown_grace=500ms"});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = *std::move(daemon);
    client_ = std::make_unique<testing::BrokerClient>(daemon_->Channel());
  }

  // A Publish of one message with a payload of `bytes`, due now.
  static hourglass::v1::PublishRequest Request(const std::string& topic,
                                               size_t bytes) {
    hourglass::v1::PublishRequest request;
    *request.add_messages() = testing::NewMessage(
        topic, std::string(bytes, 'p'), absl::ZeroDuration());
    return request;
  }

  grpc::Status Publish(const hourglass::v1::PublishRequest& request) {
    hourglass::v1::PublishResponse response;
    return client_->Publish(request, &response);
  }

  // Takes one delivery from `stream` and acks it; its payload.
  static std::string TakeOne(testing::Subscription& stream) {
    std::vector<testing::Received> got = stream.Take(1, kWait);
    if (got.size() != 1) return "<nothing>";
    stream.Ack({got[0].delivery.id()});
    return got[0].delivery.payload();
  }

  testing::TempDir dir_;
  std::unique_ptr<testing::Daemon> daemon_;
  std::unique_ptr<testing::BrokerClient> client_;
};

TEST_F(LimitsTest, StreamsPastTheLimitAreRefusedAndOpenOnesKeepWorking) {
  std::unique_ptr<testing::Subscription> first = client_->Subscribe("t", "g1");
  std::unique_ptr<testing::Subscription> second = client_->Subscribe("t", "g2");

  std::unique_ptr<testing::Subscription> third = client_->Subscribe("t", "g3");
  const std::optional<grpc::Status> refused = third->WaitEnd(kWait);
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(refused->error_message(),
            "too many streams (limit 2, --max_streams)");

  // Both admitted streams still get what comes due, once per group.
  ASSERT_TRUE(client_->Publish("t", "one", absl::ZeroDuration()).ok());
  EXPECT_EQ(TakeOne(*first), "one");
  EXPECT_EQ(TakeOne(*second), "one");

  // A stream that ends frees its place at once.
  EXPECT_EQ(first->Close().error_code(), grpc::StatusCode::OK);
  std::unique_ptr<testing::Subscription> fourth = client_->Subscribe("t", "g4");
  ASSERT_TRUE(client_->Publish("t", "two", absl::ZeroDuration()).ok());
  EXPECT_EQ(TakeOne(*second), "two");
  EXPECT_EQ(TakeOne(*fourth), "two");
  EXPECT_EQ(fourth->WaitEnd(absl::ZeroDuration()), std::nullopt);

  std::unique_ptr<testing::Subscription> fifth = client_->Subscribe("t", "g5");
  const std::optional<grpc::Status> again = fifth->WaitEnd(kWait);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
}

TEST_F(LimitsTest, PublishStreamsCountAgainstTheStreamLimit) {
  using PublishStream =
      grpc::ClientReaderWriter<hourglass::v1::PublishRequest,
                               hourglass::v1::PublishStreamResponse>;
  grpc::ClientContext open_context;
  std::unique_ptr<PublishStream> open =
      client_->stub()->PublishStream(&open_context);
  open->WaitForInitialMetadata();  // Admitted: the stream sends it at once.
  std::unique_ptr<testing::Subscription> subscribed =
      client_->Subscribe("t", "g1");

  // A third stream of either kind is refused.
  grpc::ClientContext refused_context;
  std::unique_ptr<PublishStream> refused =
      client_->stub()->PublishStream(&refused_context);
  const grpc::Status status = refused->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(status.error_message(),
            "too many streams (limit 2, --max_streams)");
  std::unique_ptr<testing::Subscription> third = client_->Subscribe("t", "g2");
  const std::optional<grpc::Status> third_status = third->WaitEnd(kWait);
  ASSERT_TRUE(third_status.has_value());
  EXPECT_EQ(third_status->error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);

  // The PublishStream's end frees its place.
  open->WritesDone();
  EXPECT_TRUE(open->Finish().ok());
  std::unique_ptr<testing::Subscription> fourth = client_->Subscribe("t", "g3");
  ASSERT_TRUE(client_->Publish("t", "one", absl::ZeroDuration()).ok());
  EXPECT_EQ(TakeOne(*fourth), "one");
}

TEST_F(LimitsTest, APublishPastTheQueueLimitIsRefusedAndStoresNothing) {
  const hourglass::v1::PublishRequest large = Request("q", 5000);
  const grpc::Status status = Publish(large);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(status.error_message(),
            absl::StrCat("publish queue full: 0 bytes of publishes are being "
                         "written and this one has ",
                         large.ByteSizeLong(),
                         "; the limit is 4096 (--max_publish_queue_bytes); "
                         "retry later"));

  // Within the limit: stored and delivered. The refused one, due earlier,
  // would have come first.
  auto stream = client_->Subscribe("q", "g");
  EXPECT_TRUE(Publish(Request("q", 3000)).ok());
  EXPECT_EQ(TakeOne(*stream), std::string(3000, 'p'));
}

TEST_F(LimitsTest, ARequestPastMaxRequestBytesIsRefused) {
  const hourglass::v1::PublishRequest huge = Request("r", 9000);
  const grpc::Status status = Publish(huge);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(),
              HasSubstr(absl::StrCat(huge.ByteSizeLong(), " vs. 8192")));
  // The connection and the broker are fine.
  EXPECT_TRUE(Publish(Request("r", 100)).ok());
}

// A channel to `daemon` on a connection of its own: gRPC shares one
// connection between channels with the same target and arguments.
std::shared_ptr<grpc::Channel> OwnConnection(const testing::Daemon& daemon) {
  grpc::ChannelArguments arguments;
  arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(
      daemon.address(), grpc::InsecureChannelCredentials(), arguments);
}

// --max_streams_per_connection is HTTP/2's MAX_CONCURRENT_STREAMS: past it
// a client's calls on that connection wait (gRPC's client holds them back;
// the broker never sees them) and go on when one of its calls ends. Other
// connections are not held back.
TEST(StreamsPerConnectionTest, CallsPastTheLimitWaitUntilOneEnds) {
  testing::TempDir dir;
  auto daemon = testing::Daemon::Start(
      HOURGLASSD_PATH, dir.path() + "/data",
      {"--max_streams_per_connection=2", "--shutdown_grace=500ms"});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  testing::BrokerClient client((*daemon)->Channel());
  std::unique_ptr<testing::Subscription> first = client.Subscribe("t", "g1");
  std::unique_ptr<testing::Subscription> second = client.Subscribe("t", "g2");
  ASSERT_EQ(first->WaitEnd(absl::ZeroDuration()), std::nullopt);
  ASSERT_EQ(second->WaitEnd(absl::ZeroDuration()), std::nullopt);

  // A third call waits: given a second, it runs out of time unanswered.
  hourglass::v1::PublishRequest request;
  *request.add_messages() =
      testing::NewMessage("t", "p", absl::Hours(1), "waited-out");
  {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
    hourglass::v1::PublishResponse response;
    const grpc::Status status =
        client.stub()->Publish(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
        << status.error_message();
  }
  // Another connection is not held back, and the broker never got the
  // call that waited.
  testing::BrokerClient other(OwnConnection(**daemon));
  const grpc::Status never_stored = other.Cancel("t", "waited-out");
  EXPECT_EQ(never_stored.error_code(), grpc::StatusCode::NOT_FOUND)
      << never_stored.error_message();

  // A call waiting when a stream ends goes on.
  absl::StatusOr<hourglass::v1::Receipt> receipt =
      absl::UnknownError("not answered");
  absl::Notification answered;
  std::thread waiting([&] {
    receipt = client.Publish("t", "p", absl::Hours(1), "went-on");
    answered.Notify();
  });
  EXPECT_EQ(first->Close().error_code(), grpc::StatusCode::OK);
  EXPECT_TRUE(answered.WaitForNotificationWithTimeout(kWait));
  waiting.join();
  ASSERT_TRUE(receipt.ok()) << receipt.status();
  EXPECT_EQ(receipt->id(), "went-on");
  EXPECT_EQ(other.Cancel("t", "went-on").error_code(), grpc::StatusCode::OK);
  EXPECT_EQ(second->WaitEnd(absl::ZeroDuration()), std::nullopt);
}

// --grpc_memory_mb is gRPC's resource quota for the server's connections
// and calls. A request that does not fit in it cannot be taken in: gRPC
// (1.51) resets the call's stream with ENHANCE_YOUR_CALM ("Buffers full"),
// which the client sees as RESOURCE_EXHAUSTED, and the broker stores
// nothing of it; the connection goes on. Without the quota the same
// request is stored.
TEST(GrpcMemoryTest, ARequestLargerThanTheQuotaIsRefused) {
  const std::string large(4 << 20, 'p');
  for (const bool quota : {true, false}) {
    SCOPED_TRACE(quota ? "--grpc_memory_mb=1" : "no quota");
    testing::TempDir dir;
    std::vector<std::string> flags = {"--max_payload_bytes=8388608",
                                      "--shutdown_grace=500ms"};
    if (quota) flags.push_back("--grpc_memory_mb=1");
    auto daemon =
        testing::Daemon::Start(HOURGLASSD_PATH, dir.path() + "/data", flags);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    testing::BrokerClient client((*daemon)->Channel());

    absl::StatusOr<hourglass::v1::Receipt> receipt =
        client.Publish("m", large, absl::Hours(1), "large");
    if (!quota) {
      ASSERT_TRUE(receipt.ok()) << receipt.status();
      EXPECT_EQ(receipt->id(), "large");
      continue;
    }
    EXPECT_EQ(receipt.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_EQ(receipt.status().message(),
              "Received RST_STREAM with error code 11");
    const grpc::Status cancel = client.Cancel("m", "large");
    EXPECT_EQ(cancel.error_code(), grpc::StatusCode::NOT_FOUND)
        << cancel.error_message();
    // What fits is taken, on the same connection.
    receipt = client.Publish("m", std::string(64 << 10, 'p'), absl::Hours(1),
                             "small");
    ASSERT_TRUE(receipt.ok()) << receipt.status();
    EXPECT_EQ(receipt->id(), "small");
  }
}

TEST(LimitsFlagsTest, RefusesBadLimits) {
  testing::TempDir dir;
  const testing::RunResult result = testing::Run(
      {HOURGLASSD_PATH, "--listen=127.0.0.1:0", "--metrics_listen=127.0.0.1:0",
       "--data_dir=" + dir.path() + "/data", "--max_request_bytes=10"},
      kWait);
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_THAT(result.output,
              HasSubstr("hourglassd: --max_request_bytes must be between 1024 "
                        "and 2147483647, not 10"));
}

}  // namespace
}  // namespace hourglass
