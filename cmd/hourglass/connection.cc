#include "cmd/hourglass/connection.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "cmd/hourglass/duration.h"
#include "cmd/hourglass/errors.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace hourglass::cli {
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
        return absl::StrCat("no answer within ", HumanDuration(timeout));
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

// Why gRPC could not connect to `target`: connects a plain socket to it to
// find the operating system's reason ("connection refused", "no route to
// host"). Understands host:port, [v6]:port, dns:, ipv4:, ipv6: and unix:.
std::string WhyUnreachable(absl::string_view target, absl::Duration timeout) {
  if (absl::ConsumePrefix(&target, "unix:")) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    if (target.size() >= sizeof(address.sun_path)) return "path too long";
    std::memcpy(address.sun_path, target.data(), target.size());
    const std::string why =
        TryConnect(reinterpret_cast<const sockaddr*>(&address), sizeof(address),
                   AF_UNIX, timeout);
    return why.empty() ? "it accepts connections but not as a gRPC server"
                       : why;
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
    if (why.empty()) {
      why = "it accepts connections but not as a gRPC server";
      break;
    }
  }
  freeaddrinfo(found);
  return why;
}

}  // namespace

absl::StatusOr<absl::Duration> ParseTimeout(const std::string& text) {
  absl::StatusOr<absl::Duration> timeout = ParseDuration(text);
  if (!timeout.ok()) return UsageError("--timeout", timeout.status().message());
  if (*timeout <= absl::ZeroDuration()) {
    return UsageError("--timeout", "must be more than 0");
  }
  return *timeout;
}

Connection::Connection(std::string address, absl::Duration timeout,
                       std::shared_ptr<grpc::Channel> channel)
    : address_(std::move(address)),
      timeout_(timeout),
      channel_(std::move(channel)),
      broker_(hourglass::v1::Broker::NewStub(channel_)),
      admin_(hourglass::v1::Admin::NewStub(channel_)) {}

absl::StatusOr<std::unique_ptr<Connection>> Connection::Open(
    const GlobalOptions& options) {
  absl::StatusOr<absl::Duration> timeout = ParseTimeout(options.timeout);
  if (!timeout.ok()) return timeout.status();

  grpc::ChannelArguments arguments;
  // Deliveries and pages are as large as the broker allows; it enforces it.
  arguments.SetMaxReceiveMessageSize(-1);
  std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(
      options.addr, grpc::InsecureChannelCredentials(), arguments);

  // Wait for READY, but give up at the first failed attempt rather than
  // retrying until the deadline: a refused connection is reported at once.
  const absl::Time deadline = absl::Now() + *timeout;
  grpc_connectivity_state state = channel->GetState(/*try_to_connect=*/true);
  while (state != GRPC_CHANNEL_READY &&
         state != GRPC_CHANNEL_TRANSIENT_FAILURE &&
         state != GRPC_CHANNEL_SHUTDOWN) {
    if (!channel->WaitForStateChange(state, absl::ToChronoTime(deadline))) {
      return absl::UnavailableError(
          absl::StrCat("cannot reach ", options.addr, ": no answer within ",
                       HumanDuration(*timeout), " (--timeout)"));
    }
    state = channel->GetState(/*try_to_connect=*/true);
  }
  if (state != GRPC_CHANNEL_READY) {
    const absl::Duration left =
        std::max(deadline - absl::Now(), absl::Seconds(1));
    return absl::UnavailableError(
        absl::StrCat("cannot reach ", options.addr, ": ",
                     WhyUnreachable(options.addr, left)));
  }
  return std::unique_ptr<Connection>(
      new Connection(options.addr, *timeout, std::move(channel)));
}

void Connection::SetDeadline(grpc::ClientContext& context) const {
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
}

absl::Status Connection::Check(const grpc::Status& status) const {
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return absl::DeadlineExceededError(
        absl::StrCat("DEADLINE_EXCEEDED: no answer from ", address_, " within ",
                     HumanDuration(timeout_), " (--timeout)"));
  }
  if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED &&
      status.error_message().empty()) {
    return absl::UnimplementedError(
        absl::StrCat("UNIMPLEMENTED: the broker at ", address_,
                     " does not serve this call (an older hourglassd?)"));
  }
  return FromGrpc(status);
}

}  // namespace hourglass::cli
