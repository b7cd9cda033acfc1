#ifndef HOURGLASS_API_ADMIN_HTTP_H_
#define HOURGLASS_API_ADMIN_HTTP_H_

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "api/admin_calls.h"
#include "api/auth.h"
#include "api/http_service.h"

namespace hourglass::api {

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
// A body may hold at most 4 KiB (the metrics listener answers 413 past
// it): enough for any request but a redrive naming many ids, which the
// gRPC call takes.
//
// Errors answer {"code": "<canonical code>", "message": "<reason>"} with
// the HTTP status of the code (HttpStatusOf): 400 for a malformed request
// (the reason names the field and value), 401 without a valid
// "Authorization: Bearer <token>" when tokens are on, 403 for a token
// without the admin role for the topic, 404 for an unknown endpoint or
// thing, 405 (with Allow) for a method the endpoint does not take, 504 if
// the broker does not answer within Options::timeout.
//
// Thread-safe: Serve may be called from any thread at once; it blocks its
// caller until the broker answers or the timeout passes.
class AdminHttp {
 public:
  struct Options {
    // How long Serve waits for the broker's answer. Default: 5 s.
    absl::Duration timeout = absl::Seconds(5);
  };

  // REQUIRES: `calls` and `authorizer` outlive the object; `authorizer`
  // may be Authorizer::Disabled().
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
