#ifndef HOURGLASS_API_CLUSTER_SERVICE_H_
#define HOURGLASS_API_CLUSTER_SERVICE_H_

#include <functional>

#include "api/auth.h"
#include "hourglass/v1/cluster.grpc.pb.h"

namespace hourglass::api {

// The Cluster service of a cluster node: GetClusterMap answers what
// `map` returns (node/cluster_node.h builds it from the node's view of
// etcd), to any authenticated caller.
// Thread-safe if `map` is.
class ClusterService final : public hourglass::v1::Cluster::CallbackService {
 public:
  // REQUIRES: `authorizer` (null: authentication off) outlives the service.
  ClusterService(std::function<hourglass::v1::ClusterMap()> map,
                 const Authorizer* authorizer = nullptr);

  grpc::ServerUnaryReactor* GetClusterMap(
      grpc::CallbackServerContext* context,
      const hourglass::v1::GetClusterMapRequest* request,
      hourglass::v1::ClusterMap* response) override;

 private:
  const std::function<hourglass::v1::ClusterMap()> map_;
  const Authorizer* const authorizer_;
};

}  // namespace hourglass::api

#endif  // HOURGLASS_API_CLUSTER_SERVICE_H_
