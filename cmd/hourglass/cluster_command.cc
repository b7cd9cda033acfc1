// The cluster subcommand: the nodes, shards, primaries, epochs, in-sync
// sets and replication lag of a cluster (hourglassd --etcd); `drain` and
// `move`, which change where its shards live.

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cmd/common/connection.h"
#include "cmd/common/duration.h"
#include "cmd/common/errors.h"
#include "cmd/common/output.h"
#include "cmd/hourglass/command.h"
#include "hourglass/v1/cluster.pb.h"

namespace hourglass::cli {
namespace {

// Shard numbers in ascending order, comma-separated: "0,3,6".
std::string ShardList(std::vector<int64_t> shards) {
  std::sort(shards.begin(), shards.end());
  return absl::StrJoin(shards, ",");
}

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

// Where the move of shard `shard` to `node` (a pin) stands in `map`, as a
// phrase: "done, d leads it at epoch 2 (...)", "d catches up (...)".
std::string PinProgress(const hourglass::v1::ClusterMap& map, uint32_t shard,
                        const std::string& node) {
  bool alive = false, draining = false;
  for (const auto& n : map.nodes()) alive |= n.id() == node;
  for (const std::string& d : map.draining()) draining |= d == node;
  const hourglass::v1::ShardInfo* info = nullptr;
  for (const auto& s : map.shards()) {
    if (s.shard() == shard) info = &s;
  }
  if (!alive) {
    return absl::StrCat(node, " is not alive: the shard is served where it ",
                        "failed over to, and moves back once ", node,
                        " is alive and in sync");
  }
  if (draining) {
    return absl::StrCat(node, " is being drained: the move waits until the ",
                        "drain is undone");
  }
  if (info == nullptr) return "the shard is not created yet";
  const std::string state =
      absl::StrCat("replicas ", absl::StrJoin(info->replicas(), ","),
                   ", in sync ", absl::StrJoin(info->isr(), ","));
  auto has = [node](const auto& list) {
    return std::find(list.begin(), list.end(), node) != list.end();
  };
  if (info->primary() == node) {
    return absl::StrCat("done, ", node, " leads it at epoch ", info->epoch(),
                        " (", state, ")");
  }
  if (info->transfer_to() == node) {
    return absl::StrCat(info->primary(), " hands it over to ", node, " (",
                        state, ")");
  }
  if (has(info->isr())) {
    return absl::StrCat(node, " is in sync; the lead moves to it next (", state,
                        ")");
  }
  if (has(info->replicas())) {
    return absl::StrCat(node, " catches up with primary ", info->primary(),
                        " (", state, ")");
  }
  return absl::StrCat(node, " joins the replicas next (", state, ")");
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
  Table nodes(zones
                  ? std::vector<std::string>{"NODE", "ADDRESS", "ZONE", "ROLES"}
                  : std::vector<std::string>{"NODE", "ADDRESS", "ROLES"});
  for (const auto& node : map->nodes()) {
    std::vector<std::string> roles;
    if (node.id() == map->controller()) roles.push_back("controller");
    for (const std::string& drained : map->draining()) {
      if (drained == node.id()) roles.push_back("draining");
    }
    std::vector<int64_t> leads, backs;
    for (const auto& shard : map->shards()) {
      if (shard.primary() == node.id()) {
        leads.push_back(shard.shard());
      } else if (std::find(shard.replicas().begin(), shard.replicas().end(),
                           node.id()) != shard.replicas().end()) {
        backs.push_back(shard.shard());
      }
    }
    if (!leads.empty()) roles.push_back("primary of " + ShardList(leads));
    if (!backs.empty()) roles.push_back("backup of " + ShardList(backs));
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
  Table shards({"SHARD", "EPOCH", "PRIMARY", "REPLICAS", "IN_SYNC", "ELIGIBLE",
                "LAST_ENTRY"});
  shards.AlignRight(0);
  shards.AlignRight(1);
  shards.AlignRight(6);
  Table lag(
      {"SHARD", "BACKUP", "APPLIED", "DURABLE", "BEHIND", "HEARD", "IN_SYNC"});
  for (size_t column : {0, 2, 3, 4, 5}) lag.AlignRight(column);
  for (const auto& shard : map->shards()) {
    shards.AddRow(
        {absl::StrCat(shard.shard()), absl::StrCat(shard.epoch()),
         shard.primary().empty() ? "(none)" : shard.primary(),
         absl::StrJoin(shard.replicas(), ","), absl::StrJoin(shard.isr(), ","),
         shard.eligible().empty() ? "-" : absl::StrJoin(shard.eligible(), ","),
         shard.lag_size() > 0 || shard.primary() == map->node()
             ? absl::StrCat(shard.last_index())
             : "?"});
    for (const auto& backup : shard.lag()) {
      lag.AddRow(
          {absl::StrCat(shard.shard()), backup.node(),
           absl::StrCat(backup.applied_index()),
           absl::StrCat(backup.durable_index()),
           absl::StrCat(backup.lag_entries()),
           backup.has_seconds_since_heard()
               ? absl::StrFormat("%.1fs ago", backup.seconds_since_heard())
               : "never",
           backup.in_sync() ? "yes" : "no"});
    }
  }
  std::cout << shards.Render();
  if (!lag.empty()) std::cout << "\n" << lag.Render();
  if (map->pins_size() > 0) {
    std::cout << "\nshards moved (hourglass cluster move):\n";
    for (const auto& pin : map->pins()) {
      std::cout << "  shard " << pin.shard() << " to " << pin.node() << ": "
                << PinProgress(*map, pin.shard(), pin.node()) << "\n";
    }
  }
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

struct MoveOptions {
  int shard = -1;
  std::string to;
  bool undo = false;
  std::string wait;
};

// `cluster move`: pins (or with --undo unpins) a shard, says what the
// controller will do and, with --wait, follows the move until the node
// leads the shard, printing each stage.
absl::Status MoveShard(const GlobalOptions& globals,
                       const MoveOptions& options) {
  std::optional<absl::Duration> wait;
  if (!options.wait.empty()) {
    if (options.undo) return UsageError("--wait", "not with --undo");
    absl::StatusOr<absl::Duration> parsed = ParseDuration(options.wait);
    if (!parsed.ok()) return UsageError("--wait", parsed.status().message());
    wait = *parsed;
  }
  if (!options.undo && options.to.empty()) {
    return UsageError("--to", "give the node to move the shard to (or --undo)");
  }
  absl::StatusOr<std::unique_ptr<Connection>> connection =
      Connection::Open(globals);
  if (!connection.ok()) return connection.status();
  absl::StatusOr<hourglass::v1::ClusterMap> map = ReadMap(**connection);
  if (!map.ok()) return map.status();
  if (absl::Status s = (*connection)
                           ->admin()
                           .MoveShard(options.shard, options.to, options.undo);
      !s.ok()) {
    return (*connection)->Check(s);
  }
  if (options.undo) {
    std::string was;
    for (const auto& pin : map->pins()) {
      if (static_cast<int>(pin.shard()) == options.shard) was = pin.node();
    }
    std::cout << "shard " << options.shard << " is no longer pinned"
              << (was.empty() ? " (it was not)" : absl::StrCat(" to ", was))
              << ": the controller places it with the others again"
              << std::endl;
    return absl::OkStatus();
  }
  const uint32_t shard = static_cast<uint32_t>(options.shard);
  std::cout << "shard " << shard << " is pinned to " << options.to
            << ": the controller makes " << options.to
            << " its primary and keeps it there; "
            << PinProgress(*map, shard, options.to) << std::endl;
  if (!wait.has_value()) {
    std::cout << "`hourglass cluster` shows the progress (or move again "
                 "with --wait=2m)"
              << std::endl;
    return absl::OkStatus();
  }
  const absl::Time deadline = absl::Now() + *wait;
  std::string said;
  while (true) {
    map = (*connection)->admin().GetClusterMap();
    if (map.ok()) {
      const std::string now = PinProgress(*map, shard, options.to);
      if (now != said) {
        std::cout << "  " << now << std::endl;
        said = now;
      }
      if (absl::StartsWith(now, "done,")) return absl::OkStatus();
    }
    if (absl::Now() >= deadline) break;
    absl::SleepFor(std::min(absl::Milliseconds(250), deadline - absl::Now()));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      options.to, " does not lead shard ", shard, " after ",
      absl::FormatDuration(*wait),
      " (--wait); the move goes on: `hourglass cluster` shows it"));
}

struct RecoverOptions {
  int shard = -1;
  std::string from;
  bool accept_loss = false;
};

// `cluster recover`: says what promoting a copy of a shard with nothing
// safe left may lose and, with --accept-loss, promotes it.
absl::Status RecoverShard(const GlobalOptions& globals,
                          const RecoverOptions& options) {
  absl::StatusOr<std::unique_ptr<Connection>> connection =
      Connection::Open(globals);
  if (!connection.ok()) return connection.status();
  absl::StatusOr<hourglass::v1::RecoverShardResponse> recovery =
      (*connection)
          ->admin()
          .RecoverShard(options.shard, options.from, options.accept_loss);
  if (!recovery.ok()) return (*connection)->Check(recovery.status());
  if (globals.json) return PrintJson(*recovery);
  std::cout << "shard " << options.shard << ": " << options.from
            << "'s copy ends at entry " << recovery->copy_index()
            << " of epoch " << recovery->copy_epoch() << "; "
            << recovery->loss() << std::endl;
  if (!recovery->recovered()) {
    std::cout << "nothing changed: to promote " << options.from
              << "'s copy anyway, run this again with --accept-loss"
              << std::endl;
    return absl::OkStatus();
  }
  std::cout << options.from << " is the primary of shard " << options.shard
            << " at epoch " << recovery->epoch()
            << "; it takes writes once another copy has caught up from it "
               "(`hourglass cluster` shows the in-sync set)"
            << std::endl;
  return absl::OkStatus();
}

}  // namespace

void AddClusterCommand(Registry& registry) {
  CLI::App* cluster = registry.app().add_subcommand(
      "cluster",
      "Show a cluster's nodes, shards, primaries, epochs, in-sync "
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
  CLI::App* move = cluster->add_subcommand(
      "move", "Make a node the primary of a shard, and keep it there");
  auto move_options = std::make_shared<MoveOptions>();
  move->add_option(
          "--shard", move_options->shard,
          "The shard's number, from 0 (`hourglass cluster` lists them)")
      ->required();
  CLI::Option* to =
      move->add_option("--to", move_options->to, "The node's id (--node_id)");
  move->add_flag("--undo", move_options->undo,
                 "Remove the shard's pin: the controller places it again")
      ->excludes(to);
  move->add_option("--wait", move_options->wait,
                   "Follow the move until the node leads the shard, at most "
                   "this long (e.g. 2m); default: do not wait");
  move->footer(R"(
The shard is pinned to the node (kept in etcd, across restarts, until
--undo), and the controller makes the node its primary:
  1. if the node holds no copy of the shard, it joins the shard's replicas:
     its copy is rebuilt from the primary's checkpoint and tails its log;
  2. once it is in sync, one old backup leaves, so the shard keeps its
     replica count (a gone or draining one first, else the one whose
     departure leaves the cluster most balanced; never the primary, never
     the node);
  3. the primary hands the shard over to the node (leader transfer: it stops
     writing, the node takes every entry and leads at the next epoch;
     clients retry for a few milliseconds).
The in-sync set never shrinks during a move, so --min_insync holds. The
rebalancer then keeps the node as the shard's primary and evens the other
shards out around it. If the node dies, the shard fails over as usual and
moves back once the node is alive and in sync again. A drained node takes
no shard: a pin to it waits until the drain is undone (and a node being
drained cannot be moved to).

Examples:
  hourglass cluster move --shard=3 --to=d
  hourglass cluster move --shard=3 --to=d --wait=2m
  hourglass cluster move --shard=3 --undo)");
  CLI::App* recover = cluster->add_subcommand(
      "recover",
      "Promote a named copy of a shard that has nothing safe left, accepting "
      "loss");
  auto recover_options = std::make_shared<RecoverOptions>();
  recover
      ->add_option("--shard", recover_options->shard,
                   "The shard's number, from 0 (`hourglass cluster` lists "
                   "them)")
      ->required();
  recover
      ->add_option("--from", recover_options->from,
                   "The node whose copy becomes the primary (--node_id)")
      ->required();
  recover->add_flag("--accept-loss", recover_options->accept_loss,
                    "Promote it; without, only say what it may lose");
  recover->footer(R"(
For a shard whose primary is gone along with every copy known to hold all
acknowledged writes (the in-sync set, and the eligible copies `hourglass
cluster` lists): the controller then waits for one of them to come back,
since promoting any other copy may lose acknowledged writes. This command
says where the named copy ends and what promoting it may lose (at least the
writes acknowledged past its end that the cluster knows of). With
--accept-loss it promotes the copy at the next epoch, alone in the in-sync
set; the shard takes writes once another copy has caught up from it, and
copies holding what it lacks are rebuilt from it. The node logs the
recovery. Refused while the primary, or a safe copy, is alive.

Examples:
  hourglass cluster recover --shard=3 --from=b
  hourglass cluster recover --shard=3 --from=b --accept-loss)");
  registry.SetAction(cluster, [&globals = registry.globals(), drain, options,
                               move, move_options, recover, recover_options] {
    if (drain->parsed())
      return DrainNode(globals, options->node, options->undo);
    if (move->parsed()) return MoveShard(globals, *move_options);
    if (recover->parsed()) return RecoverShard(globals, *recover_options);
    return ShowCluster(globals);
  });
}

}  // namespace hourglass::cli
