// The cluster subcommand: the nodes, shards, primaries, epochs, in-sync
// sets and replication lag of a cluster (hourglassd --etcd).

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cmd/common/connection.h"
#include "cmd/common/output.h"
#include "cmd/hourglass/command.h"
#include "hourglass/v1/cluster.pb.h"

namespace hourglass::cli {
namespace {

// The map `connection`'s node answers, with a clear error for a single
// node.
absl::StatusOr<hourglass::v1::ClusterMap> ReadMap(Connection& connection) {
  absl::StatusOr<hourglass::v1::ClusterMap> map =
      connection.admin().GetClusterMap();
  if (map.status().code() == absl::StatusCode::kUnimplemented) {
    return absl::FailedPreconditionError(absl::StrCat(
        connection.address(),
        " runs as a single node (hourglassd without --etcd): there is no "
        "cluster to show"));
  }
  if (!map.ok()) return connection.Check(map.status());
  return map;
}

// The replication lag of each shard comes from its primary: asks the
// primaries `map` names that are not the node that answered, and puts
// their shard entries in `map`. A primary that does not answer leaves its
// shard without lag.
void AddLagFromPrimaries(const GlobalOptions& globals,
                         hourglass::v1::ClusterMap& map) {
  for (hourglass::v1::ShardInfo& shard : *map.mutable_shards()) {
    if (shard.primary() == map.node() || shard.lag_size() > 0) continue;
    std::string address;
    for (const auto& node : map.nodes()) {
      if (node.id() == shard.primary()) address = node.address();
    }
    if (address.empty()) continue;
    GlobalOptions at_primary = globals;
    at_primary.addr = address;
    absl::StatusOr<std::unique_ptr<Connection>> connection =
        Connection::Open(at_primary);
    if (!connection.ok()) continue;
    absl::StatusOr<hourglass::v1::ClusterMap> from_primary =
        (*connection)->admin().GetClusterMap();
    if (!from_primary.ok()) continue;
    for (const hourglass::v1::ShardInfo& s : from_primary->shards()) {
      if (s.shard() == shard.shard() && s.epoch() == shard.epoch()) {
        shard.set_last_index(s.last_index());
        *shard.mutable_lag() = s.lag();
      }
    }
  }
}

absl::Status ShowCluster(const GlobalOptions& globals) {
  absl::StatusOr<std::unique_ptr<Connection>> connection =
      Connection::Open(globals);
  if (!connection.ok()) return connection.status();
  absl::StatusOr<hourglass::v1::ClusterMap> map = ReadMap(**connection);
  if (!map.ok()) return map.status();
  AddLagFromPrimaries(globals, *map);
  if (globals.json) return PrintJson(*map);

  std::cout << "cluster " << map->cluster() << ": " << map->nodes_size()
            << " live nodes, " << map->shards_size() << " of "
            << map->shard_count() << " shards created, controller "
            << (map->controller().empty() ? "(none)" : map->controller())
            << "; as node " << map->node() << " sees it\n\n";
  // The ZONE column only when nodes have one (hourglassd --zone).
  bool zones = false;
  for (const auto& node : map->nodes()) zones |= !node.zone().empty();
  Table nodes(zones ? std::vector<std::string>{"NODE", "ADDRESS", "ZONE",
                                               "ROLES"}
                    : std::vector<std::string>{"NODE", "ADDRESS", "ROLES"});
  for (const auto& node : map->nodes()) {
    std::vector<std::string> roles;
    if (node.id() == map->controller()) roles.push_back("controller");
    for (const std::string& drained : map->draining()) {
      if (drained == node.id()) roles.push_back("draining");
    }
    for (const auto& shard : map->shards()) {
      if (shard.primary() == node.id()) {
        roles.push_back(absl::StrCat("primary of ", shard.shard()));
      } else {
        for (const std::string& r : shard.replicas()) {
          if (r == node.id()) {
            roles.push_back(absl::StrCat("backup of ", shard.shard()));
          }
        }
      }
    }
    std::vector<std::string> row = {node.id(), node.address()};
    if (zones) row.push_back(node.zone().empty() ? "-" : node.zone());
    row.push_back(roles.empty() ? "-" : absl::StrJoin(roles, ", "));
    nodes.AddRow(std::move(row));
  }
  std::cout << nodes.Render() << "\n";
  if (map->shards_size() == 0) {
    std::cout << "no shard yet: the controller creates them once "
                 "--replication_factor nodes have joined"
              << std::endl;
    return absl::OkStatus();
  }
  Table shards({"SHARD", "EPOCH", "PRIMARY", "REPLICAS", "IN_SYNC",
                "LAST_ENTRY"});
  shards.AlignRight(0);
  shards.AlignRight(1);
  shards.AlignRight(5);
  Table lag({"SHARD", "BACKUP", "APPLIED", "DURABLE", "BEHIND", "HEARD",
             "IN_SYNC"});
  for (size_t column : {0, 2, 3, 4, 5}) lag.AlignRight(column);
  for (const auto& shard : map->shards()) {
    shards.AddRow({absl::StrCat(shard.shard()), absl::StrCat(shard.epoch()),
                   shard.primary(), absl::StrJoin(shard.replicas(), ","),
                   absl::StrJoin(shard.isr(), ","),
                   shard.lag_size() > 0 || shard.primary() == map->node()
                       ? absl::StrCat(shard.last_index())
                       : "?"});
    for (const auto& backup : shard.lag()) {
      lag.AddRow({absl::StrCat(shard.shard()), backup.node(),
                  absl::StrCat(backup.applied_index()),
                  absl::StrCat(backup.durable_index()),
                  absl::StrCat(backup.lag_entries()),
                  backup.has_seconds_since_heard()
                      ? absl::StrFormat("%.1fs ago",
                                        backup.seconds_since_heard())
                      : "never",
                  backup.in_sync() ? "yes" : "no"});
    }
  }
  std::cout << shards.Render();
  if (!lag.empty()) std::cout << "\n" << lag.Render();
  std::cout << std::flush;
  return absl::OkStatus();
}

// `cluster drain`: starts (or with --undo stops) draining `node`, then says
// what the controller will do, from the map.
absl::Status DrainNode(const GlobalOptions& globals, const std::string& node,
                       bool undo) {
  absl::StatusOr<std::unique_ptr<Connection>> connection =
      Connection::Open(globals);
  if (!connection.ok()) return connection.status();
  absl::StatusOr<hourglass::v1::ClusterMap> map = ReadMap(**connection);
  if (!map.ok()) return map.status();
  if (absl::Status s = (*connection)->admin().DrainNode(node, undo); !s.ok()) {
    return (*connection)->Check(s);
  }
  if (undo) {
    std::cout << "node " << node << " is no longer drained" << std::endl;
    return absl::OkStatus();
  }
  int replicas = 0, leads = 0;
  for (const auto& shard : map->shards()) {
    for (const std::string& r : shard.replicas()) replicas += r == node;
    leads += shard.primary() == node;
  }
  std::cout << "node " << node << " is being drained: the controller moves "
            << "its replicas (" << replicas << " now, primary of " << leads
            << ") to other nodes, one shard at a time, handing its shards "
            << "over first; `hourglass cluster` shows the progress"
            << std::endl;
  return absl::OkStatus();
}

}  // namespace

void AddClusterCommand(Registry& registry) {
  CLI::App* cluster = registry.app().add_subcommand(
      "cluster", "Show a cluster's nodes, shards, primaries, epochs, in-sync "
                 "sets and replication lag");
  cluster->footer(R"(
Any node of the cluster answers (--addr); the lag of each backup comes from
its shard's primary, which this command asks too. BEHIND is how many log
entries of the primary the backup has not applied; HEARD when the primary
last heard from it. A backup out of IN_SYNC is catching up (or cannot: see
the primary's log). A broker without --etcd has no cluster.

Examples:
  hourglass --addr=10.0.0.2:7070 cluster
  hourglass --json cluster)");
  CLI::App* drain = cluster->add_subcommand(
      "drain", "Move every replica off a node, before it is removed");
  struct DrainOptions {
    std::string node;
    bool undo = false;
  };
  auto options = std::make_shared<DrainOptions>();
  drain->add_option("--node", options->node, "The node's id (--node_id)")
      ->required();
  drain->add_flag("--undo", options->undo, "Stop draining it");
  drain->footer(R"(
The controller first hands each shard the node leads over to an in-sync
backup (the node stops writing, the backup takes every entry and becomes
primary at the next epoch; clients retry for a few milliseconds), then adds
a copy of each shard the node holds on another node, waits until it is in
sync, and drops the node's copy: one shard at a time, so a shard's in-sync
set never shrinks. The node can go once `hourglass cluster` shows it holds
nothing. The drain is kept in etcd until --undo, across restarts.

Examples:
  hourglass --addr=10.0.0.2:7070 cluster drain --node=d
  hourglass cluster drain --node=d --undo)");
  registry.SetAction(cluster, [&globals = registry.globals(), drain, options] {
    if (drain->parsed())
      return DrainNode(globals, options->node, options->undo);
    return ShowCluster(globals);
  });
}

}  // namespace hourglass::cli
