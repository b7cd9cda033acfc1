#ifndef HOURGLASS_NODE_CLUSTER_SNAPSHOT_H_
#define HOURGLASS_NODE_CLUSTER_SNAPSHOT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "broker/broker.h"
#include "node/shard_router.h"

namespace hourglass::node {

class PrimaryGate;

// A snapshot of a cluster of several shards, and its restore as a new
// cluster.
//
// Layout: a directory holding, for every shard n of the cluster,
// `shards/<n>`, a checkpoint of shard n's store (the layout of a node's
// --data_dir), and the file `CLUSTER_SNAPSHOT`, written last, which says
// how many shards there are:
//
//   hourglass cluster snapshot
//   shards 16
//
// A cluster of one shard is snapshot as a single node is: its store's
// checkpoint, which a single node can open too.

// Where shard `shard`'s store lives under `dir` (a node's data dir, or a
// cluster snapshot).
std::string ShardDir(const std::string& dir, int shard);

// Writes a cluster snapshot of every shard into `dir` (absolute, new; its
// parent must exist), one shard after another: through the shard's gate
// (its engine's checkpoint) while this node is its primary, and otherwise
// from its primary, the one the gate's refusal names, through `remote`
// (FetchCheckpoint, as a rebuild copies it). Each shard holds every write
// that completed before the call began; the shards are not one cut in time
// (nothing is atomic across shards). `done` runs once, on any thread, with
// the files and bytes of all shards summed and `shards` set. Errors, after
// which nothing is left at `dir`: INVALID_ARGUMENT for a relative `dir`;
// ALREADY_EXISTS; NOT_FOUND for a missing parent; the refusal of a shard
// whose primary is not known (UNAVAILABLE, during a failover); a shard's
// copy failing (its error, naming the shard); UNAVAILABLE for a local I/O
// error.
// REQUIRES: gates.size() >= 2; the gates and `remote` outlive the call.
void SnapshotShards(
    const std::vector<PrimaryGate*>& gates, ShardRouter::Remote* remote,
    std::string dir,
    broker::Broker::Callback<absl::StatusOr<broker::SnapshotInfo>> done);

// What RestoreClusterSnapshot restored.
struct RestoredCluster {
  // Per shard, the newest epoch its copy holds writes of or accepted
  // (0 for a single node's store): the restored cluster starts each shard
  // at the epoch after it, which its copy accepts.
  std::vector<int64_t> epochs;
  uint64_t bytes = 0;
};

// Copies the snapshot at `snapshot` into `data_dir` (missing or empty) as
// a node's copies of every shard: a cluster snapshot's shards to
// ShardDir(data_dir, n); a snapshot of one store (a single node's, or a
// cluster of one shard's) as shard 0 of a cluster of one shard. With
// `shards` other than 0, the snapshot must hold that many. Errors, after
// which `data_dir` holds nothing it did not:
//   INVALID_ARGUMENT     the snapshot holds another number of shards than
//                        `shards` (nothing is copied).
//   NOT_FOUND            `snapshot` is missing, or neither layout.
//   DATA_LOSS            a cluster snapshot's manifest is unreadable, or a
//                        shard it names is missing.
//   FAILED_PRECONDITION  `data_dir` exists and is not an empty directory.
//   UNAVAILABLE          an I/O error; a copy that does not open.
absl::StatusOr<RestoredCluster> RestoreClusterSnapshot(
    const std::string& snapshot, const std::string& data_dir, int shards = 0);

}  // namespace hourglass::node

#endif  // HOURGLASS_NODE_CLUSTER_SNAPSHOT_H_
