#include "tests/testing/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace hourglass::testing {

absl::StatusOr<std::unique_ptr<Subprocess>> Subprocess::Start(
    const std::vector<std::string>& argv) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  std::vector<char*> args;
  for (const std::string& arg : argv)
    args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    execv(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  return std::unique_ptr<Subprocess>(new Subprocess(pid, fds[0]));
}

Subprocess::~Subprocess() {
  if (!reaped_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (fd_ >= 0) close(fd_);
}

bool Subprocess::ReadSome(absl::Time deadline) {
  if (fd_ < 0) return false;
  const absl::Duration left =
      std::max(deadline - absl::Now(), absl::ZeroDuration());
  pollfd p{fd_, POLLIN, 0};
  const int ready =
      poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)));
  if (ready <= 0) return ready == 0 || errno == EINTR;
  char buffer[4096];
  const ssize_t n = read(fd_, buffer, sizeof(buffer));
  if (n <= 0) {
    close(fd_);
    fd_ = -1;
    return false;
  }
  output_.append(buffer, static_cast<size_t>(n));
  return true;
}

bool Subprocess::WaitForOutput(std::string_view text, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (output_.find(text) == std::string::npos) {
    if (absl::Now() >= deadline || !ReadSome(deadline)) {
      return output_.find(text) != std::string::npos;
    }
  }
  return true;
}

void Subprocess::ReadUntil(absl::Time deadline) {
  while (absl::Now() < deadline && ReadSome(deadline)) {
  }
}

void Subprocess::Signal(int signal) { kill(pid_, signal); }

bool Subprocess::Exited() {
  if (reaped_) return true;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) != pid_) return false;
  reaped_ = true;
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return true;
}

int Subprocess::Wait(absl::Duration timeout) {
  if (reaped_) return exit_code_;
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline && ReadSome(deadline)) {
  }
  if (fd_ >= 0) kill(pid_, SIGKILL);  // Output still open: it did not exit.
  int status = 0;
  waitpid(pid_, &status, 0);
  reaped_ = true;
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return exit_code_;
}

RunResult Run(const std::vector<std::string>& argv, absl::Duration timeout) {
  auto process = Subprocess::Start(argv);
  if (!process.ok()) return {-1, std::string(process.status().message())};
  const int code = (*process)->Wait(timeout);
  return {code, (*process)->output()};
}

}  // namespace hourglass::testing
