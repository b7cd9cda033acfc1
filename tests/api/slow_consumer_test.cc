// Consumers whose client stops reading, over loopback gRPC: a stream that
// the client never reads keeps no delivery past its ack timeout, gets no
// more than its outbox allows, and is ended once it has written nothing
// for the stall timeout, its deliveries going to the other consumers of
// its group at once.

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "api/broker_service.h"
#include "api/server.h"
#include "broker/engine.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "storage/memory_store.h"
#include "tests/testing/broker_client.h"
#include "tests/testing/tcp_proxy.h"

namespace hourglass::api {
namespace {

constexpr int kMessages = 40;
constexpr size_t kPayloadBytes = 512 << 10;

class SlowConsumerTest : public ::testing::Test {
 protected:
  void Start(absl::Duration stall_timeout,
             absl::Duration keepalive = absl::Seconds(30)) {
    broker::Engine::Options options;
    options.dispatcher.stall_timeout = stall_timeout;
    auto engine = broker::Engine::Open(store_.get(), &clock_, options);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
    engine_->Start();
    service_ =
        std::make_unique<BrokerService>(engine_.get(), &clock_, Limits{});
    auto server = Server::Start({.listen_address = "127.0.0.1:0",
                                 .services = {service_.get()},
                                 .keepalive_time = keepalive,
                                 .keepalive_timeout = keepalive});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    client_ = std::make_unique<testing::BrokerClient>(Channel());
  }

  void TearDown() override {
    server_.reset();
    engine_.reset();
  }

  // A channel of its own, to `port` (the server's by default): a
  // connection of its own.
  std::shared_ptr<grpc::Channel> Channel(int port = 0) {
    grpc::ChannelArguments arguments;
    arguments.SetInt("hourglass.test.channel", next_channel_++);
    return grpc::CreateCustomChannel(
        absl::StrCat("127.0.0.1:", port != 0 ? port : server_->port()),
        grpc::InsecureChannelCredentials(), arguments);
  }

  // Publishes m0 ... m39, 512 KiB each, due now.
  void PublishAll() {
    for (int i = 0; i < kMessages; ++i) {
      absl::StatusOr<hourglass::v1::Receipt> receipt =
          client_->Publish("t", std::string(kPayloadBytes, 'x'),
                           absl::ZeroDuration(), absl::StrCat("m", i));
      ASSERT_TRUE(receipt.ok()) << receipt.status();
    }
  }

  // Reads and acks deliveries of `reader` until it has every message, or
  // `timeout` has passed; the distinct ids it got.
  std::set<std::string> ReadAll(testing::Subscription& reader,
                                absl::Duration timeout) {
    std::set<std::string> ids;
    const absl::Time deadline = absl::Now() + timeout;
    while (ids.size() < kMessages && absl::Now() < deadline) {
      std::vector<testing::Received> got =
          reader.Take(kMessages - ids.size(), deadline - absl::Now());
      std::vector<std::string> acks;
      for (const testing::Received& r : got) {
        ids.insert(r.delivery.id());
        acks.push_back(r.delivery.id());
      }
      if (!acks.empty()) {
        EXPECT_TRUE(reader.Ack(acks));
      }
    }
    return ids;
  }

  static std::set<std::string> AllIds() {
    std::set<std::string> ids;
    for (int i = 0; i < kMessages; ++i) ids.insert(absl::StrCat("m", i));
    return ids;
  }

  std::unique_ptr<storage::MessageStore> store_ = storage::MemoryStore::Open();
  broker::SystemClock clock_;
  std::unique_ptr<broker::Engine> engine_;
  std::unique_ptr<BrokerService> service_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<testing::BrokerClient> client_;
  int next_channel_ = 0;
};

// A client that opened its stream and stopped reading: a hung process
// whose connection stays open.
class SilentStream {
 public:
  SilentStream(std::shared_ptr<grpc::Channel> channel, uint32_t max_in_flight,
               absl::Duration ack_timeout)
      : stub_(hourglass::v1::Broker::NewStub(std::move(channel))) {
    stream_ = stub_->Subscribe(&context_);
    hourglass::v1::SubscribeRequest request;
    request.mutable_open()->set_topic("t");
    request.mutable_open()->set_group("g");
    request.mutable_open()->set_max_in_flight(max_in_flight);
    request.mutable_open()->mutable_ack_timeout()->set_seconds(
        absl::ToInt64Seconds(ack_timeout));
    EXPECT_TRUE(stream_->Write(request));
    stream_->WaitForInitialMetadata();  // Subscribed.
  }
  ~SilentStream() {
    if (drained_) return;
    context_.TryCancel();
    Drain();
  }

  // Reads what got through, then the stream's status. Once.
  grpc::Status Drain() {
    drained_ = true;
    hourglass::v1::Delivery delivery;
    while (stream_->Read(&delivery)) {
    }
    return stream_->Finish();
  }

 private:
  std::unique_ptr<hourglass::v1::Broker::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<hourglass::v1::SubscribeRequest,
                                           hourglass::v1::Delivery>>
      stream_;
  bool drained_ = false;
};

TEST_F(SlowConsumerTest, ASilentStreamKeepsNoDeliveryPastItsAckTimeout) {
  Start(/*stall_timeout=*/absl::Hours(1));
  SilentStream silent(Channel(), /*max_in_flight=*/100,
                      /*ack_timeout=*/absl::Seconds(2));
  PublishAll();
  std::unique_ptr<testing::Subscription> reader =
      client_->Subscribe("t", "g", /*max_in_flight=*/100,
                         /*ack_timeout=*/absl::Seconds(60));
  EXPECT_EQ(ReadAll(*reader, absl::Seconds(30)), AllIds());
}

TEST_F(SlowConsumerTest, AStalledStreamIsEndedAndItsDeliveriesReturnAtOnce) {
  Start(/*stall_timeout=*/absl::Seconds(2));
  auto silent = std::make_unique<SilentStream>(Channel(), /*max_in_flight=*/100,
                                               /*ack_timeout=*/absl::Hours(1));
  PublishAll();
  std::unique_ptr<testing::Subscription> reader =
      client_->Subscribe("t", "g", /*max_in_flight=*/100,
                         /*ack_timeout=*/absl::Hours(1));
  // Within the stall timeout and the time to notice, not the hour.
  EXPECT_EQ(ReadAll(*reader, absl::Seconds(30)), AllIds());
  // The broker cancelled the silent stream's call.
  EXPECT_EQ(silent->Drain().error_code(), grpc::StatusCode::CANCELLED);
}

TEST_F(SlowConsumerTest, ADeadPeersStreamEndsWithinTheKeepaliveBound) {
  Start(/*stall_timeout=*/absl::Hours(1), /*keepalive=*/absl::Seconds(1));
  absl::StatusOr<std::unique_ptr<testing::TcpProxy>> proxy =
      testing::TcpProxy::Start(server_->port());
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  testing::BrokerClient far(Channel((*proxy)->port()));
  std::unique_ptr<testing::Subscription> gone =
      far.Subscribe("t", "g", /*max_in_flight=*/1,
                    /*ack_timeout=*/absl::Hours(1));
  ASSERT_TRUE(client_->Publish("t", "x", absl::ZeroDuration(), "m1").ok());
  std::vector<testing::Received> got = gone->Take(1, absl::Seconds(30));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].delivery.id(), "m1");
  // The peer's host hangs: its connection stays open but answers nothing.
  (*proxy)->Freeze();
  std::unique_ptr<testing::Subscription> reader =
      client_->Subscribe("t", "g", /*max_in_flight=*/1,
                         /*ack_timeout=*/absl::Hours(1));
  // Within keepalive time + timeout (2 s here), not the ack timeout.
  got = reader->Take(1, absl::Seconds(30));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].delivery.id(), "m1");
  EXPECT_EQ(got[0].delivery.attempt(), 2u);
}

}  // namespace
}  // namespace hourglass::api
