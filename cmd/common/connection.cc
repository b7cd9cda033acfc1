#include "cmd/common/connection.h"

#include <cerrno>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "cmd/common/duration.h"
#include "cmd/common/errors.h"

namespace hourglass::cli {
namespace {

// Checks that `path`, given as `flag`, can be read: a usage error if not.
// (The library reads it; this names the flag.)
absl::Status CheckReadable(absl::string_view flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return UsageError(
        flag, absl::StrCat("cannot read \"", path, "\": ", ErrnoText(errno)));
  }
  return absl::OkStatus();
}

// The library's options for the command line's, checked with errors that
// name the flags.
absl::StatusOr<client::ChannelOptions> ChannelOptionsOf(
    const GlobalOptions& options, bool own_connection) {
  absl::StatusOr<absl::Duration> timeout = ParseTimeout(options.timeout);
  if (!timeout.ok()) return timeout.status();
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return UsageError(options.tls_cert.empty() ? "--tls-key" : "--tls-cert",
                      "--tls-cert and --tls-key go together");
  }
  for (const auto& [flag, path] :
       {std::pair<absl::string_view, const std::string&>{"--tls-ca",
                                                         options.tls_ca},
        {"--tls-cert", options.tls_cert},
        {"--tls-key", options.tls_key}}) {
    if (path.empty()) continue;
    if (absl::Status s = CheckReadable(flag, path); !s.ok()) return s;
  }
  for (char c : options.token) {
    if (c <= ' ' || c > '~') {
      return UsageError("--token",
                        "has a space or a character other than printable "
                        "ASCII (HOURGLASS_TOKEN too)");
    }
  }
  client::ChannelOptions channel;
  channel.address = options.addr;
  channel.call_timeout = *timeout;
  channel.own_connection = own_connection;
  channel.token = options.token;
  channel.tls.enabled = options.tls;
  channel.tls.ca_file = options.tls_ca;
  channel.tls.cert_file = options.tls_cert;
  channel.tls.key_file = options.tls_key;
  channel.tls.server_name = options.tls_server_name;
  return channel;
}

client::PublisherOptions OneAttempt() {
  client::PublisherOptions options;
  options.retry.max_attempts = 1;
  return options;
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

Connection::Connection(std::shared_ptr<client::Channel> channel)
    : channel_(std::move(channel)),
      admin_(channel_),
      publisher_(channel_, OneAttempt()) {}

absl::StatusOr<std::unique_ptr<Connection>> Connection::Open(
    const GlobalOptions& options, bool own_connection) {
  absl::StatusOr<client::ChannelOptions> channel_options =
      ChannelOptionsOf(options, own_connection);
  if (!channel_options.ok()) return channel_options.status();
  absl::StatusOr<std::shared_ptr<client::Channel>> channel =
      client::Channel::Create(*channel_options);
  // Checked above; what is left (a file that vanished) is the command
  // line's too.
  if (!channel.ok()) return UsageError(channel.status().message());

  const absl::Duration timeout = channel_options->call_timeout;
  const absl::Status connected = (*channel)->Connect(timeout);
  switch (client::ConnectFailureOf(connected)) {
    case client::ConnectFailure::kNone:
    case client::ConnectFailure::kUnreachable:
      if (!connected.ok()) return absl::UnavailableError(connected.message());
      break;
    case client::ConnectFailure::kNoAnswer:
      return absl::UnavailableError(
          absl::StrCat("cannot reach ", options.addr, ": no answer within ",
                       HumanDuration(timeout), " (--timeout)"));
    case client::ConnectFailure::kNotGrpc:
      return absl::UnavailableError(absl::StrCat(
          "cannot reach ", options.addr, ": ",
          (*channel)->tls()
              ? "it accepts connections but the TLS handshake failed "
                "(check --tls-ca, --tls-cert, --tls-key and the name in its "
                "certificate) or it is not a gRPC server"
              : "it accepts connections but not as a plaintext gRPC server "
                "(if it uses TLS, pass --tls-ca or --tls)"));
  }
  return std::unique_ptr<Connection>(new Connection(*std::move(channel)));
}

absl::Status Connection::Check(const absl::Status& status) const {
  if (status.ok()) return status;
  if (status.code() == absl::StatusCode::kDeadlineExceeded) {
    return absl::DeadlineExceededError(
        absl::StrCat("DEADLINE_EXCEEDED: no answer from ", address(),
                     " within ", HumanDuration(timeout()), " (--timeout)"));
  }
  return absl::Status(
      status.code(), absl::StrCat(absl::StatusCodeToString(status.code()), ": ",
                                  status.message()));
}

}  // namespace hourglass::cli
