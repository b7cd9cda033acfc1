#ifndef HOURGLASS_CMD_HOURGLASSD_CLUSTER_FLAGS_H_
#define HOURGLASS_CMD_HOURGLASSD_CLUSTER_FLAGS_H_

#include <string>

#include "absl/status/statusor.h"
#include "node/cluster_node.h"

namespace hourglass::hourglassd {

// hourglassd's cluster-mode flags (README "Cluster mode"; the names are
// CLUSTER.md's). Without --etcd none of them is used.

// --etcd: empty for a single node.
std::string EtcdFlag();

// The cluster node's options that its flags give, checked: --etcd,
// --cluster, --node_id (default: the host name), --lease_ttl (1s to 5m),
// --shards, --replication_factor (1 to 9), --min_insync. INVALID_ARGUMENT
// naming the flag and its value otherwise. The caller sets the rest (the
// data dir, the store's options, the engine, the clock, the authorizer).
absl::StatusOr<node::ClusterNodeOptions> ClusterOptionsFromFlags();

// --advertise, or else `listen`'s host with `port` (the port it bound).
std::string AdvertiseAddress(const std::string& listen, int port);

}  // namespace hourglass::hourglassd

#endif  // HOURGLASS_CMD_HOURGLASSD_CLUSTER_FLAGS_H_
