// The world of the replication protocol's deterministic simulation
// (docs/cluster.md "How it is shown"; the steps and the tests are in
// simulation_test.cc, the checker in simulation_check.cc). It runs the
// shipped code, not a model of it: each node plays its part in each shard
// with the real per-shard state machine (cluster::ReplicaMachine), whose
// actions it carries out on the real ReplicatedStore (a primary's) and
// Replica (a backup's) over memory stores; the controller is the real
// cluster::Controller (PlanShard, PlanRebalance). What is simulated is
// what lies outside a node's code: etcd's records (compare-and-set, leases,
// the positions nodes report), the clock, each primary-to-backup stream (an
// in-order queue, as a gRPC stream is), disks that lose what was not
// synced when the power goes, and the faults. The actions below are the
// steps a seeded test takes at random; Check asserts after each, per shard:
//   - every acknowledged write is held by every member of the in-sync set,
//     and by every copy that leads at a later epoch: nothing acknowledged
//     is lost, whoever is promoted;
//   - a write is acknowledged only while the in-sync set, the primary
//     counted, has at least min_insync members;
//   - the in-sync copies are prefixes of one another: no split history;
//   - copies at equal positions hold equal messages (a primary never
//     writes at an epoch twice, whole-cluster power losses included);
//   - at most one primary completes writes in each epoch;
//   - a shard's epochs only grow, and a new primary holds every in-sync
//     copy;
//   - a move (PlanRebalance's step) never takes the in-sync set below
//     min_insync;
// and, once healed (CheckConverged), every replica holds exactly its
// primary's messages and the layout is where PlanRebalance wants it: with
// zones, no zone holds more of a shard's replicas than its share.

#ifndef HOURGLASS_TESTS_REPLICATION_SIMULATION_H_
#define HOURGLASS_TESTS_REPLICATION_SIMULATION_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/time/time.h"
#include "cluster/controller.h"
#include "cluster/records.h"
#include "cluster/replica_machine.h"
#include "cluster/view.h"
#include "replication/log_entry.h"
#include "replication/replica.h"
#include "replication/replicated_store.h"
#include "storage/message_store.h"
#include "tests/testing/forwarding_store.h"

namespace hourglass::replication::simulation {

// How far the clock moves at each step, and the nodes' timeouts on it:
// lag_timeout is 100 steps, a write's ack timeout 200, a position wait 20.
inline constexpr absl::Duration kStep = absl::Milliseconds(50);
inline constexpr absl::Duration kLagTimeout = absl::Seconds(5);
inline constexpr absl::Duration kAckTimeout = absl::Seconds(10);
inline constexpr absl::Duration kPositionWait = absl::Seconds(1);

struct WorldOptions {
  // Node ids; the first `members` are members from the start, the others
  // join later (Join). Default: three members, none to join.
  std::vector<std::string> pool = {"a", "b", "c"};
  int members = 3;
  // Shards, created by the controller on the first members. Default: 1.
  int shards = 1;
  // --replication_factor and --min_insync. Defaults: 3 and 2.
  int replication_factor = 3;
  int min_insync = 2;
  // Each node's --zone, by id (NodeRecord::zone). Default: none, no zones.
  std::map<std::string, std::string> zones;
};

// What a run did, to show the runs exercise what they are for.
struct WorldStats {
  int64_t acknowledged = 0;
  int64_t epochs = 0;     // over all shards
  int64_t rebuilds = 0;   // copies replaced by a checkpoint
  int64_t adds = 0;       // replicas added by PlanRebalance
  int64_t drops = 0;      // replicas dropped by PlanRebalance
  int64_t transfers = 0;  // leader transfers finished by PlanShard
  int64_t joins = 0;      // nodes joined (new or wiped)
  // Promotions of an eligible copy (no in-sync one alive), shards given
  // back by their primary (restarted at an epoch it led at, or whose
  // writes were not acknowledged), whole-cluster power losses.
  int64_t eligible_promotions = 0;
  int64_t given_back = 0;
  int64_t power_losses = 0;
};

// A memory store whose writes are lost, back to its last SyncLog, when the
// power goes (LosePower): a disk with a page cache.
class PowerLossStore : public testing::ForwardingStore {
 public:
  absl::Status SyncLog() override;
  void LosePower();

 private:
  storage::WriteBatch synced_;
};

// One simulated cluster. Deterministic for a seed. Not thread-safe (the
// simulation has one thread).
class World {
 public:
  World(uint64_t seed, WorldOptions options);

  // A number in [0, n) from the seed's generator.
  int Uniform(int n);

  // ---- The steps' actions; each picks its target at random and does
  // nothing when there is none.

  // A client writes to a node whose engine serves a shard (a stale one
  // too): one publish in four is a write nobody waits to be durable (a
  // delivery marked in flight), which a power loss may take back.
  void Write();
  // A primary sends a stream's next entries; the backup applies the next
  // one sent (without syncing); a backup syncs what it applied; the
  // primary reads the backup's next answer.
  void Ship();
  void Apply();
  void SyncBackup();
  void Answer();
  void BreakStream();
  // A member picked at random dies if it runs (its copies stay: they are
  // on disk); one that is down comes back (unless it lost its disk and a
  // record still counts on its copy: it waits, as ClusterNode::Join does).
  void Crash();
  void Restart();
  // A member dies and its disk is lost: it comes back empty.
  void LoseDisk();
  // A member picked at random freezes past its lease (SIGSTOP) if it runs;
  // one frozen resumes under a new lease.
  void Pause();
  void Resume();
  // The first half of the double fault: every backup of a shard freezes.
  void PauseBackups();
  // Every node loses power at once: each copy keeps what it had synced.
  void PowerLoss();
  // etcd stops answering (nothing changes in it, no lease ends), or comes
  // back (the leases of nodes down or frozen meanwhile end).
  void EtcdDown();
  void EtcdUp();
  // A controller round (cluster::Controller, as Member runs it).
  void Control();
  // A node joins: one of the pool never a member, or a member that is down
  // and in no shard's in-sync set, with its disk wiped.
  void Join();
  // `hourglass cluster drain` of a member, or its --undo.
  void Drain();
  // `hourglass cluster move` of a shard to a member, or its --undo.
  void Pin();

  // What every running node does on its own between steps, after the
  // clock moved on: step each shard's machine and carry its actions out,
  // report its positions, (re)connect streams, and answer clients.
  void Settle();

  // The invariants above; false (with failure() set, naming `when`) once
  // one fails.
  bool Check(const std::string& when);
  // Everything heals (every member back, etcd up, streams drained,
  // controller rounds) until nothing changes; then Check and the converged
  // layout.
  bool HealAndCheck();

  const std::string& failure() const { return failure_; }
  const WorldStats& stats() const { return stats_; }
  // Every shard's record, each node's state and its copies' positions (and
  // a primary's view of its backups), for HOURGLASS_SIMULATION_TRACE (each
  // step) and HOURGLASS_SIMULATION_TRACE_HEAL (each healing round).
  std::string Trace();

 private:
  // One node's copy of one shard, and the node's part in it.
  struct Copy {
    // The copy; null once removed.
    std::unique_ptr<PowerLossStore> store;
    std::unique_ptr<ReplicatedStore> primary;     // while it leads
    bool engine = false;                          // serving, while it leads
    std::unique_ptr<Replica> replica;             // while it follows
    std::map<std::string, std::string> shippers;  // backup -> its id
    std::string rebuild_asked;
    std::unique_ptr<cluster::ReplicaMachine> machine;
  };
  struct Node {
    std::string id;
    bool member = false;  // joined the cluster
    bool up = false;      // the process runs
    bool paused = false;  // runs but is frozen (SIGSTOP)
    bool lease = false;   // etcd holds its lease (and its node record)
    // Its lease ends once etcd answers again (it died or froze while etcd
    // was down).
    bool lease_ends = false;
    // It lost its disk and has not joined back yet.
    bool wiped = false;
    std::vector<Copy> copies;  // by shard
    // Its node record's positions, as ReportPositions last made them; gone
    // with its lease.
    std::map<int, cluster::Position> positions;
    bool acts() const { return up && !paused; }
  };
  // One primary's stream to one backup: what was sent and not yet applied,
  // and the answers not yet read. In order, as a gRPC stream is.
  struct Stream {
    bool open = false;
    int64_t epoch = 0;
    int64_t next = 0;  // the next index to send
    std::deque<std::string> sent;
    std::deque<std::pair<LogPosition, LogPosition>>
        answers;  // applied, durable
  };
  // Shard, primary, backup.
  using StreamKey = std::tuple<int, std::string, std::string>;
  struct Pending {
    int shard;
    std::string node;
    LogPosition entry;
    bool durable;
    absl::Time since;
    std::string key;
  };

  Node& node(const std::string& id);
  // Whether `target`'s disk may be lost as a single fault: every shard
  // keeps a copy the controller may promote holding every acknowledged
  // write.
  bool SurvivesDiskLoss(const Node& target);
  Stream* RandomStream(bool (*usable)(const Stream&));
  StreamKey KeyOf(const Stream* s);
  std::map<std::string, cluster::NodeRecord> AliveRecords();
  std::map<int, cluster::ShardRecord> Records() const;
  cluster::ClusterView View();
  // A node's copy made anew (a process start): its machine starts afresh.
  void Forget(Node& n);
  std::unique_ptr<cluster::ReplicaMachine> NewMachine(const std::string& id,
                                                      int shard) const;
  // Writes `write` to shard `shard`'s record (a compare-and-set that won),
  // checking the promises a record change keeps and counting what it does.
  void WriteRecord(int shard, const cluster::ShardRecord& write);

  void StepMachine(Node& n, int shard);
  cluster::ReplicaFacts Facts(Node& n, int shard);
  void CarryOut(Node& n, int shard, const cluster::ReplicaAction& action,
                int64_t revision);
  void StopStreamsOf(const std::string& id, int shard);
  // Ends stream `key` (as a broken gRPC stream): its primary's shipper
  // reports the backup disconnected (ReplicatedStore::Disconnected).
  void EndStream(const StreamKey& key, Stream& s);
  void ReportPositions(Node& n);
  void Connect();
  void Rebuild(int shard, Node& primary, Node& backup);
  void Acknowledge();
  // Sends, applies, syncs and answers everything a stream can; true if it
  // moved anything.
  bool Flush(const StreamKey& key, Stream& s);

  bool Fail(std::string what);
  bool CheckConverged();
  // Every shard's record, the drains and the pins, for failure messages.
  std::string Layout() const;
  static std::vector<std::string> Messages(storage::MessageStore& store);

  WorldOptions options_;
  std::mt19937_64 rng_;
  absl::Time now_;
  bool etcd_up_ = true;
  std::vector<Node> nodes_;
  std::vector<std::optional<cluster::ShardRecord>> records_;  // by shard
  std::vector<int64_t> revisions_;                            // by shard
  std::set<std::string> draining_;
  std::map<int, std::string> pins_;
  // The controller, and the node it runs on ("" while none).
  cluster::Controller controller_;
  std::string controller_node_;
  std::map<StreamKey, Stream> streams_;
  std::vector<Pending> pending_;
  // By shard: the acknowledged keys, with the epoch of their entry.
  std::vector<std::map<std::string, int64_t>> acknowledged_;
  // By shard and epoch, the nodes that completed a write at it.
  std::map<std::pair<int, int64_t>, std::set<std::string>> acknowledgers_;
  int next_key_ = 0;
  // By shard, its state when Check last passed it (Check).
  std::vector<std::string> checked_;
  // The first promise a write or an acknowledgement broke (WriteRecord,
  // Acknowledge): reported by the next Check.
  std::string broken_;
  WorldStats stats_;
  std::string failure_;
};

}  // namespace hourglass::replication::simulation

#endif  // HOURGLASS_TESTS_REPLICATION_SIMULATION_H_
