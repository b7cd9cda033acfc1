// What recording a metric costs on the hot paths: per publish and per
// delivery batch (Activity, which also keeps rates and lateness), per
// group commit (EngineMetrics), and the bare counter and histogram under
// them. ->Threads(2) runs two threads on one topic, as two gRPC threads
// publishing to it would.
//
//   build/dev/tests/bench/metrics_increment_bench

#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "benchmark/benchmark.h"
#include "broker/activity.h"
#include "broker/clock.h"
#include "broker/engine_metrics.h"
#include "broker/metrics.h"

namespace hourglass {
namespace {

// One registry and activity shared by a benchmark's threads.
struct Shared {
  broker::SystemClock clock;
  metrics::Registry registry;
  broker::Activity activity{&clock, &registry};
  broker::EngineMetrics engine{&registry};
};

Shared& Fixture() {
  static Shared* shared = new Shared;
  return *shared;
}

void BM_ActivityPublished(benchmark::State& state) {
  broker::Activity& activity = Fixture().activity;
  for (auto _ : state) activity.Published("orders", 1);
}
BENCHMARK(BM_ActivityPublished)->Threads(1)->Threads(2);

// A delivery batch of range(0) first deliveries of one topic.
void BM_ActivityDelivered(benchmark::State& state) {
  broker::Activity& activity = Fixture().activity;
  const std::vector<absl::Duration> lateness(state.range(0),
                                             absl::Microseconds(700));
  for (auto _ : state) activity.Delivered("orders", lateness);
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_ActivityDelivered)->Arg(1)->Arg(64)->Threads(1)->Threads(2);

void BM_ActivityAcked(benchmark::State& state) {
  broker::Activity& activity = Fixture().activity;
  for (auto _ : state) activity.Acked("orders", "billing", 1);
}
BENCHMARK(BM_ActivityAcked)->Threads(1)->Threads(2);

void BM_EngineStoreWrite(benchmark::State& state) {
  broker::EngineMetrics& engine = Fixture().engine;
  storage::CommitQueue::WriteInfo info;
  info.latency = absl::Microseconds(300);
  info.batches = 4;
  for (auto _ : state) engine.StoreWrite(info);
}
BENCHMARK(BM_EngineStoreWrite)->Threads(1)->Threads(2);

void BM_PublishLatency(benchmark::State& state) {
  broker::EngineMetrics& engine = Fixture().engine;
  for (auto _ : state) engine.PublishLatency(absl::Microseconds(900));
}
BENCHMARK(BM_PublishLatency)->Threads(1)->Threads(2);

// The primitives under the calls above.
void BM_CounterIncrement(benchmark::State& state) {
  static prometheus::Counter& counter =
      Fixture()
          .registry.Counters(metrics::Metric::kMetricsHttpRefusedTotal)
          .Add({});
  for (auto _ : state) counter.Increment();
}
BENCHMARK(BM_CounterIncrement)->Threads(1)->Threads(2);

void BM_HistogramObserve(benchmark::State& state) {
  static prometheus::Histogram& histogram =
      Fixture().registry.Histograms(metrics::Metric::kStoreSyncSeconds).Add({});
  for (auto _ : state) histogram.Observe(0.0007);
}
BENCHMARK(BM_HistogramObserve)->Threads(1)->Threads(2);

}  // namespace
}  // namespace hourglass

BENCHMARK_MAIN();
