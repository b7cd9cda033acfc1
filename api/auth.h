#ifndef HOURGLASS_API_AUTH_H_
#define HOURGLASS_API_AUTH_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "api/secret_file.h"

namespace grpc {
class ServerContextBase;
}  // namespace grpc

namespace hourglass::api {

// What a token may do. Roles are independent: admin does not imply
// produce or consume; a token that needs several lists them all.
enum class Role {
  kProduce,  // Broker.Publish, Broker.Cancel.
  kConsume,  // Broker.Subscribe.
  kAdmin,    // The Admin service.
};

// "produce", "consume" or "admin".
absl::string_view RoleName(Role role);

// What one line of the token file grants, to a token or to a client
// certificate: its roles and the topics they cover. A cheap, immutable
// value; thread-safe.
class Grant {
 public:
  // A grant of every role on every topic: what everyone has when
  // authentication is off.
  static Grant Everything();

  // OK if the grant has `role` on `topic`, else PERMISSION_DENIED naming
  // both and who holds the grant ("token" or "client certificate"), e.g.
  // `token lacks role consume for topic "orders"` or `client certificate's
  // produce role does not cover topic "payments"`.
  //
  // `topic` is a valid topic name, or "" for a call that is not about one
  // topic (an Admin call over all topics): only a grant whose roles cover
  // every topic may make those.
  absl::Status Check(Role role, absl::string_view topic) const;
  // Whether the grant has `role` on some topic.
  bool Has(Role role) const {
    return (roles_ & (1u << static_cast<int>(role))) != 0;
  }
  // "token" or "client certificate", as error messages name the holder.
  absl::string_view holder() const;

 private:
  friend class Authorizer;
  // Who presented the grant, as error messages name it.
  enum class Holder { kToken, kCertificate };

  Grant(unsigned roles, std::shared_ptr<const std::vector<std::string>> topics,
        Holder holder)
      : roles_(roles), topics_(std::move(topics)), holder_(holder) {}

  // Bit 1 << Role.
  unsigned roles_;
  // Topic patterns; null means every topic.
  std::shared_ptr<const std::vector<std::string>> topics_;
  Holder holder_;
};

// True if `topic` matches the glob `pattern`, where `*` matches any run of
// characters (dots included) and every other character itself:
// `orders.*` matches `orders.eu` and `orders.eu.dlq` but not `orders`.
// fnmatch(3) matches them; a pattern or topic holding a NUL byte (never a
// valid one) matches nothing.
bool TopicMatches(absl::string_view pattern, absl::string_view topic);

// Bearer-token and client-certificate authentication, and role-based
// authorisation, of gRPC calls.
//
// Grants come from a file (hourglassd's --auth_tokens), one per line:
//
//   # Comments start with '#'; blank lines are ignored.
//   <token> <role>[,<role>...] [<topic-pattern>[,<topic-pattern>...]]
//   cert <name> <role>[,<role>...] [<topic-pattern>[,<topic-pattern>...]]
//
//   3f9c0a61d2b84e7f9a51c0d7e6b2a418  produce           orders,orders.*
//   a71e55c2b09f4d6c8e3b1f0a9d7c6e52  consume,produce
//   d0c4b1e8f7a2495c86b3e1d0f9a7c254  admin,produce,consume *
//   cert worker-1                     produce           orders.*
//   cert spiffe://example.org/billing consume           billing
//
// Fields are separated by spaces or tabs. A token is 16 to 512 printable
// ASCII characters other than '#' and ','. Roles are produce, consume and
// admin. Topic patterns are globs (see TopicMatches); none, or `*`, means
// every topic. Tokens must be unique.
//
// A line whose first field is `cert` grants its roles to client
// certificates (mutual TLS, hourglassd's --tls_client_ca) whose common name
// or one of whose subject alternative names is exactly <name>: 1 to 512
// printable ASCII characters other than '#' and ',', compared byte for
// byte (a DNS name as written in the certificate, an IP address in its
// usual text form, a URI in full). A token is never 4 characters long, so
// no token line starts with `cert`. Names must be unique; a certificate
// whose common name has other characters (a space) is granted through one
// of its subject alternative names.
//
// A bad line fails the whole file with INVALID_ARGUMENT naming the file
// and the line, never the token: `tokens.txt:3: unknown role "prodce" ...`.
//
// Clients send `authorization: Bearer <token>` metadata on every call. A
// call that sends an authorization header is judged by it alone, whatever
// certificate it presents. A call without one, over mutual TLS, gets the
// grant of the first `cert` line (in file order) that names its
// certificate; none is UNAUTHENTICATED. A certificate alone grants
// nothing unless a `cert` line names it.
//
// Tokens are compared in constant time: every known token is compared in
// full, over a fixed width (OpenSSL's CRYPTO_memcmp over 512 zero-padded
// bytes, and the lengths without a branch), whatever the one presented, so
// that the time taken tells nothing about how much of a token matched. Tokens
// are never logged nor put in error messages.
//
// Thread-safe: the Authenticate functions, Authorize, counts and Reload may
// be called from any thread at once. A reload swaps the whole set
// atomically; a Grant taken before keeps what it granted, and long-lived
// calls (streams) hold a CallGrant, which follows reloads.
class Authorizer {
 public:
  // How many grants of each kind a token file holds.
  struct Counts {
    size_t tokens = 0;
    size_t certificates = 0;  // `cert` lines.

    friend bool operator==(const Counts&, const Counts&) = default;
  };

  // Reads and parses the token file at `path` (following symbolic links).
  // Errors: NOT_FOUND or PERMISSION_DENIED if it cannot be opened,
  // DATA_LOSS if reading it fails; FAILED_PRECONDITION if it is not a
  // regular file, or group or others may use it (CheckTokenFileMode);
  // INVALID_ARGUMENT for a bad line (`tokens.txt:3: unknown role "prodce"`)
  // or a file with neither tokens nor cert lines.
  static absl::StatusOr<std::unique_ptr<Authorizer>> FromFile(std::string path);

  // Parses `text` in the file format; `origin` names it in errors. Reload
  // is a no-op returning the current counts.
  static absl::StatusOr<std::unique_ptr<Authorizer>> FromText(
      absl::string_view text, std::string origin = "tokens");

  // A process-wide authorizer with authentication off: every call gets
  // Grant::Everything(). Never destroyed.
  static const Authorizer& Disabled();

  Authorizer(const Authorizer&) = delete;
  Authorizer& operator=(const Authorizer&) = delete;

  // Whether tokens are checked (false only for Disabled()).
  bool enabled() const { return enabled_; }
  // Where the tokens come from: the file's path, or FromText's origin.
  const std::string& origin() const { return origin_; }

  // Re-reads the file. On success the new grants take effect for calls
  // that start from now on, and it returns how many there are; on error
  // (as FromFile) the grants in use stay as they were.
  absl::StatusOr<Counts> Reload() ABSL_LOCKS_EXCLUDED(mu_);

  // How many grants are in use.
  Counts counts() const ABSL_LOCKS_EXCLUDED(mu_);
  // Counts the successful reloads: a grant taken when it was different may
  // be stale.
  uint64_t generation() const {
    return generation_.load(std::memory_order_acquire);
  }

  // The grant of the call: that of its `authorization: Bearer <token>`
  // metadata if it has an authorization header, else that of its client
  // certificate (AuthenticateCredentials). The certificate's names are
  // its `x509_common_name` and `x509_subject_alternative_name` properties
  // in the call's AuthContext, taken only from a peer gRPC authenticated.
  // REQUIRES: the server verifies client certificates when it asks for
  // them (hourglassd asks only with --tls_client_ca, and then requires and
  // verifies them).
  absl::StatusOr<Grant> Authenticate(
      const grpc::ServerContextBase& context) const ABSL_LOCKS_EXCLUDED(mu_);
  // As Authenticate, from the value of the authorization header (nullptr
  // when the call has none) and the names of the client certificate
  // verified by mutual TLS, common name first (empty without one).
  // Errors, all UNAUTHENTICATED:
  //   `unknown token`: a Bearer token that matches none;
  //   `missing "authorization: Bearer <token>" metadata`: a header that is
  //     not a Bearer token, or neither header nor certificate;
  //   `no cert line names the client certificate ("worker-9") and the call
  //     has no "authorization: Bearer <token>" metadata`: a certificate
  //     without a grant (up to four of its names are listed).
  absl::StatusOr<Grant> AuthenticateCredentials(
      const absl::string_view* authorization,
      absl::Span<const std::string> certificate_names) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // AuthenticateCredentials without a certificate.
  absl::StatusOr<Grant> AuthenticateHeader(
      const absl::string_view* authorization) const ABSL_LOCKS_EXCLUDED(mu_);

  // Authenticate, then Grant::Check(role, topic): UNAUTHENTICATED or
  // PERMISSION_DENIED as they say, else OK. The one call a handler needs:
  //
  //   if (absl::Status s = authorizer_->Authorize(*context, Role::kAdmin, "");
  //       !s.ok()) { reactor->Finish(ToGrpcStatus(s)); return reactor; }
  absl::Status Authorize(const grpc::ServerContextBase& context, Role role,
                         absl::string_view topic) const
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Token;
  struct Certificate;
  struct TokenSet;

  Authorizer(bool enabled, std::string origin, bool from_file,
             std::shared_ptr<const TokenSet> tokens);

  static absl::StatusOr<std::shared_ptr<const TokenSet>> Parse(
      absl::string_view text, absl::string_view origin);
  static absl::StatusOr<std::shared_ptr<const TokenSet>> ReadFile(
      const std::string& path);
  static Counts CountsOf(const TokenSet& set);
  // The grant of a Bearer token in `credentials` (non-empty).
  static absl::StatusOr<Grant> AuthenticateToken(const TokenSet& set,
                                                 absl::string_view credentials);

  // Constant after construction.
  const bool enabled_;
  const std::string origin_;
  const bool from_file_;

  mutable absl::Mutex mu_;
  // Replaced whole by Reload; readers take a reference and let go of mu_.
  std::shared_ptr<const TokenSet> tokens_ ABSL_GUARDED_BY(mu_);
  // Incremented by each Reload that replaced tokens_, after it did.
  std::atomic<uint64_t> generation_{0};
};

// The grant of a long-lived call (a stream), kept current: it judges by the
// grants in use now, authenticating the call again (its token, or its
// client certificate) only when the token file was reloaded since it last
// did. So a stream whose token was removed, or lost a role, is refused at
// its next check.
//
// Thread-safe.
class CallGrant {
 public:
  // `grant` is what `authorizer` gave the call when it started.
  // REQUIRES: `authorizer` and `context` outlive the CallGrant (a stream's
  // context lives until its reactor's OnDone).
  CallGrant(const Authorizer& authorizer,
            const grpc::ServerContextBase& context, Grant grant);

  // The call's grant under the grants in use now; UNAUTHENTICATED (as
  // Authorizer::Authenticate) if its credentials no longer grant anything.
  absl::StatusOr<Grant> Current() const ABSL_LOCKS_EXCLUDED(mu_);
  // Current, then Grant::Check(role, topic).
  absl::Status Check(Role role, absl::string_view topic) const
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const Authorizer& authorizer_;
  const grpc::ServerContextBase& context_;

  mutable absl::Mutex mu_;
  // The last authentication's outcome, and the generation it was under.
  mutable absl::StatusOr<Grant> grant_ ABSL_GUARDED_BY(mu_);
  mutable uint64_t generation_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hourglass::api

#endif  // HOURGLASS_API_AUTH_H_
