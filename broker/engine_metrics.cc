#include "broker/engine_metrics.h"

#include <string>
#include <string_view>
#include <utility>

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
    : registry_(registry) {
  if (registry_ == nullptr) return;
  auto histogram =
      [&](const char* name, const char* help,
          std::vector<double> bounds) -> std::shared_ptr<metrics::Histogram> {
    absl::StatusOr<metrics::HistogramFamily*> family =
        registry_->AddHistogram(name, help, {}, std::move(bounds));
    return family.ok() ? (*family)->WithLabels({}) : nullptr;
  };
  write_seconds_ =
      histogram("hourglass_store_write_seconds",
                "Time of one group commit's write to the store, without "
                "its log sync.",
                metrics::LatencySecondsBuckets());
  write_batches_ =
      histogram("hourglass_store_write_batches",
                "Batches (publishes, dispatches, steps) sharing one store "
                "write.",
                metrics::ExponentialBuckets(1, 2, 12));
  sync_seconds_ =
      histogram("hourglass_store_sync_seconds",
                "Time of one log sync (fsync); it makes every write before "
                "it durable.",
                metrics::LatencySecondsBuckets());
  publish_latency_ =
      histogram("hourglass_publish_latency_seconds",
                "Time from a Publish reaching the engine to its answer.",
                metrics::LatencySecondsBuckets());
}

EngineMetrics::~EngineMetrics() { StopCollecting(); }

void EngineMetrics::StopCollecting() {
  if (collector_.has_value()) registry_->RemoveCollector(*collector_);
  collector_.reset();
}

void EngineMetrics::Collect(std::function<std::optional<Snapshot>()> snapshot) {
  if (registry_ == nullptr) return;
  auto gauge = [&](const char* name, const char* help,
                   std::vector<std::string> labels) -> metrics::GaugeFamily* {
    absl::StatusOr<metrics::GaugeFamily*> family =
        registry_->AddGauge(name, help, std::move(labels));
    return family.ok() ? *family : nullptr;
  };
  metrics::GaugeFamily* scheduled = gauge(
      "hourglass_scheduled", "Messages published and not yet due.", {"topic"});
  metrics::GaugeFamily* ready =
      gauge("hourglass_ready", "Due messages waiting in a group.",
            {"topic", "group"});
  metrics::GaugeFamily* in_flight = gauge(
      "hourglass_in_flight",
      "Deliveries of a group not yet acknowledged (with a consumer, or due "
      "again).",
      {"topic", "group"});
  metrics::GaugeFamily* consumers = gauge(
      "hourglass_consumers", "Connected consumer streams.", {"topic", "group"});
  metrics::GaugeFamily* backlog =
      gauge("hourglass_due_backlog",
            "Messages that came due and wait to be moved to ready.", {});
  metrics::GaugeFamily* lag = gauge(
      "hourglass_loader_lag_seconds",
      "How far the loader is behind now plus the horizon (0 when on time).",
      {});
  metrics::GaugeFamily* live = gauge("hourglass_store_live_data_bytes",
                                     "RocksDB's estimate of live data.", {});
  metrics::GaugeFamily* pending =
      gauge("hourglass_store_pending_compaction_bytes",
            "RocksDB's estimate of bytes compaction still has to rewrite.", {});
  metrics::GaugeFamily* disk =
      gauge("hourglass_store_disk_bytes", "Bytes of table and blob files.", {});
  if (scheduled == nullptr || ready == nullptr || in_flight == nullptr ||
      consumers == nullptr || backlog == nullptr || lag == nullptr ||
      live == nullptr || pending == nullptr || disk == nullptr) {
    return;
  }
  collector_ = registry_->AddCollector([=, snapshot = std::move(snapshot)] {
    std::optional<Snapshot> s = snapshot();
    if (!s.has_value()) return;  // Left as the last scrape saw it.
    // Cleared first, so that deleted topics and groups disappear.
    scheduled->Clear();
    ready->Clear();
    in_flight->Clear();
    consumers->Clear();
    for (const auto& [topic, n] : s->scheduled) {
      const std::string_view labels[] = {topic};
      scheduled->WithLabels(labels)->Set(static_cast<double>(n));
    }
    for (const Snapshot::Group& g : s->groups) {
      const std::string_view labels[] = {g.topic, g.group};
      ready->WithLabels(labels)->Set(static_cast<double>(g.ready));
      in_flight->WithLabels(labels)->Set(static_cast<double>(g.in_flight));
      consumers->WithLabels(labels)->Set(static_cast<double>(g.consumers));
    }
    backlog->WithLabels({})->Set(static_cast<double>(s->due_backlog));
    lag->WithLabels({})->Set(absl::ToDoubleSeconds(s->loader_lag));
    live->WithLabels({})->Set(static_cast<double>(s->live_data_bytes));
    pending->WithLabels({})->Set(
        static_cast<double>(s->pending_compaction_bytes));
    disk->WithLabels({})->Set(static_cast<double>(s->disk_bytes));
  });
}

void EngineMetrics::StoreWrite(const storage::CommitQueue::WriteInfo& info) {
  if (write_seconds_ != nullptr) {
    write_seconds_->Observe(absl::ToDoubleSeconds(info.latency));
    write_batches_->Observe(static_cast<double>(info.batches));
  }
  WarnSlow("write", info.latency, info.batches,
           "publishes and deliveries wait on it");
}

void EngineMetrics::StoreSync(const storage::CommitQueue::SyncInfo& info) {
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
