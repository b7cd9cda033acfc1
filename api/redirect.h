#ifndef HOURGLASS_API_REDIRECT_H_
#define HOURGLASS_API_REDIRECT_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/server_interceptor.h"

namespace hourglass::api {

// Trailing metadata of an UNAVAILABLE answered by a cluster node that is not
// the primary of the shard a call needs (node/README.md "Routing"): the
// primary's address (host:port) and its epoch, in decimal. Clients retry
// there.
inline constexpr char kPrimaryTrailer[] = "hourglass-primary";
inline constexpr char kEpochTrailer[] = "hourglass-epoch";
// Trailing metadata, with any status code, of a cluster node's refusal that
// depends on the shard: the cluster's shard count, in decimal. With it a
// client computes each topic's shard (cluster/shard_hash.h) and keeps a
// primary per shard, and splits a publish that spans shards (refused with
// FAILED_PRECONDITION) into one per shard.
inline constexpr char kShardsTrailer[] = "hourglass-shards";

// Where a refused call should go: the primary of the shard it needs, and how
// many shards the cluster has.
struct Primary {
  // host:port; empty when the refusal names no primary (a publish that
  // spans shards).
  std::string address;
  int64_t epoch = 0;
  // The cluster's shard count; 0 when the refusal does not say.
  int shard_count = 0;

  bool operator==(const Primary&) const = default;
};

// A redirect travels with the refusal itself, per call, because on a node
// of many shards each call's shard has a primary of its own:
//
//   1. The node's gate of the shard refuses with WithPrimary(status, ...):
//      the primary rides in an absl::Status payload, through the broker's
//      callbacks unchanged.
//   2. ToGrpcStatus (api/status.h) carries it into the grpc::Status's
//      error details, in RedirectDetails' encoding.
//   3. The RedirectFactory's interceptor, as the status is sent, turns
//      those details into the kPrimaryTrailer, kEpochTrailer and
//      kShardsTrailer trailers and sends the status without them.

// `status` with `primary` attached. REQUIRES: !status.ok(), and a primary
// with an address or a shard count.
absl::Status WithPrimary(absl::Status status, const Primary& primary);
// The primary a status names (WithPrimary), if any.
std::optional<Primary> PrimaryOf(const absl::Status& status);

// The grpc::Status error details that carry `primary` from ToGrpcStatus to
// the interceptor; and back (nullopt for details that are not such).
std::string RedirectDetails(const Primary& primary);
std::optional<Primary> PrimaryOfDetails(const std::string& details);

// A server interceptor turning the redirect details of every call into
// trailers (and dropping the details), whichever service answered it: the
// kPrimaryTrailer and kEpochTrailer of a call that ends with UNAVAILABLE
// and names a primary, and the kShardsTrailer of one that gives the shard
// count.
// Thread-safe.
class RedirectFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;
};

}  // namespace hourglass::api

#endif  // HOURGLASS_API_REDIRECT_H_
