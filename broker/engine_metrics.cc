#include "broker/engine_metrics.h"

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "spdlog/spdlog.h"

namespace hourglass::broker {
namespace {

// A store write slower than this is logged (at most every 10 s).
constexpr absl::Duration kSlowWrite = absl::Milliseconds(200);
// A due backlog that has not emptied for this long is logged (at most every
// 30 s).
constexpr absl::Duration kSlowDrain = absl::Seconds(5);

}  // namespace

EngineMetrics::EngineMetrics(metrics::Registry* registry)
    : registry_(registry), store_errors_(registry) {
  if (registry_ == nullptr) return;
  using metrics::Metric;
  write_seconds_ = &registry_->Histograms(Metric::kStoreWriteSeconds).Add({});
  write_batches_ = &registry_->Histograms(Metric::kStoreWriteBatches).Add({});
  sync_seconds_ = &registry_->Histograms(Metric::kStoreSyncSeconds).Add({});
  publish_latency_ =
      &registry_->Histograms(Metric::kPublishLatencySeconds).Add({});
}

EngineMetrics::~EngineMetrics() { StopCollecting(); }

void EngineMetrics::StopCollecting() {
  if (collector_.has_value()) registry_->RemoveCollector(*collector_);
  if (source_.has_value()) registry_->RemoveCollector(*source_);
  collector_.reset();
  source_.reset();
}

void EngineMetrics::Collect(std::function<std::optional<Snapshot>()> snapshot) {
  if (registry_ == nullptr) return;
  using metrics::Metric;
  // What the collector read, for the source after it; scrapes are
  // serialised, so only one of them touches it at a time.
  struct State {
    prometheus::Gauge *backlog, *lag, *live, *pending, *disk;
    std::optional<Snapshot> last;
  };
  auto state = std::make_shared<State>(State{
      &registry_->Gauges(Metric::kDueBacklog).Add({}),
      &registry_->Gauges(Metric::kLoaderLagSeconds).Add({}),
      &registry_->Gauges(Metric::kStoreLiveDataBytes).Add({}),
      &registry_->Gauges(Metric::kStorePendingCompactionBytes).Add({}),
      &registry_->Gauges(Metric::kStoreDiskBytes).Add({}),
      std::nullopt,
  });
  collector_ = registry_->AddCollector([state, snapshot = std::move(snapshot)] {
    std::optional<Snapshot> s = snapshot();
    if (!s.has_value()) return;  // Left as the last scrape saw it.
    state->backlog->Set(static_cast<double>(s->due_backlog));
    state->lag->Set(absl::ToDoubleSeconds(s->loader_lag));
    state->live->Set(static_cast<double>(s->live_data_bytes));
    state->pending->Set(static_cast<double>(s->pending_compaction_bytes));
    state->disk->Set(static_cast<double>(s->disk_bytes));
    state->last = std::move(s);
  });
  // The series per topic and group, built whole from what the collector
  // read, so that those of deleted topics and groups are simply not there
  // (removing prometheus-cpp children one by one searches the family each
  // time: quadratic when thousands go at once).
  source_ = registry_->AddSource([state] {
    std::vector<prometheus::MetricFamily> families;
    if (!state->last.has_value()) return families;
    const Snapshot& s = *state->last;
    prometheus::MetricFamily scheduled = metrics::NewFamily(Metric::kScheduled);
    for (const auto& [topic, n] : s.scheduled) {
      metrics::AddSample(scheduled, {topic}).gauge.value =
          static_cast<double>(n);
    }
    prometheus::MetricFamily ready = metrics::NewFamily(Metric::kReady);
    prometheus::MetricFamily in_flight = metrics::NewFamily(Metric::kInFlight);
    prometheus::MetricFamily consumers = metrics::NewFamily(Metric::kConsumers);
    for (const Snapshot::Group& g : s.groups) {
      metrics::AddSample(ready, {g.topic, g.group}).gauge.value =
          static_cast<double>(g.ready);
      metrics::AddSample(in_flight, {g.topic, g.group}).gauge.value =
          static_cast<double>(g.in_flight);
      metrics::AddSample(consumers, {g.topic, g.group}).gauge.value =
          static_cast<double>(g.consumers);
    }
    for (prometheus::MetricFamily* family :
         {&scheduled, &ready, &in_flight, &consumers}) {
      families.push_back(std::move(*family));
    }
    return families;
  });
}

void EngineMetrics::StoreWrite(const storage::CommitQueue::WriteInfo& info) {
  if (!info.status.ok()) store_errors_.Count("write", info.status);
  if (write_seconds_ != nullptr) {
    write_seconds_->Observe(absl::ToDoubleSeconds(info.latency));
    write_batches_->Observe(static_cast<double>(info.batches));
  }
  WarnSlow("write", info.latency, info.batches,
           "publishes and deliveries wait on it");
}

void EngineMetrics::StoreSync(const storage::CommitQueue::SyncInfo& info) {
  if (!info.status.ok()) store_errors_.Count("sync", info.status);
  if (sync_seconds_ != nullptr) {
    sync_seconds_->Observe(absl::ToDoubleSeconds(info.latency));
  }
  WarnSlow("log sync", info.latency, info.batches,
           "publishes and other durable changes wait on it");
}

void EngineMetrics::WarnSlow(std::string_view what, absl::Duration latency,
                             size_t batches, std::string_view waiting) {
  if (latency < kSlowWrite) return;
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  if (now - last_slow_write_warning_ < absl::Seconds(10)) return;
  last_slow_write_warning_ = now;
  spdlog::warn("slow store {}: {} for {} batches; {}", what,
               absl::FormatDuration(latency), batches, waiting);
}

void EngineMetrics::PublishLatency(absl::Duration latency) {
  if (publish_latency_ != nullptr) {
    publish_latency_->Observe(absl::ToDoubleSeconds(latency));
  }
}

void EngineMetrics::DueBacklog(size_t waiting, absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (waiting == 0) {
    backlog_since_.reset();
    return;
  }
  if (!backlog_since_.has_value()) backlog_since_ = now;
  if (now - *backlog_since_ < kSlowDrain ||
      now - last_backlog_warning_ < absl::Seconds(30)) {
    return;
  }
  last_backlog_warning_ = now;
  spdlog::warn(
      "slow drain: {} due messages still wait to be moved to ready, and the "
      "backlog has not emptied for {}",
      waiting, absl::FormatDuration(now - *backlog_since_));
}

}  // namespace hourglass::broker
