#include "broker/metrics.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace hourglass::metrics {
namespace {

TEST(MetricsTest, EmptyRegistryRendersNothing) {
  Registry registry;
  EXPECT_EQ(registry.Render(), "");
}

TEST(MetricsTest, UnlabeledCounterRendersAtZeroAndCounts) {
  Registry registry;
  auto family = registry.AddCounter("hourglass_test_total", "Things done.");
  ASSERT_TRUE(family.ok()) << family.status();
  EXPECT_EQ(registry.Render(),
            "# HELP hourglass_test_total Things done.\n"
            "# TYPE hourglass_test_total counter\n"
            "hourglass_test_total 0\n");

  std::shared_ptr<Counter> counter = (*family)->WithLabels({});
  counter->Inc();
  counter->Inc(41);
  EXPECT_EQ(counter->Value(), 42u);
  EXPECT_EQ(registry.Render(),
            "# HELP hourglass_test_total Things done.\n"
            "# TYPE hourglass_test_total counter\n"
            "hourglass_test_total 42\n");
}

TEST(MetricsTest, LabeledCountersRenderInLabelValueOrder) {
  Registry registry;
  auto family = registry.AddCounter("hourglass_published_total",
                                    "Messages published.", {"topic", "kind"});
  ASSERT_TRUE(family.ok()) << family.status();
  // A labeled family has no children until one is used, and is left out.
  EXPECT_EQ(registry.Render(), "");

  (*family)->WithLabels({"orders", "b"})->Inc(2);
  (*family)->WithLabels({"carts", "z"})->Inc(7);
  (*family)->WithLabels({"orders", "a"})->Inc(1);
  std::shared_ptr<Counter> again = (*family)->WithLabels({"orders", "b"});
  again->Inc();
  EXPECT_EQ(again.get(), (*family)->WithLabels({"orders", "b"}).get());
  EXPECT_EQ((*family)->size(), 3u);
  EXPECT_EQ(registry.Render(),
            "# HELP hourglass_published_total Messages published.\n"
            "# TYPE hourglass_published_total counter\n"
            "hourglass_published_total{topic=\"carts\",kind=\"z\"} 7\n"
            "hourglass_published_total{topic=\"orders\",kind=\"a\"} 1\n"
            "hourglass_published_total{topic=\"orders\",kind=\"b\"} 3\n");
}

TEST(MetricsTest, GaugesSetAddAndFormatSoPrometheusParsesThem) {
  Registry registry;
  auto family = registry.AddGauge("g", "A gauge.", {"case"});
  ASSERT_TRUE(family.ok()) << family.status();
  GaugeFamily& g = **family;
  g.WithLabels({"a_int"})->Set(42);
  g.WithLabels({"b_negative"})->Set(-3);
  g.WithLabels({"c_fraction"})->Set(0.25);
  g.WithLabels({"d_big"})->Set(1e20);
  g.WithLabels({"e_tiny"})->Set(1.5e-7);
  g.WithLabels({"f_nan"})->Set(std::numeric_limits<double>::quiet_NaN());
  g.WithLabels({"g_inf"})->Set(std::numeric_limits<double>::infinity());
  g.WithLabels({"h_minus_inf"})->Set(-std::numeric_limits<double>::infinity());
  g.WithLabels({"i_2p53_minus_1"})->Set(9007199254740991.0);
  g.WithLabels({"j_2p53"})->Set(9007199254740992.0);
  g.WithLabels({"k_negative_zero"})->Set(-0.0);
  g.WithLabels({"l_seconds"})->Set(1763856000.123);
  std::shared_ptr<Gauge> added = g.WithLabels({"m_added"});
  added->Add(10);
  added->Add(-2.5);
  added->Inc();
  added->Dec();
  added->Inc();
  EXPECT_EQ(added->Value(), 8.5);
  EXPECT_EQ(registry.Render(),
            "# HELP g A gauge.\n"
            "# TYPE g gauge\n"
            "g{case=\"a_int\"} 42\n"
            "g{case=\"b_negative\"} -3\n"
            "g{case=\"c_fraction\"} 0.25\n"
            "g{case=\"d_big\"} 1e+20\n"
            "g{case=\"e_tiny\"} 1.5e-07\n"
            "g{case=\"f_nan\"} NaN\n"
            "g{case=\"g_inf\"} +Inf\n"
            "g{case=\"h_minus_inf\"} -Inf\n"
            "g{case=\"i_2p53_minus_1\"} 9007199254740991\n"
            "g{case=\"j_2p53\"} 9007199254740992\n"
            "g{case=\"k_negative_zero\"} 0\n"
            "g{case=\"l_seconds\"} 1763856000.123\n"
            "g{case=\"m_added\"} 8.5\n");
}

TEST(MetricsTest, HistogramBucketsAreCumulativeWithInf) {
  Registry registry;
  auto family = registry.AddHistogram("hourglass_lateness_seconds",
                                      "How late deliveries were.", {"topic"},
                                      {0.005, 0.5, 1, 2});
  ASSERT_TRUE(family.ok()) << family.status();
  std::shared_ptr<Histogram> orders = (*family)->WithLabels({"orders"});
  orders->Observe(0.25);
  orders->Observe(0.5);  // A bound counts in its own bucket (le).
  orders->Observe(1);
  orders->Observe(4);
  (*family)->WithLabels({"carts"});

  const Histogram::Snapshot snapshot = orders->Read();
  EXPECT_EQ(snapshot.cumulative, (std::vector<uint64_t>{0, 2, 3, 3, 4}));
  EXPECT_EQ(snapshot.sum, 5.75);
  EXPECT_EQ(snapshot.count, 4u);

  EXPECT_EQ(
      registry.Render(),
      "# HELP hourglass_lateness_seconds How late deliveries were.\n"
      "# TYPE hourglass_lateness_seconds histogram\n"
      "hourglass_lateness_seconds_bucket{topic=\"carts\",le=\"0.005\"} 0\n"
      "hourglass_lateness_seconds_bucket{topic=\"carts\",le=\"0.5\"} 0\n"
      "hourglass_lateness_seconds_bucket{topic=\"carts\",le=\"1\"} 0\n"
      "hourglass_lateness_seconds_bucket{topic=\"carts\",le=\"2\"} 0\n"
      "hourglass_lateness_seconds_bucket{topic=\"carts\",le=\"+Inf\"} 0\n"
      "hourglass_lateness_seconds_sum{topic=\"carts\"} 0\n"
      "hourglass_lateness_seconds_count{topic=\"carts\"} 0\n"
      "hourglass_lateness_seconds_bucket{topic=\"orders\",le=\"0.005\"} 0\n"
      "hourglass_lateness_seconds_bucket{topic=\"orders\",le=\"0.5\"} 2\n"
      "hourglass_lateness_seconds_bucket{topic=\"orders\",le=\"1\"} 3\n"
      "hourglass_lateness_seconds_bucket{topic=\"orders\",le=\"2\"} 3\n"
      "hourglass_lateness_seconds_bucket{topic=\"orders\",le=\"+Inf\"} 4\n"
      "hourglass_lateness_seconds_sum{topic=\"orders\"} 5.75\n"
      "hourglass_lateness_seconds_count{topic=\"orders\"} 4\n");
}

TEST(MetricsTest, UnlabeledHistogramPutsNanInTheInfBucket) {
  Registry registry;
  auto family =
      registry.AddHistogram("batch_size", "Messages per batch.", {}, {1, 10});
  ASSERT_TRUE(family.ok()) << family.status();
  std::shared_ptr<Histogram> histogram = (*family)->WithLabels({});
  histogram->Observe(1);
  histogram->Observe(7);
  histogram->Observe(std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(registry.Render(),
            "# HELP batch_size Messages per batch.\n"
            "# TYPE batch_size histogram\n"
            "batch_size_bucket{le=\"1\"} 1\n"
            "batch_size_bucket{le=\"10\"} 2\n"
            "batch_size_bucket{le=\"+Inf\"} 3\n"
            "batch_size_sum NaN\n"
            "batch_size_count 3\n");
}

TEST(MetricsTest, BucketHelpers) {
  EXPECT_EQ(ExponentialBuckets(1, 4, 4), (std::vector<double>{1, 4, 16, 64}));
  const std::vector<double> latency = LatencySecondsBuckets();
  ASSERT_EQ(latency.size(), 18u);
  EXPECT_EQ(latency.front(), 0.0001);
  EXPECT_EQ(latency.back(), 60);
  Registry registry;
  EXPECT_TRUE(registry.AddHistogram("h", "", {}, latency).ok());
}

TEST(MetricsTest, EscapesLabelValuesAndHelp) {
  Registry registry;
  auto family = registry.AddCounter(
      "escaped_total", "Help with a \\ backslash, \"quotes\"\nand a newline.",
      {"value"});
  ASSERT_TRUE(family.ok()) << family.status();
  (*family)->WithLabels({"back\\slash \"quoted\"\nnext line"})->Inc();
  (*family)->WithLabels({""})->Inc(2);
  EXPECT_EQ(registry.Render(),
            "# HELP escaped_total Help with a \\\\ backslash, \"quotes\"\\nand "
            "a newline.\n"
            "# TYPE escaped_total counter\n"
            "escaped_total{value=\"\"} 2\n"
            "escaped_total{value=\"back\\\\slash \\\"quoted\\\"\\nnext "
            "line\"} 1\n");
}

TEST(MetricsTest, FamiliesRenderInNameOrder) {
  Registry registry;
  ASSERT_TRUE(registry.AddGauge("zeta", "Z.").ok());
  ASSERT_TRUE(registry.AddCounter("alpha_total", "A.").ok());
  ASSERT_TRUE(registry.AddGauge("beta", "B.", {"x"}).ok());  // no children
  ASSERT_TRUE(registry.AddGauge("mid:ratio", "M.").ok());
  EXPECT_EQ(registry.Render(),
            "# HELP alpha_total A.\n"
            "# TYPE alpha_total counter\n"
            "alpha_total 0\n"
            "# HELP mid:ratio M.\n"
            "# TYPE mid:ratio gauge\n"
            "mid:ratio 0\n"
            "# HELP zeta Z.\n"
            "# TYPE zeta gauge\n"
            "zeta 0\n");
}

TEST(MetricsTest, AddingTheSameFamilyAgainReturnsIt) {
  Registry registry;
  auto first = registry.AddCounter("c_total", "C.", {"topic"});
  auto second = registry.AddCounter("c_total", "C.", {"topic"});
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*first, *second);

  auto h1 = registry.AddHistogram("h", "H.", {}, {1, 2});
  auto h2 = registry.AddHistogram("h", "H.", {}, {1, 2});
  ASSERT_TRUE(h1.ok() && h2.ok());
  EXPECT_EQ(*h1, *h2);
}

TEST(MetricsTest, RefusesConflictingAndMalformedFamilies) {
  Registry registry;
  ASSERT_TRUE(registry.AddCounter("c_total", "C.", {"topic"}).ok());
  ASSERT_TRUE(registry.AddHistogram("h", "H.", {}, {1, 2}).ok());

  auto as_gauge = registry.AddGauge("c_total", "C.", {"topic"});
  EXPECT_EQ(as_gauge.status(),
            absl::AlreadyExistsError(
                "metric c_total is already registered as a counter with "
                "labels {topic} and different help, labels, type or buckets"));
  EXPECT_EQ(registry.AddCounter("c_total", "C.", {"group"}).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(registry.AddCounter("c_total", "Other.", {"topic"}).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(registry.AddHistogram("h", "H.", {}, {1, 3}).status().code(),
            absl::StatusCode::kAlreadyExists);

  EXPECT_EQ(
      registry.AddCounter("1abc", "").status(),
      absl::InvalidArgumentError(
          "metric name \"1abc\" does not match [a-zA-Z_:][a-zA-Z0-9_:]*"));
  EXPECT_EQ(registry.AddCounter("", "").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.AddCounter("a-b", "").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      registry.AddGauge("g", "", {"a:b"}).status(),
      absl::InvalidArgumentError("metric g: label name \"a:b\" does not match "
                                 "[a-zA-Z_][a-zA-Z0-9_]* or starts with __"));
  EXPECT_EQ(registry.AddGauge("g", "", {"__reserved"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.AddGauge("g", "", {"topic", "topic"}).status(),
            absl::InvalidArgumentError(
                "metric g: label name \"topic\" appears twice"));
  EXPECT_EQ(registry.AddHistogram("h2", "", {"le"}, {1}).status(),
            absl::InvalidArgumentError(
                "metric h2: label name \"le\" is reserved for buckets"));
  EXPECT_EQ(registry.AddHistogram("h2", "", {}, {1, 0.5}).status(),
            absl::InvalidArgumentError(
                "metric h2: bucket bounds must be finite and strictly "
                "increasing, not 1, 0.5"));
  EXPECT_EQ(registry.AddHistogram("h2", "", {}, {1, 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry
                .AddHistogram("h2", "", {},
                              {1, std::numeric_limits<double>::infinity()})
                .status(),
            absl::InvalidArgumentError(
                "metric h2: bucket bounds must be finite and strictly "
                "increasing, not 1, +Inf"));
  // Nothing malformed was added.
  EXPECT_EQ(registry.Render(),
            "# HELP h H.\n"
            "# TYPE h histogram\n"
            "h_bucket{le=\"1\"} 0\n"
            "h_bucket{le=\"2\"} 0\n"
            "h_bucket{le=\"+Inf\"} 0\n"
            "h_sum 0\n"
            "h_count 0\n");
}

TEST(MetricsTest, RemovedChildrenStopRenderingAndComeBackAtZero) {
  Registry registry;
  auto family = registry.AddGauge("hourglass_ready", "Ready messages.",
                                  {"topic", "group"});
  ASSERT_TRUE(family.ok()) << family.status();
  GaugeFamily& ready = **family;
  ready.WithLabels({"orders", "billing"})->Set(1);
  ready.WithLabels({"orders", "shipping"})->Set(2);
  ready.WithLabels({"carts", "billing"})->Set(3);
  std::shared_ptr<Gauge> held = ready.WithLabels({"carts", "audit"});
  held->Set(4);

  EXPECT_TRUE(ready.Remove({"orders", "shipping"}));
  EXPECT_FALSE(ready.Remove({"orders", "shipping"}));
  EXPECT_FALSE(ready.Remove({"nope", "nope"}));
  // Group "audit" is deleted: every topic's child for it goes.
  EXPECT_EQ(ready.RemoveIf([](absl::Span<const std::string> labels) {
    return labels[1] == "audit";
  }),
            1u);
  // What a caller still holds stays usable, but is no longer rendered.
  held->Set(40);
  EXPECT_EQ(held->Value(), 40);
  EXPECT_EQ(registry.Render(),
            "# HELP hourglass_ready Ready messages.\n"
            "# TYPE hourglass_ready gauge\n"
            "hourglass_ready{topic=\"carts\",group=\"billing\"} 3\n"
            "hourglass_ready{topic=\"orders\",group=\"billing\"} 1\n");

  EXPECT_EQ(ready.WithLabels({"carts", "audit"})->Value(), 0);
  ready.Clear();
  EXPECT_EQ(ready.size(), 0u);
  EXPECT_EQ(registry.Render(), "");
}

TEST(MetricsTest, CollectorsRunAtEachScrapeUntilRemoved) {
  Registry registry;
  auto family = registry.AddGauge("hourglass_scheduled", "Scheduled messages.",
                                  {"topic"});
  ASSERT_TRUE(family.ok()) << family.status();
  // State the collector reads, as the broker's would be.
  std::vector<std::pair<std::string, int>> scheduled = {{"orders", 5}};
  int runs = 0;
  const Registry::CollectorId id = registry.AddCollector([&] {
    ++runs;
    // Topics that vanished must not linger: rebuild from current state.
    (*family)->Clear();
    for (const auto& [topic, count] : scheduled) {
      (*family)->WithLabels({topic})->Set(count);
    }
  });
  EXPECT_EQ(registry.Render(),
            "# HELP hourglass_scheduled Scheduled messages.\n"
            "# TYPE hourglass_scheduled gauge\n"
            "hourglass_scheduled{topic=\"orders\"} 5\n");

  scheduled = {{"carts", 2}, {"reminders", 9}};
  EXPECT_EQ(registry.Render(),
            "# HELP hourglass_scheduled Scheduled messages.\n"
            "# TYPE hourglass_scheduled gauge\n"
            "hourglass_scheduled{topic=\"carts\"} 2\n"
            "hourglass_scheduled{topic=\"reminders\"} 9\n");
  EXPECT_EQ(runs, 2);

  registry.RemoveCollector(id);
  registry.RemoveCollector(id);  // Unknown ids are ignored.
  scheduled = {};
  EXPECT_EQ(registry.Render(),
            "# HELP hourglass_scheduled Scheduled messages.\n"
            "# TYPE hourglass_scheduled gauge\n"
            "hourglass_scheduled{topic=\"carts\"} 2\n"
            "hourglass_scheduled{topic=\"reminders\"} 9\n");
  EXPECT_EQ(runs, 2);
}

TEST(MetricsTest, CollectorsRunInTheOrderAddedAndMayAddFamilies) {
  Registry registry;
  std::string order;
  registry.AddCollector([&] { order += "a"; });
  registry.AddCollector([&] {
    order += "b";
    auto family = registry.AddGauge("late_gauge", "Added while collecting.");
    ASSERT_TRUE(family.ok()) << family.status();
    (*family)->WithLabels({})->Set(3);
  });
  EXPECT_EQ(registry.Render(),
            "# HELP late_gauge Added while collecting.\n"
            "# TYPE late_gauge gauge\n"
            "late_gauge 3\n");
  EXPECT_EQ(order, "ab");
}

// Several threads record into shared and per-thread children, creating them
// concurrently, while another thread scrapes; every increment is counted.
TEST(MetricsTest, ConcurrentRecordingLosesNothing) {
  constexpr int kThreads = 8;
  constexpr int kIncrements = 100000;
  Registry registry;
  auto counters = registry.AddCounter("ops_total", "Ops.", {"thread"});
  auto histograms = registry.AddHistogram("op_size", "Sizes.", {}, {1, 2});
  auto gauges = registry.AddGauge("level", "Level.");
  ASSERT_TRUE(counters.ok() && histograms.ok() && gauges.ok());

  absl::Notification start;
  absl::Notification stop_scraping;
  std::thread scraper([&] {
    start.WaitForNotification();
    while (!stop_scraping.HasBeenNotified()) registry.Render();
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.WaitForNotification();
      std::shared_ptr<Counter> own =
          (*counters)->WithLabels({absl::StrCat("t", t)});
      std::shared_ptr<Histogram> sizes = (*histograms)->WithLabels({});
      std::shared_ptr<Gauge> level = (*gauges)->WithLabels({});
      for (int i = 0; i < kIncrements; ++i) {
        // The lookup of the shared child races with its creation at first.
        (*counters)->WithLabels({"shared"})->Inc();
        own->Inc(2);
        sizes->Observe(i % 3);  // 0, 1, 2: buckets le=1 and le=2.
        level->Inc();
      }
    });
  }
  start.Notify();
  for (std::thread& thread : threads) thread.join();
  stop_scraping.Notify();
  scraper.join();

  EXPECT_EQ((*counters)->WithLabels({"shared"})->Value(),
            uint64_t{kThreads} * kIncrements);
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ((*counters)->WithLabels({absl::StrCat("t", t)})->Value(),
              2u * kIncrements);
  }
  EXPECT_EQ((*gauges)->WithLabels({})->Value(), kThreads * kIncrements);
  const Histogram::Snapshot sizes = (*histograms)->WithLabels({})->Read();
  // Per thread: 33334 zeros, 33333 ones, 33333 twos.
  EXPECT_EQ(sizes.cumulative,
            (std::vector<uint64_t>{kThreads * 66667u, kThreads * 100000u,
                                   kThreads * 100000u}));
  EXPECT_EQ(sizes.count, uint64_t{kThreads} * kIncrements);
  EXPECT_EQ(sizes.sum, kThreads * (33333.0 * 1 + 33333.0 * 2));
}

}  // namespace
}  // namespace hourglass::metrics
