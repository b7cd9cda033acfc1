#ifndef HOURGLASS_CLIENT_INTERNAL_REDIRECT_H_
#define HOURGLASS_CLIENT_INTERNAL_REDIRECT_H_

#include <string>

#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"

namespace hourglass::client::internal {

// What a cluster node that refused a call said about where to send it
// (api/redirect.h on the server's side): the hourglass-primary and
// hourglass-shards trailers, or a PublishAnswer's `primary` and
// `shard_count`.
struct Redirect {
  // host:port of the primary of the call's shard; empty when none is named
  // (or the call did not end with UNAVAILABLE).
  std::string primary;
  // The cluster's shard count; 0 when not said.
  int shard_count = 0;
};

// The Redirect of a call that ended with `status` on `context`.
Redirect RedirectOf(const grpc::ClientContext& context,
                    const grpc::Status& status);

}  // namespace hourglass::client::internal

#endif  // HOURGLASS_CLIENT_INTERNAL_REDIRECT_H_
