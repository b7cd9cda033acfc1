#ifndef HOURGLASS_TESTS_TESTING_EVENTUALLY_H_
#define HOURGLASS_TESTS_TESTING_EVENTUALLY_H_

#include <functional>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace hourglass::testing {

// Waits until `condition` holds, checking it every millisecond, for at most
// `timeout`; returns whether it held. For state that real time changes and
// that nothing announces (a count in the store), where a test cannot wait
// on a notification.
inline bool Eventually(const std::function<bool()>& condition,
                       absl::Duration timeout = absl::Seconds(30)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

}  // namespace hourglass::testing

#endif  // HOURGLASS_TESTS_TESTING_EVENTUALLY_H_
