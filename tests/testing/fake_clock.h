#ifndef HOURGLASS_TESTS_TESTING_FAKE_CLOCK_H_
#define HOURGLASS_TESTS_TESTING_FAKE_CLOCK_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "broker/clock.h"

namespace hourglass::testing {

// A clock that moves only when the test says so. Thread-safe.
class FakeClock final : public broker::Clock {
 public:
  explicit FakeClock(absl::Time start) : now_(start) {}

  absl::Time Now() override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }
  void Set(absl::Time t) {
    absl::MutexLock lock(&mu_);
    now_ = t;
  }

 private:
  absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hourglass::testing

#endif  // HOURGLASS_TESTS_TESTING_FAKE_CLOCK_H_
