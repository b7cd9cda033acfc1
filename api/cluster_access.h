#ifndef HOURGLASS_API_CLUSTER_ACCESS_H_
#define HOURGLASS_API_CLUSTER_ACCESS_H_

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "hourglass/v1/cluster.pb.h"

namespace grpc {
class Channel;
}  // namespace grpc

namespace hourglass::api {

// What the console's JSON API (admin_http.h) needs of a cluster node
// (hourglassd --etcd), given as callbacks so that api/ does not depend on
// node/: the cluster map, for GET /api/v1/cluster, and channels to the
// other nodes, to ask the primaries of other shards (the lag of their
// backups, and the calls about topics whose shard this node does not
// lead). hourglassd makes it from node::ClusterNode.
//
// Thread-safe if the callbacks are.
class ClusterAccess {
 public:
  using MapFn = std::function<hourglass::v1::ClusterMap()>;
  using ChannelFn =
      std::function<std::shared_ptr<grpc::Channel>(const std::string&)>;

  // `map` answers what Cluster.GetClusterMap answers on this node.
  // `channel` makes a channel to the node whose gRPC address (its
  // --advertise) it is given, speaking as this node speaks to its peers
  // (TLS and its client certificate when the nodes use them); a call on it
  // carries the caller's token, which the other node checks as usual.
  ClusterAccess(MapFn map, ChannelFn channel);

  hourglass::v1::ClusterMap Map() const { return map_(); }

  // The channel to `address`, made at the first call and kept.
  std::shared_ptr<grpc::Channel> ChannelTo(const std::string& address)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Constant after construction.
  const MapFn map_;
  const ChannelFn channel_;

  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace hourglass::api

#endif  // HOURGLASS_API_CLUSTER_ACCESS_H_
