#include "api/metrics_http.h"

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "broker/metrics.h"
#include "gtest/gtest.h"
#include "httplib.h"

namespace hourglass::api {
namespace {

constexpr time_t kClientTimeoutSeconds = 10;

std::unique_ptr<httplib::Client> Client(int port, bool keep_alive = false) {
  auto client = std::make_unique<httplib::Client>("127.0.0.1", port);
  client->set_connection_timeout(kClientTimeoutSeconds, 0);
  client->set_read_timeout(kClientTimeoutSeconds, 0);
  client->set_keep_alive(keep_alive);
  return client;
}

TEST(MetricsServerTest, ServesTheRegistryAsItIsWhenScraped) {
  metrics::Registry registry;
  auto requests = registry.AddCounter("hourglass_test_requests_total",
                                      "Requests \"served\".", {"path"});
  ASSERT_TRUE(requests.ok()) << requests.status();
  (*requests)->WithLabels({"/a"})->Inc(3);
  auto scrapes = registry.AddGauge("hourglass_test_scrapes", "Scrapes seen.");
  ASSERT_TRUE(scrapes.ok()) << scrapes.status();
  registry.AddCollector([gauge = (*scrapes)->WithLabels({})] { gauge->Inc(); });

  auto server = MetricsServer::Start("127.0.0.1:0", &registry);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_GT((*server)->port(), 0);

  auto client = Client((*server)->port());
  httplib::Result first = client->Get("/metrics");
  ASSERT_TRUE(first) << httplib::to_string(first.error());
  EXPECT_EQ(first->status, 200);
  EXPECT_EQ(first->get_header_value("Content-Type"),
            "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(first->body,
            "# HELP hourglass_test_requests_total Requests \"served\".\n"
            "# TYPE hourglass_test_requests_total counter\n"
            "hourglass_test_requests_total{path=\"/a\"} 3\n"
            "# HELP hourglass_test_scrapes Scrapes seen.\n"
            "# TYPE hourglass_test_scrapes gauge\n"
            "hourglass_test_scrapes 1\n");

  (*requests)->WithLabels({"/b"})->Inc();
  httplib::Result second = client->Get("/metrics");
  ASSERT_TRUE(second) << httplib::to_string(second.error());
  EXPECT_EQ(second->status, 200);
  EXPECT_EQ(second->body,
            "# HELP hourglass_test_requests_total Requests \"served\".\n"
            "# TYPE hourglass_test_requests_total counter\n"
            "hourglass_test_requests_total{path=\"/a\"} 3\n"
            "hourglass_test_requests_total{path=\"/b\"} 1\n"
            "# HELP hourglass_test_scrapes Scrapes seen.\n"
            "# TYPE hourglass_test_scrapes gauge\n"
            "hourglass_test_scrapes 2\n");
}

TEST(MetricsServerTest, AnswersOtherPathsWith404) {
  metrics::Registry registry;
  auto server = MetricsServer::Start("127.0.0.1:0", &registry);
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = Client((*server)->port());
  for (const char* path : {"/", "/metric", "/metrics/extra", "/favicon.ico"}) {
    httplib::Result result = client->Get(path);
    ASSERT_TRUE(result) << path << ": " << httplib::to_string(result.error());
    EXPECT_EQ(result->status, 404) << path;
  }
}

TEST(MetricsServerTest, RefusesAPortInUseNamingIt) {
  metrics::Registry registry;
  auto first = MetricsServer::Start("127.0.0.1:0", &registry);
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string taken = absl::StrCat("127.0.0.1:", (*first)->port());

  auto second = MetricsServer::Start(taken, &registry);
  EXPECT_EQ(second.status(), absl::UnavailableError(absl::StrCat(
                                 "cannot serve metrics on \"", taken,
                                 "\": Address already in use")));

  // The first one still serves.
  httplib::Result result = Client((*first)->port())->Get("/metrics");
  ASSERT_TRUE(result) << httplib::to_string(result.error());
  EXPECT_EQ(result->status, 200);
}

TEST(MetricsServerTest, RefusesAMalformedAddressNamingIt) {
  metrics::Registry registry;
  EXPECT_EQ(MetricsServer::Start("nonsense", &registry).status(),
            absl::InvalidArgumentError("metrics address \"nonsense\" is not "
                                       "host:port (port 0-65535)"));
  EXPECT_EQ(MetricsServer::Start("127.0.0.1:65536", &registry).status(),
            absl::InvalidArgumentError("metrics address \"127.0.0.1:65536\" "
                                       "is not host:port (port 0-65535)"));
  EXPECT_EQ(MetricsServer::Start("127.0.0.1:http", &registry).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MetricsServerTest, RefusesAnAddressThatIsNotLocal) {
  metrics::Registry registry;
  // TEST-NET-1 (RFC 5737) is never a local address.
  EXPECT_EQ(MetricsServer::Start("192.0.2.1:0", &registry).status(),
            absl::UnavailableError("cannot serve metrics on \"192.0.2.1:0\": "
                                   "Cannot assign requested address"));
}

TEST(MetricsServerTest, ShutdownStopsServingAndFreesThePort) {
  metrics::Registry registry;
  auto server = MetricsServer::Start("127.0.0.1:0", &registry);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  // A scraper that keeps its connection open does not hold up Shutdown
  // for long.
  auto keep_alive_client = Client(port, /*keep_alive=*/true);
  httplib::Result before = keep_alive_client->Get("/metrics");
  ASSERT_TRUE(before) << httplib::to_string(before.error());

  const absl::Time start = absl::Now();
  (*server)->Shutdown();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  (*server)->Shutdown();  // Idempotent.

  httplib::Result after = Client(port)->Get("/metrics");
  EXPECT_FALSE(after);
  EXPECT_EQ(after.error(), httplib::Error::Connection);

  auto again =
      MetricsServer::Start(absl::StrCat("127.0.0.1:", port), &registry);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)->port(), port);
}

// Destruction right after Start must not lose the stop (httplib ignores a
// stop that comes before its accept loop runs).
TEST(MetricsServerTest, StopsWhenDestroyedRightAfterStart) {
  metrics::Registry registry;
  for (int i = 0; i < 50; ++i) {
    auto server = MetricsServer::Start("127.0.0.1:0", &registry);
    ASSERT_TRUE(server.ok()) << server.status();
  }
}

}  // namespace
}  // namespace hourglass::api
