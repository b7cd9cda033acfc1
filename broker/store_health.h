#ifndef HOURGLASS_BROKER_STORE_HEALTH_H_
#define HOURGLASS_BROKER_STORE_HEALTH_H_

#include <atomic>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace hourglass::broker {

// Whether the store takes writes, as the broker's own writes find it. A
// failed write or log sync makes it refusing, with that failure as the
// reason; the next one that succeeds makes it taking writes again. While it
// refuses, a probe (a small synced write) runs every Options::probe_every,
// so that it recovers when space returns even if no client writes. hourglassd
// turns each change into the gRPC health status (NOT_SERVING while
// refusing) and a log line.
//
// Thread-safe. Record is cheap while nothing changes (one atomic load);
// listeners run on the thread whose Record changed the state, one at a
// time, always ending with the current state.
class StoreHealth {
 public:
  struct Options {
    // How often the probe runs while the store refuses writes. Default: 1 s.
    absl::Duration probe_every = absl::Seconds(1);
  };
  // Writes something small and durable through the broker's write path and
  // returns the outcome; blocks for it.
  using Probe = absl::AnyInvocable<absl::Status()>;
  using Listener = absl::AnyInvocable<void(const absl::Status&)>;

  // Starts the probe's thread ("hg-store-probe"), idle while writes succeed.
  StoreHealth(Probe probe, Options options);
  // Stops the probe's thread (Stop).
  ~StoreHealth();

  // Stops the probe's thread, waiting for a probe in progress; Record and
  // the listeners keep working. Idempotent.
  void Stop();

  StoreHealth(const StoreHealth&) = delete;
  StoreHealth& operator=(const StoreHealth&) = delete;

  // The outcome of one store write or log sync.
  void Record(const absl::Status& write);

  // OK while the store takes writes; otherwise the failure that made it
  // refuse them.
  absl::Status status() const;

  // Calls `listener` with the current status at once, then each time the
  // store starts or stops refusing writes. It must not block nor call
  // Watch.
  void Watch(Listener listener);
  // Forgets every listener; none runs once it returns.
  void Unwatch();

 private:
  void RunProbe();
  // Tells the listeners the current status if it differs from what they
  // were last told in whether writes are taken.
  void Notify();

  Probe probe_;
  const Options options_;
  std::atomic<bool> refusing_{false};

  mutable absl::Mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  // Held while telling listeners, so that they hear changes in order.
  absl::Mutex notify_mu_ ABSL_ACQUIRED_AFTER(mu_);
  std::vector<Listener> listeners_ ABSL_GUARDED_BY(notify_mu_);
  absl::Status told_ ABSL_GUARDED_BY(notify_mu_);

  std::thread prober_;
};

}  // namespace hourglass::broker

#endif  // HOURGLASS_BROKER_STORE_HEALTH_H_
