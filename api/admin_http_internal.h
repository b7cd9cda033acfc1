#ifndef HOURGLASS_API_ADMIN_HTTP_INTERNAL_H_
#define HOURGLASS_API_ADMIN_HTTP_INTERNAL_H_

// What the files of the console's JSON API (admin_http.cc,
// admin_http_cluster.cc, admin_http_publish.cc) share. Not for other
// modules: admin_http.h is the interface.

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "api/admin_http.h"
#include "api/auth.h"
#include "api/cluster_access.h"
#include "api/http_service.h"
#include "api/redirect.h"
#include "google/protobuf/message.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"

namespace hourglass::api::admin_http_internal {

// `text` as a JSON string, quoted and escaped by protobuf's printer.
std::string JsonString(absl::string_view text);

// `message` in protobuf's JSON mapping, every field printed; INTERNAL if
// it cannot be printed.
absl::StatusOr<std::string> PrintJson(const google::protobuf::Message& message);

// The address of the node to ask instead, when `status` is the refusal of
// a node that does not lead the shard a call needs (UNAVAILABLE naming the
// shard's primary, api::WithPrimary) and `cluster` is set (cluster mode);
// nullopt otherwise.
std::optional<std::string> ForwardTarget(const absl::Status& status,
                                         const ClusterAccess* cluster);

// The gRPC status `status` of a call forwarded to the shard's primary at
// `address`, as an absl::Status: the same code and message, but for
// UNAVAILABLE and DEADLINE_EXCEEDED (the node may not have answered at
// all), whose message says which node was asked: `asked the shard's
// primary at 10.0.0.1:7070: failed to connect to all addresses`.
absl::Status ForwardedStatus(const grpc::Status& status,
                             const std::string& address);

// Calls `method` of a gRPC stub of type `Stub` on `cluster`'s channel to
// `address`, with `request`, until `deadline`, carrying the HTTP request's
// Authorization header (so that the node there authorises the caller as
// usual, by its own token file). Blocks until it answers.
template <typename Stub, typename Request, typename Response>
absl::Status Forward(ClusterAccess& cluster, const std::string& address,
                     grpc::Status (Stub::*method)(grpc::ClientContext*,
                                                  const Request&, Response*),
                     const Request& request, Response* response,
                     const HttpRequest& http, absl::Time deadline) {
  Stub stub(cluster.ChannelTo(address));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(deadline));
  if (http.authorization.has_value()) {
    context.AddMetadata("authorization", *http.authorization);
  }
  return ForwardedStatus((stub.*method)(&context, request, response), address);
}

// GET /api/v1/cluster (admin_http_cluster.cc): {"mode":"single"} without
// `cluster`; otherwise the cluster map as AdminHttp's comment describes,
// the lag of the shards other nodes lead asked of them until `deadline`.
// PERMISSION_DENIED unless `grant` has the admin role on every topic.
absl::StatusOr<std::string> ServeCluster(const Grant& grant,
                                         const HttpRequest& http,
                                         ClusterAccess* cluster,
                                         absl::Time deadline);

// POST /api/v1/topics/{topic}/publish (admin_http_publish.cc): publishes
// the message the JSON body describes to `topic` through `options`'
// publisher, forwarding it to the topic's primary in cluster mode, until
// `deadline`; the receipt's JSON.
absl::StatusOr<std::string> ServePublish(const Grant& grant,
                                         const HttpRequest& http,
                                         const std::string& topic,
                                         const AdminHttp::Options& options,
                                         absl::Time deadline);

}  // namespace hourglass::api::admin_http_internal

#endif  // HOURGLASS_API_ADMIN_HTTP_INTERNAL_H_
