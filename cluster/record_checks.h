#ifndef HOURGLASS_CLUSTER_RECORD_CHECKS_H_
#define HOURGLASS_CLUSTER_RECORD_CHECKS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "cluster/view.h"

namespace hourglass::cluster {

// What a node's view of the cluster says of calls its peers make to its
// Replication service, after they proved they are peers: a peer is trusted
// to be a node, not to say which shard it leads or holds. Pure functions of
// their arguments.

// Whether `view` confirms a primary's hello: `primary` leading `shard` at
// `epoch`. OK if the shard's record says so. Otherwise nothing may be
// written (not even the epoch): UNAVAILABLE while the view has not reached
// `epoch` yet (the record comes within moments of the hello: the primary
// tries again), FAILED_PRECONDITION if the record names another primary at
// `epoch`, or a newer epoch.
absl::Status ConfirmHello(const ClusterView& view, int shard, int64_t epoch,
                          const std::string& primary);

// Whether `node` may have a checkpoint of `shard` (its whole store): for a
// rebuild, only a node the record names as a replica (in the in-sync set
// or not); for a cluster snapshot (`snapshot`), a live node of the cluster.
// PERMISSION_DENIED otherwise, naming the node and the shard.
absl::Status MayFetchCheckpoint(const ClusterView& view, int shard,
                                const std::string& node, bool snapshot);

}  // namespace hourglass::cluster

#endif  // HOURGLASS_CLUSTER_RECORD_CHECKS_H_
