#ifndef HOURGLASS_CLIENT_INTERNAL_REACHABILITY_H_
#define HOURGLASS_CLIENT_INTERNAL_REACHABILITY_H_

#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace hourglass::client::internal {

// Why gRPC could not connect to `target`, found by connecting a plain
// socket to it within `timeout`: the operating system's reason in words
// that follow a colon ("connection refused", "no route to host", `cannot
// resolve "x": ...`), or "" when the socket connects (the peer accepts
// connections: it does not speak gRPC as the channel does). Understands
// host:port, [v6]:port, dns:, ipv4:, ipv6: and unix:. Blocks the caller.
std::string WhyUnreachable(absl::string_view target, absl::Duration timeout);

// strerror's text for `error` with a lower-case first letter.
std::string ErrnoText(int error);

}  // namespace hourglass::client::internal

#endif  // HOURGLASS_CLIENT_INTERNAL_REACHABILITY_H_
