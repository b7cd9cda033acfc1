#ifndef HOURGLASS_CMD_COMMON_CONNECTION_H_
#define HOURGLASS_CMD_COMMON_CONNECTION_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/admin.h"
#include "client/channel.h"
#include "client/publisher.h"

namespace hourglass::cli {

// Options every subcommand takes, before or after the subcommand's name.
struct GlobalOptions {
  // --addr (HOURGLASS_ADDR): the broker, as host:port or any gRPC target
  // (dns:///host:port, unix:/path); for a cluster, any node, or several
  // separated by commas (client::ChannelOptions::address). Default
  // 127.0.0.1:7070.
  std::string addr = "127.0.0.1:7070";
  // --timeout: how long to wait for the connection, and for each call.
  // Default 10s.
  std::string timeout = "10s";
  // --json: print JSON for scripts instead of tables. Default off.
  bool json = false;

  // TLS: on with --tls or any of the --tls-* files; default plaintext.
  // --tls: TLS, trusting the system's CAs unless --tls-ca says otherwise.
  bool tls = false;
  // --tls-ca (HOURGLASS_TLS_CA): PEM CAs that sign the broker's certificate.
  std::string tls_ca;
  // --tls-cert, --tls-key (HOURGLASS_TLS_CERT, HOURGLASS_TLS_KEY): the
  // client's PEM certificate and key, for brokers that want mutual TLS.
  std::string tls_cert;
  std::string tls_key;
  // --tls-server-name (HOURGLASS_TLS_SERVER_NAME): the name the broker's
  // certificate must have, when
  // --addr does not say it (an IP address, a load balancer). Default: the
  // host of --addr.
  std::string tls_server_name;
  // --token (HOURGLASS_TOKEN): sent as "authorization: Bearer <token>" on
  // every call. Default: none.
  std::string token;
};

// A connection to the broker as the command line asks for it: a
// client::Channel with the clients on it, and the command line's way of
// reporting their errors. Made on the command's thread; the clients are
// thread-safe.
class Connection {
 public:
  // Parses --timeout, checks the --tls-* files and --token, then connects to
  // --addr and waits until the channel is ready, at most --timeout.
  //
  // Errors: a usage error for a bad --timeout, a --tls-* file that cannot be
  // read, --tls-cert without --tls-key (or the reverse) or a --token that
  // cannot be sent; UNAVAILABLE `cannot reach ADDR: REASON` (e.g.
  // "connection refused") when the broker cannot be reached.
  //
  // gRPC lets channels to one address share a TCP connection;
  // `own_connection` gives this one a connection of its own (for
  // hourglass-bench, whose producers and consumers would otherwise all share
  // one).
  static absl::StatusOr<std::unique_ptr<Connection>> Open(
      const GlobalOptions& options, bool own_connection = false);

  const std::string& address() const { return channel_->options().address; }
  absl::Duration timeout() const { return channel_->options().call_timeout; }

  const std::shared_ptr<client::Channel>& channel() const { return channel_; }
  client::Admin& admin() { return admin_; }
  // One attempt per publish and cancel: an operator sees what happened, and
  // decides whether to try again.
  client::Publisher& publisher() { return publisher_; }

  // A failed call's status as the command line prints it: the same code,
  // its name first ("NOT_FOUND: no scheduled message ..."), and for
  // DEADLINE_EXCEEDED the address and --timeout: "DEADLINE_EXCEEDED: no
  // answer from ADDR within 10s (--timeout)". OK stays OK.
  absl::Status Check(const absl::Status& status) const;

 private:
  explicit Connection(std::shared_ptr<client::Channel> channel);

  const std::shared_ptr<client::Channel> channel_;
  client::Admin admin_;
  client::Publisher publisher_;
};

// Parses --timeout: a duration over zero. Errors: a usage error naming
// --timeout.
absl::StatusOr<absl::Duration> ParseTimeout(const std::string& text);

}  // namespace hourglass::cli

#endif  // HOURGLASS_CMD_COMMON_CONNECTION_H_
