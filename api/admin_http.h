#ifndef HOURGLASS_API_ADMIN_HTTP_H_
#define HOURGLASS_API_ADMIN_HTTP_H_

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "api/admin_calls.h"
#include "api/auth.h"
#include "api/http_service.h"

namespace hourglass::api {

class BrokerService;
class ClusterAccess;

// hourglass.v1.Admin as JSON over HTTP, under /api/v1/, for the web
// console: each endpoint takes its request message in protobuf's JSON
// mapping (query parameters for GET and DELETE, a JSON body for POST; path
// segments name the topic, group or message) and answers the response
// message in the same mapping (lowerCamelCase names, every field printed,
// 64-bit counts as strings), through the same AdminCalls as the gRPC
// service.
//
//   GET    /api/v1/stats?topic=T                        GetStats
//   GET    /api/v1/topics                               ListTopics
//   GET    /api/v1/topics/{topic}/groups                ListGroups
//   POST   /api/v1/topics/{topic}/groups {"group":G}    CreateGroup
//   DELETE /api/v1/topics/{topic}/groups/{group}        DeleteGroup
//   GET    /api/v1/topics/{topic}/messages?state=S&...  ListMessages
//   GET    /api/v1/topics/{topic}/messages/{id}         GetMessage
//   POST   /api/v1/topics/{topic}/messages/{id}/cancel  CancelMessage
//   POST   /api/v1/topics/{topic}/messages/{id}/reschedule
//          {"delay":"30s"} or {"deliverAt":"2030-01-01T00:00:00Z"}
//                                                       Reschedule
//   POST   /api/v1/topics/{topic}/redrive {"ids":[...]} RedriveDeadLetters
//   POST   /api/v1/topics/{topic}/purge {"scheduled":true,"ready":true}
//                                                       PurgeTopic
//   GET    /api/v1/topics/{topic}/schedule?from=T1&to=T2&bucket=3600s
//                                                       GetSchedule
//   POST   /api/v1/snapshot {"dir":"NAME"}              CreateSnapshot
//          (a plain name, written into --snapshot_dir)
//
// and two endpoints of its own:
//
//   POST   /api/v1/topics/{topic}/publish               Broker.Publish
//          {"payload":"text","delay":"10s","id":"order-1",
//           "headers":{"k":"v"}}
//     Publishes one message to the topic and answers its Receipt
//     ({"id":..,"deliverAt":..,"duplicate":..}). payload is text (UTF-8;
//     default empty); delay is a duration ("250ms", "10s", "1h30m") or a
//     number of milliseconds, or deliverAt an RFC 3339 time instead
//     (neither: due now); id is the idempotency key (default: the broker
//     assigns one); headers an object of strings. Any other field, or a
//     field of another type, is 400 naming it; then the broker's own
//     checks of a Publish apply (ValidatePublish, the limits; their
//     reasons start "message 0: "). Needs, besides the admin role, role
//     produce for the topic, as every publish does. 501 without
//     Options::publisher. The 4 KiB body limit below makes it a way to
//     publish test messages, not a producer's.
//   GET    /api/v1/cluster                              the cluster map
//     A single node answers {"mode":"single"}. A cluster node answers
//     {"mode":"cluster", "cluster", "node" (the node that answered),
//     "controller", "hash", "shardCount", "nodes", "shards", "pins",
//     "lagErrors"}: "nodes" lists every node the map names (the live ones,
//     and those a shard or a drain still names), each {"id", "address",
//     "zone", "alive", "draining", "controller"}; "shards" and "pins" are
//     Cluster.GetClusterMap's ShardInfo and ShardPin in the JSON mapping,
//     with each shard's lastIndex and backups' lag as its primary gave them
//     (this node's own for the shards it leads; for the others, each
//     primary is asked, as `hourglass cluster` does); "lagErrors" lists the
//     shards whose primary did not say, each {"shard", "primary",
//     "message"} (their lag stays empty: no number is made up). Needs the
//     admin role on every topic.
//
// In cluster mode (Options::cluster), a call about a topic whose shard
// this node does not lead (the node's gate refuses it with UNAVAILABLE
// naming the shard's primary: node/README.md, "Routing") is forwarded,
// once, as the same gRPC call (Admin's, or Broker.Publish) to that
// primary, carrying the caller's Authorization header, which the primary
// checks as usual; its answer, or its error, is the answer. Calls about
// every topic (the stats and topics of the overview) are the broker's
// own: the node asks every primary (node/shard_router.h). So every topic
// of the cluster shows, and can be changed, from any node's console.
//
// A body may hold at most 4 KiB (the metrics listener answers 413 past
// it): enough for any request but a redrive naming many ids, which the
// gRPC call takes.
//
// Errors answer {"code": "<canonical code>", "message": "<reason>"} with
// the HTTP status of the code (HttpStatusOf): 400 for a malformed request
// (the reason names the field and value), 401 without a valid
// "Authorization: Bearer <token>" when tokens are on, 403 for a token
// without the admin role for the topic, 404 for an unknown endpoint or
// thing, 405 (with Allow) for a method the endpoint does not take, 503
// when a shard has no primary (or a forwarded call's primary does not
// answer), 504 if the broker does not answer within Options::timeout.
//
// Thread-safe: Serve may be called from any thread at once; it blocks its
// caller until the broker (or the node a call is forwarded to) answers or
// the timeout passes.
class AdminHttp {
 public:
  struct Options {
    // How long Serve waits for the answer, forwarded calls included.
    // Default: 5 s.
    absl::Duration timeout = absl::Seconds(5);
    // What POST .../publish publishes through
    // (BrokerService::StartPublish: the checks, roles and limits of
    // Broker.Publish). Null: that endpoint answers 501. Default: null.
    BrokerService* publisher = nullptr;
    // Cluster mode: the map and the channels to the other nodes, for GET
    // /api/v1/cluster and for forwarding. Null: a single node. Default:
    // null.
    ClusterAccess* cluster = nullptr;
  };

  // REQUIRES: `calls`, `authorizer`, and options.publisher and
  // options.cluster if set, outlive the object; `authorizer` may be
  // Authorizer::Disabled().
  AdminHttp(AdminCalls* calls, const Authorizer* authorizer, Options options);

  // Answers `request`, whose path starts with "api", "v1".
  HttpResponse Serve(const HttpRequest& request) const;

 private:
  AdminCalls* const calls_;
  const Authorizer* const authorizer_;
  const Options options_;
};

// The HTTP status of a canonical code, as Google's HTTP APIs map them:
// INVALID_ARGUMENT, FAILED_PRECONDITION and OUT_OF_RANGE 400,
// UNAUTHENTICATED 401, PERMISSION_DENIED 403, NOT_FOUND 404, ALREADY_EXISTS
// and ABORTED 409, RESOURCE_EXHAUSTED 429, CANCELLED 499, UNIMPLEMENTED
// 501, UNAVAILABLE 503, DEADLINE_EXCEEDED 504, others 500; OK 200.
int HttpStatusOf(absl::StatusCode code);

// The JSON error answer of `status` (not OK).
HttpResponse JsonError(const absl::Status& status);

}  // namespace hourglass::api

#endif  // HOURGLASS_API_ADMIN_HTTP_H_
