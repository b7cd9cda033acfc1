#ifndef HOURGLASS_CLIENT_RETRY_H_
#define HOURGLASS_CLIENT_RETRY_H_

#include <algorithm>

#include "absl/random/random.h"
#include "absl/time/time.h"

namespace hourglass::client {

// How long to wait between attempts: `initial`, then `multiplier` times the
// last wait, up to `max`; each wait is drawn uniformly from [50%, 100%] of
// that, so that clients that failed together do not retry together.
struct BackoffPolicy {
  // Default: 50 ms.
  absl::Duration initial = absl::Milliseconds(50);
  // Default: 2 s.
  absl::Duration max = absl::Seconds(2);
  // Default: 2.
  double multiplier = 2;
};

// Which failed calls are tried again, and how often.
struct RetryPolicy {
  // Attempts in all, the first included; 1 turns retries off. Every attempt
  // also ends at the call's deadline. Default: 5.
  int max_attempts = 5;
  BackoffPolicy backoff;
};

// The waits of one BackoffPolicy, one after the other. Not thread-safe: one
// per retrying operation.
class Backoff {
 public:
  explicit Backoff(const BackoffPolicy& policy)
      : policy_(policy), next_(policy.initial) {}

  // The next wait, with jitter.
  absl::Duration Next() {
    const absl::Duration wait = next_ * absl::Uniform(random_, 0.5, 1.0);
    next_ = std::min(next_ * policy_.multiplier, policy_.max);
    return wait;
  }
  // Starts again from `initial` (after a success).
  void Reset() { next_ = policy_.initial; }

 private:
  const BackoffPolicy policy_;
  absl::Duration next_;
  absl::BitGen random_;
};

}  // namespace hourglass::client

#endif  // HOURGLASS_CLIENT_RETRY_H_
