#ifndef HOURGLASS_API_CLUSTER_SERVICE_H_
#define HOURGLASS_API_CLUSTER_SERVICE_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api/auth.h"
#include "hourglass/v1/cluster.grpc.pb.h"

namespace hourglass::api {

// The Cluster service of a cluster node: GetClusterMap answers what
// `map` returns (node/cluster_node.h builds it from the node's view of
// etcd), to any authenticated caller; DrainNode calls `drain` (node id,
// whether to drain), MoveShard calls `move` (shard, node id, undo) and
// RecoverShard calls `recover` (shard, node id, accept_loss), for callers
// with the admin role, once the request has the fields it needs
// (INVALID_ARGUMENT otherwise). `drain`, `move` and `recover` check the
// rest, may block for an etcd write, and run on a gRPC thread.
// Thread-safe if `map`, `drain`, `move` and `recover` are.
class ClusterService final : public hourglass::v1::Cluster::CallbackService {
 public:
  // REQUIRES: `authorizer` (null: authentication off) outlives the service.
  using Drain =
      std::function<absl::Status(const std::string& node, bool drain)>;
  using Move = std::function<absl::Status(int shard, const std::string& node,
                                          bool undo)>;
  using Recover =
      std::function<absl::StatusOr<hourglass::v1::RecoverShardResponse>(
          int shard, const std::string& node, bool accept_loss)>;
  ClusterService(std::function<hourglass::v1::ClusterMap()> map, Drain drain,
                 Move move, Recover recover,
                 const Authorizer* authorizer = nullptr);

  grpc::ServerUnaryReactor* GetClusterMap(
      grpc::CallbackServerContext* context,
      const hourglass::v1::GetClusterMapRequest* request,
      hourglass::v1::ClusterMap* response) override;
  grpc::ServerUnaryReactor* DrainNode(
      grpc::CallbackServerContext* context,
      const hourglass::v1::DrainNodeRequest* request,
      hourglass::v1::DrainNodeResponse* response) override;
  grpc::ServerUnaryReactor* MoveShard(
      grpc::CallbackServerContext* context,
      const hourglass::v1::MoveShardRequest* request,
      hourglass::v1::MoveShardResponse* response) override;
  grpc::ServerUnaryReactor* RecoverShard(
      grpc::CallbackServerContext* context,
      const hourglass::v1::RecoverShardRequest* request,
      hourglass::v1::RecoverShardResponse* response) override;

 private:
  const std::function<hourglass::v1::ClusterMap()> map_;
  const Drain drain_;
  const Move move_;
  const Recover recover_;
  const Authorizer* const authorizer_;
};

}  // namespace hourglass::api

#endif  // HOURGLASS_API_CLUSTER_SERVICE_H_
