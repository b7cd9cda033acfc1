#include "broker/activity.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "broker/metric_catalog.h"

namespace hourglass::broker {
namespace {

constexpr double kBaseMicros = 10.0;  // Bucket 0 holds up to 10 µs.
constexpr double kGrowth = 1.1;

int BucketOf(int64_t micros) {
  if (micros <= kBaseMicros) return 0;
  const int b = static_cast<int>(std::ceil(
      std::log(static_cast<double>(micros) / kBaseMicros) / std::log(kGrowth)));
  return std::min(b, 199);
}

absl::Duration BucketTop(int b) {
  return absl::Microseconds(kBaseMicros * std::pow(kGrowth, b));
}

// Observes every lateness of a batch with one update of `histogram` (one
// lock of its own, not one per delivery).
void ObserveAll(prometheus::Histogram& histogram,
                absl::Span<const absl::Duration> lateness) {
  if (lateness.size() == 1) {
    histogram.Observe(absl::ToDoubleSeconds(lateness[0]));
    return;
  }
  const std::vector<double>& bounds =
      metrics::Info(metrics::Metric::kDeliveryLatenessSeconds).buckets;
  std::vector<double> increments(bounds.size() + 1);  // The last is +Inf.
  double sum = 0;
  for (const absl::Duration late : lateness) {
    const double seconds = absl::ToDoubleSeconds(late);
    sum += seconds;
    // The first bound >= seconds, as Histogram::Observe picks it.
    ++increments[std::lower_bound(bounds.begin(), bounds.end(), seconds) -
                 bounds.begin()];
  }
  histogram.ObserveMultiple(increments, sum);
}

}  // namespace

Activity::Activity(Clock* clock, metrics::Registry* registry)
    : clock_(clock), registry_(registry) {
  if (registry == nullptr) return;
  lateness_histogram_ =
      &registry->Histograms(metrics::Metric::kDeliveryLatenessSeconds).Add({});
  totals_source_ = registry->AddSource([this] { return CollectTotals(); });
}

Activity::~Activity() {
  if (registry_ != nullptr) registry_->RemoveCollector(totals_source_);
}

void Activity::Count(std::string_view topic, uint64_t n,
                     uint64_t Totals::*which) {
  if (registry_ == nullptr) return;
  const int64_t now = NowSecond();
  absl::MutexLock lock(&mu_);
  StateLocked(topic, now).totals->*which += n;
}

std::vector<prometheus::MetricFamily> Activity::CollectTotals() {
  std::vector<std::pair<std::string, Totals>> totals;
  {
    absl::MutexLock lock(&mu_);
    totals.assign(totals_.begin(), totals_.end());
  }
  using metrics::Metric;
  const std::pair<Metric, uint64_t Totals::*> kFamilies[] = {
      {Metric::kPublishedTotal, &Totals::published},
      {Metric::kDeliveredTotal, &Totals::delivered},
      {Metric::kRedeliveredTotal, &Totals::redelivered},
      {Metric::kAckedTotal, &Totals::acked},
      {Metric::kNackedTotal, &Totals::nacked},
      {Metric::kDeadLetteredTotal, &Totals::dead_lettered},
      {Metric::kExpiredTotal, &Totals::expired},
      {Metric::kCancelledTotal, &Totals::cancelled},
  };
  std::vector<prometheus::MetricFamily> families;
  if (totals.empty()) return families;
  families.reserve(std::size(kFamilies));
  for (const auto& [metric, which] : kFamilies) {
    prometheus::MetricFamily& family =
        families.emplace_back(metrics::NewFamily(metric));
    family.metric.reserve(totals.size());
    for (const auto& [topic, t] : totals) {
      metrics::AddSample(family, {topic}).counter.value =
          static_cast<double>(t.*which);
    }
  }
  return families;
}

void Activity::Rate::Add(int64_t second, uint64_t n) {
  PerSecond(second);  // Clears seconds that passed.
  counts[second % kSeconds] += n;
}

double Activity::Rate::PerSecond(int64_t now_second) {
  if (now_second - last_second >= kSeconds) {
    counts.fill(0);
  } else {
    for (int64_t s = last_second + 1; s <= now_second; ++s) {
      counts[s % kSeconds] = 0;
    }
  }
  last_second = std::max(last_second, now_second);
  uint64_t total = 0;
  for (uint64_t c : counts) total += c;
  return static_cast<double>(total) / kSeconds;
}

void Activity::Lateness::Add(int64_t ten_seconds, absl::Duration lateness) {
  const int slot = static_cast<int>(ten_seconds % kSlots);
  if (slot_start[slot] != ten_seconds) {
    slots[slot].fill(0);
    slot_start[slot] = ten_seconds;
    slot_max_us[slot] = 0;
  }
  const int64_t micros =
      std::max<int64_t>(0, absl::ToInt64Microseconds(lateness));
  ++slots[slot][BucketOf(micros)];
  slot_max_us[slot] = std::max(slot_max_us[slot], micros);
}

Activity::Percentiles Activity::Lateness::Get(int64_t now_ten_seconds) {
  std::array<uint64_t, kBuckets> merged{};
  uint64_t total = 0;
  int64_t max_us = 0;
  for (int slot = 0; slot < kSlots; ++slot) {
    if (now_ten_seconds - slot_start[slot] >= kSlots) continue;  // Stale.
    for (int b = 0; b < kBuckets; ++b) {
      merged[b] += slots[slot][b];
      total += slots[slot][b];
    }
    max_us = std::max(max_us, slot_max_us[slot]);
  }
  Percentiles p;
  if (total == 0) return p;
  const absl::Duration max = absl::Microseconds(max_us);
  auto at = [&](double q) {
    const uint64_t rank = static_cast<uint64_t>(std::ceil(q * total));
    uint64_t seen = 0;
    for (int b = 0; b < kBuckets; ++b) {
      seen += merged[b];
      if (seen >= rank) return std::min(BucketTop(b), max);
    }
    return max;
  };
  p.p50 = at(0.50);
  p.p90 = at(0.90);
  p.p99 = at(0.99);
  p.max = max;
  return p;
}

int64_t Activity::NowSecond() { return absl::ToUnixSeconds(clock_->Now()); }

Activity::TopicState& Activity::StateLocked(std::string_view topic,
                                            int64_t now_second) {
  auto it = topics_.find(topic);
  if (it == topics_.end()) {
    // Forget topics idle for a minute before adding one.
    std::erase_if(topics_, [&](const auto& entry) {
      return now_second - entry.second.last_active > kSeconds;
    });
    std::erase_if(acks_, [&](const auto& entry) {
      return now_second - entry.second.last_second > kSeconds;
    });
    it = topics_.emplace(std::string(topic), TopicState()).first;
    if (registry_ != nullptr) {
      it->second.totals =
          &totals_.try_emplace(std::string(topic)).first->second;
    }
  }
  it->second.last_active = now_second;
  it->second.last_event = ++events_;
  return it->second;
}

void Activity::Published(std::string_view topic, uint64_t n) {
  const int64_t now = NowSecond();
  absl::MutexLock lock(&mu_);
  TopicState& state = StateLocked(topic, now);
  state.published.Add(now, n);
  if (state.totals != nullptr) state.totals->published += n;
}

void Activity::Delivered(std::string_view topic,
                         absl::Span<const absl::Duration> lateness) {
  if (lateness.empty()) return;
  const int64_t now = NowSecond();
  absl::ReleasableMutexLock lock(&mu_);
  TopicState& state = StateLocked(topic, now);
  state.delivered.Add(now, lateness.size());
  for (const absl::Duration late : lateness) state.lateness.Add(now / 10, late);
  if (state.totals != nullptr) state.totals->delivered += lateness.size();
  lock.Release();
  if (lateness_histogram_ != nullptr)
    ObserveAll(*lateness_histogram_, lateness);
}

void Activity::Redelivered(std::string_view topic, uint64_t n) {
  Count(topic, n, &Totals::redelivered);
}

void Activity::Nacked(std::string_view topic, uint64_t n) {
  Count(topic, n, &Totals::nacked);
}

void Activity::DeadLettered(std::string_view topic, uint64_t n) {
  Count(topic, n, &Totals::dead_lettered);
}

void Activity::Expired(std::string_view topic, uint64_t n) {
  Count(topic, n, &Totals::expired);
}

void Activity::Cancelled(std::string_view topic, uint64_t n) {
  Count(topic, n, &Totals::cancelled);
}

void Activity::Acked(std::string_view topic, std::string_view group,
                     uint64_t n) {
  const int64_t now = NowSecond();
  absl::MutexLock lock(&mu_);
  TopicState& state = StateLocked(topic, now);
  acks_[{std::string(topic), std::string(group)}].Add(now, n);
  if (state.totals != nullptr) state.totals->acked += n;
}

Activity::TopicView Activity::Topic(std::string_view topic) {
  const int64_t now = NowSecond();
  absl::MutexLock lock(&mu_);
  TopicView view;
  auto it = topics_.find(topic);
  if (it == topics_.end()) return view;
  view.publish_rate = it->second.published.PerSecond(now);
  view.delivery_rate = it->second.delivered.PerSecond(now);
  view.lateness = it->second.lateness.Get(now / 10);
  return view;
}

uint64_t Activity::EventMark() {
  absl::MutexLock lock(&mu_);
  return events_;
}

size_t Activity::ForgetTopicsExcept(
    const absl::flat_hash_set<std::string>& live, uint64_t mark) {
  absl::MutexLock lock(&mu_);
  // Topics with events after `mark`; never erased below, so the views stay
  // valid.
  absl::flat_hash_set<absl::string_view> recent;
  for (const auto& [topic, state] : topics_) {
    if (state.last_event > mark) recent.insert(topic);
  }
  auto gone = [&](const std::string& topic) {
    return !live.contains(topic) && !recent.contains(topic);
  };
  // Totals outlive the states of idle topics, so totals_, not topics_,
  // lists them.
  const size_t removed = std::erase_if(
      totals_, [&](const auto& entry) { return gone(entry.first); });
  // The states of gone topics point at the removed totals: drop them, so
  // that a later event makes new ones.
  std::erase_if(topics_, [&](const auto& entry) { return gone(entry.first); });
  return removed;
}

double Activity::AckRate(std::string_view topic, std::string_view group) {
  const int64_t now = NowSecond();
  absl::MutexLock lock(&mu_);
  auto it = acks_.find({std::string(topic), std::string(group)});
  return it == acks_.end() ? 0 : it->second.PerSecond(now);
}

}  // namespace hourglass::broker
