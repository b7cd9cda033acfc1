#ifndef HOURGLASS_CLUSTER_REPLICA_MACHINE_H_
#define HOURGLASS_CLUSTER_REPLICA_MACHINE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/time/time.h"
#include "cluster/records.h"

namespace hourglass::cluster {

// What a node knows, at one moment, of one shard and of its own part in it:
// the shard's record as the node last read it from etcd, and the state of
// what the node holds (its copy, its primary store, its engine). The host
// (node/shard_host.h, or the replication simulation) gathers it; the
// machine decides from it alone.
struct ReplicaFacts {
  absl::Time now;
  // The shard's record and its mod_revision; nullopt while it has none.
  std::optional<ShardRecord> record;
  int64_t record_revision = 0;
  // The addresses (--advertise) of the live nodes, by id.
  std::map<std::string, std::string> alive;
  // The node leaves the cluster (shutting down): it takes no role any more.
  bool leaving = false;

  // Whether the node holds a copy of the shard now (not while a rebuild
  // replaces it, nor once removed), and the highest epoch the copy
  // accepted.
  bool has_copy = false;
  int64_t accepted_epoch = 0;
  // Why the primary said this node's copy cannot follow its log ("" if it
  // did not say so since the last rebuild).
  std::string rebuild_asked;
  // Whether a backup's Replica applies the primary's stream to the copy.
  bool following = false;

  // The primary's store (replication::ReplicatedStore), while the node
  // holds one.
  struct Backup {
    LogEnd applied;
    LogEnd durable;
    absl::Time last_heard = absl::InfinitePast();
    // Since when it has lacked an entry (ReplicatedStore::BackupState).
    absl::Time lacking_since = absl::InfiniteFuture();
    // Bytes of the log after `applied`, as far as the store keeps it.
    size_t lag_bytes = 0;
    // In the set of backups writes wait for, and counted toward
    // min_insync there (the record names it in the in-sync set).
    bool in_sync = false;
    bool counted = false;
    // It reported since its stream last (re)started: its position is of
    // the copy it holds now.
    bool connected = false;
  };
  struct Primary {
    int64_t epoch = 0;
    // Closed: writes were not acknowledged in time, or the in-sync set fell
    // below --min_insync under waiting writes.
    bool closed = false;
    std::string close_reason;
    LogEnd last;
    LogEnd acknowledged;
    std::map<std::string, Backup> backups;
  };
  std::optional<Primary> primary;
  // The shippers running, backup node id -> the address they ship to.
  std::map<std::string, std::string> shippers;
  // The engine on the primary store: not open (closed, or failed to open:
  // `engine_error` says why), being opened, or open and serving.
  enum class Engine { kClosed, kOpening, kOpen };
  Engine engine = Engine::kClosed;
  std::string engine_error;
};

// What the machine asks its host to do, in order. Each is idempotent
// enough to be asked again while the facts lag behind.
namespace replica_action {
// Become the primary at `epoch`: open the primary store over the copy,
// writes waiting for `in_sync`, and let peers fetch its checkpoints.
struct OpenPrimary {
  int64_t epoch = 0;
  std::vector<std::string> in_sync;
};
// Stop being the primary: refuse clients with `reason`, close the store
// (waiting writes fail), stop the shippers and the engine.
struct StepDown {
  std::string reason;
};
struct StartShipper {
  std::string node;
  std::string address;
};
struct StopShipper {
  std::string node;
};
// Change the set of backups the primary store's writes wait for; `why`
// for the log ("" for no line).
struct AddInSync {
  std::string node;
  std::string why;
};
struct RemoveInSync {
  std::string node;
  std::string why;
};
// Count a backup writes wait for toward min_insync: the record names it.
struct CountInSync {
  std::string node;
};
// Write `next` over the record the facts hold, by compare-and-set at the
// primary's epoch (Member::WriteAsPrimary); `what` for the log, and `then`
// too, once written ("" for no line).
struct WriteRecord {
  ShardRecord next;
  std::string what;
  std::string then;
};
// Open the engine on the primary store (in the background) and, once it
// opened, let clients in.
struct OpenEngine {};
// Refuse clients with `reason` and shut the engine down: nothing is
// written any more (a leader transfer).
struct CloseEngine {
  std::string reason;
};
// Refuse clients, saying who the primary is (the shard's record).
struct Refuse {};
// Apply the primary's stream to the copy (as a backup), or stop.
struct Follow {};
struct StopFollowing {};
// Replace the copy by the checkpoint of the primary at `from`.
struct Rebuild {
  std::string from;
  std::string why;
};
// Open a new, empty copy (named again after the old one was removed).
struct OpenCopy {};
// Remove the copy, files and all: the record no longer names this node.
struct RemoveCopy {};
// Keep the copy the record (at `record_epoch`) does not name: it followed
// a newer epoch (said once).
struct KeepCopy {
  int64_t record_epoch = 0;
  int64_t accepted_epoch = 0;
};
// The primary stopped writing at `index`, which the transfer's target holds
// durably: report it for the controller to finish the hand-over.
struct HandedOver {
  int64_t index = 0;
};
}  // namespace replica_action

using ReplicaAction =
    std::variant<replica_action::OpenPrimary, replica_action::StepDown,
                 replica_action::StartShipper, replica_action::StopShipper,
                 replica_action::AddInSync, replica_action::RemoveInSync,
                 replica_action::CountInSync, replica_action::WriteRecord,
                 replica_action::OpenEngine, replica_action::CloseEngine,
                 replica_action::Refuse, replica_action::Follow,
                 replica_action::StopFollowing, replica_action::Rebuild,
                 replica_action::OpenCopy, replica_action::RemoveCopy,
                 replica_action::KeepCopy, replica_action::HandedOver>;

struct ReplicaMachineOptions {
  // This node's id (--node_id).
  std::string node;
  int shard = 0;
  // --min_insync. Default: 2.
  int min_insync = 2;
  // An in-sync backup lacking an entry written this long ago leaves the
  // in-sync set; one added waits this long to make the log durable.
  // Default: 5 s.
  absl::Duration lag_timeout = absl::Seconds(5);
  // How far behind the primary's last entry a backup out of the in-sync
  // set may be for the primary to start adding it: about what a shipper
  // has in flight, which it applies well within lag_timeout. Default:
  // 4 MiB.
  size_t rejoin_bytes = size_t{4} << 20;
};

// One shard's role on one node, decided as a pure state machine in the
// manner of etcd's raft.Step: facts in (ReplicaFacts: the shard's record,
// the node's copy and stores, the time), actions out (ReplicaAction), no
// I/O, no locks, no clock of its own. The host carries the actions out and
// calls Step again with the facts that follow, at each change of the
// record and on a tick; the replication simulation runs the same class.
//
// The rules (docs/cluster.md):
//   - Named the primary at an epoch its copy accepted before (it led at
//     it, and restarted), it gives the shard back (compare-and-set: the
//     record without a primary) for the controller to promote the most
//     advanced in-sync copy at the next epoch: a primary never writes at an
//     epoch twice, and after a power loss another copy may hold what it
//     lost.
//   - As primary it ships its log to every live replica, keeps the set its
//     writes wait for equal to the record's in-sync set (a backup being
//     added aside), takes out of the set a backup whose node is gone or
//     that lacks an entry written lag_timeout ago (one record change per
//     record revision; a removal that leaves the set below min_insync keeps
//     the backup eligible, KeepEligible), and adds one that has caught up
//     (locally first, and into the record once it made the log durable).
//   - A primary whose store closed (writes not acknowledged in time, or
//     the set fell below min_insync under waiting writes) steps down and
//     gives the shard back (the record without a primary), for the
//     controller to promote a copy at a new epoch.
//   - A leader transfer (record's transfer_to): the engine closes, and once
//     the target holds the whole log durably the primary reports where it
//     stopped. Given up, the engine opens again.
//   - A replica that is not the primary follows it while the primary is
//     alive, and stops once it is gone (or gave the shard back): the
//     position it reports then is final, and the controller ranks copies by
//     it. A copy that cannot follow (the primary says so) is rebuilt from
//     the primary's checkpoint. A node the record does not name removes its
//     copy, unless the copy accepted a newer epoch than the record's (etcd's
//     data was replaced: the copy may be the last one).
//
// Not thread-safe: its host calls it from one thread at a time.
class ReplicaMachine {
 public:
  explicit ReplicaMachine(ReplicaMachineOptions options);

  // What to do now, given `facts`.
  std::vector<ReplicaAction> Step(const ReplicaFacts& facts);

  // The role the machine plays now. A learner is a replica outside the
  // in-sync set (catching up); a backup is in it.
  enum class Role { kNone, kLearner, kBackup, kPrimary };
  Role role() const;
  // The epoch it leads at (0 unless primary).
  int64_t epoch() const;
  // Where it stopped writing, once a leader transfer's target holds its
  // whole log durably; nullopt otherwise.
  std::optional<int64_t> handed_over() const;

 private:
  struct None {
    // The epoch it gave the shard back at, and why, until the record moves
    // on from it.
    std::optional<std::pair<int64_t, std::string>> gave_back;
  };
  struct Learner {};
  struct Backup {};
  struct Primary {
    int64_t epoch = 0;
    absl::Time since;
    // A backup added to the set writes wait for, which joins the record's
    // in-sync set once it made entry `mark` durable, by `deadline`.
    struct Adding {
      std::string node;
      int64_t mark = 0;
      absl::Time deadline;
    };
    std::optional<Adding> adding;
    // When adding each backup last failed: it is not tried again for
    // lag_timeout (writes wait for a backup being added).
    std::map<std::string, absl::Time> add_failed;
    // A leader transfer under way, and once done where it stopped.
    std::string handing_over_to;
    std::optional<int64_t> handed_over;
    // When the engine was last asked to open: an engine that fails to open
    // is tried again after kEngineRetry, not at once.
    absl::Time engine_asked = absl::InfinitePast();
  };

  // The primary's part of Step, the record naming this node.
  void StepPrimary(const ReplicaFacts& facts, const ShardRecord& record,
                   std::vector<ReplicaAction>& out);
  void KeepShippers(const ReplicaFacts& facts, const ShardRecord& record,
                    std::vector<ReplicaAction>& out);
  // The in-sync set's keeping; at most one record write.
  void KeepInSyncSet(const ReplicaFacts& facts, const ShardRecord& record,
                     Primary& primary, std::vector<ReplicaAction>& out);
  void HandOver(const ReplicaFacts& facts, const ShardRecord& record,
                Primary& primary, std::vector<ReplicaAction>& out);
  // A record write from the facts' record, at most one per revision.
  void Write(const ReplicaFacts& facts, ShardRecord next, std::string what,
             std::string then, std::vector<ReplicaAction>& out);

  const ReplicaMachineOptions options_;
  std::variant<None, Learner, Backup, Primary> role_;
  // The record revision the last write was made from, and when: no other
  // is made from it for a second (the record moves on within milliseconds
  // of a write that succeeded; one that failed is tried again).
  int64_t wrote_from_ = -1;
  absl::Time wrote_at_ = absl::InfinitePast();
  // Whether a copy kept against the record was said once.
  bool kept_copy_said_ = false;
};

// The name of a role, for logs and metrics ("none", "learner", ...).
const char* RoleName(ReplicaMachine::Role role);

// An action in a line ("OpenPrimary epoch 3 in sync [b,c]"), for traces and
// tests.
std::string Describe(const ReplicaAction& action);

}  // namespace hourglass::cluster

#endif  // HOURGLASS_CLUSTER_REPLICA_MACHINE_H_
