#include "cmd/hourglassd/cluster_flags.h"

#include <unistd.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "cluster/etcd_client.h"

// Cluster mode (CLUSTER.md in the contributors' notes; README "Cluster
// mode"). Without --etcd, none of these is used.
ABSL_FLAG(std::string, etcd, "",
          "host:port[,host:port...] of etcd: turns cluster mode on. Default: "
          "none, a single node.");
ABSL_FLAG(std::string, cluster, "hourglass",
          "Cluster mode: the cluster's name, its prefix in etcd.");
ABSL_FLAG(std::string, node_id, "",
          "Cluster mode: this node's id, unique in the cluster (1 to 200 of "
          "[A-Za-z0-9._-]). Default: the host name.");
ABSL_FLAG(std::string, advertise, "",
          "Cluster mode: host:port clients and peers reach this node at. "
          "Default: --listen, with the port it bound.");
ABSL_FLAG(int32_t, replication_factor, 3,
          "Cluster mode: copies of each shard (used when the cluster creates "
          "it).");
ABSL_FLAG(int32_t, min_insync, 2,
          "Cluster mode: fewest in-sync copies, the primary's counted, with "
          "which a shard takes writes.");
ABSL_FLAG(absl::Duration, lease_ttl, absl::Seconds(3),
          "Cluster mode: a node that cannot renew its etcd lease for this "
          "long is dead to the cluster (whole seconds).");
ABSL_FLAG(int32_t, shards, 1,
          "Cluster mode: shards of a new cluster. This version runs one.");

namespace hourglass::hourglassd {

std::string EtcdFlag() { return absl::GetFlag(FLAGS_etcd); }

absl::StatusOr<node::ClusterNodeOptions> ClusterOptionsFromFlags() {
  absl::StatusOr<std::vector<std::string>> endpoints =
      cluster::ParseEtcdEndpoints(absl::GetFlag(FLAGS_etcd));
  if (!endpoints.ok()) return endpoints.status();
  node::ClusterNodeOptions options;
  options.etcd = *std::move(endpoints);
  options.cluster = absl::GetFlag(FLAGS_cluster);
  options.node_id = absl::GetFlag(FLAGS_node_id);
  if (options.node_id.empty()) {
    char host[256] = {};
    if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') {
      return absl::InvalidArgumentError(
          "--node_id is empty and the host name cannot be read");
    }
    options.node_id = host;
  }
  const absl::Duration lease_ttl = absl::GetFlag(FLAGS_lease_ttl);
  if (lease_ttl < absl::Seconds(1) || lease_ttl > absl::Minutes(5)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--lease_ttl must be between 1s and 5m, not ",
                     absl::FormatDuration(lease_ttl)));
  }
  options.lease_ttl = lease_ttl;
  options.shards = absl::GetFlag(FLAGS_shards);
  options.replication_factor = absl::GetFlag(FLAGS_replication_factor);
  if (options.replication_factor < 1 || options.replication_factor > 9) {
    return absl::InvalidArgumentError(
        absl::StrCat("--replication_factor must be between 1 and 9, not ",
                     options.replication_factor));
  }
  options.min_insync = absl::GetFlag(FLAGS_min_insync);
  return options;
}

std::string AdvertiseAddress(const std::string& listen, int port) {
  if (std::string advertise = absl::GetFlag(FLAGS_advertise);
      !advertise.empty()) {
    return advertise;
  }
  return absl::StrCat(listen.substr(0, listen.rfind(':')), ":", port);
}

}  // namespace hourglass::hourglassd
