#ifndef HOURGLASS_CMD_COMMON_SIGNAL_WATCHER_H_
#define HOURGLASS_CMD_COMMON_SIGNAL_WATCHER_H_

#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace hourglass::cli {

// Turns SIGINT and SIGTERM into calls of `on_signal` on a thread of its
// own, so that Ctrl-C can end a command cleanly. The constructor blocks the
// two signals in the calling thread and so in every thread started after it:
// construct it before anything (gRPC) starts threads. They stay blocked
// after destruction.
//
// Made and destroyed on one thread; on_signal runs on the watcher's thread.
class SignalWatcher {
 public:
  explicit SignalWatcher(std::function<void(int signal)> on_signal);
  // Stops and joins the watcher's thread.
  ~SignalWatcher();

  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

 private:
  void Run();

  const std::function<void(int)> on_signal_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace hourglass::cli

#endif  // HOURGLASS_CMD_COMMON_SIGNAL_WATCHER_H_
