#ifndef HOURGLASS_BROKER_CLOCK_H_
#define HOURGLASS_BROKER_CLOCK_H_

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace hourglass::broker {

// The broker's source of wall-clock time (UTC), the time deliver_at is
// measured on. An interface so that tests control time.
//
// Implementations are thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() = 0;
};

// The system's wall clock.
class SystemClock final : public Clock {
 public:
  absl::Time Now() override { return absl::Now(); }
};

}  // namespace hourglass::broker

#endif  // HOURGLASS_BROKER_CLOCK_H_
