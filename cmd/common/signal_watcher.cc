#include "cmd/common/signal_watcher.h"

#include <pthread.h>
#include <signal.h>

#include <utility>

namespace hourglass::cli {
namespace {

sigset_t WatchedSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  return signals;
}

}  // namespace

SignalWatcher::SignalWatcher(std::function<void(int)> on_signal)
    : on_signal_(std::move(on_signal)) {
  const sigset_t signals = WatchedSignals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  thread_ = std::thread([this] { Run(); });
}

SignalWatcher::~SignalWatcher() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  // Wakes the sigwait below; the signal is blocked everywhere, so it reaches
  // only that thread.
  pthread_kill(thread_.native_handle(), SIGTERM);
  thread_.join();
}

void SignalWatcher::Run() {
  const sigset_t signals = WatchedSignals();
  while (true) {
    int signal = 0;
    if (sigwait(&signals, &signal) != 0) continue;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
    }
    on_signal_(signal);
  }
}

}  // namespace hourglass::cli
