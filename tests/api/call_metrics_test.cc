// gRPC calls counted by method and status code, and timed, by the server's
// interceptor (api/call_metrics.h), over loopback.

#include "api/call_metrics.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "api/broker_service.h"
#include "api/server.h"
#include "broker/clock.h"
#include "broker/engine.h"
#include "broker/metrics.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "storage/memory_store.h"
#include "tests/testing/broker_client.h"
#include "tests/testing/text_lines.h"

namespace hourglass::api {
namespace {

using ::testing::ElementsAre;

class CallMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = storage::MemoryStore::Open();
    auto engine = broker::Engine::Open(store_.get(), &clock_, {});
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
    engine_->Start();
    service_ =
        std::make_unique<BrokerService>(engine_.get(), &clock_, Limits{});
    auto server = Server::Start({.listen_address = "127.0.0.1:0",
                                 .services = {service_.get()},
                                 .metrics = &registry_});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    client_ = std::make_unique<testing::BrokerClient>(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                            grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    server_.reset();
    engine_.reset();
  }

  metrics::Registry registry_;
  std::unique_ptr<storage::MessageStore> store_;
  broker::SystemClock clock_;
  std::unique_ptr<broker::Engine> engine_;
  std::unique_ptr<BrokerService> service_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<testing::BrokerClient> client_;
};

TEST_F(CallMetricsTest, CountsEachPublishByItsStatusCode) {
  ASSERT_TRUE(client_->Publish("orders", "a", absl::ZeroDuration()).ok());
  const absl::StatusOr<hourglass::v1::Receipt> bad =
      client_->Publish("no spaces", "a", absl::ZeroDuration());
  ASSERT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument)
      << bad.status();

  const std::string text = registry_.Render();
  EXPECT_THAT(testing::LinesStartingWith(text, "hourglass_grpc_calls_total"),
              ElementsAre("hourglass_grpc_calls_total{method=\"hourglass.v1."
                          "Broker/Publish\",code=\"INVALID_ARGUMENT\"} 1",
                          "hourglass_grpc_calls_total{method=\"hourglass.v1."
                          "Broker/Publish\",code=\"OK\"} 1"));
  EXPECT_THAT(
      testing::LinesStartingWith(text, "hourglass_grpc_call_seconds_count"),
      ElementsAre("hourglass_grpc_call_seconds_count{method="
                  "\"hourglass.v1.Broker/Publish\"} 2"));
}

// A stream is counted when it ends, with the status it ended with.
TEST_F(CallMetricsTest, CountsASubscribeWhenItEnds) {
  std::unique_ptr<testing::Subscription> subscription =
      client_->Subscribe("orders", "billing");
  EXPECT_THAT(testing::LinesStartingWith(registry_.Render(),
                                         "hourglass_grpc_calls_total"),
              ::testing::IsEmpty());
  const grpc::Status status = subscription->Close();
  ASSERT_TRUE(status.ok()) << status.error_message();

  std::unique_ptr<testing::Subscription> refused =
      client_->Subscribe("orders", "no spaces");
  const std::optional<grpc::Status> end = refused->WaitEnd(absl::Seconds(30));
  ASSERT_TRUE(end.has_value());
  ASSERT_EQ(end->error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << end->error_message();

  const std::string text = registry_.Render();
  EXPECT_THAT(testing::LinesStartingWith(text, "hourglass_grpc_calls_total"),
              ElementsAre("hourglass_grpc_calls_total{method=\"hourglass.v1."
                          "Broker/Subscribe\",code=\"INVALID_ARGUMENT\"} 1",
                          "hourglass_grpc_calls_total{method=\"hourglass.v1."
                          "Broker/Subscribe\",code=\"OK\"} 1"));
  EXPECT_THAT(
      testing::LinesStartingWith(text, "hourglass_grpc_call_seconds_count"),
      ElementsAre("hourglass_grpc_call_seconds_count{method="
                  "\"hourglass.v1.Broker/Subscribe\"} 2"));
}

TEST(RefusalReasonTest, NamesTheReasonOfEachRefusalAndNothingElse) {
  using grpc::StatusCode;
  EXPECT_EQ(RefusalReason(grpc::Status(StatusCode::RESOURCE_EXHAUSTED,
                                       "write /data: disk full (IO error)")),
            "disk_full");
  EXPECT_EQ(RefusalReason(grpc::Status(StatusCode::RESOURCE_EXHAUSTED,
                                       "10000 streams are open")),
            "limit");
  EXPECT_EQ(RefusalReason(grpc::Status(StatusCode::UNAVAILABLE, "stopping")),
            "unavailable");
  EXPECT_EQ(RefusalReason(grpc::Status(StatusCode::ABORTED, "in progress")),
            "busy");
  EXPECT_EQ(RefusalReason(grpc::Status(StatusCode::UNAUTHENTICATED, "")),
            "unauthenticated");
  EXPECT_EQ(RefusalReason(grpc::Status(StatusCode::PERMISSION_DENIED, "")),
            "permission_denied");
  for (StatusCode code :
       {StatusCode::OK, StatusCode::INVALID_ARGUMENT, StatusCode::NOT_FOUND,
        StatusCode::ALREADY_EXISTS, StatusCode::FAILED_PRECONDITION,
        StatusCode::CANCELLED}) {
    EXPECT_EQ(RefusalReason(grpc::Status(code, "x")), "") << code;
  }
}

// Every reason's series exists from the start, so that an alert on its
// rate sees the first refusal; a refusal counts once, by its reason.
TEST_F(CallMetricsTest, CountsRefusedCallsByReasonFromZero) {
  EXPECT_THAT(
      testing::LinesStartingWith(registry_.Render(),
                                 "hourglass_calls_refused_total"),
      ElementsAre(
          "hourglass_calls_refused_total{reason=\"busy\"} 0",
          "hourglass_calls_refused_total{reason=\"disk_full\"} 0",
          "hourglass_calls_refused_total{reason=\"limit\"} 0",
          "hourglass_calls_refused_total{reason=\"permission_denied\"} 0",
          "hourglass_calls_refused_total{reason=\"unauthenticated\"} 0",
          "hourglass_calls_refused_total{reason=\"unavailable\"} 0"));
  // A caller's mistake is no refusal: cancelling a message that is not there.
  EXPECT_EQ(client_->Cancel("orders", "nope").error_code(),
            grpc::StatusCode::NOT_FOUND);
  // A broker shutting down refuses a new stream: unavailable.
  engine_->Shutdown(absl::UnavailableError("the broker is stopping"));
  std::unique_ptr<testing::Subscription> refused =
      client_->Subscribe("orders", "billing");
  const std::optional<grpc::Status> end = refused->WaitEnd(absl::Seconds(30));
  ASSERT_TRUE(end.has_value());
  ASSERT_EQ(end->error_code(), grpc::StatusCode::UNAVAILABLE)
      << end->error_message();
  EXPECT_THAT(
      testing::LinesStartingWith(registry_.Render(),
                                 "hourglass_calls_refused_total"),
      ElementsAre(
          "hourglass_calls_refused_total{reason=\"busy\"} 0",
          "hourglass_calls_refused_total{reason=\"disk_full\"} 0",
          "hourglass_calls_refused_total{reason=\"limit\"} 0",
          "hourglass_calls_refused_total{reason=\"permission_denied\"} 0",
          "hourglass_calls_refused_total{reason=\"unauthenticated\"} 0",
          "hourglass_calls_refused_total{reason=\"unavailable\"} 1"));
}

}  // namespace
}  // namespace hourglass::api
