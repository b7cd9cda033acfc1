#ifndef HOURGLASS_NODE_PEER_CALLS_H_
#define HOURGLASS_NODE_PEER_CALLS_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
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

// How a node's router reaches the primaries of the shards it is not the
// primary of: ShardRouter::Remote over the other nodes' Replication
// service (node to node, so TLS and the peer check apply as to
// replication). Stats of every topic come by GetShardStats, whose
// answering end is Serve; stats travel whole (replication.proto's
// ShardTopicStats). A shard's checkpoint, for a cluster snapshot, comes by
// FetchCheckpoint, as a backup's rebuild does.
//
// Thread-safe. Stats calls in flight hold nothing of the PeerCalls; each
// checkpoint copy runs on a thread of its own, joined by the next
// Checkpoint call once it has ended, or by the destructor (which waits for
// copies under way).
class PeerCalls final : public ShardRouter::Remote {
 public:
  // `channel` makes the channel to a peer at `address` (its --advertise);
  // one is made per address and kept. A peer has `timeout` to answer.
  // `node_id` is this node's, which a checkpoint's primary checks.
  PeerCalls(
      std::function<std::shared_ptr<grpc::Channel>(const std::string& address)>
          channel,
      std::string node_id, absl::Duration timeout = absl::Seconds(5),
      absl::Duration checkpoint_timeout = absl::Hours(1));
  ~PeerCalls() override;

  // ShardRouter::Remote. Errors: the peer's (UNAVAILABLE if it is not the
  // primary of a shard asked any more), DEADLINE_EXCEEDED, each saying
  // which shards and which peer.
  void Stats(const std::string& address, std::vector<int> shards,
             ShardRouter::StatsCallback done) override;
  // ShardRouter::Remote. The copy has `checkpoint_timeout` in all.
  void Checkpoint(
      const std::string& address, int shard, std::string dir,
      broker::Broker::Callback<absl::StatusOr<storage::CheckpointInfo>> done)
      override;

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
  const std::string node_id_;
  const absl::Duration timeout_;
  const absl::Duration checkpoint_timeout_;

  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_
      ABSL_GUARDED_BY(mu_);
  // The checkpoint copies under way, and those finished since the last
  // Checkpoint call, which joins them; the destructor joins them all.
  struct Copy {
    std::thread thread;
    // Set as the copy's thread ends.
    std::shared_ptr<std::atomic<bool>> finished;
  };
  std::vector<Copy> copies_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hourglass::node

#endif  // HOURGLASS_NODE_PEER_CALLS_H_
