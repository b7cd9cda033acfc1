#include "api/metrics_http.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "broker/metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "tests/testing/text_lines.h"

namespace hourglass::api {
namespace {

constexpr time_t kClientTimeoutSeconds = 10;

// What the server itself counts, in a registry it serves, while nothing
// was refused or timed out.
constexpr char kServerMetrics[] =
    "# HELP hourglass_metrics_http_refused_total Connections to the metrics "
    "endpoint answered 503 at once: every worker busy and "
    "--metrics_max_queued_connections waiting.\n"
    "# TYPE hourglass_metrics_http_refused_total counter\n"
    "hourglass_metrics_http_refused_total 0\n"
    "# HELP hourglass_metrics_http_timed_out_total Connections to the metrics "
    "endpoint closed at --metrics_request_timeout, before their answer was "
    "written.\n"
    "# TYPE hourglass_metrics_http_timed_out_total counter\n"
    "hourglass_metrics_http_timed_out_total 0\n";

// Heads of the catalog's families the tests record into.
constexpr char kDueBacklogHead[] =
    "# HELP hourglass_due_backlog Messages that came due and wait to be "
    "moved to ready.\n"
    "# TYPE hourglass_due_backlog gauge\n";
constexpr char kPublishedHead[] =
    "# HELP hourglass_published_total Messages published (stored).\n"
    "# TYPE hourglass_published_total counter\n";

// The 503 a connection past the queue gets.
constexpr char kBusy[] =
    "HTTP/1.1 503 Service Unavailable\r\n"
    "Content-Type: text/plain\r\n"
    "Content-Length: 52\r\n"
    "Connection: close\r\n"
    "\r\n"
    "too many connections to the metrics endpoint; retry\n";

std::unique_ptr<httplib::Client> Client(int port, bool keep_alive = false) {
  auto client = std::make_unique<httplib::Client>("127.0.0.1", port);
  client->set_connection_timeout(kClientTimeoutSeconds, 0);
  client->set_read_timeout(kClientTimeoutSeconds, 0);
  client->set_keep_alive(keep_alive);
  return client;
}

// A plain TCP connection to 127.0.0.1:`port`; -1 if it fails.
int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) !=
      0) {
    close(fd);
    return -1;
  }
  return fd;
}

struct Received {
  std::string bytes;
  bool closed = false;  // The server closed (or reset) the connection.
};

// What arrives on `fd` until the server closes it or `timeout` passes.
Received ReadUntilClosed(int fd, absl::Duration timeout) {
  Received received;
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    pollfd p = {fd, POLLIN, 0};
    const int ms =
        static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()) + 1);
    if (poll(&p, 1, ms) <= 0) continue;
    char buffer[4096];
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) {
      received.closed = true;
      break;
    }
    received.bytes.append(buffer, static_cast<size_t>(n));
  }
  return received;
}

// A client that sends a request head one byte every 100 ms, as slowly as
// it likes, until the server closes the connection (or 30 s pass).
class Trickler {
 public:
  // The connection's life is timed from before the connect: the server's
  // deadline may start as soon as the handshake completes, before the
  // thread below runs.
  explicit Trickler(int port) : connected_at_(absl::Now()), fd_(Connect(port)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~Trickler() {
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) close(fd_);
  }

  // Waits for the server to close the connection; then: what it sent, and
  // how long the connection lasted.
  Received Join() {
    thread_.join();
    return received_;
  }
  absl::Duration lifetime() const { return closed_at_ - connected_at_; }
  size_t bytes_sent() const { return sent_; }

 private:
  void Run() {
    const std::string head = "GET /metrics HTTP/1.1\r\nX-Slow: ";
    if (fd_ < 0 || send(fd_, head.data(), head.size(), MSG_NOSIGNAL) < 0) {
      return;
    }
    sent_ = head.size();
    while (absl::Now() - connected_at_ < absl::Seconds(30)) {
      // The pace of the client, and the wait for the server to close.
      pollfd p = {fd_, POLLIN, 0};
      if (poll(&p, 1, 100) > 0) {
        received_ = ReadUntilClosed(fd_, absl::Seconds(10));
        break;
      }
      if (send(fd_, "a", 1, MSG_NOSIGNAL) != 1) {
        received_.closed = true;
        break;
      }
      ++sent_;
    }
    closed_at_ = absl::Now();
  }

  const absl::Time connected_at_;
  const int fd_;
  std::thread thread_;
  // Written by the thread, read after Join.
  absl::Time closed_at_;
  size_t sent_ = 0;
  Received received_;
};

TEST(MetricsServerTest, ServesTheRegistryAsItIsWhenScraped) {
  metrics::Registry registry;
  metrics::CounterFamily published =
      registry.Counters(metrics::Metric::kPublishedTotal);
  published.Add({"a"}).Increment(3);
  // A collector counts the scrapes.
  prometheus::Gauge& scrapes =
      registry.Gauges(metrics::Metric::kDueBacklog).Add({});
  registry.AddCollector([&scrapes] { scrapes.Increment(); });

  auto server = MetricsServer::Start("127.0.0.1:0", &registry);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_GT((*server)->port(), 0);

  auto client = Client((*server)->port());
  httplib::Result first = client->Get("/metrics");
  ASSERT_TRUE(first) << httplib::to_string(first.error());
  EXPECT_EQ(first->status, 200);
  EXPECT_EQ(first->get_header_value("Content-Type"),
            "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(first->body, std::string(kDueBacklogHead) +
                             "hourglass_due_backlog 1\n" + kServerMetrics +
                             kPublishedHead +
                             "hourglass_published_total{topic=\"a\"} 3\n");

  published.Add({"b"}).Increment();
  httplib::Result second = client->Get("/metrics");
  ASSERT_TRUE(second) << httplib::to_string(second.error());
  EXPECT_EQ(second->status, 200);
  EXPECT_EQ(second->body, std::string(kDueBacklogHead) +
                              "hourglass_due_backlog 2\n" + kServerMetrics +
                              kPublishedHead +
                              "hourglass_published_total{topic=\"a\"} 3\n"
                              "hourglass_published_total{topic=\"b\"} 1\n");
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

// Clients that send their request a byte at a time hold a worker each only
// until the request timeout: a scrape that arrives while they occupy every
// worker is answered once they are cut.
TEST(MetricsServerTest, TricklingClientsOnEveryWorkerDoNotStarveAScrape) {
  metrics::Registry registry;
  registry.Counters(metrics::Metric::kPublishedTotal).Add({"a"}).Increment(3);
  auto server = MetricsServer::Start(
      "127.0.0.1:0", &registry,
      {.workers = 2, .max_queued = 2, .request_timeout = absl::Seconds(1)});
  ASSERT_TRUE(server.ok()) << server.status();
  MetricsServer& s = **server;

  Trickler first(s.port());
  Trickler second(s.port());
  ASSERT_TRUE(
      s.AwaitLoad([](const MetricsServer::Load& l) { return l.serving == 2; },
                  absl::Seconds(10)));

  // Waits in the queue, then is served once the tricklers are cut.
  httplib::Result scrape = Client(s.port())->Get("/metrics");
  ASSERT_TRUE(scrape) << httplib::to_string(scrape.error());
  EXPECT_EQ(scrape->status, 200);
  EXPECT_THAT(
      testing::LinesStartingWith(scrape->body, "hourglass_published_total"),
      ::testing::ElementsAre("hourglass_published_total{topic=\"a\"} 3"));

  for (Trickler* t : {&first, &second}) {
    const Received received = t->Join();
    EXPECT_TRUE(received.closed);
    EXPECT_EQ(received.bytes, "");  // Cut, not answered.
    EXPECT_GE(t->lifetime(), absl::Seconds(1));
    EXPECT_GT(t->bytes_sent(), 35u);  // It did keep sending.
  }
  // Counted once each worker is done with its trickler.
  ASSERT_TRUE(
      s.AwaitLoad([](const MetricsServer::Load& l) { return l.timed_out == 2; },
                  absl::Seconds(10)));
  EXPECT_EQ(s.load().refused, 0u);
  httplib::Result after = Client(s.port())->Get("/metrics");
  ASSERT_TRUE(after) << httplib::to_string(after.error());
  EXPECT_THAT(
      testing::LinesStartingWith(after->body, "hourglass_metrics_http"),
      ::testing::ElementsAre("hourglass_metrics_http_refused_total 0",
                             "hourglass_metrics_http_timed_out_total 2"));
}

// Idle connections are cut at the request timeout too: a scrape queued
// behind more of them than there are workers is still answered.
TEST(MetricsServerTest, IdleConnectionsDoNotStarveAScrape) {
  metrics::Registry registry;
  auto server = MetricsServer::Start(
      "127.0.0.1:0", &registry,
      {.workers = 2, .max_queued = 4, .request_timeout = absl::Seconds(1)});
  ASSERT_TRUE(server.ok()) << server.status();
  MetricsServer& s = **server;
  std::vector<int> idle;
  for (int i = 0; i < 5; ++i) {
    idle.push_back(Connect(s.port()));
    ASSERT_GE(idle.back(), 0);
  }
  ASSERT_TRUE(s.AwaitLoad(
      [](const MetricsServer::Load& l) {
        return l.serving == 2 && l.queued == 3;
      },
      absl::Seconds(10)));

  // Fourth in the queue: answered after two rounds of idle ones are cut,
  // within (ceil(4 / 2) + 1) * 1 s.
  httplib::Result scrape = Client(s.port())->Get("/metrics");
  ASSERT_TRUE(scrape) << httplib::to_string(scrape.error());
  EXPECT_EQ(scrape->status, 200);
  EXPECT_THAT(
      testing::LinesStartingWith(scrape->body, "hourglass_metrics_http"),
      ::testing::ElementsAre(
          "hourglass_metrics_http_refused_total 0",
          ::testing::StartsWith("hourglass_metrics_http_timed_out_"
                                "total ")));
  for (const int fd : idle) {
    const Received received = ReadUntilClosed(fd, absl::Seconds(10));
    EXPECT_TRUE(received.closed);
    EXPECT_EQ(received.bytes, "");
    close(fd);
  }
  EXPECT_TRUE(
      s.AwaitLoad([](const MetricsServer::Load& l) { return l.timed_out == 5; },
                  absl::Seconds(10)));
}

// With every worker busy and the queue full, a connection is answered 503
// and closed at once, while the slow ones still hold their places; once
// they go, scrapes are served again.
TEST(MetricsServerTest, AConnectionPastTheQueueIsRefusedAtOnce) {
  metrics::Registry registry;
  auto server = MetricsServer::Start(
      "127.0.0.1:0", &registry,
      {.workers = 1, .max_queued = 1, .request_timeout = absl::Seconds(60)});
  ASSERT_TRUE(server.ok()) << server.status();
  MetricsServer& s = **server;
  const int served = Connect(s.port());
  ASSERT_GE(served, 0);
  ASSERT_TRUE(
      s.AwaitLoad([](const MetricsServer::Load& l) { return l.serving == 1; },
                  absl::Seconds(10)));
  const int queued = Connect(s.port());
  ASSERT_GE(queued, 0);
  ASSERT_TRUE(
      s.AwaitLoad([](const MetricsServer::Load& l) { return l.queued == 1; },
                  absl::Seconds(10)));

  const int third = Connect(s.port());
  ASSERT_GE(third, 0);
  const Received refused = ReadUntilClosed(third, absl::Seconds(10));
  close(third);
  EXPECT_EQ(refused.bytes, kBusy);
  EXPECT_TRUE(refused.closed);
  // A scraper that sends its request gets the same answer.
  httplib::Result busy = Client(s.port())->Get("/metrics");
  ASSERT_TRUE(busy) << httplib::to_string(busy.error());
  EXPECT_EQ(busy->status, 503);
  EXPECT_EQ(busy->body,
            "too many connections to the metrics endpoint; retry\n");
  MetricsServer::Load load = s.load();
  EXPECT_EQ(load.serving, 1u);  // Refused long before the 60 s timeout.
  EXPECT_EQ(load.queued, 1u);
  EXPECT_EQ(load.refused, 2u);
  EXPECT_EQ(load.timed_out, 0u);

  // The slow clients leave; the queued one takes the worker, then nothing.
  close(served);
  ASSERT_TRUE(s.AwaitLoad(
      [](const MetricsServer::Load& l) {
        return l.serving == 1 && l.queued == 0;
      },
      absl::Seconds(10)));
  close(queued);
  ASSERT_TRUE(
      s.AwaitLoad([](const MetricsServer::Load& l) { return l.serving == 0; },
                  absl::Seconds(10)));
  httplib::Result scrape = Client(s.port())->Get("/metrics");
  ASSERT_TRUE(scrape) << httplib::to_string(scrape.error());
  EXPECT_EQ(scrape->status, 200);
  EXPECT_THAT(
      testing::LinesStartingWith(scrape->body, "hourglass_metrics_http"),
      ::testing::ElementsAre("hourglass_metrics_http_refused_total 2",
                             "hourglass_metrics_http_timed_out_total 0"));
}

// A request larger than the server reads is not kept: the server stops
// reading at 64 KiB, answers 400 and closes, and the next scrape is served.
TEST(MetricsServerTest, StopsReadingAnOversizedRequest) {
  metrics::Registry registry;
  auto server = MetricsServer::Start("127.0.0.1:0", &registry);
  ASSERT_TRUE(server.ok()) << server.status();
  const int fd = Connect((*server)->port());
  ASSERT_GE(fd, 0);
  std::string head = "GET /metrics HTTP/1.1\r\n";
  while (head.size() < (128 << 10)) head += "X-Filler: 0123456789abcdef\r\n";
  // What the server does not read may not fit in the socket's buffers.
  (void)send(fd, head.data(), head.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  const Received received = ReadUntilClosed(fd, absl::Seconds(10));
  close(fd);
  EXPECT_TRUE(received.closed);
  EXPECT_EQ(received.bytes,
            "HTTP/1.1 400 Bad Request\r\nConnection: close\r\n"
            "Content-Length: 0\r\n\r\n");
  httplib::Result scrape = Client((*server)->port())->Get("/metrics");
  ASSERT_TRUE(scrape) << httplib::to_string(scrape.error());
  EXPECT_EQ(scrape->status, 200);
}

TEST(MetricsServerTest, RefusesOptionsOutOfRange) {
  metrics::Registry registry;
  EXPECT_EQ(
      MetricsServer::Start("127.0.0.1:0", &registry, {.workers = 0}).status(),
      absl::InvalidArgumentError(
          "metrics server needs at least one worker and a positive "
          "request timeout, not 0 and 5s"));
  EXPECT_EQ(MetricsServer::Start("127.0.0.1:0", &registry,
                                 {.request_timeout = absl::ZeroDuration()})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
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

// Shutdown does not wait for slow clients: it closes the connections being
// served and those waiting at once.
TEST(MetricsServerTest, ShutdownClosesServedAndQueuedConnectionsAtOnce) {
  metrics::Registry registry;
  auto server = MetricsServer::Start(
      "127.0.0.1:0", &registry,
      {.workers = 1, .max_queued = 1, .request_timeout = absl::Seconds(60)});
  ASSERT_TRUE(server.ok()) << server.status();
  MetricsServer& s = **server;
  const int served = Connect(s.port());
  ASSERT_GE(served, 0);
  ASSERT_TRUE(
      s.AwaitLoad([](const MetricsServer::Load& l) { return l.serving == 1; },
                  absl::Seconds(10)));
  const int queued = Connect(s.port());
  ASSERT_GE(queued, 0);
  ASSERT_TRUE(
      s.AwaitLoad([](const MetricsServer::Load& l) { return l.queued == 1; },
                  absl::Seconds(10)));

  const absl::Time start = absl::Now();
  s.Shutdown();
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));  // Not the 60 s.
  for (const int fd : {served, queued}) {
    const Received received = ReadUntilClosed(fd, absl::Seconds(10));
    EXPECT_TRUE(received.closed);
    EXPECT_EQ(received.bytes, "");
    close(fd);
  }
}

// Destruction right after Start must stop every thread it started.
TEST(MetricsServerTest, StopsWhenDestroyedRightAfterStart) {
  metrics::Registry registry;
  for (int i = 0; i < 50; ++i) {
    auto server = MetricsServer::Start("127.0.0.1:0", &registry);
    ASSERT_TRUE(server.ok()) << server.status();
  }
}

}  // namespace
}  // namespace hourglass::api
