#include "cmd/hourglassd/sd_notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"

namespace hourglass::hourglassd {
namespace {

// Room in sockaddr_un's sun_path (108 bytes on Linux).
constexpr size_t kSunPathSize = sizeof(sockaddr_un::sun_path);

}  // namespace

absl::StatusOr<ServiceNotifier> ServiceNotifier::Create(
    std::string_view notify_socket) {
  if (notify_socket.empty()) return ServiceNotifier("", "");
  const std::string display(notify_socket);
  if (notify_socket.front() == '@') {
    // Abstract: a NUL, then the name; the address length, not a
    // terminating NUL, says where the name ends.
    if (notify_socket.size() == 1) {
      return absl::InvalidArgumentError(
          "NOTIFY_SOCKET=\"@\" names no abstract socket");
    }
    if (notify_socket.size() > kSunPathSize) {
      return absl::InvalidArgumentError(
          absl::StrCat("NOTIFY_SOCKET=\"", display, "\" is longer than ",
                       kSunPathSize, " bytes"));
    }
    std::string address(notify_socket);
    address.front() = '\0';
    return ServiceNotifier(std::move(address), display);
  }
  if (notify_socket.front() != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("NOTIFY_SOCKET=\"", display,
                     "\" is neither an absolute path nor '@' and an abstract "
                     "socket name"));
  }
  // A path, with its terminating NUL.
  if (notify_socket.size() + 1 > kSunPathSize) {
    return absl::InvalidArgumentError(absl::StrCat("NOTIFY_SOCKET=\"", display,
                                                   "\" is longer than ",
                                                   kSunPathSize - 1, " bytes"));
  }
  return ServiceNotifier(display, display);
}

absl::StatusOr<ServiceNotifier> ServiceNotifier::FromEnvironment() {
  const char* value = getenv("NOTIFY_SOCKET");
  return Create(value == nullptr ? "" : value);
}

absl::Status ServiceNotifier::Notify(std::string_view state) const {
  if (!enabled()) return absl::OkStatus();
  sockaddr_un address = {};
  address.sun_family = AF_UNIX;
  memcpy(address.sun_path, address_.data(), address_.size());
  socklen_t length = offsetof(sockaddr_un, sun_path) + address_.size();
  // A path's address includes its NUL (already zero); an abstract name's
  // ends with its last byte.
  if (address_.front() != '\0') ++length;

  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("cannot open a socket to notify NOTIFY_SOCKET=",
                            display_));
  }
  const ssize_t sent =
      sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
             reinterpret_cast<const sockaddr*>(&address), length);
  const int error = errno;
  close(fd);
  if (sent < 0) {
    return absl::ErrnoToStatus(
        error, absl::StrCat("cannot notify NOTIFY_SOCKET=", display_));
  }
  // A datagram goes whole or not at all.
  return absl::OkStatus();
}

}  // namespace hourglass::hourglassd
