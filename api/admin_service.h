#ifndef HOURGLASS_API_ADMIN_SERVICE_H_
#define HOURGLASS_API_ADMIN_SERVICE_H_

#include <string>

#include "absl/time/time.h"
#include "api/admin_calls.h"
#include "api/auth.h"
#include "api/validation.h"
#include "broker/broker.h"
#include "broker/clock.h"
#include "hourglass/v1/admin.grpc.pb.h"

namespace hourglass::api {

// hourglass.v1.Admin on the gRPC callback API: authenticates each call and
// hands it to AdminCalls (admin_calls.h), which validates it, asks the
// broker and translates the answer. The broker answers queries and runs
// tasks on threads of its own: no gRPC thread waits on the store.
//
// Thread-safe; gRPC calls it from its own threads.
class AdminService final : public hourglass::v1::Admin::CallbackService {
 public:
  // `started_at` is when the broker started (GetStats reports it). Every
  // call needs the admin role of `authorizer` for its topic (calls about
  // all topics: an unrestricted token); null means no authentication.
  // REQUIRES: the pointers outlive the service.
  AdminService(broker::Broker* broker, broker::Clock* clock, Limits limits,
               absl::Time started_at, const Authorizer* authorizer = nullptr);

  grpc::ServerUnaryReactor* GetStats(
      grpc::CallbackServerContext* context,
      const hourglass::v1::GetStatsRequest* request,
      hourglass::v1::GetStatsResponse* response) override;
  grpc::ServerUnaryReactor* ListTopics(
      grpc::CallbackServerContext* context,
      const hourglass::v1::ListTopicsRequest* request,
      hourglass::v1::ListTopicsResponse* response) override;
  grpc::ServerUnaryReactor* ListGroups(
      grpc::CallbackServerContext* context,
      const hourglass::v1::ListGroupsRequest* request,
      hourglass::v1::ListGroupsResponse* response) override;
  grpc::ServerUnaryReactor* CreateGroup(
      grpc::CallbackServerContext* context,
      const hourglass::v1::CreateGroupRequest* request,
      hourglass::v1::Group* response) override;
  grpc::ServerUnaryReactor* DeleteGroup(
      grpc::CallbackServerContext* context,
      const hourglass::v1::DeleteGroupRequest* request,
      hourglass::v1::DeleteGroupResponse* response) override;
  grpc::ServerUnaryReactor* ListMessages(
      grpc::CallbackServerContext* context,
      const hourglass::v1::ListMessagesRequest* request,
      hourglass::v1::ListMessagesResponse* response) override;
  grpc::ServerUnaryReactor* GetMessage(
      grpc::CallbackServerContext* context,
      const hourglass::v1::GetMessageRequest* request,
      hourglass::v1::MessageInfo* response) override;
  grpc::ServerUnaryReactor* GetSchedule(
      grpc::CallbackServerContext* context,
      const hourglass::v1::GetScheduleRequest* request,
      hourglass::v1::GetScheduleResponse* response) override;
  grpc::ServerUnaryReactor* CancelMessage(
      grpc::CallbackServerContext* context,
      const hourglass::v1::CancelRequest* request,
      hourglass::v1::CancelResponse* response) override;
  grpc::ServerUnaryReactor* Reschedule(
      grpc::CallbackServerContext* context,
      const hourglass::v1::RescheduleRequest* request,
      hourglass::v1::Receipt* response) override;
  grpc::ServerUnaryReactor* RedriveDeadLetters(
      grpc::CallbackServerContext* context,
      const hourglass::v1::RedriveDeadLettersRequest* request,
      hourglass::v1::RedriveDeadLettersResponse* response) override;
  grpc::ServerUnaryReactor* PurgeTopic(
      grpc::CallbackServerContext* context,
      const hourglass::v1::PurgeTopicRequest* request,
      hourglass::v1::PurgeTopicResponse* response) override;
  grpc::ServerUnaryReactor* CreateSnapshot(
      grpc::CallbackServerContext* context,
      const hourglass::v1::CreateSnapshotRequest* request,
      hourglass::v1::Snapshot* response) override;

 private:
  const Authorizer* const authorizer_;
  AdminCalls calls_;
};

}  // namespace hourglass::api

#endif  // HOURGLASS_API_ADMIN_SERVICE_H_
