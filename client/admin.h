#ifndef HOURGLASS_CLIENT_ADMIN_H_
#define HOURGLASS_CLIENT_ADMIN_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/channel.h"
#include "hourglass/v1/admin.pb.h"
#include "hourglass/v1/cluster.pb.h"
#include "hourglass/v1/recurrences.pb.h"

namespace hourglass::client {

// The operators' API: the Admin service (api/hourglass/v1/admin.proto), one
// method per RPC, the recurrences' PreviewRecurrence (recurrences.proto), and
// grpc.health.v1.
//
// Unlike Publisher and Consumer, it speaks the generated messages: the
// admin surface is wide, grows with the broker, and its callers (the CLI)
// print the answers as protobuf's JSON. Each call is synchronous, has the
// channel's call_timeout as its deadline, and is not retried (an operator
// decides). Errors are the broker's, as the .proto documents them (e.g.
// NOT_FOUND, ALREADY_EXISTS, PERMISSION_DENIED); DEADLINE_EXCEEDED `no
// answer from ADDRESS within TIMEOUT`.
//
// Thread-safe.
class Admin {
 public:
  explicit Admin(std::shared_ptr<Channel> channel);

  absl::StatusOr<hourglass::v1::GetStatsResponse> GetStats(
      const hourglass::v1::GetStatsRequest& request);
  absl::StatusOr<hourglass::v1::ListTopicsResponse> ListTopics(
      const hourglass::v1::ListTopicsRequest& request = {});
  absl::StatusOr<hourglass::v1::ListGroupsResponse> ListGroups(
      const hourglass::v1::ListGroupsRequest& request);
  absl::StatusOr<hourglass::v1::Group> CreateGroup(
      const hourglass::v1::CreateGroupRequest& request);
  absl::StatusOr<hourglass::v1::DeleteGroupResponse> DeleteGroup(
      const hourglass::v1::DeleteGroupRequest& request);
  absl::StatusOr<hourglass::v1::ListMessagesResponse> ListMessages(
      const hourglass::v1::ListMessagesRequest& request);
  // The schedule histogram of a topic (admin.proto says how buckets are
  // placed and which requests are refused).
  absl::StatusOr<hourglass::v1::GetScheduleResponse> GetSchedule(
      const hourglass::v1::GetScheduleRequest& request);
  absl::StatusOr<hourglass::v1::MessageInfo> GetMessage(
      const hourglass::v1::GetMessageRequest& request);
  absl::Status CancelMessage(const hourglass::v1::CancelRequest& request);
  absl::StatusOr<hourglass::v1::Receipt> Reschedule(
      const hourglass::v1::RescheduleRequest& request);
  absl::StatusOr<hourglass::v1::RedriveDeadLettersResponse> RedriveDeadLetters(
      const hourglass::v1::RedriveDeadLettersRequest& request);
  absl::StatusOr<hourglass::v1::PurgeTopicResponse> PurgeTopic(
      const hourglass::v1::PurgeTopicRequest& request);
  absl::StatusOr<hourglass::v1::Snapshot> CreateSnapshot(
      const hourglass::v1::CreateSnapshotRequest& request);

  // Cluster.GetClusterMap of the node calls go to now (not redirected: any
  // node answers). UNIMPLEMENTED from a broker that is not in cluster mode.
  absl::StatusOr<hourglass::v1::ClusterMap> GetClusterMap();
  // Cluster.DrainNode of the node calls go to now (any node answers): starts
  // draining node `node`, or stops with `undo`. Errors: the service's;
  // UNIMPLEMENTED from a broker that is not in cluster mode.
  absl::Status DrainNode(const std::string& node, bool undo);
  // Cluster.MoveShard of the node calls go to now (any node answers): moves
  // shard `shard` to node `node` (pins it there), or with `undo` (and an
  // empty `node`) removes its pin. Errors: the service's; UNIMPLEMENTED
  // from a broker that is not in cluster mode.
  absl::Status MoveShard(int shard, const std::string& node, bool undo);
  // Cluster.RecoverShard of the node calls go to now (any node answers):
  // what promoting node `node`'s copy of shard `shard` may lose and, with
  // `accept_loss`, its promotion. Errors: the service's; UNIMPLEMENTED from
  // a broker that is not in cluster mode.
  absl::StatusOr<hourglass::v1::RecoverShardResponse> RecoverShard(
      int shard, const std::string& node, bool accept_loss);

  // Recurrences.PreviewRecurrence: the next fire times of a rule, computed
  // by the broker (any node answers), storing nothing. Errors: the
  // service's (INVALID_ARGUMENT naming the bad field of the rule).
  absl::StatusOr<hourglass::v1::PreviewRecurrenceResponse> PreviewRecurrence(
      const hourglass::v1::PreviewRecurrenceRequest& request);

  // grpc.health.v1.Health/Check of `service` ("": the whole broker; e.g.
  // "hourglass.v1.Broker"): the serving status's name, "SERVING",
  // "NOT_SERVING", "SERVICE_UNKNOWN" or "UNKNOWN" ("STATUS_<n>" for a value
  // this library does not know). Errors: as the other calls; NOT_FOUND for
  // a service the broker does not know.
  absl::StatusOr<std::string> Health(const std::string& service = "");

 private:
  const std::shared_ptr<Channel> channel_;
};

}  // namespace hourglass::client

#endif  // HOURGLASS_CLIENT_ADMIN_H_
