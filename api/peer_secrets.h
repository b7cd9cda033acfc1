#ifndef HOURGLASS_API_PEER_SECRETS_H_
#define HOURGLASS_API_PEER_SECRETS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "api/secret_file.h"

namespace grpc {
class ServerContextBase;
}  // namespace grpc

namespace hourglass::api {

// The metadata key a node's calls to its peers carry the peer secret in.
// Not `authorization`: a peer secret is no client token, and the client
// API never reads this key.
inline constexpr char kPeerSecretMetadata[] = "hourglass-peer-secret";

// The secret a cluster's nodes share to tell their calls to one another
// from clients' (hourglassd's --peer_token_file), for a cluster whose nodes
// do not speak mutual TLS. The file holds one or two secrets, one a line;
// blank lines and lines starting with '#' are skipped. A secret is 32 to
// 512 printable ASCII characters, no spaces. A node sends the first and
// lets in calls carrying either, so a new secret is rolled in without
// downtime: add it as the second line on every node (SIGHUP), then make it
// the first everywhere, then remove the old one.
//
// The file must be open to its owner only (CheckTokenFileMode), and
// secrets are compared in constant time and never logged.
//
// Thread-safe: Check and current() may run on any thread during a Reload.
class PeerSecrets {
 public:
  // Reads the file at `path`. Errors: ReadSecretFile's, and
  // INVALID_ARGUMENT `peers.txt:2: a peer secret is 32 to 512 printable
  // characters without spaces` (never quoting the secret) or `peers.txt
  // holds no secret` or `... holds 3 secrets; at most two`.
  static absl::StatusOr<std::unique_ptr<PeerSecrets>> FromFile(
      std::string path);
  // The same from `text`, named `origin` in errors. Reload keeps them.
  static absl::StatusOr<std::unique_ptr<PeerSecrets>> FromText(
      absl::string_view text, std::string origin = "peer secrets");

  PeerSecrets(const PeerSecrets&) = delete;
  PeerSecrets& operator=(const PeerSecrets&) = delete;

  // Reads the file again: its secrets take over for calls from now on, and
  // it returns how many there are; on error the old ones stay.
  absl::StatusOr<size_t> Reload() ABSL_LOCKS_EXCLUDED(mu_);

  // The secret this node sends: the file's first.
  std::string current() const ABSL_LOCKS_EXCLUDED(mu_);
  // Where the secrets come from (the file's path).
  const std::string& origin() const { return origin_; }

  // OK if the call carries one of the secrets in kPeerSecretMetadata.
  // Otherwise UNAUTHENTICATED `only the cluster's nodes may call this: the
  // call carries no peer secret (hourglass-peer-secret)` or `...: its peer
  // secret is not this cluster's`; or PERMISSION_DENIED `only the
  // cluster's nodes may call this: a client's token does not open it` for
  // a call with an authorization header and no peer secret.
  absl::Status Check(const grpc::ServerContextBase& context) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // As Check, from the calls' metadata values (nullptr when absent).
  absl::Status CheckValues(const absl::string_view* secret,
                           bool has_authorization) const
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Set {
    std::vector<std::string> secrets;  // In file order; 1 or 2.
    std::vector<PaddedSecret> padded;
  };
  PeerSecrets(std::string origin, bool from_file, Set set)
      : origin_(std::move(origin)),
        from_file_(from_file),
        set_(std::move(set)) {}
  static absl::StatusOr<Set> Parse(absl::string_view text,
                                   absl::string_view origin);

  const std::string origin_;
  const bool from_file_;
  mutable absl::Mutex mu_;
  Set set_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hourglass::api

#endif  // HOURGLASS_API_PEER_SECRETS_H_
