#ifndef HOURGLASS_TESTS_TESTING_SUBPROCESS_H_
#define HOURGLASS_TESTS_TESTING_SUBPROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace hourglass::testing {

// A child process whose stdout and stderr the test reads. Waits are bounded
// by deadlines, never by sleeping.
//
// Not thread-safe: one test thread drives it.
class Subprocess {
 public:
  // Starts argv[0] (a path) with the given arguments.
  static absl::StatusOr<std::unique_ptr<Subprocess>> Start(
      const std::vector<std::string>& argv);

  // Kills the child with SIGKILL if it still runs, and reaps it.
  ~Subprocess();

  // Reads output until it contains `text`; false if `timeout` passes or the
  // child closes its output first.
  bool WaitForOutput(std::string_view text, absl::Duration timeout);

  // Reads whatever output comes until `deadline` (returns at once at the
  // end of output): keeps a long-running child from blocking on a full
  // pipe while the test has nothing to wait for in its output.
  void ReadUntil(absl::Time deadline);

  // Sends `signal` to the child.
  void Signal(int signal);

  // Whether the child has exited, without waiting; reaps it if it has (Wait
  // then returns its exit code).
  bool Exited();

  // Reads the rest of the output and reaps the child. Returns its exit code,
  // or 128 + signal if a signal ended it. If it has not exited after
  // `timeout`, kills it with SIGKILL first (and returns 128 + SIGKILL).
  int Wait(absl::Duration timeout);

  // Everything read so far, stdout and stderr interleaved.
  const std::string& output() const { return output_; }
  pid_t pid() const { return pid_; }

 private:
  Subprocess(pid_t pid, int fd) : pid_(pid), fd_(fd) {}
  // Reads what is available until `deadline`; false at end of output.
  bool ReadSome(absl::Time deadline);

  const pid_t pid_;
  int fd_;
  bool reaped_ = false;
  int exit_code_ = -1;
  std::string output_;
};

// Runs argv to completion (at most `timeout`); returns the exit code and
// fills `output`.
struct RunResult {
  int exit_code;
  std::string output;
};
RunResult Run(const std::vector<std::string>& argv, absl::Duration timeout);

}  // namespace hourglass::testing

#endif  // HOURGLASS_TESTS_TESTING_SUBPROCESS_H_
