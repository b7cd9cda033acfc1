#include "broker/activity.h"

#include <algorithm>
#include <cmath>

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

}  // namespace

Activity::Activity(Clock* clock, metrics::Registry* registry) : clock_(clock) {
  if (registry == nullptr) return;
  auto counter = [&](const char* name,
                     const char* help) -> metrics::CounterFamily* {
    absl::StatusOr<metrics::CounterFamily*> family =
        registry->AddCounter(name, help, {"topic"});
    return family.ok() ? *family : nullptr;
  };
  families_.published =
      counter("hourglass_published_total", "Messages published (stored).");
  families_.delivered = counter("hourglass_delivered_total",
                                "First deliveries of messages to a group.");
  families_.redelivered =
      counter("hourglass_redelivered_total",
              "Deliveries after the first: ack timeouts, nacks, disconnects.");
  families_.acked =
      counter("hourglass_acked_total", "Acknowledged deliveries.");
  families_.nacked = counter("hourglass_nacked_total", "Nacked deliveries.");
  families_.dead_lettered =
      counter("hourglass_dead_lettered_total",
              "Messages moved to <topic>.dlq after --max_attempts.");
  families_.cancelled =
      counter("hourglass_cancelled_total", "Scheduled messages cancelled.");
  absl::StatusOr<metrics::HistogramFamily*> lateness =
      registry->AddHistogram("hourglass_delivery_lateness_seconds",
                             "First delivery time minus deliver_at.", {},
                             metrics::LatencySecondsBuckets());
  if (lateness.ok()) {
    families_.lateness = *lateness;
    lateness_histogram_ = (*lateness)->WithLabels({});
  }
}

void Activity::Count(std::string_view topic, uint64_t n,
                     std::shared_ptr<metrics::Counter> TopicCounters::*which) {
  if (families_.published == nullptr) return;
  const int64_t now = NowSecond();
  std::shared_ptr<metrics::Counter> counter;
  {
    absl::MutexLock lock(&mu_);
    counter = StateLocked(topic, now).counters.*which;
  }
  if (counter != nullptr) counter->Inc(n);
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
    if (families_.published != nullptr) {
      const std::string_view labels[] = {topic};
      TopicCounters& c = it->second.counters;
      c.published = families_.published->WithLabels(labels);
      c.delivered = families_.delivered->WithLabels(labels);
      c.redelivered = families_.redelivered->WithLabels(labels);
      c.acked = families_.acked->WithLabels(labels);
      c.nacked = families_.nacked->WithLabels(labels);
      c.dead_lettered = families_.dead_lettered->WithLabels(labels);
      c.cancelled = families_.cancelled->WithLabels(labels);
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
  if (state.counters.published != nullptr) state.counters.published->Inc(n);
}

void Activity::Delivered(std::string_view topic,
                         absl::Span<const absl::Duration> lateness) {
  if (lateness.empty()) return;
  const int64_t now = NowSecond();
  absl::MutexLock lock(&mu_);
  TopicState& state = StateLocked(topic, now);
  state.delivered.Add(now, lateness.size());
  for (const absl::Duration late : lateness) {
    state.lateness.Add(now / 10, late);
    if (lateness_histogram_ != nullptr) {
      lateness_histogram_->Observe(absl::ToDoubleSeconds(late));
    }
  }
  if (state.counters.delivered != nullptr) {
    state.counters.delivered->Inc(lateness.size());
  }
}

void Activity::Redelivered(std::string_view topic, uint64_t n) {
  Count(topic, n, &TopicCounters::redelivered);
}

void Activity::Nacked(std::string_view topic, uint64_t n) {
  Count(topic, n, &TopicCounters::nacked);
}

void Activity::DeadLettered(std::string_view topic, uint64_t n) {
  Count(topic, n, &TopicCounters::dead_lettered);
}

void Activity::Cancelled(std::string_view topic, uint64_t n) {
  Count(topic, n, &TopicCounters::cancelled);
}

void Activity::Acked(std::string_view topic, std::string_view group,
                     uint64_t n) {
  const int64_t now = NowSecond();
  absl::MutexLock lock(&mu_);
  TopicState& state = StateLocked(topic, now);
  acks_[{std::string(topic), std::string(group)}].Add(now, n);
  if (state.counters.acked != nullptr) state.counters.acked->Inc(n);
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
  // Every family has a child for the same topics (StateLocked adds them
  // together). Totals outlive the states of idle topics, so the families,
  // not topics_, list them.
  size_t removed = 0;
  for (metrics::CounterFamily* family :
       {families_.published, families_.delivered, families_.redelivered,
        families_.acked, families_.nacked, families_.dead_lettered,
        families_.cancelled}) {
    if (family == nullptr) continue;
    removed = std::max(
        removed, family->RemoveIf([&](absl::Span<const std::string> labels) {
          return gone(labels[0]);
        }));
  }
  // The states of gone topics hold the removed children: drop them, so
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
