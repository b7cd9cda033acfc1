#include "client/internal/reachability.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace hourglass::client::internal {
namespace {

// Connects a stream socket to `address` within `timeout`; "" on success,
// else why not.
std::string TryConnect(const sockaddr* address, socklen_t length, int family,
                       absl::Duration timeout) {
  const int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoText(errno);
  int error = 0;
  if (connect(fd, address, length) != 0) {
    error = errno;
    if (error == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      const int ready =
          poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout)));
      if (ready == 0) {
        close(fd);
        return absl::StrCat(
            "no answer within ",
            absl::FormatDuration(absl::Trunc(timeout, absl::Milliseconds(1))));
      }
      socklen_t size = sizeof(error);
      if (ready < 0 ||
          getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) != 0) {
        error = errno;
      }
    }
  }
  close(fd);
  return error == 0 ? "" : ErrnoText(error);
}

}  // namespace

std::string ErrnoText(int error) {
  std::string text = std::strerror(error);
  if (!text.empty()) text[0] = absl::ascii_tolower(text[0]);
  return text;
}

std::string WhyUnreachable(absl::string_view target, absl::Duration timeout) {
  if (absl::ConsumePrefix(&target, "unix:")) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    if (target.size() >= sizeof(address.sun_path)) return "path too long";
    std::memcpy(address.sun_path, target.data(), target.size());
    return TryConnect(reinterpret_cast<const sockaddr*>(&address),
                      sizeof(address), AF_UNIX, timeout);
  }
  if (!absl::ConsumePrefix(&target, "dns:///")) {
    absl::ConsumePrefix(&target, "dns:");
  }
  if (absl::ConsumePrefix(&target, "ipv4:") ||
      absl::ConsumePrefix(&target, "ipv6:")) {
    target = target.substr(0, target.find(','));
  }
  const size_t colon = target.rfind(':');
  if (colon == absl::string_view::npos) return "cannot connect";
  std::string host(target.substr(0, colon));
  const std::string port(target.substr(colon + 1));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }

  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int error = getaddrinfo(host.c_str(), port.c_str(), &hints, &found);
      error != 0) {
    std::string why = gai_strerror(error);
    if (!why.empty()) why[0] = absl::ascii_tolower(why[0]);
    return absl::StrCat("cannot resolve \"", host, "\": ", why);
  }
  std::string why = "cannot connect";
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    why = TryConnect(a->ai_addr, a->ai_addrlen, a->ai_family, timeout);
    if (why.empty()) break;
  }
  freeaddrinfo(found);
  return why;
}

}  // namespace hourglass::client::internal
