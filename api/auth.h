#ifndef HOURGLASS_API_AUTH_H_
#define HOURGLASS_API_AUTH_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

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

// What one token grants: its roles and the topics they cover. A cheap,
// immutable value; thread-safe.
class Grant {
 public:
  // A grant of every role on every topic: what everyone has when
  // authentication is off.
  static Grant Everything();

  // OK if the grant has `role` on `topic`, else PERMISSION_DENIED naming
  // both, e.g. `token lacks role consume (topic "orders")` or `token's role
  // produce does not cover topic "payments"`.
  //
  // `topic` is a valid topic name, or "" for a call that is not about one
  // topic (an Admin call over all topics): only a token whose roles cover
  // every topic may make those.
  absl::Status Check(Role role, absl::string_view topic) const;

 private:
  friend class Authorizer;
  Grant(unsigned roles, std::shared_ptr<const std::vector<std::string>> topics)
      : roles_(roles), topics_(std::move(topics)) {}

  // Bit 1 << Role.
  unsigned roles_;
  // Topic patterns; null means every topic.
  std::shared_ptr<const std::vector<std::string>> topics_;
};

// True if `topic` matches the glob `pattern`, where `*` matches any run of
// characters (dots included) and every other character itself:
// `orders.*` matches `orders.eu` and `orders.eu.dlq` but not `orders`.
bool TopicMatches(absl::string_view pattern, absl::string_view topic);

// Bearer-token authentication and role-based authorisation of gRPC calls.
//
// Tokens come from a file (hourglassd's --auth_tokens), one per line:
//
//   # Comments start with '#'; blank lines are ignored.
//   <token> <role>[,<role>...] [<topic-pattern>[,<topic-pattern>...]]
//
//   3f9c0a61d2b84e7f9a51c0d7e6b2a418  produce           orders,orders.*
//   a71e55c2b09f4d6c8e3b1f0a9d7c6e52  consume,produce
//   d0c4b1e8f7a2495c86b3e1d0f9a7c254  admin,produce,consume *
//
// Fields are separated by spaces or tabs. A token is 16 to 512 printable
// ASCII characters other than '#' and ','. Roles are produce, consume and
// admin. Topic patterns are globs (see TopicMatches); none, or `*`, means
// every topic. Tokens must be unique. A bad line fails the whole file with
// INVALID_ARGUMENT naming the file and the line, never the token.
//
// Clients send `authorization: Bearer <token>` metadata on every call.
//
// Tokens are compared in constant time: every known token is compared in
// full, over a fixed width, whatever the one presented, so that the time
// taken tells nothing about how much of a token matched. Tokens are never
// logged nor put in error messages.
//
// Thread-safe: Authenticate, Authorize and Reload may be called from any
// thread at once. A reload swaps the whole set atomically; what was
// authenticated before keeps its Grant (an open stream is not cut off).
class Authorizer {
 public:
  // Reads and parses the token file at `path` (following symbolic links).
  // Errors: NOT_FOUND or PERMISSION_DENIED if it cannot be opened,
  // DATA_LOSS if reading it fails; FAILED_PRECONDITION if it is not a
  // regular file, or group or others may use it (CheckTokenFileMode);
  // INVALID_ARGUMENT for a bad line (`tokens.txt:3: unknown role "prodce"`)
  // or a file without tokens.
  static absl::StatusOr<std::unique_ptr<Authorizer>> FromFile(std::string path);

  // Parses `text` in the file format; `origin` names it in errors. Reload
  // is a no-op returning the current count.
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

  // Re-reads the file. On success the new tokens take effect for calls
  // that start from now on, and it returns how many there are; on error
  // (as FromFile) the tokens in use stay as they were.
  absl::StatusOr<size_t> Reload() ABSL_LOCKS_EXCLUDED(mu_);

  // The grant of the call's `authorization: Bearer <token>` metadata.
  // Errors: UNAUTHENTICATED `missing "authorization: Bearer <token>"
  // metadata` when there is none or it is not a Bearer token, and
  // UNAUTHENTICATED `unknown token` when no token matches.
  absl::StatusOr<Grant> Authenticate(
      const grpc::ServerContextBase& context) const ABSL_LOCKS_EXCLUDED(mu_);
  // As above, from the value of the authorization header; nullptr when
  // the call has none.
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
  struct TokenSet;

  Authorizer(bool enabled, std::string origin, bool from_file,
             std::shared_ptr<const TokenSet> tokens);

  static absl::StatusOr<std::shared_ptr<const TokenSet>> Parse(
      absl::string_view text, absl::string_view origin);
  static absl::StatusOr<std::shared_ptr<const TokenSet>> ReadFile(
      const std::string& path);

  // Constant after construction.
  const bool enabled_;
  const std::string origin_;
  const bool from_file_;

  mutable absl::Mutex mu_;
  // Replaced whole by Reload; readers take a reference and let go of mu_.
  std::shared_ptr<const TokenSet> tokens_ ABSL_GUARDED_BY(mu_);
};

// OK if a token file with permission bits `mode` (st_mode), owned by user
// `owner`, may be used by a process whose effective user is `euid`; else
// FAILED_PRECONDITION with a one-line reason naming `path`, e.g.
// `tokens.txt is readable by group and others (mode 0644); chmod 600 it`.
//
// A token file may be open to its owner only, with one exception taken
// from PostgreSQL's rule for its TLS key: a file owned by root, used by
// another user, may also be readable (not writable) by its group, so that
// root can share it with the broker's group alone (root:hourglass, mode
// 0640; a Kubernetes Secret mounted with an fsGroup, mode 0440).
absl::Status CheckTokenFileMode(absl::string_view path, mode_t mode,
                                uid_t owner, uid_t euid);

}  // namespace hourglass::api

#endif  // HOURGLASS_API_AUTH_H_
