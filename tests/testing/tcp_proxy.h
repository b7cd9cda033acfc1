#ifndef HOURGLASS_TESTS_TESTING_TCP_PROXY_H_
#define HOURGLASS_TESTS_TESTING_TCP_PROXY_H_

#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace hourglass::testing {

// A TCP proxy on loopback for tests of what crosses a network: it listens
// on 127.0.0.1 (a port the OS chooses) and forwards each connection to
// 127.0.0.1:target_port, byte for byte, until Freeze makes it a network
// that drops everything while connections stay open: what a peer sees of
// a host that hangs, or of a partition. Thaw heals it.
//
// Forwarding blocks while the receiving end reads nothing (a stopped
// process behind the proxy holds up every link of this proxy, as a hung
// host would); destroy the proxy only once the processes on both ends run
// or are gone.
//
// Runs one thread of its own. Thread-safe.
class TcpProxy {
 public:
  static absl::StatusOr<std::unique_ptr<TcpProxy>> Start(int target_port);
  // Closes every connection and stops the thread.
  ~TcpProxy();

  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  int port() const { return port_; }

  // From now on nothing is forwarded in either direction, and new
  // connections are accepted by the kernel but never served. Connections
  // stay open: neither end sees a close or a reset.
  void Freeze();
  // Forwarding resumes, for the connections still open and new ones.
  void Thaw();
  // New connections go to 127.0.0.1:`target_port` (a restarted server on a
  // new port); open ones stay where they were.
  void SetTarget(int target_port);

 private:
  TcpProxy(int listener, int port, int target_port, int wake_read,
           int wake_write);
  void Run();
  int TargetPort();
  // Sets frozen_ and wakes the thread.
  void SetFrozen(bool frozen);

  // Constant after construction.
  const int listener_;
  const int port_;
  // A pipe that wakes the thread's poll.
  const int wake_read_;
  const int wake_write_;

  absl::Mutex mu_;
  int target_port_ ABSL_GUARDED_BY(mu_);
  bool frozen_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  std::thread thread_;
};

}  // namespace hourglass::testing

#endif  // HOURGLASS_TESTS_TESTING_TCP_PROXY_H_
