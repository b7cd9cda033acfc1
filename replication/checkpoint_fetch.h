#ifndef HOURGLASS_REPLICATION_CHECKPOINT_FETCH_H_
#define HOURGLASS_REPLICATION_CHECKPOINT_FETCH_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "storage/message_store.h"

namespace grpc {
class Channel;
}  // namespace grpc

namespace hourglass::replication {

// Who asks for a checkpoint, and what for: a primary sends one for a
// rebuild to a replica of the shard only, and for a snapshot to a live
// node of the cluster only (ReplicationService::SetFetchCheck).
struct CheckpointAsker {
  std::string node;  // The asking node's id.
  bool snapshot = false;
};

// Copies the checkpoint of `shard` that the primary at the other end of
// `channel` serves (Replication.FetchCheckpoint) to `asker` into `dir`, a
// new directory (its parent must exist), syncing each file; at most
// `timeout` in all. On error nothing is left at `dir`. Errors:
// ALREADY_EXISTS for an existing `dir`; the primary's (FAILED_PRECONDITION
// from a node that is not the primary, PERMISSION_DENIED for an asker it
// does not serve, UNAVAILABLE while it sends the shard's checkpoint to
// another); UNAVAILABLE for a broken stream or a local I/O error.
absl::StatusOr<storage::CheckpointInfo> FetchCheckpoint(
    std::shared_ptr<grpc::Channel> channel, int shard,
    const CheckpointAsker& asker, const std::string& dir,
    absl::Duration timeout);

}  // namespace hourglass::replication

#endif  // HOURGLASS_REPLICATION_CHECKPOINT_FETCH_H_
