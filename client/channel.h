#ifndef HOURGLASS_CLIENT_CHANNEL_H_
#define HOURGLASS_CLIENT_CHANNEL_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/tls.h"

namespace hourglass::client {

namespace internal {
class ChannelAccess;
struct Endpoint;
struct ChannelState;
}  // namespace internal

// Where a Channel connects and how.
struct ChannelOptions {
  // The broker: host:port, or any gRPC target (dns:///host:port,
  // unix:/path). For a cluster, any node, or several separated by commas
  // (calls start at the first; the others are asked for the cluster map
  // when it does not answer). Default: 127.0.0.1:7070.
  std::string address = "127.0.0.1:7070";
  TlsOptions tls;
  // Bearer token, sent as "authorization: Bearer <token>" call credentials
  // on every call (over plaintext too: hourglassd on loopback may check
  // tokens without TLS). Printable ASCII without spaces. Default: none.
  std::string token;
  // The deadline of each call: a unary call, a publish with its retries,
  // the answer to a stream's open. Default: 10 s.
  absl::Duration call_timeout = absl::Seconds(10);
  // gRPC shares one TCP connection among channels to the same address; true
  // gives this channel a connection of its own (load generators, whose
  // streams would otherwise share one). Default: false.
  bool own_connection = false;
};

// A connection to one broker, shared by the Publishers, Consumers and Admin
// clients made on it.
//
// Every call goes through the channel's current endpoint (see
// client/internal/channel_state.h). In cluster mode (docs/cluster.md) a node
// that is not the primary answers UNAVAILABLE with trailing metadata
// "hourglass-primary: host:port"; the channel then sends calls to that
// address, on a gRPC channel made with these same options, and the call is
// repeated there. When the current node does not answer at all (it died),
// the clients ask the nodes the channel knows (those of `address` and of
// the last cluster map read) for the map, and go to the primary it names.
// With many shards, once a node has said how many there are (the
// hourglass-shards trailer, or the map), calls about a topic go to the
// primary of the topic's shard, each shard's followed on its own.
// Publishes with an id are repeated safely (idempotent); a publish without
// one, or a cancel, whose outcome is unknown is not.
//
// Thread-safe. Hold it by the shared_ptr Create returns; the clients made
// on it keep it alive, and each waits for its own calls before it goes.
class Channel {
 public:
  // Checks `options` and reads the TLS files; does not connect (calls
  // connect on first use, or Connect does).
  //
  // Errors: INVALID_ARGUMENT naming the option, e.g. `tls.ca_file: cannot
  // read "ca.pem": no such file or directory`, `tls.cert_file and
  // tls.key_file go together`, `token has a space or a character other than
  // printable ASCII`, `call_timeout must be more than 0`.
  static absl::StatusOr<std::shared_ptr<Channel>> Create(
      ChannelOptions options);

  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  // Connects and waits until the connection is ready, at most `timeout`,
  // giving up at the first failed attempt rather than retrying: a refused
  // connection is reported at once. With several addresses (a cluster's
  // nodes), the first that answers becomes the one calls go to, and the
  // error is the first address's if none does.
  //
  // Errors: UNAVAILABLE `cannot reach ADDRESS: WHY`, where WHY is the
  // operating system's reason ("connection refused", `cannot resolve "x":
  // ...`), "no answer within 10s", or, for a peer that accepts connections
  // but does not speak gRPC as configured, a sentence that says so (TLS
  // against plaintext or the reverse, an untrusted certificate, not a gRPC
  // server). ConnectFailureOf tells the cases apart.
  absl::Status Connect(absl::Duration timeout);

  const ChannelOptions& options() const;
  // Whether calls use TLS (tls.enabled or a TLS file).
  bool tls() const;

 private:
  friend class internal::ChannelAccess;
  // Connect's work for one endpoint, until `deadline`.
  absl::Status ConnectTo(const internal::Endpoint& endpoint,
                         absl::Time deadline, absl::Duration timeout);
  explicit Channel(std::unique_ptr<internal::ChannelState> state);

  const std::unique_ptr<internal::ChannelState> state_;
};

// Waits until gRPC has shut down, but at most `limit`: call it at the end
// of a short-lived program, after the last Channel and client are gone and
// before returning from main.
//
// gRPC shuts down when its last object is released, and a channel finishes
// its teardown on one of gRPC's own threads; the shutdown then runs on a
// detached thread, and a process that exits meanwhile races with it (gRPC
// 1.51 may crash at exit). gRPC gives no notice when it is done, so this
// checks grpc_is_initialized() in steps of at most 10 ms.
void AwaitGrpcShutdown(absl::Duration limit);

// How Connect failed, for callers that word their own advice (the CLI names
// its flags).
enum class ConnectFailure {
  kNone,         // Not an error of Connect.
  kUnreachable,  // The operating system's reason, in the message.
  kNoAnswer,     // Nothing answered within the timeout.
  kNotGrpc,      // It accepts connections but the gRPC (or TLS) handshake
                 // failed.
};
ConnectFailure ConnectFailureOf(const absl::Status& status);

}  // namespace hourglass::client

#endif  // HOURGLASS_CLIENT_CHANNEL_H_
