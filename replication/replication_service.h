#ifndef HOURGLASS_REPLICATION_REPLICATION_SERVICE_H_
#define HOURGLASS_REPLICATION_REPLICATION_SERVICE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "replication/replica.h"
#include "storage/message_store.h"

namespace grpc {
class ServerContextBase;
class Service;
}  // namespace grpc

namespace hourglass::replication {

class ReplicatedStore;

namespace v1 {
class ShardStatsRequest;
class ShardStatsResponse;
}  // namespace v1

// The backup's end of replication: the gRPC service Replication
// (replication.proto) applying what a primary ships to the Replica set
// for the shard its hello names with SetReplica. While there is none (this
// node holds no backup copy of that shard, or is its primary) a stream is
// refused with FAILED_PRECONDITION; a shard the cluster does not have
// (outside [0, shards)) with INVALID_ARGUMENT. The same holds for
// FetchCheckpoint and the source SetSource gives each shard. GetShardStats,
// which nodes ask each other for the stats of the shards they are the
// primaries of, goes to the handler SetStatsHandler gives.
//
// Each stream runs on a gRPC thread of the synchronous API for its whole
// life (one per primary shipping here), reading, applying and answering
// in turn: the order of the log is the order of the stream. A second
// thread per stream syncs what it applied and answers again, so that
// applying the next request does not wait for the fsync.
//
// Every call is first judged by the caller check, if any: in a cluster
// that speaks TLS, only the other nodes may call (api::PeerCertificates).
//
// Thread-safe.
class ReplicationService {
 public:
  // Judges a call before it does anything: OK lets it in; any other status
  // ends it with that status (the check logs and counts refusals). Called
  // on gRPC threads, any number at once.
  using CallerCheck =
      std::function<absl::Status(const grpc::ServerContextBase& context)>;

  // Serves shards 0 to shards - 1. `check` may be empty: every caller is
  // let in (a test, or --insecure_peers). A checkpoint is sent to one
  // caller at a time per shard, and for `checkpoint_time_limit` at most.
  explicit ReplicationService(
      int shards, CallerCheck check = nullptr,
      absl::Duration checkpoint_time_limit = absl::Hours(1));
  ~ReplicationService();
  ReplicationService(const ReplicationService&) = delete;
  ReplicationService& operator=(const ReplicationService&) = delete;

  // The copy of `shard` streams apply to; nullptr for none (streams of the
  // shard open now end at their next request). `replica` must outlive its
  // use: call SetReplica(shard, nullptr) before destroying it, which waits
  // until no stream uses it. REQUIRES: 0 <= shard < shards.
  void SetReplica(int shard, Replica* replica);

  // The primary's store of `shard` FetchCheckpoint copies (it checkpoints
  // into a new directory under `scratch_dir`, streams it, and removes it);
  // nullptr while this node is not the shard's primary. As SetReplica,
  // waits until no call uses the old one.
  void SetSource(int shard, ReplicatedStore* store,
                 const std::string& scratch_dir);

  // What runs when a primary says the copy of `shard` must be rebuilt (a
  // request with `rebuild` set); on the stream's thread, so it must not
  // block. May be empty. Set before the shard's first SetReplica.
  void SetRebuildHandler(int shard,
                         absl::AnyInvocable<void(std::string why)> handler);

  // Answers GetShardStats: the stats of every topic of `shards`, or why
  // not (the call ends with that status). Called on a gRPC thread, which it
  // may block until the engines answer. Set once, before the service is
  // served; without it the call is UNIMPLEMENTED.
  using StatsHandler = std::function<absl::Status(
      const v1::ShardStatsRequest& request, v1::ShardStatsResponse* response)>;
  void SetStatsHandler(StatsHandler handler);

  // What this node's view of the shard's record says of a primary's hello
  // (`primary` leading `shard` at `epoch`): OK if the record confirms it;
  // otherwise the status the stream ends with, before the epoch is
  // accepted (nothing is written). Without one, every hello is taken.
  using HelloCheck = std::function<absl::Status(int shard, int64_t epoch,
                                                const std::string& primary)>;
  // Whether the node `node` may have a checkpoint of `shard` (`snapshot`:
  // for a cluster snapshot, not a rebuild): OK, or the status the call
  // ends with. Without one, every caller the caller check let in may.
  using FetchCheck = std::function<absl::Status(
      int shard, const std::string& node, bool snapshot)>;
  // Set both before the service is served.
  void SetRecordChecks(HelloCheck hello, FetchCheck fetch);

  // Checkpoints of `shard` FetchCheckpoint sent in full, since the start.
  uint64_t checkpoints_sent(int shard) const;

  // For api::ServerOptions::services.
  grpc::Service* service();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hourglass::replication

#endif  // HOURGLASS_REPLICATION_REPLICATION_SERVICE_H_
