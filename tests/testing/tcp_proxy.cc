#include "tests/testing/tcp_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace hourglass::testing {
namespace {

absl::Status Errno(const char* what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

sockaddr_in Loopback(int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

// Copies what `from` has to `to`; false once either is closed or failed.
bool Forward(int from, int to) {
  char buffer[64 << 10];
  const ssize_t n = read(from, buffer, sizeof(buffer));
  if (n <= 0) return false;
  for (ssize_t sent = 0; sent < n;) {
    const ssize_t w = write(to, buffer + sent, static_cast<size_t>(n - sent));
    if (w <= 0) return false;
    sent += w;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpProxy>> TcpProxy::Start(int target_port) {
  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0) return Errno("socket");
  sockaddr_in address = Loopback(0);
  socklen_t size = sizeof(address);
  if (bind(listener, reinterpret_cast<sockaddr*>(&address), size) != 0 ||
      listen(listener, 64) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&address), &size) !=
          0) {
    absl::Status status = Errno("bind/listen");
    close(listener);
    return status;
  }
  int wake[2];
  if (pipe2(wake, O_CLOEXEC) != 0) {
    absl::Status status = Errno("pipe");
    close(listener);
    return status;
  }
  std::unique_ptr<TcpProxy> proxy(new TcpProxy(
      listener, ntohs(address.sin_port), target_port, wake[0], wake[1]));
  proxy->thread_ = std::thread([p = proxy.get()] { p->Run(); });
  return proxy;
}

TcpProxy::TcpProxy(int listener, int port, int target_port, int wake_read,
                   int wake_write)
    : listener_(listener),
      port_(port),
      wake_read_(wake_read),
      wake_write_(wake_write),
      target_port_(target_port) {}

TcpProxy::~TcpProxy() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  (void)!write(wake_write_, "x", 1);
  thread_.join();
  close(listener_);
  close(wake_read_);
  close(wake_write_);
}

void TcpProxy::Freeze() { SetFrozen(true); }

void TcpProxy::Thaw() { SetFrozen(false); }

void TcpProxy::SetFrozen(bool frozen) {
  {
    absl::MutexLock lock(&mu_);
    frozen_ = frozen;
  }
  (void)!write(wake_write_, "x", 1);
}

int TcpProxy::TargetPort() {
  absl::MutexLock lock(&mu_);
  return target_port_;
}

void TcpProxy::SetTarget(int target_port) {
  absl::MutexLock lock(&mu_);
  target_port_ = target_port;
}

void TcpProxy::Run() {
  // Pairs of (client side, server side) sockets.
  std::vector<std::pair<int, int>> links;
  auto close_link = [](std::pair<int, int>& link) {
    close(link.first);
    close(link.second);
  };
  while (true) {
    bool frozen;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) break;
      frozen = frozen_;
    }
    std::vector<pollfd> fds;
    fds.push_back({wake_read_, POLLIN, 0});
    if (!frozen) {
      fds.push_back({listener_, POLLIN, 0});
      for (const auto& [client, server] : links) {
        fds.push_back({client, POLLIN, 0});
        fds.push_back({server, POLLIN, 0});
      }
    }
    const size_t polled = frozen ? 0 : links.size();
    if (poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) break;
    if (fds[0].revents != 0) {
      char drain[16];
      (void)!read(wake_read_, drain, sizeof(drain));
      continue;  // Frozen or stopping: look again.
    }
    if (fds[1].revents & POLLIN) {
      const int client = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client >= 0) {
        const int server = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in target = Loopback(TargetPort());
        if (server >= 0 && connect(server, reinterpret_cast<sockaddr*>(&target),
                                   sizeof(target)) == 0) {
          // As the ends do: Nagle's wait on top of theirs would add tens of
          // milliseconds to every small message.
          const int one = 1;
          setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
          setsockopt(server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
          links.emplace_back(client, server);
        } else {
          close(client);
          if (server >= 0) close(server);
        }
      }
    }
    // Links are polled in the order of `fds`; closed ones leave afterwards.
    std::vector<bool> open(polled, true);
    for (size_t i = 0; i < open.size(); ++i) {
      const pollfd& from_client = fds[2 + 2 * i];
      const pollfd& from_server = fds[3 + 2 * i];
      if (from_client.revents != 0 &&
          !Forward(links[i].first, links[i].second)) {
        open[i] = false;
      }
      if (open[i] && from_server.revents != 0 &&
          !Forward(links[i].second, links[i].first)) {
        open[i] = false;
      }
    }
    std::vector<std::pair<int, int>> kept;
    for (size_t i = 0; i < links.size(); ++i) {
      if (i < open.size() && !open[i]) {
        close_link(links[i]);
      } else {
        kept.push_back(links[i]);
      }
    }
    links = std::move(kept);
  }
  for (auto& link : links) close_link(link);
}

}  // namespace hourglass::testing
