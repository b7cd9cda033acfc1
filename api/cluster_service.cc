#include "api/cluster_service.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "api/status.h"

namespace hourglass::api {

ClusterService::ClusterService(std::function<hourglass::v1::ClusterMap()> map,
                               Drain drain, Move move, Recover recover,
                               const Authorizer* authorizer)
    : map_(std::move(map)),
      drain_(std::move(drain)),
      move_(std::move(move)),
      recover_(std::move(recover)),
      authorizer_(authorizer != nullptr ? authorizer
                                        : &Authorizer::Disabled()) {}

grpc::ServerUnaryReactor* ClusterService::GetClusterMap(
    grpc::CallbackServerContext* context,
    const hourglass::v1::GetClusterMapRequest* /*request*/,
    hourglass::v1::ClusterMap* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::StatusOr<Grant> grant = authorizer_->Authenticate(*context);
      !grant.ok()) {
    reactor->Finish(ToGrpcStatus(grant.status()));
    return reactor;
  }
  *response = map_();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* ClusterService::DrainNode(
    grpc::CallbackServerContext* context,
    const hourglass::v1::DrainNodeRequest* request,
    hourglass::v1::DrainNodeResponse* /*response*/) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::Status allowed = authorizer_->Authorize(*context, Role::kAdmin, "");
      !allowed.ok()) {
    reactor->Finish(ToGrpcStatus(allowed));
    return reactor;
  }
  if (request->node().empty()) {
    reactor->Finish(ToGrpcStatus(
        absl::InvalidArgumentError("node: a node id is required")));
    return reactor;
  }
  reactor->Finish(ToGrpcStatus(drain_(request->node(), !request->undo())));
  return reactor;
}

grpc::ServerUnaryReactor* ClusterService::MoveShard(
    grpc::CallbackServerContext* context,
    const hourglass::v1::MoveShardRequest* request,
    hourglass::v1::MoveShardResponse* /*response*/) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::Status allowed = authorizer_->Authorize(*context, Role::kAdmin, "");
      !allowed.ok()) {
    reactor->Finish(ToGrpcStatus(allowed));
    return reactor;
  }
  if (request->undo() && !request->node().empty()) {
    reactor->Finish(ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat(
        "node: \"", request->node(), "\" given with undo, which removes shard ",
        request->shard(), "'s pin whatever its node: give no node"))));
    return reactor;
  }
  if (!request->undo() && request->node().empty()) {
    reactor->Finish(ToGrpcStatus(absl::InvalidArgumentError(
        absl::StrCat("node: a node id is required (the node to move shard ",
                     request->shard(), " to)"))));
    return reactor;
  }
  reactor->Finish(
      ToGrpcStatus(move_(request->shard(), request->node(), request->undo())));
  return reactor;
}

grpc::ServerUnaryReactor* ClusterService::RecoverShard(
    grpc::CallbackServerContext* context,
    const hourglass::v1::RecoverShardRequest* request,
    hourglass::v1::RecoverShardResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::Status allowed = authorizer_->Authorize(*context, Role::kAdmin, "");
      !allowed.ok()) {
    reactor->Finish(ToGrpcStatus(allowed));
    return reactor;
  }
  if (request->node().empty()) {
    reactor->Finish(ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat(
        "node: a node id is required (the node whose copy of shard ",
        request->shard(), " to promote)"))));
    return reactor;
  }
  absl::StatusOr<hourglass::v1::RecoverShardResponse> recovered =
      recover_(request->shard(), request->node(), request->accept_loss());
  if (recovered.ok()) *response = *std::move(recovered);
  reactor->Finish(ToGrpcStatus(recovered.status()));
  return reactor;
}

}  // namespace hourglass::api
