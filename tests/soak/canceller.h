#ifndef HOURGLASS_TESTS_SOAK_CANCELLER_H_
#define HOURGLASS_TESTS_SOAK_CANCELLER_H_

#include <functional>
#include <memory>
#include <queue>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "tests/soak/context.h"

namespace hourglass::soak {

// Cancels messages at chosen times, from a thread of its own: some well
// before their deliver_at, some a few milliseconds around it (the race that
// exactly one side must win), some just after (NOT_FOUND). Each message is
// cancelled at most once, so that NOT_FOUND never means "cancelled by me
// before".
//
// Offer may be called from any thread; Start and Join from the driver's.
class Canceller {
 public:
  explicit Canceller(Shared* shared);

  // Starts the thread; it stops at shared->stop_producing.
  void Start();
  void Join();

  // Cancel `id` (published with a receipt due at `deliver_at`) at `at`.
  void Offer(std::string id, absl::Time at);

 private:
  struct Planned {
    absl::Time at;
    std::string id;
    bool operator>(const Planned& other) const { return at > other.at; }
  };

  void Run();
  // Takes the plans that are due, waiting until one is or the soak stops.
  std::vector<Planned> TakeDue();
  void CancelOne(const std::string& id);

  Shared* const shared_;
  std::mt19937_64 rng_;
  // Touched only by the canceller's thread.
  std::unique_ptr<Connection> connection_;

  absl::Mutex mu_;
  std::priority_queue<Planned, std::vector<Planned>, std::greater<>> plans_
      ABSL_GUARDED_BY(mu_);
  // Set when a plan earlier than the one the thread waits for arrives.
  bool woken_ ABSL_GUARDED_BY(mu_) = false;

  std::thread thread_;
};

}  // namespace hourglass::soak

#endif  // HOURGLASS_TESTS_SOAK_CANCELLER_H_
