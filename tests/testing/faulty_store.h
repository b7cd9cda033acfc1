#ifndef HOURGLASS_TESTS_TESTING_FAULTY_STORE_H_
#define HOURGLASS_TESTS_TESTING_FAULTY_STORE_H_

#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "tests/testing/forwarding_store.h"

namespace hourglass::testing {

// A MessageStore in memory whose writes fail on demand, as a full disk or
// a failing device would: a failed Write applies nothing. Thread-safe.
class FaultyStore final : public ForwardingStore {
 public:
  // Every Write from now on returns `status` (OK clears the fault). With
  // `after`, the next `after` writes still succeed first.
  void FailWrites(absl::Status status, int after = 0) {
    absl::MutexLock lock(&mu_);
    failure_ = std::move(status);
    successes_before_failure_ = after;
  }

  absl::Status Write(const storage::WriteBatch& batch) override {
    {
      absl::MutexLock lock(&mu_);
      if (!failure_.ok()) {
        if (successes_before_failure_ == 0) return failure_;
        --successes_before_failure_;
      }
    }
    return ForwardingStore::Write(batch);
  }

 private:
  absl::Mutex mu_;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  int successes_before_failure_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace hourglass::testing

#endif  // HOURGLASS_TESTS_TESTING_FAULTY_STORE_H_
