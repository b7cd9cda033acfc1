#include "api/admin_service.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api/status.h"

namespace hourglass::api {
namespace {

namespace v1 = hourglass::v1;

// Authenticates the call with `authorizer` and hands it to `method` of
// `calls`, which finishes the call's reactor.
template <typename Request, typename Response>
grpc::ServerUnaryReactor* Handle(
    const Authorizer& authorizer, AdminCalls& calls,
    void (AdminCalls::*method)(const Grant&, const Request&, Response*,
                               AdminCalls::Done),
    grpc::CallbackServerContext* context, const Request* request,
    Response* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<Grant> grant = authorizer.Authenticate(*context);
  if (!grant.ok()) {
    reactor->Finish(ToGrpcStatus(grant.status()));
    return reactor;
  }
  (calls.*method)(*grant, *request, response, [reactor](absl::Status status) {
    reactor->Finish(ToGrpcStatus(status));
  });
  return reactor;
}

}  // namespace

AdminService::AdminService(broker::Broker* broker, broker::Clock* clock,
                           Limits limits, absl::Time started_at,
                           const Authorizer* authorizer)
    : authorizer_(authorizer != nullptr ? authorizer : &Authorizer::Disabled()),
      calls_(broker, clock, limits, started_at) {}

grpc::ServerUnaryReactor* AdminService::GetStats(
    grpc::CallbackServerContext* context, const v1::GetStatsRequest* request,
    v1::GetStatsResponse* response) {
  return Handle(*authorizer_, calls_, &AdminCalls::GetStats, context, request,
                response);
}

grpc::ServerUnaryReactor* AdminService::ListTopics(
    grpc::CallbackServerContext* context, const v1::ListTopicsRequest* request,
    v1::ListTopicsResponse* response) {
  return Handle(*authorizer_, calls_, &AdminCalls::ListTopics, context, request,
                response);
}

grpc::ServerUnaryReactor* AdminService::ListGroups(
    grpc::CallbackServerContext* context, const v1::ListGroupsRequest* request,
    v1::ListGroupsResponse* response) {
  return Handle(*authorizer_, calls_, &AdminCalls::ListGroups, context, request,
                response);
}

grpc::ServerUnaryReactor* AdminService::CreateGroup(
    grpc::CallbackServerContext* context, const v1::CreateGroupRequest* request,
    v1::Group* response) {
  return Handle(*authorizer_, calls_, &AdminCalls::CreateGroup, context,
                request, response);
}

grpc::ServerUnaryReactor* AdminService::DeleteGroup(
    grpc::CallbackServerContext* context, const v1::DeleteGroupRequest* request,
    v1::DeleteGroupResponse* response) {
  return Handle(*authorizer_, calls_, &AdminCalls::DeleteGroup, context,
                request, response);
}

grpc::ServerUnaryReactor* AdminService::ListMessages(
    grpc::CallbackServerContext* context,
    const v1::ListMessagesRequest* request,
    v1::ListMessagesResponse* response) {
  return Handle(*authorizer_, calls_, &AdminCalls::ListMessages, context,
                request, response);
}

grpc::ServerUnaryReactor* AdminService::GetMessage(
    grpc::CallbackServerContext* context, const v1::GetMessageRequest* request,
    v1::MessageInfo* response) {
  return Handle(*authorizer_, calls_, &AdminCalls::GetMessage, context, request,
                response);
}

grpc::ServerUnaryReactor* AdminService::GetSchedule(
    grpc::CallbackServerContext* context, const v1::GetScheduleRequest* request,
    v1::GetScheduleResponse* response) {
  return Handle(*authorizer_, calls_, &AdminCalls::GetSchedule, context,
                request, response);
}

grpc::ServerUnaryReactor* AdminService::CancelMessage(
    grpc::CallbackServerContext* context, const v1::CancelRequest* request,
    v1::CancelResponse* response) {
  return Handle(*authorizer_, calls_, &AdminCalls::CancelMessage, context,
                request, response);
}

grpc::ServerUnaryReactor* AdminService::Reschedule(
    grpc::CallbackServerContext* context, const v1::RescheduleRequest* request,
    v1::Receipt* response) {
  return Handle(*authorizer_, calls_, &AdminCalls::Reschedule, context, request,
                response);
}

grpc::ServerUnaryReactor* AdminService::RedriveDeadLetters(
    grpc::CallbackServerContext* context,
    const v1::RedriveDeadLettersRequest* request,
    v1::RedriveDeadLettersResponse* response) {
  return Handle(*authorizer_, calls_, &AdminCalls::RedriveDeadLetters, context,
                request, response);
}

grpc::ServerUnaryReactor* AdminService::PurgeTopic(
    grpc::CallbackServerContext* context, const v1::PurgeTopicRequest* request,
    v1::PurgeTopicResponse* response) {
  return Handle(*authorizer_, calls_, &AdminCalls::PurgeTopic, context, request,
                response);
}

grpc::ServerUnaryReactor* AdminService::CreateSnapshot(
    grpc::CallbackServerContext* context,
    const v1::CreateSnapshotRequest* request, v1::Snapshot* response) {
  return Handle(*authorizer_, calls_, &AdminCalls::CreateSnapshot, context,
                request, response);
}

}  // namespace hourglass::api
