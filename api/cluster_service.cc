#include "api/cluster_service.h"

#include <utility>

#include "api/status.h"

namespace hourglass::api {

ClusterService::ClusterService(std::function<hourglass::v1::ClusterMap()> map,
                               const Authorizer* authorizer)
    : map_(std::move(map)),
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

}  // namespace hourglass::api
