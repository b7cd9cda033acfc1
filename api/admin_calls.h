#ifndef HOURGLASS_API_ADMIN_CALLS_H_
#define HOURGLASS_API_ADMIN_CALLS_H_

#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "api/auth.h"
#include "api/validation.h"
#include "broker/broker.h"
#include "broker/clock.h"
#include "hourglass/v1/admin.pb.h"

namespace hourglass::api {

// The calls of hourglass.v1.Admin apart from any transport: each checks
// that `grant` has the admin role for the call's topic (calls about all
// topics: a grant that covers every topic), validates the request, asks
// the broker (broker/broker.h) and translates its answer into `response`.
// The gRPC service (admin_service.h) and the console's JSON API
// (admin_http.h) are thin wrappers that authenticate the caller and hand
// the call here, so both answer alike.
//
// Every call ends by running `done` exactly once with its outcome:
// PERMISSION_DENIED from Grant::Check, INVALID_ARGUMENT naming the field
// and the value for a bad request (nothing changes), otherwise what the
// broker answered (admin.proto lists the codes). `done` runs on the
// caller's thread for an answer known at once (a bad request), else on one
// of the broker's threads; it must not block. `response` is filled only on
// success.
//
// REQUIRES: `request` and `response` outlive the call, that is until
// `done` runs.
//
// Thread-safe: calls may come from any thread at once.
class AdminCalls {
 public:
  using Done = absl::AnyInvocable<void(absl::Status) &&>;

  // `started_at` is when the broker started (GetStats reports it).
  // REQUIRES: the pointers outlive the object.
  AdminCalls(broker::Broker* broker, broker::Clock* clock, Limits limits,
             absl::Time started_at);

  void GetStats(const Grant& grant,
                const hourglass::v1::GetStatsRequest& request,
                hourglass::v1::GetStatsResponse* response, Done done);
  void ListTopics(const Grant& grant,
                  const hourglass::v1::ListTopicsRequest& request,
                  hourglass::v1::ListTopicsResponse* response, Done done);
  void ListGroups(const Grant& grant,
                  const hourglass::v1::ListGroupsRequest& request,
                  hourglass::v1::ListGroupsResponse* response, Done done);
  void CreateGroup(const Grant& grant,
                   const hourglass::v1::CreateGroupRequest& request,
                   hourglass::v1::Group* response, Done done);
  void DeleteGroup(const Grant& grant,
                   const hourglass::v1::DeleteGroupRequest& request,
                   hourglass::v1::DeleteGroupResponse* response, Done done);
  void ListMessages(const Grant& grant,
                    const hourglass::v1::ListMessagesRequest& request,
                    hourglass::v1::ListMessagesResponse* response, Done done);
  void GetMessage(const Grant& grant,
                  const hourglass::v1::GetMessageRequest& request,
                  hourglass::v1::MessageInfo* response, Done done);
  void GetSchedule(const Grant& grant,
                   const hourglass::v1::GetScheduleRequest& request,
                   hourglass::v1::GetScheduleResponse* response, Done done);
  void CancelMessage(const Grant& grant,
                     const hourglass::v1::CancelRequest& request,
                     hourglass::v1::CancelResponse* response, Done done);
  void Reschedule(const Grant& grant,
                  const hourglass::v1::RescheduleRequest& request,
                  hourglass::v1::Receipt* response, Done done);
  void RedriveDeadLetters(
      const Grant& grant,
      const hourglass::v1::RedriveDeadLettersRequest& request,
      hourglass::v1::RedriveDeadLettersResponse* response, Done done);
  void PurgeTopic(const Grant& grant,
                  const hourglass::v1::PurgeTopicRequest& request,
                  hourglass::v1::PurgeTopicResponse* response, Done done);
  void CreateSnapshot(const Grant& grant,
                      const hourglass::v1::CreateSnapshotRequest& request,
                      hourglass::v1::Snapshot* response, Done done);

 private:
  broker::Broker* const broker_;
  broker::Clock* const clock_;
  const Limits limits_;
  const absl::Time started_at_;
};

// Page tokens of ListMessages: where the page ended, bound to the request's
// other fields so that a token cannot be replayed against another listing.
std::string EncodePageToken(const hourglass::v1::ListMessagesRequest& request,
                            const broker::ListPosition& position);
// INVALID_ARGUMENT if `request.page_token` is malformed or was made for a
// request with other fields.
absl::StatusOr<broker::ListPosition> DecodePageToken(
    const hourglass::v1::ListMessagesRequest& request);

// Where CreateSnapshot writes the snapshot `name` (CreateSnapshotRequest's
// dir): snapshot_dir/name, snapshot_dir made if missing. A snapshot is
// named, never placed: INVALID_ARGUMENT for an empty name or one that is
// not a plain name (up to 200 of [A-Za-z0-9._-], not . or ..), so that no
// caller can make the broker write elsewhere; FAILED_PRECONDITION without
// a snapshot_dir; UNAVAILABLE if it cannot be made.
absl::StatusOr<std::string> SnapshotPath(const std::string& snapshot_dir,
                                         const std::string& name);

}  // namespace hourglass::api

#endif  // HOURGLASS_API_ADMIN_CALLS_H_
