#ifndef HOURGLASS_NODE_SHARD_HOST_H_
#define HOURGLASS_NODE_SHARD_HOST_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "broker/clock.h"
#include "broker/engine.h"
#include "cluster/member.h"
#include "cluster/replica_machine.h"
#include "node/node_health.h"
#include "storage/message_store.h"

namespace grpc {
class Channel;
}  // namespace grpc

namespace hourglass::broker {
class RateLimitedLog;
}  // namespace hourglass::broker

namespace hourglass::metrics {
class Registry;
}  // namespace hourglass::metrics

namespace hourglass::replication {
class Replica;
class ReplicatedStore;
class ReplicationService;
class Shipper;
}  // namespace hourglass::replication

namespace hourglass::node {

class PrimaryGate;

// Where a copy being removed goes first (ShardHost renames its store's
// directory there, then deletes it): what is left there after a crash is
// deleted at start.
std::string RemovedCopyDir(const std::string& store_dir);

struct ShardHostOptions {
  int shard = 0;
  // How many shards the cluster has (refusals name it). Default: 1.
  int shard_count = 1;
  // This node's id (--node_id).
  std::string node_id;
  // --min_insync.
  int min_insync = 2;
  // An in-sync backup that is behind and has not answered for this long
  // leaves the in-sync set (writes stop waiting for it). Default: 5 s.
  absl::Duration lag_timeout = absl::Seconds(5);
  // How long a write waits for the in-sync backups before this primary
  // gives up on its epoch (replication::ReplicatedStoreOptions). Must be
  // longer than lag_timeout. Default: 15 s.
  absl::Duration ack_timeout = absl::Seconds(15);
  // The engine opened while this node is the primary.
  broker::Engine::Options engine;
  broker::Clock* clock = nullptr;  // Required.
  // Counts promotions (hourglass_cluster_promotions_total). Optional.
  metrics::Registry* metrics = nullptr;
  // Where the shard's store lives, and how to open it there: a backup
  // whose copy must be rebuilt closes it, replaces the directory by the
  // primary's checkpoint, and opens it again. Required.
  std::string store_dir;
  std::function<absl::StatusOr<std::unique_ptr<storage::MessageStore>>(
      const std::string& dir)>
      open_store;
  // Makes the gRPC channel to a peer at `address` (its --advertise): to a
  // backup to ship the log, to the primary to fetch a checkpoint. Speaks
  // TLS when the cluster does (ClusterNodeOptions::peer_tls). Required.
  std::function<std::shared_ptr<grpc::Channel>(const std::string& address)>
      peer_channel;
  // Most bytes of log entries in one request to a backup; a larger entry
  // goes in pieces of this size (replication::ShipperOptions). Default:
  // 4 MiB.
  size_t peer_request_bytes = size_t{4} << 20;
};

// One shard on one node of a cluster: it plays the role the shard's record
// in etcd gives this node, and changes role as the record changes. What to
// do is decided by the shard's state machine (cluster/replica_machine.h,
// the rules: docs/cluster.md); the host gathers the facts it decides from
// (the record, the copy, the primary store and its backups' progress, the
// engine) and carries out what it decides:
//
//   primary   the shard's store is a ReplicatedStore over `base`; a Shipper
//             streams its log to each live replica; the engine runs on it
//             and the PrimaryGate lets clients in.
//   backup,   `base` is a Replica that the ReplicationService applies the
//   learner   primary's entries to (a learner is not in the in-sync set
//             yet); clients are refused with where the primary is (the
//             gate's refusal names it: ShardRefusal).
//   none      the record does not name this node (or does not exist yet).
//             A copy the record does not name is removed, files and all;
//             named again, the node starts from an empty copy, which the
//             primary rebuilds.
//
// The host's thread steps the machine on each view the Member hands over
// (OnView) and on a tick every 250 ms. The role's objects are under one
// lock (role_mu_), never held across an etcd call, a checkpoint fetch or a
// wait for backups: record writes and rebuilds run after it is released,
// so health, progress and the cluster map never wait behind them.
// Thread-safe.
class ShardHost {
 public:
  // `base` is the shard's store, opened at options.store_dir; `gate` is
  // the shard's. REQUIRES: every pointer outlives the host.
  ShardHost(std::unique_ptr<storage::MessageStore> base,
            ShardHostOptions options, PrimaryGate* gate,
            replication::ReplicationService* replication);
  // Steps down (if primary) and stops.
  ~ShardHost();
  ShardHost(const ShardHost&) = delete;
  ShardHost& operator=(const ShardHost&) = delete;

  // The member whose view the host follows and which writes its record
  // changes. Call once, after Member::Join.
  void Attach(cluster::Member* member);

  // For Member::Callbacks::on_view.
  void OnView(const cluster::ClusterView& view);
  // For Member::Callbacks::position: where this node's copy ends (the
  // epoch and index of its last entry applied; promoted, a copy syncs what
  // it applied before it writes, ReplicatedStore::Open); nullopt while it
  // still follows a primary, whose stream may yet make it grow. Ranking
  // copies by what they applied puts the longest log first: the other
  // in-sync copies, prefixes of the same log, are prefixes of it.
  std::optional<cluster::LogEnd> Position();
  // For Member::Callbacks::handed_over: the index where this primary
  // stopped writing, once the backup the record's transfer_to names holds
  // every entry durably; nullopt before (or without a transfer).
  std::optional<int64_t> HandedOver();

  // For ReplicationService::SetRebuildHandler of the shard: the primary
  // says this backup's copy cannot follow its log; the host rebuilds it
  // from the primary's checkpoint. Does not block.
  void RequestRebuild(std::string why);

  // Stops serving as primary now, with `reason` (the node is shutting
  // down): clients are refused from here on. For good: the node is
  // leaving, and the host takes no role any more. Health is NOT_SERVING
  // for both names when it returns.
  void StepDown(const std::string& reason);

  // The shard's part in the node's health (node/node_health.h). All false
  // before the record exists and once the node left.
  using Health = ShardHealth;
  Health health() const;
  // Calls `listener` with health() now, and again after each change, in
  // order, from the host's thread or StepDown's caller; one call at a time.
  // Replaces an earlier listener. It must not block nor call the host.
  void WatchHealth(absl::AnyInvocable<void(Health)> listener);

  // A backup's progress as this primary sees it.
  struct BackupProgress {
    std::string node;
    int64_t applied_index = 0;
    // Bytes of the primary's log after applied_index.
    size_t lag_bytes = 0;
    int64_t durable_index = 0;
    absl::Time last_heard = absl::InfinitePast();
    bool in_sync = false;
  };
  struct Progress {
    int64_t last_index = 0;               // of this primary's log
    std::vector<BackupProgress> backups;  // by node id
  };
  // nullopt unless this node is the primary.
  std::optional<Progress> progress() const;
  // The index of the last entry of this node's copy (0 for none).
  int64_t position() const;

  using Role = cluster::ReplicaMachine::Role;
  Role role() const;
  // The epoch this node is primary at (0 if it is not).
  int64_t epoch() const;

 private:
  void Run();
  // One step of the machine: the facts gathered and the actions carried
  // out, those that call etcd or wait without the lock.
  void Step(const cluster::ClusterView& view);
  cluster::ReplicaFacts FactsLocked(const cluster::ClusterView& view)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(role_mu_);
  // Carries out one action that needs the lock; false for one that must
  // wait until it is released (a record write, a rebuild, a removal's
  // files), which it leaves to the caller.
  bool CarryOutLocked(const cluster::ReplicaAction& action,
                      const cluster::ClusterView& view)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(role_mu_);
  void OpenPrimaryLocked(const cluster::replica_action::OpenPrimary& open)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(role_mu_);
  void StartShipperLocked(const std::string& node, const std::string& address)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(role_mu_);
  // Opens the engine on a thread of its own (opener_), which hands the
  // result over in opened_ and wakes the host. Opening writes, and a write
  // waits for the in-sync backups: the host's thread must stay free to
  // take a backup that died meanwhile out of the in-sync set, or the write
  // would wait out ack_timeout and end the epoch.
  void StartOpeningEngineLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(role_mu_);
  // Takes the opener's result once there is one: the engine starts and the
  // gate opens, or the error is logged.
  void TakeOpenedEngineLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(role_mu_);
  // Waits for the opener, if any (close the store first, so that its
  // writes fail rather than wait), and shuts down what it opened.
  void StopOpeningEngineLocked(const absl::Status& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(role_mu_);
  // Refuses clients with `why` and shuts the engine down (and an opener).
  void CloseEngineLocked(const absl::Status& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(role_mu_);
  void FollowLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(role_mu_);
  void StopFollowingLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(role_mu_);
  void OpenCopyLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(role_mu_);
  // Replaces the copy by the primary's checkpoint (closing and reopening
  // the store), for a backup whose copy cannot follow.
  void Rebuild(const std::string& primary_address, const std::string& why);
  // Closes the copy and renames its directory to RemovedCopyDir, which it
  // returns for the caller to delete without the lock ("" if the rename
  // failed); then deletes it.
  std::string DiscardCopyLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(role_mu_);
  void DeleteRemovedCopy(const std::string& removed);
  void WriteRecord(const cluster::ShardRecord& from,
                   const cluster::replica_action::WriteRecord& write);
  void StepDownLocked(const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(role_mu_);
  // Tells the health listener health() if it changed since last told.
  void TellHealth();

  const ShardHostOptions options_;
  PrimaryGate* const gate_;
  replication::ReplicationService* const replication_;

  mutable absl::Mutex mu_;
  cluster::Member* member_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::optional<cluster::ClusterView> view_ ABSL_GUARDED_BY(mu_);
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  // Why the copy must be rebuilt; empty while it need not.
  std::string rebuild_ ABSL_GUARDED_BY(mu_);
  // What the engine's opener opened, until the host's thread takes it.
  std::optional<absl::StatusOr<std::unique_ptr<broker::Engine>>> opened_
      ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  // The role's state, changed on the host's thread (and by StepDown) under
  // role_mu_. Taken before mu_ (the role's work reads the view and wakes
  // the thread while it holds role_mu_), never while mu_ is held, and never
  // held across etcd, a fetch or a wait.
  mutable absl::Mutex role_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  cluster::ReplicaMachine machine_ ABSL_GUARDED_BY(role_mu_);
  // The shard's store; null while a rebuild replaces it, after a failed
  // rebuild, and once removed until the record names this node again.
  std::unique_ptr<storage::MessageStore> base_ ABSL_GUARDED_BY(role_mu_);
  std::unique_ptr<replication::Replica> replica_ ABSL_GUARDED_BY(role_mu_);
  std::unique_ptr<replication::ReplicatedStore> store_
      ABSL_GUARDED_BY(role_mu_);
  std::map<std::string, std::unique_ptr<replication::Shipper>> shippers_
      ABSL_GUARDED_BY(role_mu_);
  std::map<std::string, std::string> shipper_addresses_
      ABSL_GUARDED_BY(role_mu_);
  std::unique_ptr<broker::Engine> engine_ ABSL_GUARDED_BY(role_mu_);
  std::string engine_error_ ABSL_GUARDED_BY(role_mu_);
  // Paces the errors the role's work meets again at every tick (a copy
  // that cannot be opened or followed while its disk is full): one line per
  // kind every 10 s, saying how many were not logged. Thread-safe itself.
  const std::unique_ptr<broker::RateLimitedLog> repeated_errors_;
  // Opens the engine while the host's thread goes on; joinable from its
  // start until the host took its result.
  std::thread opener_ ABSL_GUARDED_BY(role_mu_);
  absl::Time opening_since_ ABSL_GUARDED_BY(role_mu_);
  // Set by StepDown: the node is leaving, and takes no role any more.
  bool left_ ABSL_GUARDED_BY(role_mu_) = false;

  // The health listener and what it was told last; held while it is told,
  // so that changes arrive in order. Taken before role_mu_.
  absl::Mutex health_mu_ ABSL_ACQUIRED_BEFORE(role_mu_);
  absl::AnyInvocable<void(Health)> health_listener_ ABSL_GUARDED_BY(health_mu_);
  Health told_ ABSL_GUARDED_BY(health_mu_);

  std::thread thread_;
};

}  // namespace hourglass::node

#endif  // HOURGLASS_NODE_SHARD_HOST_H_
