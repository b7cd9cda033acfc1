#include "client/admin.h"

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "client/internal/channel_state.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"

namespace hourglass::client {
namespace {

using internal::ChannelAccess;
using Stub = hourglass::v1::Admin::Stub;
using ClusterStub = hourglass::v1::Cluster::Stub;
using RecurrencesStub = hourglass::v1::Recurrences::Stub;

// The stub, by type, of where calls about `topic` go (empty: about no
// topic in particular).
Stub& StubOf(const Channel& channel, Stub* /*type*/, std::string_view topic) {
  return ChannelAccess::admin(channel, topic);
}
ClusterStub& StubOf(const Channel& channel, ClusterStub* /*type*/,
                    std::string_view topic) {
  return *ChannelAccess::endpoint(channel, topic).cluster;
}
RecurrencesStub& StubOf(const Channel& channel, RecurrencesStub* /*type*/,
                        std::string_view topic) {
  return *ChannelAccess::endpoint(channel, topic).recurrences;
}

// The topic a request is about, if it names one: in cluster mode it goes to
// the primary of the topic's shard.
template <typename Request>
std::string_view TopicOf(const Request& request) {
  if constexpr (requires { request.topic(); }) {
    return request.topic();
  } else {
    return {};
  }
}

// Calls `method` of the Admin (or Cluster, or Recurrences) stub synchronously
// with the channel's deadline and credentials.
template <typename StubType, typename Response, typename Request>
absl::StatusOr<Response> Call(
    const Channel& channel,
    grpc::Status (StubType::*method)(grpc::ClientContext*, const Request&,
                                     Response*),
    const Request& request) {
  const absl::Duration timeout = channel.options().call_timeout;
  const std::string_view topic = TopicOf(request);
  // Admin calls read or are safe to repeat where the node refused them: a
  // node that is not the primary (cluster mode) sends them to the one that
  // is, and a dead one's peers say which that is.
  for (int attempt = 1;; ++attempt) {
    grpc::ClientContext context;
    ChannelAccess::Prepare(channel, context, absl::Now() + timeout);
    Response response;
    const grpc::Status status =
        (StubOf(channel, static_cast<StubType*>(nullptr), topic).*method)(
            &context, request, &response);
    if (status.ok()) return response;
    if (attempt < internal::kMaxRedirects &&
        (ChannelAccess::FollowRedirect(channel, context, status, topic) ||
         (status.error_code() == grpc::StatusCode::UNAVAILABLE &&
          ChannelAccess::Rediscover(channel, internal::kRediscoverTimeout,
                                    topic)))) {
      continue;
    }
    return ChannelAccess::ToStatus(channel, status, timeout);
  }
}

// The name of grpc.health.v1.HealthCheckResponse.ServingStatus `value`.
std::string ServingStatusName(uint64_t value) {
  switch (value) {
    case 0:
      return "UNKNOWN";
    case 1:
      return "SERVING";
    case 2:
      return "NOT_SERVING";
    case 3:
      return "SERVICE_UNKNOWN";
  }
  return absl::StrCat("STATUS_", value);
}

// The `status` field of a HealthCheckResponse in `bytes`; UNKNOWN (0) when
// absent. False if the bytes are not a protobuf message.
bool ParseServingStatus(const std::string& bytes, uint64_t& serving) {
  google::protobuf::io::CodedInputStream in(
      reinterpret_cast<const uint8_t*>(bytes.data()),
      static_cast<int>(bytes.size()));
  serving = 0;
  while (const uint32_t tag = in.ReadTag()) {
    bool ok = true;
    uint64_t varint = 0;
    uint32_t size = 0;
    switch (tag & 7) {  // The wire type.
      case 0:
        ok = in.ReadVarint64(&varint);
        if (tag >> 3 == 1) serving = varint;  // Field 1: status.
        break;
      case 1:
        ok = in.Skip(8);
        break;
      case 2:
        ok = in.ReadVarint32(&size) && in.Skip(static_cast<int>(size));
        break;
      case 5:
        ok = in.Skip(4);
        break;
      default:
        ok = false;
    }
    if (!ok) return false;
  }
  return true;
}

}  // namespace

Admin::Admin(std::shared_ptr<Channel> channel) : channel_(std::move(channel)) {}

absl::StatusOr<hourglass::v1::GetStatsResponse> Admin::GetStats(
    const hourglass::v1::GetStatsRequest& request) {
  return Call(*channel_, &Stub::GetStats, request);
}

absl::StatusOr<hourglass::v1::ListTopicsResponse> Admin::ListTopics(
    const hourglass::v1::ListTopicsRequest& request) {
  return Call(*channel_, &Stub::ListTopics, request);
}

absl::StatusOr<hourglass::v1::ListGroupsResponse> Admin::ListGroups(
    const hourglass::v1::ListGroupsRequest& request) {
  return Call(*channel_, &Stub::ListGroups, request);
}

absl::StatusOr<hourglass::v1::Group> Admin::CreateGroup(
    const hourglass::v1::CreateGroupRequest& request) {
  return Call(*channel_, &Stub::CreateGroup, request);
}

absl::StatusOr<hourglass::v1::DeleteGroupResponse> Admin::DeleteGroup(
    const hourglass::v1::DeleteGroupRequest& request) {
  return Call(*channel_, &Stub::DeleteGroup, request);
}

absl::StatusOr<hourglass::v1::ListMessagesResponse> Admin::ListMessages(
    const hourglass::v1::ListMessagesRequest& request) {
  return Call(*channel_, &Stub::ListMessages, request);
}

absl::StatusOr<hourglass::v1::GetScheduleResponse> Admin::GetSchedule(
    const hourglass::v1::GetScheduleRequest& request) {
  return Call(*channel_, &Stub::GetSchedule, request);
}

absl::StatusOr<hourglass::v1::MessageInfo> Admin::GetMessage(
    const hourglass::v1::GetMessageRequest& request) {
  return Call(*channel_, &Stub::GetMessage, request);
}

absl::Status Admin::CancelMessage(const hourglass::v1::CancelRequest& request) {
  return Call(*channel_, &Stub::CancelMessage, request).status();
}

absl::StatusOr<hourglass::v1::Receipt> Admin::Reschedule(
    const hourglass::v1::RescheduleRequest& request) {
  return Call(*channel_, &Stub::Reschedule, request);
}

absl::StatusOr<hourglass::v1::RedriveDeadLettersResponse>
Admin::RedriveDeadLetters(
    const hourglass::v1::RedriveDeadLettersRequest& request) {
  return Call(*channel_, &Stub::RedriveDeadLetters, request);
}

absl::StatusOr<hourglass::v1::PurgeTopicResponse> Admin::PurgeTopic(
    const hourglass::v1::PurgeTopicRequest& request) {
  return Call(*channel_, &Stub::PurgeTopic, request);
}

absl::StatusOr<hourglass::v1::Snapshot> Admin::CreateSnapshot(
    const hourglass::v1::CreateSnapshotRequest& request) {
  return Call(*channel_, &Stub::CreateSnapshot, request);
}

absl::StatusOr<hourglass::v1::PreviewRecurrenceResponse>
Admin::PreviewRecurrence(
    const hourglass::v1::PreviewRecurrenceRequest& request) {
  return Call(*channel_, &RecurrencesStub::PreviewRecurrence, request);
}

absl::StatusOr<hourglass::v1::ClusterMap> Admin::GetClusterMap() {
  grpc::ClientContext context;
  const absl::Duration timeout = channel_->options().call_timeout;
  ChannelAccess::Prepare(*channel_, context, absl::Now() + timeout);
  hourglass::v1::ClusterMap map;
  const grpc::Status status =
      ChannelAccess::endpoint(*channel_).cluster->GetClusterMap(
          &context, hourglass::v1::GetClusterMapRequest(), &map);
  if (!status.ok()) return ChannelAccess::ToStatus(*channel_, status, timeout);
  return map;
}

absl::Status Admin::DrainNode(const std::string& node, bool undo) {
  hourglass::v1::DrainNodeRequest request;
  request.set_node(node);
  request.set_undo(undo);
  // Safe to repeat (it sets or clears a mark): any node that answers.
  return Call(*channel_, &ClusterStub::DrainNode, request).status();
}

absl::Status Admin::MoveShard(int shard, const std::string& node, bool undo) {
  hourglass::v1::MoveShardRequest request;
  request.set_shard(shard);
  request.set_node(node);
  request.set_undo(undo);
  // Safe to repeat (it sets or clears a pin): any node that answers.
  return Call(*channel_, &ClusterStub::MoveShard, request).status();
}

absl::StatusOr<hourglass::v1::RecoverShardResponse> Admin::RecoverShard(
    int shard, const std::string& node, bool accept_loss) {
  hourglass::v1::RecoverShardRequest request;
  request.set_shard(shard);
  request.set_node(node);
  request.set_accept_loss(accept_loss);
  // Safe to repeat: a second promotion of the same copy is refused, the
  // first having given the shard a live primary.
  return Call(*channel_, &ClusterStub::RecoverShard, request);
}

absl::StatusOr<std::string> Admin::Health(const std::string& service) {
  // grpc.health.v1 by hand: the messages are a string and an enum, and
  // generated code for them would clash with an application's own copy of
  // health.proto (protobuf allows one definition of a file per process).
  std::string request_bytes;
  {
    google::protobuf::io::StringOutputStream out(&request_bytes);
    google::protobuf::io::CodedOutputStream coded(&out);
    if (!service.empty()) {  // Field 1, length-delimited: service.
      coded.WriteTag(10);
      coded.WriteVarint32(static_cast<uint32_t>(service.size()));
      coded.WriteString(service);
    }
  }
  grpc::Slice slice(request_bytes);
  const grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  grpc::ClientContext context;
  const absl::Duration timeout = channel_->options().call_timeout;
  ChannelAccess::Prepare(*channel_, context, absl::Now() + timeout);
  grpc::GenericStub stub(ChannelAccess::endpoint(*channel_).channel);
  absl::Notification done;
  grpc::Status status;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(),
                 &request, &response, [&](grpc::Status s) {
                   status = std::move(s);
                   done.Notify();
                 });
  done.WaitForNotification();
  if (!status.ok()) return ChannelAccess::ToStatus(*channel_, status, timeout);

  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) {
    return absl::InternalError("cannot read the health answer");
  }
  std::string bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  uint64_t serving = 0;
  if (!ParseServingStatus(bytes, serving)) {
    return absl::InternalError("malformed health answer");
  }
  return ServingStatusName(serving);
}

}  // namespace hourglass::client
