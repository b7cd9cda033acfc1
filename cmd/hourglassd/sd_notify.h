#ifndef HOURGLASS_CMD_HOURGLASSD_SD_NOTIFY_H_
#define HOURGLASS_CMD_HOURGLASSD_SD_NOTIFY_H_

#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace hourglass::hourglassd {

// Tells the service manager what the daemon is doing, through systemd's
// notification protocol (sd_notify(3)), without linking libsystemd.
//
// The protocol: a service started with Type=notify finds in $NOTIFY_SOCKET
// the address of an AF_UNIX datagram socket, either a file system path
// ("/run/systemd/notify") or, when it starts with '@', a name in the
// abstract namespace (the '@' stands for the leading NUL byte). Each
// notification is one datagram of newline-separated VARIABLE=value
// assignments, such as "READY=1" (start-up finished), "STOPPING=1"
// (shutting down) and "STATUS=free text" (shown by `systemctl status`).
// The manager learns the sender's PID from the socket's credentials, so
// with NotifyAccess=main (the default) only the main process may notify.
//
// Without $NOTIFY_SOCKET (not started by systemd, or by a unit of another
// Type=) a notifier is disabled: Notify does nothing and succeeds.
//
// Immutable after construction; Notify may be called from any thread.
class ServiceNotifier {
 public:
  // The notifier for `notify_socket`, a value of $NOTIFY_SOCKET; empty
  // means none (disabled). Errors: INVALID_ARGUMENT when it is neither an
  // absolute path nor '@' followed by a name, or is longer than an AF_UNIX
  // address holds (107 bytes for a path, 108 for '@' and a name); the
  // message quotes the value.
  static absl::StatusOr<ServiceNotifier> Create(std::string_view notify_socket);

  // Create with $NOTIFY_SOCKET, as the process's environment has it now.
  static absl::StatusOr<ServiceNotifier> FromEnvironment();

  // True when there is a socket to notify.
  bool enabled() const { return !address_.empty(); }

  // Sends `state` ("READY=1", "STOPPING=1\nSTATUS=...") as one datagram,
  // waiting while the socket's queue is full (as sd_notify does). OK and
  // nothing sent when disabled. Errors: the errno of socket(2) or
  // sendto(2) as a status (NOT_FOUND: no socket at the path;
  // UNAVAILABLE: connection refused, nobody bound; PERMISSION_DENIED...),
  // the message naming the socket as $NOTIFY_SOCKET gave it.
  absl::Status Notify(std::string_view state) const;

 private:
  ServiceNotifier(std::string address, std::string display)
      : address_(std::move(address)), display_(std::move(display)) {}

  // The bytes of sockaddr_un's sun_path: a path, or for the abstract
  // namespace a NUL and the name. Empty: disabled.
  std::string address_;
  // $NOTIFY_SOCKET as given, for messages.
  std::string display_;
};

}  // namespace hourglass::hourglassd

#endif  // HOURGLASS_CMD_HOURGLASSD_SD_NOTIFY_H_
