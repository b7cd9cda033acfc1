#ifndef HOURGLASS_BROKER_ACTIVITY_H_
#define HOURGLASS_BROKER_ACTIVITY_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "broker/clock.h"
#include "broker/metrics.h"
#include "broker/views.h"

namespace hourglass::broker {

// What happened, per topic and group. Two views: rates and delivery
// lateness over the last minute, for Admin.GetStats; and, given a metrics
// registry, Prometheus totals per topic (hourglass_published_total,
// _delivered_total, _redelivered_total, _acked_total, _nacked_total,
// _dead_lettered_total, _expired_total, _cancelled_total), counted under this
// class's lock and read by each scrape, and a delivery-lateness histogram
// (hourglass_delivery_lateness_seconds), one update per delivery batch.
// Counts go into one-second buckets and lateness into ten-second
// histograms with buckets 10% apart, so a percentile is within 10% of the
// true value and memory per topic is a few kilobytes, however busy it is.
// Topics idle for a minute are forgotten when another topic first counts
// something; their Prometheus totals stay until ForgetTopicsExcept removes
// them, once the topic is gone.
//
// Thread-safe.
class Activity {
 public:
  // REQUIRES: `clock`, and `registry` if given, outlive the activity.
  explicit Activity(Clock* clock, metrics::Registry* registry = nullptr);
  // Stops scrapes from reading the totals (waits for one in progress).
  ~Activity();

  void Published(std::string_view topic, uint64_t n);
  // First deliveries only: how late each was (delivery minus deliver_at).
  // One call per batch of deliveries: it takes the lock once.
  void Delivered(std::string_view topic,
                 absl::Span<const absl::Duration> lateness);
  // Deliveries after the first (ack timeout, nack, hand-back, restart).
  void Redelivered(std::string_view topic, uint64_t n);
  void Acked(std::string_view topic, std::string_view group, uint64_t n);
  void Nacked(std::string_view topic, uint64_t n);
  void DeadLettered(std::string_view topic, uint64_t n);
  // Messages that reached their deadline in a group (one per group).
  void Expired(std::string_view topic, uint64_t n);
  void Cancelled(std::string_view topic, uint64_t n);

  using Percentiles = broker::Percentiles;
  using TopicView = TopicActivity;
  TopicView Topic(std::string_view topic);
  // Acks per second over the last minute.
  double AckRate(std::string_view topic, std::string_view group);

  // Where the sequence of events (the calls above that count) stands, for
  // ForgetTopicsExcept.
  uint64_t EventMark();
  // Forgets every topic that is not in `live` and had no event after `mark`
  // (EventMark's result when `live` was read): its rates and lateness, and
  // its Prometheus totals, which stop being rendered. A topic that has an
  // event later starts again from zero (a counter reset, to Prometheus).
  // Events after `mark` keep a topic, so that one whose first message was
  // published while `live` was read is not forgotten with its count.
  // Returns how many topics' totals were removed.
  size_t ForgetTopicsExcept(const absl::flat_hash_set<std::string>& live,
                            uint64_t mark);

 private:
  static constexpr int kSeconds = 60;
  // Lateness buckets: bucket b holds values up to kBase * 1.1^b.
  static constexpr int kBuckets = 200;
  static constexpr int kSlots = 6;  // Ten seconds each.

  // Counts per second over the last minute.
  struct Rate {
    std::array<uint64_t, kSeconds> counts{};
    int64_t last_second = 0;  // The second counts[last % kSeconds] holds.
    void Add(int64_t second, uint64_t n);
    double PerSecond(int64_t now_second);
  };
  struct Lateness {
    std::array<std::array<uint32_t, kBuckets>, kSlots> slots{};
    std::array<int64_t, kSlots> slot_start{};  // In ten-second units.
    std::array<int64_t, kSlots> slot_max_us{};
    void Add(int64_t ten_seconds, absl::Duration lateness);
    Percentiles Get(int64_t now_ten_seconds);
  };
  // The Prometheus totals of one topic.
  struct Totals {
    uint64_t published = 0, delivered = 0, redelivered = 0, acked = 0,
             nacked = 0, dead_lettered = 0, expired = 0, cancelled = 0;
  };
  struct TopicState {
    Rate published;
    Rate delivered;
    Lateness lateness;
    int64_t last_active = 0;
    uint64_t last_event = 0;  // In the sequence of events_.
    // The topic's entry of totals_; null without a registry.
    Totals* totals = nullptr;
  };
  // Counts `n` on the topic's total chosen by `which`, if metrics are on.
  void Count(std::string_view topic, uint64_t n, uint64_t Totals::*which);
  // The totals as families of the catalog, for a scrape (a source of the
  // registry, see metrics::Registry::AddSource).
  std::vector<prometheus::MetricFamily> CollectTotals();

  int64_t NowSecond();
  TopicState& StateLocked(std::string_view topic, int64_t now_second)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Clock* const clock_;
  metrics::Registry* const registry_;
  // Null without a registry. Constant after construction.
  prometheus::Histogram* lateness_histogram_ = nullptr;
  metrics::Registry::CollectorId totals_source_ = 0;
  absl::Mutex mu_;
  std::map<std::string, TopicState, std::less<>> topics_ ABSL_GUARDED_BY(mu_);
  // The Prometheus totals of each topic that has them, with a registry;
  // they outlive the states of idle topics, until ForgetTopicsExcept.
  // Counted here, under the lock the events take anyway, and read by
  // CollectTotals at scrape time.
  std::map<std::string, Totals, std::less<>> totals_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<std::string, std::string>, Rate> acks_
      ABSL_GUARDED_BY(mu_);
  // Events counted so far.
  uint64_t events_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace hourglass::broker

#endif  // HOURGLASS_BROKER_ACTIVITY_H_
