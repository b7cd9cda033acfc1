#include "cmd/common/connection.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "api/bearer_token.h"
#include "cmd/common/duration.h"
#include "cmd/common/errors.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "grpc/grpc.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/channel_arguments.h"

namespace hourglass::cli {
namespace {

constexpr char kNotGrpc[] = "it accepts connections but not as a gRPC server";

// The contents of `path`, given as `flag`; a usage error if unreadable.
absl::StatusOr<std::string> ReadFlagFile(absl::string_view flag,
                                         const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return UsageError(
        flag, absl::StrCat("cannot read \"", path, "\": ", ErrnoText(errno)));
  }
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The channel credentials the TLS options ask for: plaintext, TLS, or TLS
// with a client certificate.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> Credentials(
    const GlobalOptions& options) {
  if (!options.tls && options.tls_ca.empty() && options.tls_cert.empty() &&
      options.tls_key.empty()) {
    return grpc::InsecureChannelCredentials();
  }
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return UsageError(options.tls_cert.empty() ? "--tls-key" : "--tls-cert",
                      "--tls-cert and --tls-key go together");
  }
  grpc::SslCredentialsOptions ssl;
  if (!options.tls_ca.empty()) {
    absl::StatusOr<std::string> ca = ReadFlagFile("--tls-ca", options.tls_ca);
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *std::move(ca);
  }
  if (!options.tls_cert.empty()) {
    absl::StatusOr<std::string> cert =
        ReadFlagFile("--tls-cert", options.tls_cert);
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key =
        ReadFlagFile("--tls-key", options.tls_key);
    if (!key.ok()) return key.status();
    ssl.pem_cert_chain = *std::move(cert);
    ssl.pem_private_key = *std::move(key);
  }
  return grpc::SslCredentials(ssl);
}

// The name of grpc.health.v1.HealthCheckResponse.ServingStatus `value`.
std::string ServingStatusName(uint64_t value) {
  switch (value) {
    case 0:
      return "UNKNOWN";
    case 1:
      return "SERVING";
    case 2:
      return "NOT_SERVING";
    case 3:
      return "SERVICE_UNKNOWN";
  }
  return absl::StrCat("STATUS_", value);
}

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
    return why.empty() ? kNotGrpc : why;
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
      why = kNotGrpc;
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

void AwaitGrpcShutdown(absl::Duration limit) {
  const absl::Time deadline = absl::Now() + limit;
  absl::Duration step = absl::Microseconds(100);
  while (grpc_is_initialized() && absl::Now() < deadline) {
    absl::SleepFor(step);
    step = std::min(2 * step, absl::Milliseconds(10));
  }
}

Connection::Connection(std::string address, absl::Duration timeout,
                       std::shared_ptr<grpc::Channel> channel)
    : address_(std::move(address)),
      timeout_(timeout),
      channel_(std::move(channel)),
      broker_(hourglass::v1::Broker::NewStub(channel_)),
      admin_(hourglass::v1::Admin::NewStub(channel_)) {}

absl::StatusOr<std::unique_ptr<Connection>> Connection::Open(
    const GlobalOptions& options, bool own_connection) {
  absl::StatusOr<absl::Duration> timeout = ParseTimeout(options.timeout);
  if (!timeout.ok()) return timeout.status();

  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      Credentials(options);
  if (!credentials.ok()) return credentials.status();
  const bool tls = options.tls || !options.tls_ca.empty() ||
                   !options.tls_cert.empty() || !options.tls_key.empty();
  for (char c : options.token) {
    if (c <= ' ' || c > '~') {
      return UsageError("--token",
                        "has a space or a character other than printable "
                        "ASCII (HOURGLASS_TOKEN too)");
    }
  }

  grpc::ChannelArguments arguments;
  // Deliveries and pages are as large as the broker allows; it enforces it.
  arguments.SetMaxReceiveMessageSize(-1);
  if (own_connection) arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  if (!options.tls_server_name.empty()) {
    arguments.SetSslTargetNameOverride(options.tls_server_name);
  }
  std::shared_ptr<grpc::Channel> channel =
      grpc::experimental::CreateCustomChannelWithInterceptors(
          options.addr, *credentials, arguments,
          api::BearerTokenInterceptors(options.token));

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
    std::string why = WhyUnreachable(options.addr, left);
    if (why == kNotGrpc) {
      why = tls ? "it accepts connections but the TLS handshake failed "
                  "(check --tls-ca, --tls-cert, --tls-key and the name in "
                  "its certificate) or it is not a gRPC server"
                : "it accepts connections but not as a plaintext gRPC "
                  "server (if it uses TLS, pass --tls-ca or --tls)";
    }
    return absl::UnavailableError(
        absl::StrCat("cannot reach ", options.addr, ": ", why));
  }
  return std::unique_ptr<Connection>(
      new Connection(options.addr, *timeout, std::move(channel)));
}

absl::StatusOr<std::string> Connection::Health(const std::string& service) {
  // grpc.health.v1 by hand: the messages are a string and an enum, and so
  // the CLI needs no generated code for them.
  std::string request_bytes;
  {
    google::protobuf::io::StringOutputStream out(&request_bytes);
    google::protobuf::io::CodedOutputStream coded(&out);
    if (!service.empty()) {  // Field 1, length-delimited: service.
      coded.WriteTag(10);
      coded.WriteVarint32(static_cast<uint32_t>(service.size()));
      coded.WriteString(service);
    }
  }
  grpc::Slice slice(request_bytes);
  const grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  grpc::ClientContext context;
  SetDeadline(context);
  grpc::GenericStub stub(channel_);
  absl::Notification done;
  grpc::Status status;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(),
                 &request, &response, [&](grpc::Status s) {
                   status = std::move(s);
                   done.Notify();
                 });
  done.WaitForNotification();
  if (!status.ok()) return Check(status);

  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) {
    return absl::InternalError("cannot read the health answer");
  }
  std::string bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  google::protobuf::io::CodedInputStream in(
      reinterpret_cast<const uint8_t*>(bytes.data()),
      static_cast<int>(bytes.size()));
  uint64_t serving = 0;  // UNKNOWN when absent.
  while (const uint32_t tag = in.ReadTag()) {
    bool ok = true;
    uint64_t varint = 0;
    uint32_t size = 0;
    switch (tag & 7) {  // The wire type.
      case 0:
        ok = in.ReadVarint64(&varint);
        if (tag >> 3 == 1) serving = varint;  // Field 1: status.
        break;
      case 1:
        ok = in.Skip(8);
        break;
      case 2:
        ok = in.ReadVarint32(&size) && in.Skip(static_cast<int>(size));
        break;
      case 5:
        ok = in.Skip(4);
        break;
      default:
        ok = false;
    }
    if (!ok) return absl::InternalError("malformed health answer");
  }
  return ServingStatusName(serving);
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
