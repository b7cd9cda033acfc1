#include "cmd/hourglass/stdin_lines.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <utility>

namespace hourglass::cli {

StdinLines::StdinLines(std::function<void(std::string)> on_line,
                       std::function<void()> on_end)
    : on_line_(std::move(on_line)),
      on_end_(std::move(on_end)),
      stop_fd_(eventfd(0, EFD_CLOEXEC)) {
  thread_ = std::thread([this] { Run(); });
}

StdinLines::~StdinLines() {
  const uint64_t one = 1;
  if (write(stop_fd_, &one, sizeof(one)) < 0) {
    // Cannot happen for an eventfd below its maximum; nothing to do.
  }
  thread_.join();
  close(stop_fd_);
}

void StdinLines::Run() {
  std::string pending;
  char buffer[4096];
  while (true) {
    pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[1].revents != 0) return;
    const ssize_t n = read(STDIN_FILENO, buffer, sizeof(buffer));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;
    pending.append(buffer, static_cast<size_t>(n));
    size_t newline;
    while ((newline = pending.find('\n')) != std::string::npos) {
      std::string line = pending.substr(0, newline);
      pending.erase(0, newline + 1);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      on_line_(std::move(line));
    }
  }
  if (!pending.empty()) on_line_(std::move(pending));
  on_end_();
}

}  // namespace hourglass::cli
