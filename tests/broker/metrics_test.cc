#include "broker/metrics.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "broker/metric_catalog.h"
#include "gtest/gtest.h"

namespace hourglass::metrics {
namespace {

TEST(MetricsTest, EmptyRegistryRendersNothing) {
  Registry registry;
  EXPECT_EQ(registry.Render(), "");
}

TEST(MetricsTest, UnlabeledCounterRendersAtZeroAndCounts) {
  Registry registry;
  CounterFamily family = registry.Counters(Metric::kMetricsHttpRefusedTotal);
  const std::string head =
      "# HELP hourglass_metrics_http_refused_total Connections to the "
      "metrics endpoint answered 503 at once: every worker busy and "
      "--metrics_max_queued_connections waiting.\n"
      "# TYPE hourglass_metrics_http_refused_total counter\n";
  EXPECT_EQ(registry.Render(),
            head + "hourglass_metrics_http_refused_total 0\n");

  prometheus::Counter& counter = family.Add({});
  counter.Increment();
  counter.Increment(41);
  EXPECT_EQ(counter.Value(), 42);
  // Registering again finds the same family and child.
  EXPECT_EQ(&registry.Counters(Metric::kMetricsHttpRefusedTotal).Add({}),
            &counter);
  EXPECT_EQ(registry.Render(),
            head + "hourglass_metrics_http_refused_total 42\n");
}

TEST(MetricsTest, LabeledCountersRenderInLabelValueOrder) {
  Registry registry;
  CounterFamily published = registry.Counters(Metric::kPublishedTotal);
  // A labeled family has no children until one is used, and is left out.
  EXPECT_EQ(registry.Render(), "");

  published.Add({"orders"}).Increment(2);
  published.Add({"carts"}).Increment(7);
  published.Add({"audit"}).Increment(1);
  prometheus::Counter& again = published.Add({"orders"});
  again.Increment();
  EXPECT_EQ(&again, &published.Add({"orders"}));
  EXPECT_EQ(registry.Render(),
            "# HELP hourglass_published_total Messages published (stored).\n"
            "# TYPE hourglass_published_total counter\n"
            "hourglass_published_total{topic=\"audit\"} 1\n"
            "hourglass_published_total{topic=\"carts\"} 7\n"
            "hourglass_published_total{topic=\"orders\"} 3\n");
}

// prometheus-cpp keeps labels in name order; a scrape shows them in the
// catalog's (topic before group), and the series in that order's values.
TEST(MetricsTest, LabelsRenderInTheCatalogsOrder) {
  Registry registry;
  GaugeFamily ready = registry.Gauges(Metric::kReady);
  ready.Add({"orders", "shipping"}).Set(2);
  ready.Add({"orders", "billing"}).Set(1);
  ready.Add({"carts", "zeta"}).Set(3);
  EXPECT_EQ(registry.Render(),
            "# HELP hourglass_ready Due messages waiting in a group.\n"
            "# TYPE hourglass_ready gauge\n"
            "hourglass_ready{topic=\"carts\",group=\"zeta\"} 3\n"
            "hourglass_ready{topic=\"orders\",group=\"billing\"} 1\n"
            "hourglass_ready{topic=\"orders\",group=\"shipping\"} 2\n");
}

TEST(MetricsTest, GaugesSetAndFormatSoPrometheusParsesThem) {
  Registry registry;
  GaugeFamily g = registry.Gauges(Metric::kBuildInfo);
  g.Add({"a_int"}).Set(42);
  g.Add({"b_negative"}).Set(-3);
  g.Add({"c_fraction"}).Set(0.25);
  g.Add({"d_big"}).Set(1e20);
  g.Add({"e_tiny"}).Set(1.5e-7);
  g.Add({"f_nan"}).Set(std::numeric_limits<double>::quiet_NaN());
  g.Add({"g_inf"}).Set(std::numeric_limits<double>::infinity());
  g.Add({"h_minus_inf"}).Set(-std::numeric_limits<double>::infinity());
  g.Add({"i_2p53"}).Set(9007199254740992.0);
  g.Add({"j_seconds"}).Set(1763856000.123);
  prometheus::Gauge& changed = g.Add({"k_changed"});
  changed.Increment(10);
  changed.Decrement(2.5);
  changed.Increment();
  EXPECT_EQ(changed.Value(), 8.5);
  const std::string text = registry.Render();
  EXPECT_EQ(text.substr(text.find('\n', text.find("# TYPE")) + 1),
            "hourglass_build_info{version=\"a_int\"} 42\n"
            "hourglass_build_info{version=\"b_negative\"} -3\n"
            "hourglass_build_info{version=\"c_fraction\"} 0.25\n"
            "hourglass_build_info{version=\"d_big\"} 1e+20\n"
            "hourglass_build_info{version=\"e_tiny\"} 1.5e-07\n"
            "hourglass_build_info{version=\"f_nan\"} Nan\n"
            "hourglass_build_info{version=\"g_inf\"} +Inf\n"
            "hourglass_build_info{version=\"h_minus_inf\"} -Inf\n"
            "hourglass_build_info{version=\"i_2p53\"} 9007199254740992\n"
            "hourglass_build_info{version=\"j_seconds\"} 1763856000.123\n"
            "hourglass_build_info{version=\"k_changed\"} 8.5\n");
}

// prometheus-cpp's TextSerializer writes a histogram's _count and _sum
// before its buckets (Prometheus reads them in any order).
TEST(MetricsTest, HistogramBucketsAreTheCatalogsCumulativeWithInf) {
  Registry registry;
  prometheus::Histogram& batches =
      registry.Histograms(Metric::kStoreWriteBatches).Add({});
  batches.Observe(1);  // A bound counts in its own bucket (le).
  batches.Observe(3);
  batches.Observe(4);
  batches.Observe(5000);
  const std::string text = registry.Render();
  const std::string samples =
      text.substr(text.find('\n', text.find("# TYPE")) + 1);
  EXPECT_EQ(samples,
            "hourglass_store_write_batches_count 4\n"
            "hourglass_store_write_batches_sum 5008\n"
            "hourglass_store_write_batches_bucket{le=\"1\"} 1\n"
            "hourglass_store_write_batches_bucket{le=\"2\"} 1\n"
            "hourglass_store_write_batches_bucket{le=\"4\"} 3\n"
            "hourglass_store_write_batches_bucket{le=\"8\"} 3\n"
            "hourglass_store_write_batches_bucket{le=\"16\"} 3\n"
            "hourglass_store_write_batches_bucket{le=\"32\"} 3\n"
            "hourglass_store_write_batches_bucket{le=\"64\"} 3\n"
            "hourglass_store_write_batches_bucket{le=\"128\"} 3\n"
            "hourglass_store_write_batches_bucket{le=\"256\"} 3\n"
            "hourglass_store_write_batches_bucket{le=\"512\"} 3\n"
            "hourglass_store_write_batches_bucket{le=\"1024\"} 3\n"
            "hourglass_store_write_batches_bucket{le=\"2048\"} 3\n"
            "hourglass_store_write_batches_bucket{le=\"+Inf\"} 4\n");
}

TEST(MetricsTest, LatencyHistogramsUseTheLatencyBuckets) {
  Registry registry;
  registry.Histograms(Metric::kPublishLatencySeconds).Add({}).Observe(0.003);
  const std::string text = registry.Render();
  for (const char* line : {
           "hourglass_publish_latency_seconds_bucket{le=\"0.0001\"} 0\n",
           "hourglass_publish_latency_seconds_bucket{le=\"0.0025\"} 0\n",
           "hourglass_publish_latency_seconds_bucket{le=\"0.005\"} 1\n",
           "hourglass_publish_latency_seconds_bucket{le=\"60\"} 1\n",
           "hourglass_publish_latency_seconds_bucket{le=\"+Inf\"} 1\n",
           "hourglass_publish_latency_seconds_sum 0.003\n",
           "hourglass_publish_latency_seconds_count 1\n",
       }) {
    EXPECT_NE(text.find(line), std::string::npos) << line << text;
  }
}

TEST(MetricsTest, BucketHelpers) {
  EXPECT_EQ(ExponentialBuckets(1, 4, 4), (std::vector<double>{1, 4, 16, 64}));
  const std::vector<double> latency = LatencySecondsBuckets();
  ASSERT_EQ(latency.size(), 18u);
  EXPECT_EQ(latency.front(), 0.0001);
  EXPECT_EQ(latency.back(), 60);
}

TEST(MetricsTest, EscapesLabelValues) {
  Registry registry;
  CounterFamily family = registry.Counters(Metric::kAckedTotal);
  family.Add({"back\\slash \"quoted\"\nnext line"}).Increment();
  family.Add({""}).Increment(2);
  EXPECT_EQ(registry.Render(),
            "# HELP hourglass_acked_total Acknowledged deliveries.\n"
            "# TYPE hourglass_acked_total counter\n"
            "hourglass_acked_total{topic=\"\"} 2\n"
            "hourglass_acked_total{topic=\"back\\\\slash \\\"quoted\\\"\\nnext "
            "line\"} 1\n");
}

TEST(MetricsTest, FamiliesRenderInNameOrder) {
  Registry registry;
  registry.Gauges(Metric::kStoreDiskBytes);
  registry.Counters(Metric::kMetricsHttpTimedOutTotal);
  registry.Gauges(Metric::kScheduled);  // No children: left out.
  registry.Gauges(Metric::kDueBacklog);
  std::vector<std::string> types;
  const std::string text = registry.Render();
  for (size_t at = text.find("# TYPE "); at != std::string::npos;
       at = text.find("# TYPE ", at + 1)) {
    types.push_back(text.substr(at, text.find('\n', at) - at));
  }
  EXPECT_EQ(types, (std::vector<std::string>{
                       "# TYPE hourglass_due_backlog gauge",
                       "# TYPE hourglass_metrics_http_timed_out_total counter",
                       "# TYPE hourglass_store_disk_bytes gauge"}));
}

TEST(MetricsTest, RemovedChildrenStopRenderingAndComeBackAtZero) {
  Registry registry;
  GaugeFamily ready = registry.Gauges(Metric::kReady);
  ready.Add({"orders", "billing"}).Set(1);
  ready.Remove(&ready.Add({"orders", "shipping"}));
  EXPECT_EQ(registry.Render(),
            "# HELP hourglass_ready Due messages waiting in a group.\n"
            "# TYPE hourglass_ready gauge\n"
            "hourglass_ready{topic=\"orders\",group=\"billing\"} 1\n");
  EXPECT_EQ(ready.Add({"orders", "shipping"}).Value(), 0);
  ready.Remove(&ready.Add({"orders", "shipping"}));
  ready.Remove(&ready.Add({"orders", "billing"}));
  EXPECT_EQ(registry.Render(), "");
}

TEST(MetricsTest, CollectorsRunAtEachScrapeUntilRemoved) {
  Registry registry;
  prometheus::Gauge& backlog = registry.Gauges(Metric::kDueBacklog).Add({});
  int state = 5;  // What the collector reads, as the broker's would be.
  int runs = 0;
  const Registry::CollectorId id = registry.AddCollector([&] {
    ++runs;
    backlog.Set(state);
  });
  const std::string head =
      "# HELP hourglass_due_backlog Messages that came due and wait to be "
      "moved to ready.\n"
      "# TYPE hourglass_due_backlog gauge\n";
  EXPECT_EQ(registry.Render(), head + "hourglass_due_backlog 5\n");
  state = 2;
  EXPECT_EQ(registry.Render(), head + "hourglass_due_backlog 2\n");
  EXPECT_EQ(runs, 2);

  registry.RemoveCollector(id);
  registry.RemoveCollector(id);  // Unknown ids are ignored.
  state = 9;
  EXPECT_EQ(registry.Render(), head + "hourglass_due_backlog 2\n");
  EXPECT_EQ(runs, 2);
}

// A source hands each scrape whole families, built from what exists then:
// what went away since is simply not in them. They render among the
// registry's, in name order, their samples in label value order.
TEST(MetricsTest, SourcesRenderWholeFamiliesAtEachScrapeUntilRemoved) {
  Registry registry;
  registry.Gauges(Metric::kStoreDiskBytes).Add({}).Set(4096);
  std::vector<std::pair<std::string, int>> state = {{"orders", 5},
                                                    {"carts", 1}};
  const Registry::CollectorId id = registry.AddSource([&] {
    prometheus::MetricFamily scheduled = NewFamily(Metric::kScheduled);
    for (const auto& [topic, n] : state) {
      AddSample(scheduled, {topic}).gauge.value = n;
    }
    prometheus::MetricFamily ready = NewFamily(Metric::kReady);
    AddSample(ready, {"orders", "billing"}).gauge.value = 2;
    return std::vector<prometheus::MetricFamily>{scheduled, ready};
  });
  const std::string ready =
      "# HELP hourglass_ready Due messages waiting in a group.\n"
      "# TYPE hourglass_ready gauge\n"
      "hourglass_ready{topic=\"orders\",group=\"billing\"} 2\n";
  const std::string scheduled_head =
      "# HELP hourglass_scheduled Messages published and not yet due.\n"
      "# TYPE hourglass_scheduled gauge\n";
  const std::string disk =
      "# HELP hourglass_store_disk_bytes Bytes of table and blob files and of "
      "the write-ahead log.\n"
      "# TYPE hourglass_store_disk_bytes gauge\n"
      "hourglass_store_disk_bytes 4096\n";
  EXPECT_EQ(registry.Render(), ready + scheduled_head +
                                   "hourglass_scheduled{topic=\"carts\"} 1\n"
                                   "hourglass_scheduled{topic=\"orders\"} 5\n" +
                                   disk);
  state = {{"reminders", 9}};
  EXPECT_EQ(registry.Render(),
            ready + scheduled_head +
                "hourglass_scheduled{topic=\"reminders\"} 9\n" + disk);
  registry.RemoveCollector(id);
  EXPECT_EQ(registry.Render(), disk);
}

// Two sources with one family (two engines of one cluster node, each with
// its own topics) render as one family, its samples in label value order.
TEST(MetricsTest, SourcesOfOneFamilyRenderAsOneFamily) {
  Registry registry;
  for (const char* topic : {"orders", "carts"}) {
    registry.AddSource([topic] {
      prometheus::MetricFamily scheduled = NewFamily(Metric::kScheduled);
      AddSample(scheduled, {topic}).gauge.value = 1;
      return std::vector<prometheus::MetricFamily>{scheduled};
    });
  }
  EXPECT_EQ(registry.Render(),
            "# HELP hourglass_scheduled Messages published and not yet due.\n"
            "# TYPE hourglass_scheduled gauge\n"
            "hourglass_scheduled{topic=\"carts\"} 1\n"
            "hourglass_scheduled{topic=\"orders\"} 1\n");
}

TEST(MetricsTest, CollectorsRunInTheOrderAddedAndMayRegisterFamilies) {
  Registry registry;
  std::string order;
  registry.AddCollector([&] { order += "a"; });
  registry.AddCollector([&] {
    order += "b";
    registry.Gauges(Metric::kDueBacklog).Add({}).Set(3);
  });
  EXPECT_EQ(registry.Render(),
            "# HELP hourglass_due_backlog Messages that came due and wait to "
            "be moved to ready.\n"
            "# TYPE hourglass_due_backlog gauge\n"
            "hourglass_due_backlog 3\n");
  EXPECT_EQ(order, "ab");
}

// Several threads record into shared and per-thread children, creating them
// concurrently, while another thread scrapes; every increment is counted.
TEST(MetricsTest, ConcurrentRecordingLosesNothing) {
  constexpr int kThreads = 8;
  constexpr int kIncrements = 100000;
  Registry registry;
  CounterFamily counters = registry.Counters(Metric::kPublishedTotal);
  prometheus::Histogram& sizes =
      registry.Histograms(Metric::kStoreWriteBatches).Add({});
  prometheus::Gauge& level = registry.Gauges(Metric::kDueBacklog).Add({});

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
      const std::string own_topic = absl::StrCat("t", t);
      prometheus::Counter& own = counters.Add({own_topic});
      for (int i = 0; i < kIncrements; ++i) {
        // The lookup of the shared child races with its creation at first.
        counters.Add({"shared"}).Increment();
        own.Increment(2);
        sizes.Observe(1 + i % 3);  // 1, 2, 3: buckets le=1, le=2, le=4.
        level.Increment();
      }
    });
  }
  start.Notify();
  for (std::thread& thread : threads) thread.join();
  stop_scraping.Notify();
  scraper.join();

  EXPECT_EQ(counters.Add({"shared"}).Value(), kThreads * kIncrements);
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(counters.Add({absl::StrCat("t", t)}).Value(), 2 * kIncrements);
  }
  EXPECT_EQ(level.Value(), kThreads * kIncrements);
  const prometheus::ClientMetric::Histogram h = sizes.Collect().histogram;
  EXPECT_EQ(h.sample_count, uint64_t{kThreads} * kIncrements);
  // Per thread: 33334 ones, 33333 twos, 33333 threes.
  ASSERT_GE(h.bucket.size(), 3u);
  EXPECT_EQ(h.bucket[0].cumulative_count, kThreads * 33334u);
  EXPECT_EQ(h.bucket[1].cumulative_count, kThreads * 66667u);
  EXPECT_EQ(h.bucket[2].cumulative_count, kThreads * 100000u);
  EXPECT_EQ(h.sample_sum, kThreads * (33334.0 + 33333.0 * 2 + 33333.0 * 3));
}

}  // namespace
}  // namespace hourglass::metrics
