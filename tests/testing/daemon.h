#ifndef HOURGLASS_TESTS_TESTING_DAEMON_H_
#define HOURGLASS_TESTS_TESTING_DAEMON_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/security/credentials.h"
#include "tests/testing/subprocess.h"

namespace hourglass::testing {

// A real hourglassd child process on an OS-chosen loopback port, with its
// data in `data_dir`. Not thread-safe: one test thread drives it.
class Daemon {
 public:
  // Starts hourglassd (the HOURGLASSD_PATH the test was built with) with
  // --listen=127.0.0.1:0, --data_dir and `flags`, and waits until it
  // listens. Fails with its output if it exits or does not listen in time.
  // A `launcher` (a command and its arguments, e.g. nsenter's) runs
  // hourglassd as its last arguments.
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(
      const std::string& hourglassd, const std::string& data_dir,
      std::vector<std::string> flags = {},
      const std::vector<std::string>& launcher = {});

  // Kills the child (SIGKILL) if it still runs.
  ~Daemon() = default;

  int port() const { return port_; }
  std::string address() const;
  // A new channel to the daemon, connected.
  std::shared_ptr<grpc::Channel> Channel() const;
  // A new channel with `credentials` (TLS) that sends `token`, unless
  // empty, as "authorization: Bearer <token>" on every call; connected
  // unless it cannot be within the start timeout.
  std::shared_ptr<grpc::Channel> Channel(
      std::shared_ptr<grpc::ChannelCredentials> credentials,
      const std::string& token = "") const;

  // The port of the daemon's metrics listener, which serves the web console
  // too, from the line it logs once it serves (a cluster node: once it
  // joined); 0 if it logs none within the start timeout.
  int metrics_port();

  // GET /metrics from the daemon's metrics listener (the port it logged);
  // the body, or empty if it does not answer 200 within the start timeout.
  std::string ScrapeMetrics();

  // SIGTERM, then waits for the exit code (128 + 9 if it had to be killed
  // after `timeout`).
  int Stop(absl::Duration timeout = absl::Seconds(30));
  // SIGKILL: as a crash, or a power cut with --durability=sync.
  void Kill();

  Subprocess& process() { return *process_; }

 private:
  Daemon(std::unique_ptr<Subprocess> process, int port)
      : process_(std::move(process)), port_(port) {}

  std::unique_ptr<Subprocess> process_;
  int port_;
};

// The WARNING lines of hourglassd's log `output`, each from its level on
// ("warning WARNING: ..."; the timestamp before it varies), in order.
std::vector<std::string> Warnings(const std::string& output);

}  // namespace hourglass::testing

#endif  // HOURGLASS_TESTS_TESTING_DAEMON_H_
