#ifndef HOURGLASS_BROKER_ENGINE_METRICS_H_
#define HOURGLASS_BROKER_ENGINE_METRICS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "broker/metrics.h"
#include "broker/store_errors.h"
#include "storage/commit_queue.h"

namespace hourglass::broker {

// The engine's health signals besides per-topic events (Activity counts
// those): store writes, publish latency, and, at scrape time, gauges of what
// the broker holds. Also logs warnings for slow store writes and a due
// backlog that does not drain.
//
// Metric names: hourglass_store_write_seconds and
// hourglass_store_write_batches (histograms per group commit),
// hourglass_publish_latency_seconds (histogram), and the gauges
// hourglass_scheduled{topic}, hourglass_ready{topic,group},
// hourglass_in_flight{topic,group}, hourglass_consumers{topic,group},
// hourglass_due_backlog, hourglass_loader_lag_seconds,
// hourglass_store_{live_data,pending_compaction,disk}_bytes. The waiting
// area of a topic with no group is reported as group "".
//
// Series per topic and group exist only while their topic or group does,
// so their number follows what the broker holds, not its history. A topic
// exists while it holds a pending message (scheduled, ready in a group or
// its waiting area, in flight, or dead-lettered into it: its `messages`
// counter is above 0) or has a registered group; a group exists from its
// registration until it is deleted. Each scrape shows the topics and groups
// that exist when it reads them (Inspector::Stats):
//   per topic: hourglass_scheduled, and the seven hourglass_*_total
//              counters of Activity (removed with the topic,
//              Activity::ForgetTopicsExcept; one that comes back starts
//              them at 0, which Prometheus reads as a counter reset);
//   per group: hourglass_ready, hourglass_in_flight, hourglass_consumers;
//              the same three for a waiting area while it holds messages.
// A deleted group's series are gone from the next scrape, and so are those
// of a topic left without messages and groups (purged, cancelled, drained),
// except that a topic with an event while a scrape reads keeps its totals
// until the scrape after. So a scrape renders at most
//   8 T + 3 (G + W)
// labelled series, T topics that exist (dead-letter topics count), G groups
// and W <= T waiting areas holding messages, besides a fixed set of
// unlabelled ones. Series of topics that were gone by the last scrape take
// no memory; those that went since stay in memory until the next.
//
// A scrape reads no table: counts come from the store's non-zero counters
// in memory and from the dispatcher (Inspector::Stats), so it costs
// O(T + G), however many topics ever existed.
//
// Thread-safe.
class EngineMetrics {
 public:
  // Without a registry only the warnings remain.
  explicit EngineMetrics(metrics::Registry* registry);
  // Stops collecting (RemoveCollector waits for a scrape in progress).
  ~EngineMetrics();

  // What the gauges read, at scrape time. Called on the scrape thread.
  struct Snapshot {
    struct Group {
      std::string topic, group;
      uint64_t ready = 0, in_flight = 0, consumers = 0;
    };
    std::vector<std::pair<std::string, uint64_t>> scheduled;  // By topic.
    std::vector<Group> groups;
    uint64_t due_backlog = 0;
    absl::Duration loader_lag;
    uint64_t live_data_bytes = 0, pending_compaction_bytes = 0, disk_bytes = 0;
  };
  // Starts the scrape-time collector. `snapshot` must not block long.
  void Collect(std::function<std::optional<Snapshot>()> snapshot);
  // Stops it, waiting for a scrape in progress. Idempotent.
  void StopCollecting();

  // After each group commit's write (on the commit queue's writer thread)
  // and each log sync (on its syncer thread); a failure counts in
  // store_errors() as op "write" or "sync".
  void StoreWrite(const storage::CommitQueue::WriteInfo& info);
  void StoreSync(const storage::CommitQueue::SyncInfo& info);
  void PublishLatency(absl::Duration latency);
  // From the timer thread after each step: how many due messages wait to
  // be moved to ready.
  void DueBacklog(size_t waiting, absl::Time now);

  // Where the broker's background loops count (and log) failed store
  // operations.
  StoreErrors& store_errors() { return store_errors_; }

 private:
  metrics::Registry* const registry_;
  // Null without a registry.
  prometheus::Histogram* write_seconds_ = nullptr;
  prometheus::Histogram* write_batches_ = nullptr;
  prometheus::Histogram* sync_seconds_ = nullptr;
  prometheus::Histogram* publish_latency_ = nullptr;
  std::optional<metrics::Registry::CollectorId> collector_;
  std::optional<metrics::Registry::CollectorId> source_;
  StoreErrors store_errors_;

  absl::Mutex mu_;
  // Warns that a store write or sync took `latency`, at most every 10 s.
  void WarnSlow(std::string_view what, absl::Duration latency, size_t batches,
                std::string_view waiting);
  absl::Time last_slow_write_warning_ ABSL_GUARDED_BY(mu_) =
      absl::InfinitePast();
  // Since when the due backlog has not been empty; and the last warning.
  std::optional<absl::Time> backlog_since_ ABSL_GUARDED_BY(mu_);
  absl::Time last_backlog_warning_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace hourglass::broker

#endif  // HOURGLASS_BROKER_ENGINE_METRICS_H_
