#ifndef HOURGLASS_BROKER_STORE_ERRORS_H_
#define HOURGLASS_BROKER_STORE_ERRORS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "broker/clock.h"
#include "broker/metrics.h"

namespace hourglass::broker {

// Decides when a repeated event is worth a log line: the first time for a
// key, then at most once per `interval` for that key, saying how many
// occurrences went unlogged since. So a loop that fails at every turn logs
// a line every `interval`, not thousands a second.
//
// Thread-safe.
class RateLimitedLog {
 public:
  // `clock` null means the system clock. REQUIRES: `clock` outlives this.
  RateLimitedLog(absl::Duration interval, Clock* clock = nullptr)
      : interval_(interval), clock_(clock) {}

  // Counts one occurrence of `key`. Returns nullopt if it is not to be
  // logged now; otherwise how many occurrences of `key` before this one were
  // not logged (0 the first time).
  std::optional<uint64_t> Allow(std::string_view key);

 private:
  struct Key {
    absl::Time last_logged;
    uint64_t suppressed = 0;
  };
  const absl::Duration interval_;
  Clock* const clock_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Key> keys_ ABSL_GUARDED_BY(mu_);
};

// Failed store operations of the broker's background loops (the commit
// queue's writer and syncer; the timer, dispatcher and loader): each counts
// in hourglass_store_errors_total{op} and is logged as an ERROR, at most
// once every Options::log_every per op, with the count of those not logged
// since:
//   store write failed: UNAVAILABLE: disk gone (and 41 more since the last
//   report)
//
// One object per broker, handed to the loops that use it (not a global).
// Thread-safe.
class StoreErrors {
 public:
  struct Options {
    // How often each op may log. Default: 10 s.
    absl::Duration log_every = absl::Seconds(10);
    // Ops whose series exist at 0 from the start, so that rate() and
    // alerts see the first error. Others appear at their first error.
    // Default: the broker's background ops, "write" and "sync" (the commit
    // queue's group commits), "load" (the loader reading the schedule),
    // "dispatch" (the timer thread moving due messages to ready) and
    // "deliver" (a dispatcher step).
    std::vector<std::string> known_ops = {"write", "sync", "load", "dispatch",
                                          "deliver"};
    // Time for log_every; null (the default) is the system clock.
    Clock* clock = nullptr;
  };

  // Without a registry it only logs. REQUIRES: `registry` and
  // Options::clock, if given, outlive this.
  explicit StoreErrors(metrics::Registry* registry)
      : StoreErrors(registry, Options()) {}
  StoreErrors(metrics::Registry* registry, Options options);

  // Counts one failure of `op` (a short name such as "write", "sync",
  // "load", "dispatch": the op label's value) with `error`, and logs it
  // unless `op` logged less than log_every ago.
  void Count(std::string_view op, const absl::Status& error);

 private:
  metrics::CounterFamily family_;  // Unset without a registry.
  const bool metrics_on_;
  RateLimitedLog log_;
};

}  // namespace hourglass::broker

#endif  // HOURGLASS_BROKER_STORE_ERRORS_H_
