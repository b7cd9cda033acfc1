#ifndef HOURGLASS_CLUSTER_MEMBER_H_
#define HOURGLASS_CLUSTER_MEMBER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cluster/controller.h"
#include "cluster/etcd_client.h"
#include "cluster/records.h"
#include "cluster/view.h"

namespace hourglass::cluster {

class Election;
class LeaseKeeper;
class Watch;
struct WatchEvent;

struct MemberOptions {
  // --cluster and --node_id; both must pass ValidateName. Required.
  std::string cluster;
  std::string node_id;
  // --advertise: the address clients and peers use. Required.
  std::string address;
  // --zone: the failure domain the node is in (its node record says it,
  // and placement spreads each shard's replicas over zones). Optional.
  std::string zone;
  // --lease_ttl: a node whose lease is not renewed for this long is dead to
  // the cluster. Default: 3 s.
  absl::Duration lease_ttl = absl::Seconds(3);
  // The cluster's shard count: the shards the controller creates. Must be
  // the cluster's once it exists (hourglassd agrees on it first,
  // shard_count.h); the cluster's first member writes it. Default: 1.
  int shards = 1;
  // The records of every shard, when this member creates the cluster with
  // copies it already holds (a restore from a snapshot, --restore_from):
  // Join writes them with the shard count, in one transaction, and fails
  // with FAILED_PRECONDITION if the cluster exists. REQUIRES: empty, or
  // one record for each shard 0 to shards - 1. Default: empty (the
  // controller creates the shards, with empty copies).
  std::map<int, ShardRecord> create_with;
  // --replication_factor. Default: 3.
  int replication_factor = 3;
  // --min_insync: replica moves never take a shard's in-sync set below it.
  // Default: 2.
  int min_insync = 2;
  // How long the controller waits, after a shard's primary is gone, for its
  // in-sync backups to report their positions before it promotes the most
  // advanced of those that did. Default: the lease TTL.
  std::optional<absl::Duration> position_wait;
  // How long to wait before trying etcd again after a failed call. Default:
  // 500 ms.
  absl::Duration retry_delay = absl::Milliseconds(500);
};

// One node's membership in a cluster (cluster/README.md): it holds the node's
// lease and its key nodes/<id>, campaigns for controller, and keeps a view
// of the cluster from a watch on the cluster's prefix. While etcd cannot be
// reached it keeps its last view and goes on trying; if etcd ended its
// lease meanwhile, it joins again under a new one. While it is the
// controller it creates the shards and changes their epoch, primary and
// replicas (cluster/placement.h decides; each write is a compare-and-set
// fenced by the controller's term). When a shard's primary is gone and
// this node is one of its in-sync backups, it reports its position in its
// node record for the controller to choose from.
//
// All of that runs on the member's thread. Thread-safe.
class Member {
 public:
  struct Callbacks {
    // Where this node's copy of `shard` ends: the epoch and index of its
    // last log entry applied; nullopt if it has none. Called on the
    // member's thread when it reports a position. May be empty (no
    // position is ever reported).
    absl::AnyInvocable<std::optional<LogEnd>(int shard)> position;
    // For a shard this node is the primary of, with a leader transfer under
    // way (ShardRecord::transfer_to): the index of its last log entry once
    // it has stopped writing and the target holds every entry durably;
    // nullopt until then. Called on the member's thread, which then reports
    // it for the controller (see Wake). May be empty (never reported).
    absl::AnyInvocable<std::optional<int64_t>(int shard)> handed_over;
    // Each new view, on the member's thread, in order. Must not block for
    // long or destroy the member. May be empty.
    absl::AnyInvocable<void(const ClusterView& view)> on_view;
    // Each time etcd says the node's lease no longer exists (NOT_FOUND): the
    // rest of the cluster took the node for dead (its shards may be failing
    // over). The member joins again under a new lease by itself; shards keep
    // their roles until their records change (a deposed primary's backups
    // refuse its epoch). Runs on the lease keeper's thread. May be empty.
    absl::AnyInvocable<void(absl::Status status)> on_lost;
  };

  // Checks the shard count against the cluster's (writing it, for the
  // cluster's first member), grants the node's lease and writes nodes/<id>
  // under it, then starts the member's thread. A node id still held by an
  // earlier lease (this node's before a crash) is waited for, at most a
  // lease TTL and a second. Errors:
  //   INVALID_ARGUMENT     a bad name, an empty address, a shard count or
  //                        replication factor below 1.
  //   FAILED_PRECONDITION  the cluster has another shard count than
  //                        options.shards (AgreeOnShardCount's message,
  //                        which says which).
  //   DATA_LOSS            the cluster's shard count key holds no count.
  //   ALREADY_EXISTS       another live node has this id.
  //   etcd's errors (UNAVAILABLE, ...).
  static absl::StatusOr<std::unique_ptr<Member>> Join(EtcdClient& client,
                                                      MemberOptions options,
                                                      Callbacks callbacks);

  // Leaves the cluster: resigns as controller and revokes the lease, which
  // deletes nodes/<id> at once. No callback runs after it returns.
  ~Member();
  Member(const Member&) = delete;
  Member& operator=(const Member&) = delete;

  // Stops without revoking the lease or resigning, as a crash would: the
  // cluster learns of it when the lease expires. Nothing runs afterwards.
  void Abandon();

  const std::string& node_id() const { return options_.node_id; }
  int64_t lease() const;

  ClusterView view() const;
  // Waits until `condition` holds for the view (checked at each change), at
  // most until `deadline`; whether it does.
  bool AwaitView(absl::FunctionRef<bool(const ClusterView&)> condition,
                 absl::Time deadline) const;
  // Whether this node is the controller now.
  bool controlling() const;
  // Whether etcd answers: false while the renewals of the node's lease are
  // overdue (etcd unreachable or stalled) or the lease was lost and the
  // node has not joined again yet.
  bool etcd_reachable() const;
  // The controller's term (Leader::term) while this node is the controller.
  std::optional<int64_t> LeadingTerm() const;

  // Has the member's thread look at its callbacks again now rather than
  // at its next change or tick: a host whose hand-over has finished has a
  // position to report.
  void Wake();

  // The primary's change of a shard's in-sync set, at its epoch: writes
  // `isr` (which must hold this node, first, then replicas of `from`) into
  // shards/<shard>, with the eligible copies kept by KeepEligible
  // (placement.h: a backup that leaves a set smaller than --min_insync
  // becomes eligible), if this node is the primary there and the record is
  // still `from`, the one the caller decided on: in the view, and in etcd
  // (compare-and-set on the view's revision). So a change decided on a
  // record the controller has changed since (a replica dropped meanwhile)
  // is not written. Returns whether it was written. Errors:
  // FAILED_PRECONDITION if this node is not the shard's primary in the
  // view, INVALID_ARGUMENT if `isr` does not begin with it or names a node
  // that is not a replica of `from`; etcd's.
  //
  // `acknowledged`, the primary's highest acknowledged entry, goes into the
  // record too (ShardRecord::acknowledged) when it is beyond `from`'s.
  absl::StatusOr<bool> SetIsr(int shard, const ShardRecord& from,
                              std::vector<std::string> isr,
                              LogEnd acknowledged = {});
  // The primary's write of `next` over `from`, the record of `shard`
  // this node is the primary of (its state machine composes it:
  // cluster/replica_machine.h): written, and `what` logged, under the same
  // conditions as SetIsr's, with the same results and errors but for the
  // in-sync set's checks.
  absl::StatusOr<bool> WriteAsPrimary(int shard, const ShardRecord& from,
                                      const ShardRecord& next,
                                      std::string_view what);

 private:
  Member(EtcdClient& client, MemberOptions options, Callbacks callbacks);

  // Grants a lease and keeps it (replacing the keeper and election of an
  // earlier one), writes nodes/<id> under it once no other lease holds it,
  // and campaigns for controller. Errors as Join's.
  absl::Status Register();
  // The lease keeper's calls (LeaseKeeper::LostCallback) for lease `lease`.
  void OnLeaseChange(int64_t lease, absl::Status status);
  void Run();
  // Reads the whole prefix into a fresh view and watches from after it.
  absl::Status Resync();
  void Apply(const WatchEvent& event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Brings this node's reported positions up to date (PositionsToReport,
  // placement.h): for shards whose primary is gone, and its hand-overs.
  void ReportPositions(const ClusterView& view);
  // The controller's work (Controller decides): writes what it decided for
  // `view`; returns when to decide again at the latest.
  absl::Time Control(const ClusterView& view, int64_t term);
  // Carries `write` out by compare-and-set, fenced by `term`, and logs its
  // reason. False if this node is no longer the controller.
  bool WriteShard(const ControllerWrite& write, int64_t term);
  // Sleeps until `deadline` or until woken.
  void WaitForWork(absl::Time deadline);

  // Constant after construction.
  EtcdClient& client_;
  const MemberOptions options_;
  const std::string prefix_;
  Callbacks callbacks_;  // position and on_view: the member thread's.

  // The current lease's keeper and election: replaced by Register, on the
  // member's thread (or in Join, before it starts); read by any thread.
  mutable absl::Mutex parts_mu_ ABSL_ACQUIRED_AFTER(mu_);
  std::unique_ptr<LeaseKeeper> keeper_ ABSL_GUARDED_BY(parts_mu_);
  std::unique_ptr<Election> election_ ABSL_GUARDED_BY(parts_mu_);
  std::unique_ptr<Watch> watch_;  // The member thread's.

  mutable absl::Mutex mu_;
  ClusterView view_ ABSL_GUARDED_BY(mu_);
  bool synced_ ABSL_GUARDED_BY(mu_) = false;  // view_ read and watched
  bool watch_ended_ ABSL_GUARDED_BY(mu_) = false;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  bool lost_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  // The member thread's: the controller's decisions while this node leads.
  Controller controller_;
  // The member thread's: the revision of the last view given to on_view.
  int64_t delivered_revision_ = -1;
  std::thread thread_;
};

// Marks node `node_id` of cluster `cluster` as being drained (`drain`), or
// no longer (keys.h DrainKey): while it is, the controller moves the
// replicas it holds to other nodes, one at a time (cluster/rebalance.h).
// The node need not be alive. Errors: INVALID_ARGUMENT for a bad node id;
// etcd's.
absl::Status SetDraining(EtcdClient& client, std::string_view cluster,
                         std::string_view node_id, bool drain);

// Pins shard `shard` of cluster `cluster` to node `node_id` (keys.h
// PinKey), or with nullopt removes its pin: while the node is alive and not
// draining, the controller makes it a replica and the primary of the shard
// and keeps it so (cluster/rebalance.h). Checks only the node id's form:
// the caller checks the shard's range and the node (Cluster.MoveShard).
// Errors: INVALID_ARGUMENT for a bad node id or a negative shard; etcd's.
absl::Status SetPin(EtcdClient& client, std::string_view cluster, int shard,
                    const std::optional<std::string>& node_id);

}  // namespace hourglass::cluster

#endif  // HOURGLASS_CLUSTER_MEMBER_H_
