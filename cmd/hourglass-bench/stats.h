#ifndef HOURGLASS_CMD_HOURGLASS_BENCH_STATS_H_
#define HOURGLASS_CMD_HOURGLASS_BENCH_STATS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace hourglass::bench {

// The sequence numbers consumers have seen, to count each message once and
// redeliveries as duplicates. A bitmap in chunks of 2^20 bits (128 KiB)
// allocated on first use, so memory follows the highest sequence published.
//
// Thread-safe, lock-free.
class SeenSet {
 public:
  SeenSet() = default;
  ~SeenSet();
  SeenSet(const SeenSet&) = delete;
  SeenSet& operator=(const SeenSet&) = delete;

  // Marks `sequence` seen; true if it was not before. Sequences past the
  // largest supported (2^32) are never seen, and are reported as new.
  bool Insert(uint64_t sequence);

 private:
  static constexpr int kChunkBits = 20;
  static constexpr uint64_t kChunks = uint64_t{1} << (32 - kChunkBits);
  std::array<std::atomic<std::atomic<uint64_t>*>, kChunks> chunks_{};
};

// Time stamps of a run, kept as the earliest and latest seen. Thread-safe.
class TimeSpan {
 public:
  void Add(absl::Time t) {
    absl::MutexLock lock(&mu_);
    if (t < first_) first_ = t;
    if (t > last_) last_ = t;
  }
  // InfiniteFuture / InfinitePast while empty.
  absl::Time first() const {
    absl::MutexLock lock(&mu_);
    return first_;
  }
  absl::Time last() const {
    absl::MutexLock lock(&mu_);
    return last_;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time first_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  absl::Time last_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

// Counters that producers and consumers update from gRPC's threads and the
// bench's main thread reads for the progress line and the summary. All
// atomic (relaxed: each is a count on its own) but for the first error.
struct BenchCounters {
  // Messages in Publish calls that succeeded, and those calls.
  std::atomic<uint64_t> published{0};
  std::atomic<uint64_t> publish_calls{0};
  // Failed Publish calls, and the messages they held.
  std::atomic<uint64_t> errors{0};
  std::atomic<uint64_t> failed_messages{0};
  // Deliveries: every one, each message's first, the rest (redeliveries),
  // those that came before their deliver_at, and those that carried no
  // sequence number of the bench (other publishers on the topic).
  std::atomic<uint64_t> deliveries{0};
  std::atomic<uint64_t> delivered{0};
  std::atomic<uint64_t> duplicates{0};
  std::atomic<uint64_t> early{0};
  std::atomic<uint64_t> foreign{0};
  // Failed Subscribe streams.
  std::atomic<uint64_t> stream_errors{0};

  // When the first Publish call was sent and the last one answered.
  TimeSpan publish_span;
  // When the first and last message was first delivered.
  TimeSpan delivery_span;

  // Keeps the first error's text, for the report.
  void NoteError(const std::string& text) {
    absl::MutexLock lock(&mu);
    if (first_error.empty()) first_error = text;
  }
  std::string FirstError() {
    absl::MutexLock lock(&mu);
    return first_error;
  }

  absl::Mutex mu;
  std::string first_error ABSL_GUARDED_BY(mu);
};

// Where a run of hourglass-bench stands, for its main thread to wait on:
// producers report when they are done, consumers how many distinct
// messages they have delivered, the signal watcher an interrupt.
// Thread-safe.
class BenchControl {
 public:
  // `producers` are running. Call before starting them.
  void SetProducers(int producers);
  // A producer has answered its last call.
  void ProducerDone();
  // Waits until every producer is done, `deadline` passes or Interrupt is
  // called; true if every producer is done.
  bool WaitPublished(absl::Time deadline);

  // The number of distinct messages to wait for, once publishing ended;
  // `delivered` is how many were delivered by then.
  void SetTarget(uint64_t target, uint64_t delivered);
  // `delivered` distinct messages have been delivered by now.
  void Delivered(uint64_t delivered) {
    if (delivered >= target_.load(std::memory_order_acquire)) Reach();
  }
  // Waits until the target is reached, `deadline` passes or Interrupt is
  // called; true if reached.
  bool WaitDelivered(absl::Time deadline);

  // Wakes both waits for good.
  void Interrupt();
  bool interrupted();

 private:
  void Reach();

  std::atomic<uint64_t> target_{UINT64_MAX};
  absl::Mutex mu_;
  int producers_ ABSL_GUARDED_BY(mu_) = 0;
  bool reached_ ABSL_GUARDED_BY(mu_) = false;
  bool interrupted_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace hourglass::bench

#endif  // HOURGLASS_CMD_HOURGLASS_BENCH_STATS_H_
