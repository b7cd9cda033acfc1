#ifndef HOURGLASS_NODE_PEER_STATS_H_
#define HOURGLASS_NODE_PEER_STATS_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "node/shard_router.h"

namespace grpc {
class Channel;
}  // namespace grpc

namespace hourglass::replication::v1 {
class ShardStatsRequest;
class ShardStatsResponse;
}  // namespace hourglass::replication::v1

namespace hourglass::node {

// How a node gathers the stats of every topic from the primaries of the
// shards it is not the primary of: ShardRouter::Remote over the other
// nodes' Replication service (GetShardStats, node to node, so TLS and the
// peer check apply as to replication), and Serve, that call's answering
// end. Stats travel whole (replication.proto's ShardTopicStats).
//
// Thread-safe. Calls in flight hold nothing of the PeerStats.
class PeerStats final : public ShardRouter::Remote {
 public:
  // `channel` makes the channel to a peer at `address` (its --advertise);
  // one is made per address and kept. A peer has `timeout` to answer.
  explicit PeerStats(
      std::function<std::shared_ptr<grpc::Channel>(const std::string& address)>
          channel,
      absl::Duration timeout = absl::Seconds(5));
  ~PeerStats() override;

  // ShardRouter::Remote. Errors: the peer's (UNAVAILABLE if it is not the
  // primary of a shard asked any more), DEADLINE_EXCEEDED, each saying
  // which shards and which peer.
  void Stats(const std::string& address, std::vector<int> shards,
             ShardRouter::StatsCallback done) override;

  // GetShardStats' answer on this node: `router`'s LocalStats of the shards
  // asked, waited for. For ReplicationService::SetStatsHandler.
  static absl::Status Serve(ShardRouter& router,
                            const replication::v1::ShardStatsRequest& request,
                            replication::v1::ShardStatsResponse* response);

 private:
  std::shared_ptr<grpc::Channel> ChannelTo(const std::string& address);

  // Constant after construction.
  const std::function<std::shared_ptr<grpc::Channel>(const std::string&)>
      channel_;
  const absl::Duration timeout_;

  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace hourglass::node

#endif  // HOURGLASS_NODE_PEER_STATS_H_
