#include "broker/store_health.h"

#include <pthread.h>

#include <utility>

namespace hourglass::broker {

StoreHealth::StoreHealth(Probe probe, Options options)
    : probe_(std::move(probe)), options_(options) {
  prober_ = std::thread([this] { RunProbe(); });
}

StoreHealth::~StoreHealth() { Stop(); }

void StoreHealth::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (prober_.joinable()) prober_.join();
}

void StoreHealth::Record(const absl::Status& write) {
  if (write.ok() && !refusing_.load(std::memory_order_acquire)) return;
  {
    absl::MutexLock lock(&mu_);
    const bool changes = write.ok() != status_.ok();
    status_ = write;  // While refusing, the latest failure is the reason.
    if (!changes) return;
    refusing_.store(!write.ok(), std::memory_order_release);
  }
  Notify();
}

absl::Status StoreHealth::status() const {
  absl::MutexLock lock(&mu_);
  return status_;
}

void StoreHealth::Watch(Listener listener) {
  absl::MutexLock lock(&notify_mu_);
  listener(status());
  listeners_.push_back(std::move(listener));
}

void StoreHealth::Unwatch() {
  absl::MutexLock lock(&notify_mu_);
  listeners_.clear();
}

void StoreHealth::Notify() {
  absl::MutexLock lock(&notify_mu_);
  const absl::Status now = status();
  if (now.ok() == told_.ok()) return;  // Told already.
  told_ = now;
  for (Listener& listener : listeners_) listener(now);
}

void StoreHealth::RunProbe() {
  pthread_setname_np(pthread_self(), "hg-store-probe");
  mu_.Lock();
  while (true) {
    // Idle until the store refuses writes (or we stop).
    mu_.Await(absl::Condition(
        +[](StoreHealth* h) ABSL_EXCLUSIVE_LOCKS_REQUIRED(h->mu_) {
          return h->stopping_ || !h->status_.ok();
        },
        this));
    if (stopping_) break;
    // Then a probe every probe_every until a write succeeds.
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.probe_every);
    if (stopping_) break;
    if (status_.ok()) continue;  // A client's write succeeded meanwhile.
    mu_.Unlock();
    const absl::Status probed = probe_();
    Record(probed);
    mu_.Lock();
  }
  mu_.Unlock();
}

}  // namespace hourglass::broker
