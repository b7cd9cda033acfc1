// The world of the replication protocol's deterministic simulation
// (CLUSTER.md "How it is tested"; the steps and the tests are in
// simulation_test.cc, the checker in simulation_check.cc): nodes holding one
// copy of each shard over memory stores, the real ReplicatedStore (a
// primary's), Replica (a backup's), Diverged, PlanShard and PlanRebalance, with
// etcd's records (shards, node leases and the positions they report, drains,
// pins) simulated, and each primary-to-backup stream an in-order queue. The
// actions below are the steps a seeded test takes at random; Check asserts
// after each what CLUSTER.md promises, per shard:
//   - every acknowledged write is held by every member of the in-sync set
//     (so by whichever of them is promoted): nothing acknowledged is lost;
//   - the in-sync copies are prefixes of one another: no split history;
//   - copies at equal positions hold equal messages;
//   - at most one primary completes writes in each epoch;
//   - a move (PlanRebalance's step) never takes the in-sync set below
//     min_insync (a failover may shrink it);
// and, once healed (CheckConverged), every replica holds exactly its
// primary's messages and the layout is where PlanRebalance wants it: with
// zones, no zone holds more of a shard's replicas than its share.
// Delays and reordering are the steps' random interleaving (each stream
// stays in order, as a gRPC stream does).

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

#include "cluster/records.h"
#include "replication/log_entry.h"
#include "replication/replica.h"
#include "replication/replicated_store.h"
#include "storage/message_store.h"

namespace hourglass::replication::simulation {

struct WorldOptions {
  // Node ids; the first `members` are members from the start, the others
  // join later (Join). Default: three members, none to join.
  std::vector<std::string> pool = {"a", "b", "c"};
  int members = 3;
  // Shards, created by PlanShard on the first members. Default: 1.
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
  // Promotions of an eligible copy (no in-sync one alive), and epochs a
  // restarted primary took for itself.
  int64_t eligible_promotions = 0;
  int64_t epochs_taken = 0;
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

  // A client writes to a node that acts as a primary (a stale one too),
  // unless it is handing its shard over.
  void Write();
  // A primary sends a stream's next entries; the backup applies the next
  // one sent; the primary reads the backup's next answer.
  void Ship();
  void Apply();
  void Answer();
  void BreakStream();
  // A member picked at random dies if it runs (its copies stay: they are
  // on disk); one that is down comes back.
  void Crash();
  void Restart();
  // A member picked at random freezes past its lease (SIGSTOP) if it runs;
  // one frozen resumes under a new lease.
  void Pause();
  void Resume();
  // A controller round (cluster/member.cc Member::Control): PlanShard for
  // every shard, and when none needs it, one PlanRebalance step.
  void Control();
  // A node joins: one of the pool never a member, or a member that is down
  // and in no shard's in-sync set, with its disk wiped.
  void Join();
  // `hourglass cluster drain` of a member, or its --undo.
  void Drain();
  // `hourglass cluster move` of a shard to a member, or its --undo.
  void Pin();

  // What every running node does on its own between steps: report its
  // positions, follow the records (ShardHost), (re)connect streams, keep
  // the in-sync sets, and answer clients.
  void Settle();

  // The invariants above; false (with failure() set, naming `when`) once
  // one fails.
  bool Check(const std::string& when);
  // Everything heals (every member back, streams drained, controller
  // rounds) until nothing changes; then Check and the converged layout.
  bool HealAndCheck();

  const std::string& failure() const { return failure_; }
  // Every shard's record and each node's state and copies' positions, for
  // HOURGLASS_SIMULATION_TRACE.
  std::string Trace();
  const WorldStats& stats() const { return stats_; }

 private:
  // One node's copy of one shard, and its role in it.
  struct Copy {
    std::unique_ptr<storage::MessageStore> store;
    std::unique_ptr<ReplicatedStore> primary;  // while it acts as primary
    std::unique_ptr<Replica> replica;          // while it acts as a backup
    // A leader transfer under way (ShardHost::HandOverLocked): the target,
    // and once it holds the whole log durably, where the log ends.
    std::string handing_over_to;
    std::optional<int64_t> handed_over;
  };
  struct Node {
    std::string id;
    bool member = false;       // joined the cluster
    bool up = false;           // the process runs
    bool paused = false;       // runs but is frozen (SIGSTOP)
    bool lease = false;        // etcd holds its lease (and its node record)
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
    std::deque<LogPosition> answers;
  };
  // Shard, primary, backup.
  using StreamKey = std::tuple<int, std::string, std::string>;
  struct Pending {
    int shard;
    std::string node;
    int64_t epoch;
    int64_t index;
    std::string key;
  };

  Node& node(const std::string& id);
  bool Alive(const std::string& id) { return node(id).lease; }
  Stream* RandomStream(bool (*usable)(const Stream&));
  StreamKey KeyOf(const Stream* s);
  std::map<std::string, cluster::NodeRecord> AliveRecords();
  std::map<int, cluster::ShardRecord> Records() const;
  // Applies a write of the controller to shard `shard`'s record, counting
  // what it does.
  void WriteRecord(int shard, const cluster::ShardRecord& write);

  void ReportPositions(Node& n);
  void Observe(Node& n, int shard);
  void Connect();
  void Rebuild(int shard, Node& primary, Node& backup);
  void KeepInSyncSets();
  void Acknowledge();
  // Sends, applies and answers everything a stream can; true if it moved
  // anything.
  bool Flush(const StreamKey& key, Stream& s);

  bool Fail(std::string what);
  bool CheckConverged();
  // Every shard's record, the drains and the pins, for failure messages.
  std::string Layout() const;
  static std::vector<std::string> Messages(storage::MessageStore& store);

  WorldOptions options_;
  std::mt19937_64 rng_;
  std::vector<Node> nodes_;
  std::vector<std::optional<cluster::ShardRecord>> records_;  // by shard
  std::set<std::string> draining_;
  std::map<int, std::string> pins_;
  std::map<StreamKey, Stream> streams_;
  std::vector<Pending> pending_;
  // By shard: the acknowledged keys, with their epochs.
  std::vector<std::map<std::string, int64_t>> acknowledged_;
  // By shard and epoch, the nodes that completed a write at it.
  std::map<std::pair<int, int64_t>, std::set<std::string>> acknowledgers_;
  int next_key_ = 0;
  // By shard, its state when Check last passed it (Check).
  std::vector<std::string> checked_;
  // The first controller write that broke a promise (WriteRecord): a move
  // that took an in-sync set below min_insync, or a new primary whose copy
  // does not hold every in-sync copy.
  std::string bad_write_;
  WorldStats stats_;
  std::string failure_;
};

}  // namespace hourglass::replication::simulation

#endif  // HOURGLASS_TESTS_REPLICATION_SIMULATION_H_
