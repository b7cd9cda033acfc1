#ifndef HOURGLASS_TESTS_CONSOLE_CONSOLE_FIXTURE_H_
#define HOURGLASS_TESTS_CONSOLE_CONSOLE_FIXTURE_H_

// The fixture of the web console's raw-HTTP tests (console_test.cc,
// console_publish_test.cc): an engine with a memory store and real time,
// its Broker service over gRPC, and the Console mounted on a metrics
// listener, driven over real HTTP. Waits are conditions with deadlines,
// never sleeps.

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "api/admin_calls.h"
#include "api/broker_service.h"
#include "api/metrics_http.h"
#include "api/server.h"
#include "broker/engine.h"
#include "broker/metrics.h"
#include "console/console.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "tests/testing/broker_client.h"
#include "tests/testing/faulty_store.h"
#include "tests/testing/temp_dir.h"

namespace hourglass::console {

namespace v1 = hourglass::v1;

inline constexpr absl::Duration kWait = absl::Seconds(30);
inline constexpr char kJson[] = "application/json";
inline const absl::Time kStartedAt = absl::FromUnixSeconds(1'795'305'600);

// Tokens of the authorizer of the tests with tokens.
inline constexpr char kAdminToken[] = "admin-token-0123456789";
inline constexpr char kOrdersAdminToken[] = "orders-admin-token-0123";
inline constexpr char kProduceToken[] = "produce-token-0123456789";

// The answer of a JSON error.
inline std::string Error(const std::string& code, const std::string& message) {
  return absl::StrCat(R"({"code":")", code, R"(","message":")", message,
                      R"("})");
}

// Parses an API answer into `Message`; fails the test if it does not
// parse.
template <typename Message>
Message Parse(const std::string& json) {
  Message message;
  const auto status =
      google::protobuf::util::JsonStringToMessage(json, &message);
  EXPECT_TRUE(status.ok()) << status.message().ToString() << " in " << json;
  return message;
}

class ConsoleTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(broker::Engine::Options()); }

  void Start(broker::Engine::Options options,
             const api::Authorizer* authorizer = nullptr) {
    TearDown();
    auto engine = broker::Engine::Open(&store_, &clock_, options);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
    engine_->Start();
    broker_service_ = std::make_unique<api::BrokerService>(
        engine_.get(), &clock_, api::Limits());
    auto server = api::Server::Start(
        {.listen_address = "127.0.0.1:0", .services = {broker_service_.get()}});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    client_ = std::make_unique<testing::BrokerClient>(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                            grpc::InsecureChannelCredentials()));
    api::Limits limits;
    limits.snapshot_dir = snapshots_.path();
    calls_ = std::make_unique<api::AdminCalls>(engine_.get(), &clock_, limits,
                                               kStartedAt);
    auto http = api::MetricsServer::Start("127.0.0.1:0", &registry_);
    ASSERT_TRUE(http.ok()) << http.status();
    http_ = *std::move(http);
    console_ = std::make_unique<Console>(
        calls_.get(),
        authorizer != nullptr ? authorizer : &api::Authorizer::Disabled(),
        api::AdminHttp::Options{.publisher = broker_service_.get()},
        GuardOptions{.port = http_->port(),
                     .allowed_hosts = {"broker.example"}});
    http_->Mount(console_.get());
    web_ = std::make_unique<httplib::Client>("127.0.0.1", http_->port());
    web_->set_read_timeout(30, 0);
  }

  void TearDown() override {
    http_.reset();
    console_.reset();
    calls_.reset();
    server_.reset();
    broker_service_.reset();
    engine_.reset();
  }

  httplib::Headers Auth(const std::string& token) {
    if (token.empty()) return {};
    return {{"Authorization", absl::StrCat("Bearer ", token)}};
  }

  httplib::Result Get(const std::string& path, const std::string& token = "") {
    return web_->Get(path.c_str(), Auth(token));
  }
  httplib::Result Post(const std::string& path, const std::string& body,
                       const std::string& token = "") {
    return web_->Post(path.c_str(), Auth(token), body, kJson);
  }
  httplib::Result Delete(const std::string& path,
                         const std::string& token = "") {
    return web_->Delete(path.c_str(), Auth(token), "", kJson);
  }

  // Publishes through gRPC: the receipt, or a failed test and an empty one.
  v1::Receipt Publish(const std::string& topic, const std::string& id,
                      absl::Duration delay,
                      const std::string& payload = "payload") {
    absl::StatusOr<v1::Receipt> receipt =
        client_->Publish(topic, payload, delay, id);
    EXPECT_TRUE(receipt.ok()) << receipt.status();
    return receipt.value_or(v1::Receipt());
  }

  v1::ListMessagesResponse List(const std::string& topic,
                                const std::string& state) {
    httplib::Result result = Get(absl::StrCat(
        "/api/v1/topics/", topic, "/messages?state=MESSAGE_STATE_", state));
    EXPECT_TRUE(result);
    if (!result) return {};
    EXPECT_EQ(result->status, 200) << result->body;
    return Parse<v1::ListMessagesResponse>(result->body);
  }

  testing::TempDir snapshots_;
  testing::FaultyStore store_;
  broker::SystemClock clock_;
  metrics::Registry registry_;
  std::unique_ptr<broker::Engine> engine_;
  std::unique_ptr<api::BrokerService> broker_service_;
  std::unique_ptr<api::Server> server_;
  std::unique_ptr<testing::BrokerClient> client_;
  std::unique_ptr<api::AdminCalls> calls_;
  std::unique_ptr<Console> console_;
  std::unique_ptr<api::MetricsServer> http_;
  std::unique_ptr<httplib::Client> web_;
};

// Expects `result` to be `status` with body `body`.
#define EXPECT_ANSWER(result, status_code, body_text)  \
  do {                                                 \
    httplib::Result r_ = (result);                     \
    ASSERT_TRUE(r_) << httplib::to_string(r_.error()); \
    EXPECT_EQ(r_->status, status_code) << r_->body;    \
    EXPECT_EQ(r_->body, body_text);                    \
  } while (false)

}  // namespace hourglass::console

#endif  // HOURGLASS_TESTS_CONSOLE_CONSOLE_FIXTURE_H_
