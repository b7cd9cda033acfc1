#include "cmd/hourglassd/cluster_flags.h"

#include <unistd.h>

#include <fstream>
#include <initializer_list>
#include <iterator>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "api/peer_secrets.h"
#include "api/pem.h"
#include "api/server.h"
#include "client/tls.h"
#include "cluster/etcd_client.h"
#include "node/shard_router.h"

// Cluster mode (docs/cluster-guide.md; docs/cluster.md). Without --etcd, none
// of these is used.
ABSL_FLAG(std::string, etcd, "",
          "host:port[,host:port...] of etcd: turns cluster mode on. Default: "
          "none, a single node.");
ABSL_FLAG(std::string, cluster, "hourglass",
          "Cluster mode: the cluster's name, its prefix in etcd.");
ABSL_FLAG(std::string, node_id, "",
          "Cluster mode: this node's id, unique in the cluster (1 to 200 of "
          "[A-Za-z0-9._-]). Default: the host name.");
ABSL_FLAG(std::string, zone, "",
          "Cluster mode: the failure domain this node is in (a rack, a data "
          "centre's zone; 1 to 200 of [A-Za-z0-9._-]). Given to every node, "
          "each shard's replicas are spread over the zones, so that losing "
          "one zone keeps a quorum of each shard when there are as many "
          "zones as copies. Default: none.");
ABSL_FLAG(std::string, advertise, "",
          "Cluster mode: host:port clients and peers reach this node at. "
          "Default: --listen, with the port it bound.");
ABSL_FLAG(int32_t, replication_factor, 3,
          "Cluster mode: copies of each shard (used when the cluster creates "
          "it).");
ABSL_FLAG(int32_t, min_insync, 2,
          "Cluster mode: fewest in-sync copies, the primary's counted, with "
          "which a shard takes writes.");
ABSL_FLAG(absl::Duration, replication_log_keep, absl::Minutes(2),
          "Cluster mode: how long each shard keeps the files of its "
          "write-ahead log once they are flushed, so that a backup further "
          "behind than the 64 MiB of entries a primary keeps in memory "
          "catches up from them instead of being rebuilt from a checkpoint. "
          "Costs disk: about the rate of writes times 1.5 times this. 0 keeps "
          "none, and backups behind a primary's memory are always rebuilt.");
ABSL_FLAG(absl::Duration, lease_ttl, absl::Seconds(3),
          "Cluster mode: a node that cannot renew its etcd lease for this "
          "long is dead to the cluster (whole seconds).");
ABSL_FLAG(std::optional<int32_t>, shards, std::nullopt,
          "Cluster mode: shards of the cluster (1 to 4096), fixed when the "
          "cluster is created (kept in etcd). A topic's shard is the FNV-1a "
          "hash of its name modulo this. Default (none, or empty): the "
          "cluster's count, or 16 for a cluster that does not exist yet; a "
          "node given another count than the cluster's exits, saying which "
          "to give.");
ABSL_FLAG(std::string, tls_peer_ca, "",
          "Cluster mode with --tls_cert: PEM CA certificates that sign the "
          "other nodes' certificates, and only theirs. This node verifies a "
          "peer's server certificate against them (for the host of its "
          "--advertise address, or --tls_peer_server_name) and presents its "
          "own --tls_cert as client certificate; its server accepts client "
          "certificates they sign, and only such callers may use the "
          "Replication service. Required with --tls_cert in cluster mode. "
          "Given the --tls_client_ca file, every client certificate counts "
          "as a node (a WARNING says so).");
ABSL_FLAG(std::string, peer_token_file, "",
          "Cluster mode: a file holding the secret the cluster's nodes share "
          "(32 to 512 printable characters; one a line, at most two, so a "
          "new one can be rolled in: every node sends the first and accepts "
          "either). Only calls carrying it may use the Replication service. "
          "Open to its owner only; reloaded on SIGHUP. One of mutual TLS "
          "(--tls_peer_ca) and this is required; with both, both are "
          "checked.");
ABSL_FLAG(bool, insecure_peers, false,
          "Cluster mode: start with neither mutual TLS between nodes nor "
          "--peer_token_file, so that anyone who reaches a node's port may "
          "replicate into and out of it. For trying a cluster out on one "
          "machine only; a WARNING says so at every start.");
ABSL_FLAG(std::string, tls_peer_server_name, "",
          "Cluster mode with --tls_cert: the name every peer's certificate "
          "must have, when certificates do not name the --advertise "
          "addresses (all nodes share one name). Default: the host of the "
          "peer's --advertise address.");
ABSL_FLAG(std::string, etcd_ca, "",
          "Cluster mode: PEM CA certificates that sign etcd's certificate; "
          "speaks TLS to etcd (as etcdctl's --cacert). Default: plaintext, "
          "unless --etcd_cert is set (then the system's CAs).");
ABSL_FLAG(std::string, etcd_cert, "",
          "Cluster mode: PEM client certificate presented to etcd (as "
          "etcdctl's --cert), for an etcd with --client-cert-auth; with "
          "--etcd_key. Turns TLS to etcd on.");
ABSL_FLAG(std::string, etcd_key, "",
          "Cluster mode: PEM private key of --etcd_cert (as etcdctl's "
          "--key).");

namespace hourglass::hourglassd {

namespace {

// Checks that each non-empty file of `files` (flag, path, PEM kind) is a
// readable PEM file of its kind: api::ReadPem's error, naming the flag.
absl::Status CheckPemFiles(
    std::initializer_list<
        std::tuple<absl::string_view, std::string, absl::string_view>>
        files) {
  for (const auto& [flag, path, kind] : files) {
    if (path.empty()) continue;
    if (absl::StatusOr<std::string> pem = api::ReadPem(flag, path, kind);
        !pem.ok()) {
      return pem.status();
    }
  }
  return absl::OkStatus();
}

// The TLS between nodes that the server's TLS flags and --tls_peer_ca,
// --tls_peer_server_name ask for, checked.
absl::StatusOr<client::TlsOptions> PeerTlsFromFlags(
    const ServerTlsFlags& server) {
  const std::string peer_ca = absl::GetFlag(FLAGS_tls_peer_ca);
  const std::string server_name = absl::GetFlag(FLAGS_tls_peer_server_name);
  if (server.cert.empty() && server.key.empty()) {
    for (const auto& [flag, value] :
         {std::pair{"--tls_peer_ca", peer_ca},
          std::pair{"--tls_peer_server_name", server_name}}) {
      if (!value.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            flag,
            " needs --tls_cert and --tls_key: nodes speak TLS to each "
            "other when their gRPC servers do"));
      }
    }
    return client::TlsOptions{};
  }
  if (server.cert.empty() || server.key.empty()) {
    return absl::InvalidArgumentError(
        "TLS needs both --tls_cert and --tls_key");
  }
  client::TlsOptions tls;
  tls.enabled = true;
  tls.ca_file = peer_ca;
  if (tls.ca_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls_cert in cluster mode needs --tls_peer_ca: the CAs that sign "
        "the nodes' certificates, and only theirs (not --tls_client_ca's: "
        "every client certificate would count as a node, and could "
        "replicate into and out of it)");
  }
  tls.cert_file = server.cert;
  tls.key_file = server.key;
  tls.server_name = server_name;
  if (absl::Status files =
          CheckPemFiles({{"--tls_peer_ca", tls.ca_file, "CERTIFICATE"},
                         {"--tls_cert", tls.cert_file, "CERTIFICATE"},
                         {"--tls_key", tls.key_file, "PRIVATE KEY"}});
      !files.ok()) {
    return files;
  }
  return tls;
}

// The TLS to etcd that --etcd_ca, --etcd_cert and --etcd_key ask for,
// checked.
absl::StatusOr<client::TlsOptions> EtcdTlsFromFlags() {
  client::TlsOptions tls;
  tls.ca_file = absl::GetFlag(FLAGS_etcd_ca);
  tls.cert_file = absl::GetFlag(FLAGS_etcd_cert);
  tls.key_file = absl::GetFlag(FLAGS_etcd_key);
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(tls.cert_file.empty() ? "--etcd_key" : "--etcd_cert",
                     ": --etcd_cert and --etcd_key go together"));
  }
  if (absl::Status files =
          CheckPemFiles({{"--etcd_ca", tls.ca_file, "CERTIFICATE"},
                         {"--etcd_cert", tls.cert_file, "CERTIFICATE"},
                         {"--etcd_key", tls.key_file, "PRIVATE KEY"}});
      !files.ok()) {
    return files;
  }
  return tls;
}

// Whether the files at `a` and `b` hold the same bytes (false if either
// cannot be read).
bool SameFileContents(const std::string& a, const std::string& b) {
  std::ifstream fa(a, std::ios::binary);
  std::ifstream fb(b, std::ios::binary);
  if (!fa || !fb) return false;
  const std::string ca((std::istreambuf_iterator<char>(fa)),
                       std::istreambuf_iterator<char>());
  const std::string cb((std::istreambuf_iterator<char>(fb)),
                       std::istreambuf_iterator<char>());
  return ca == cb;
}

}  // namespace

std::string EtcdFlag() { return absl::GetFlag(FLAGS_etcd); }

std::optional<int> ShardsFlag() { return absl::GetFlag(FLAGS_shards); }

absl::Status CheckNoClusterTlsFlags() {
  if (absl::GetFlag(FLAGS_insecure_peers)) {
    return absl::InvalidArgumentError(
        "--insecure_peers is for cluster mode, which --etcd turns on; a "
        "single node has no peers and no etcd");
  }
  for (const auto& [flag, value] :
       {std::pair{"--tls_peer_ca", absl::GetFlag(FLAGS_tls_peer_ca)},
        std::pair{"--peer_token_file", absl::GetFlag(FLAGS_peer_token_file)},
        std::pair{"--tls_peer_server_name",
                  absl::GetFlag(FLAGS_tls_peer_server_name)},
        std::pair{"--etcd_ca", absl::GetFlag(FLAGS_etcd_ca)},
        std::pair{"--etcd_cert", absl::GetFlag(FLAGS_etcd_cert)},
        std::pair{"--etcd_key", absl::GetFlag(FLAGS_etcd_key)}}) {
    if (!value.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag,
          " is for cluster mode, which --etcd turns on; a single node "
          "has no peers and no etcd"));
    }
  }
  return absl::OkStatus();
}

std::string TlsSummary(const node::ClusterNodeOptions& options) {
  std::string peers = "plaintext";
  if (client::UsesTls(options.peer_tls)) {
    peers = absl::StrCat("mutual TLS verified by ", options.peer_tls.ca_file);
    if (!options.peer_tls.server_name.empty()) {
      absl::StrAppend(&peers, " as \"", options.peer_tls.server_name, "\"");
    }
  }
  std::string etcd = "plaintext";
  if (client::UsesTls(options.etcd_tls)) {
    etcd = absl::StrCat(
        "TLS",
        options.etcd_tls.ca_file.empty()
            ? " (system CAs)"
            : absl::StrCat(" verified by ", options.etcd_tls.ca_file),
        options.etcd_tls.cert_file.empty() ? "" : " with a client certificate");
  }
  return absl::StrCat("peers over ", peers, "; etcd over ", etcd);
}

absl::StatusOr<node::ClusterNodeOptions> ClusterOptionsFromFlags(
    const ServerTlsFlags& server_tls) {
  absl::StatusOr<std::vector<std::string>> endpoints =
      cluster::ParseEtcdEndpoints(absl::GetFlag(FLAGS_etcd));
  if (!endpoints.ok()) return endpoints.status();
  node::ClusterNodeOptions options;
  absl::StatusOr<client::TlsOptions> peer_tls = PeerTlsFromFlags(server_tls);
  if (!peer_tls.ok()) return peer_tls.status();
  options.peer_tls = *std::move(peer_tls);
  absl::StatusOr<client::TlsOptions> etcd_tls = EtcdTlsFromFlags();
  if (!etcd_tls.ok()) return etcd_tls.status();
  options.etcd_tls = *std::move(etcd_tls);
  options.etcd = *std::move(endpoints);
  options.peer_token_file = absl::GetFlag(FLAGS_peer_token_file);
  options.insecure_peers = absl::GetFlag(FLAGS_insecure_peers);
  // Checked again by ClusterNode::Open; here, before waiting for etcd.
  if (!options.peer_token_file.empty()) {
    if (absl::Status secrets =
            api::PeerSecrets::FromFile(options.peer_token_file).status();
        !secrets.ok()) {
      return secrets;
    }
  }
  if (!client::UsesTls(options.peer_tls) && options.peer_token_file.empty() &&
      !options.insecure_peers) {
    return absl::InvalidArgumentError(
        "cluster mode needs its nodes to prove who they are to one another, "
        "or anyone who reaches a node's port could replicate into and out "
        "of it: give --tls_cert, --tls_key and --tls_peer_ca (mutual TLS "
        "with the nodes' own CA), or --peer_token_file (a secret the nodes "
        "share); --insecure_peers starts without either");
  }
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
  options.zone = absl::GetFlag(FLAGS_zone);
  const absl::Duration lease_ttl = absl::GetFlag(FLAGS_lease_ttl);
  if (lease_ttl < absl::Seconds(1) || lease_ttl > absl::Minutes(5)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--lease_ttl must be between 1s and 5m, not ",
                     absl::FormatDuration(lease_ttl)));
  }
  options.lease_ttl = lease_ttl;
  if (const std::optional<int32_t> shards = ShardsFlag();
      shards.has_value() &&
      (*shards < 1 || *shards > node::ShardRouter::kMaxShards)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--shards must be between 1 and ",
                     node::ShardRouter::kMaxShards, ", not ", *shards));
  }
  options.replication_factor = absl::GetFlag(FLAGS_replication_factor);
  if (options.replication_factor < 1 || options.replication_factor > 9) {
    return absl::InvalidArgumentError(
        absl::StrCat("--replication_factor must be between 1 and 9, not ",
                     options.replication_factor));
  }
  options.min_insync = absl::GetFlag(FLAGS_min_insync);
  options.replication_log_keep = absl::GetFlag(FLAGS_replication_log_keep);
  if (options.replication_log_keep < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--replication_log_keep must not be negative, not ",
                     absl::FormatDuration(options.replication_log_keep)));
  }
  return options;
}

std::vector<std::string> ClusterFlagWarnings(
    const ServerTlsFlags& server_tls, const node::ClusterNodeOptions& options) {
  std::vector<std::string> warnings;
  if (!client::UsesTls(options.etcd_tls)) {
    for (const std::string& endpoint : options.etcd) {
      if (api::IsLoopbackAddress(endpoint)) continue;
      warnings.push_back(absl::StrCat(
          "--etcd=", endpoint,
          " is not loopback and TLS to etcd is off (--etcd_ca): the cluster's "
          "records and leases travel in plain text, and whoever sits between "
          "may change who leads each shard"));
      break;
    }
  }
  if (options.insecure_peers && !client::UsesTls(options.peer_tls) &&
      options.peer_token_file.empty()) {
    warnings.push_back(
        "--insecure_peers: the nodes do not prove who they are to one "
        "another, so anyone who reaches a node's port can replicate into "
        "and out of it (write into its copies, read every message); give "
        "--peer_token_file or mutual TLS (--tls_peer_ca) outside a test");
  }
  if (client::UsesTls(options.peer_tls) && !server_tls.client_ca.empty() &&
      SameFileContents(options.peer_tls.ca_file, server_tls.client_ca)) {
    warnings.push_back(absl::StrCat(
        "--tls_peer_ca is the --tls_client_ca (", options.peer_tls.ca_file,
        "): every client certificate counts as a node and may replicate "
        "into and out of this node; give the nodes a CA of their own"));
  }
  return warnings;
}

std::string AdvertiseAddress(const std::string& listen, int port) {
  if (std::string advertise = absl::GetFlag(FLAGS_advertise);
      !advertise.empty()) {
    return advertise;
  }
  return absl::StrCat(listen.substr(0, listen.rfind(':')), ":", port);
}

}  // namespace hourglass::hourglassd
