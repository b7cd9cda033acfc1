#ifndef HOURGLASS_CMD_HOURGLASS_BENCH_WORKLOAD_H_
#define HOURGLASS_CMD_HOURGLASS_BENCH_WORKLOAD_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/message.h"

namespace hourglass::bench {

// When the messages of hourglass-bench come due.
struct DelaySpec {
  enum class Kind {
    // Every message after `min`.
    kFixed,
    // Each message after a delay drawn uniformly from [min, max].
    kUniform,
    // Every message at one instant, `min` after publishing starts: a burst
    // of due messages (the "hot second").
    kHot,
  };
  Kind kind = Kind::kFixed;
  absl::Duration min = absl::ZeroDuration();
  absl::Duration max = absl::ZeroDuration();

  // The longest delay a message may get.
  absl::Duration longest() const { return kind == Kind::kUniform ? max : min; }
  // As --delay takes it: "0", "5s", "1s..10s", "hot:30s".
  std::string ToString() const;
};

// Parses --delay: DURATION (fixed), MIN..MAX (uniform) or hot:DURATION.
// Errors: INVALID_ARGUMENT naming what is wrong; the caller prefixes the flag.
absl::StatusOr<DelaySpec> ParseDelaySpec(absl::string_view text);

// Payloads carry the message's sequence number in their first 8 bytes
// (little-endian), so that consumers can tell every message apart without
// the broker storing idempotency ids; the rest is filler.
inline constexpr size_t kSequenceBytes = 8;
// The sequence number in `payload`; false if it is too short.
bool ReadSequence(absl::string_view payload, uint64_t& sequence);

// What producers publish, and the shared counter that hands out sequence
// numbers in batches, paced to --rate and cut off at --count or --duration.
//
// Constant after construction but for the counter and Stop; thread-safe.
class PublishPlan {
 public:
  struct Options {
    // The topics, at least one: each batch goes to one, the next batch to
    // the next (by sequence number), round the list.
    std::vector<std::string> topics;
    // Payload size in bytes, at least kSequenceBytes.
    size_t payload_bytes = 100;
    // Messages per Publish call, at least 1.
    uint32_t batch = 100;
    DelaySpec delay;
    // Messages per second over all producers; 0 means as fast as possible.
    double rate = 0;
    // Messages in all; 0 means no limit (then `duration` must be finite).
    uint64_t count = 0;
    // How long to keep publishing; InfiniteDuration() means no limit.
    absl::Duration duration = absl::InfiniteDuration();
    // When not empty, every message gets the id `id_prefix` + its sequence
    // number, so that a retried call cannot store it twice. Empty: the
    // broker assigns ids.
    std::string id_prefix;
  };

  // Publishing starts at `start`: pacing, --duration and the hot instant
  // count from there.
  PublishPlan(Options options, absl::Time start);

  // One Publish call's share: messages [first, first + size).
  struct Claim {
    uint64_t first = 0;
    uint32_t size = 0;
    // When to send it, to keep to --rate; InfinitePast() when unpaced.
    absl::Time send_at = absl::InfinitePast();
  };
  // The next batch, or size 0 once the plan is complete or stopped.
  Claim Next();

  // Makes Next return size 0 from now on.
  void Stop() { stopped_.store(true, std::memory_order_relaxed); }

  // Fills `messages` with the claim's claim.size messages. `random` draws
  // uniform delays.
  void Fill(const Claim& claim, absl::BitGen& random,
            std::vector<client::Message>& messages) const;

  const Options& options() const { return options_; }
  absl::Time start() const { return start_; }
  // When hot messages come due (start + delay); InfiniteFuture() otherwise.
  absl::Time hot_instant() const { return hot_instant_; }

 private:
  const Options options_;
  const absl::Time start_;
  const absl::Time end_;
  const absl::Time hot_instant_;
  // The payload after its sequence number.
  const std::string filler_;
  std::atomic<uint64_t> next_{0};
  std::atomic<bool> stopped_{false};
};

}  // namespace hourglass::bench

#endif  // HOURGLASS_CMD_HOURGLASS_BENCH_WORKLOAD_H_
