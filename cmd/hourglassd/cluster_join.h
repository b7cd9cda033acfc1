#ifndef HOURGLASS_CMD_HOURGLASSD_CLUSTER_JOIN_H_
#define HOURGLASS_CMD_HOURGLASSD_CLUSTER_JOIN_H_

#include <signal.h>

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "node/cluster_node.h"

namespace hourglass::hourglassd {

// Joins `node`'s cluster as `advertise` (ClusterNode::Join; `on_lost` runs
// if the node later loses its lease). While etcd does not answer (a node
// started before etcd, or during an outage of it) it tries again, the waits
// growing from 0.5 s to 5 s, each failure logged; a SIGTERM or SIGINT among
// `signals` (blocked by the caller) ends the wait and is returned, for the
// caller to shut down as usual. Returns nullopt once joined; errors other
// than etcd's silence (another live node with this --node_id, bad flags)
// as Join gives them. A SIGHUP meanwhile is taken and ignored.
absl::StatusOr<std::optional<int>> JoinCluster(
    node::ClusterNode& node, const std::string& advertise,
    const sigset_t& signals, const std::function<void()>& on_lost);

}  // namespace hourglass::hourglassd

#endif  // HOURGLASS_CMD_HOURGLASSD_CLUSTER_JOIN_H_
