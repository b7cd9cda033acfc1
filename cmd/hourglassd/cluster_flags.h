#ifndef HOURGLASS_CMD_HOURGLASSD_CLUSTER_FLAGS_H_
#define HOURGLASS_CMD_HOURGLASSD_CLUSTER_FLAGS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "node/cluster_node.h"

namespace hourglass::hourglassd {

// hourglassd's cluster-mode flags (docs/flags.md, docs/cluster-guide.md).
// Without --etcd none of them is used.

// --etcd: empty for a single node.
std::string EtcdFlag();

// --shards: nullopt when it is not given (or given empty, as
// deploy/hourglassd.flags does): the node then takes the cluster's count,
// or creates the cluster with cluster::kDefaultShardCount. Checked by
// ClusterOptionsFromFlags.
std::optional<int> ShardsFlag();

// The gRPC server's TLS flags (main.cc's), which cluster mode's TLS
// between nodes follows.
struct ServerTlsFlags {
  std::string cert;       // --tls_cert
  std::string key;        // --tls_key
  std::string client_ca;  // --tls_client_ca
};

// The cluster node's options that its flags give, checked: --etcd,
// --cluster, --node_id (default: the host name), --lease_ttl (1s to 5m),
// --replication_factor (1 to 9), --min_insync; TLS between nodes
// (node::ClusterNodeOptions::peer_tls) when `server_tls` has a certificate:
// verified by --tls_peer_ca (required), presenting --tls_cert and
// --tls_key, with --tls_peer_server_name; --peer_token_file and
// --insecure_peers (node::ClusterNode::Open checks that the nodes
// authenticate one another one way or the other); TLS to
// etcd with --etcd_ca, --etcd_cert and --etcd_key (the last two together).
// Every TLS file is read now. INVALID_ARGUMENT naming the flag and its
// value otherwise (e.g. "--tls_peer_ca needs --tls_cert and --tls_key:
// ..."), NOT_FOUND `cannot read --etcd_ca "x.pem": ...` for a file that
// cannot be read. --shards, if given, is checked (1 to 4096) but not set:
// the shard count is agreed with etcd (AgreeOnShardCount, cluster_join.h).
// The caller sets the rest (the shard count, the data dir, the store's
// options, the engine, the clock, the authorizer).
absl::StatusOr<node::ClusterNodeOptions> ClusterOptionsFromFlags(
    const ServerTlsFlags& server_tls);

// What a node started with these options should warn about at every start:
// plaintext to an etcd off loopback; --insecure_peers without other peer
// authentication; a --tls_peer_ca with the same contents as
// --tls_client_ca.
std::vector<std::string> ClusterFlagWarnings(
    const ServerTlsFlags& server_tls, const node::ClusterNodeOptions& options);

// For a single node (no --etcd): INVALID_ARGUMENT naming the first of
// cluster mode's peer and TLS flags that is set (--insecure_peers,
// --tls_peer_ca, --peer_token_file, --tls_peer_server_name, --etcd_ca,
// --etcd_cert, --etcd_key), which would otherwise be ignored.
absl::Status CheckNoClusterTlsFlags();

// How the node speaks to its peers and to etcd, for the start-up log:
// "peers over mutual TLS verified by ca.pem; etcd over plaintext", "peers
// over plaintext; etcd over TLS verified by ca.pem with a client
// certificate".
std::string TlsSummary(const node::ClusterNodeOptions& options);

// --advertise, or else `listen`'s host with `port` (the port it bound).
std::string AdvertiseAddress(const std::string& listen, int port);

}  // namespace hourglass::hourglassd

#endif  // HOURGLASS_CMD_HOURGLASSD_CLUSTER_FLAGS_H_
