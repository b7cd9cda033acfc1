// A deterministic simulation of the replication protocol (CLUSTER.md "How it
// is tested"): the real ReplicatedStore, Replica, Diverged and PlanShard, over
// memory stores, with etcd's shard record and the nodes' leases simulated,
// and each primary-to-backup stream an in-order queue. Seeded random steps
// write, ship, apply, acknowledge, and inject faults (broken streams,
// crashes and restarts, a primary paused past its lease and resumed,
// failovers); after every step a checker asserts what CLUSTER.md promises:
//   - every acknowledged write is held by every member of the in-sync set
//     (so by whichever of them is promoted): nothing acknowledged is lost;
//   - the in-sync copies are prefixes of one another: no split history;
//   - copies at equal positions hold equal messages;
//   - at most one primary completes writes in each epoch;
//   - once healed, every copy holds exactly the primary's messages.
// Delays and reordering are the steps' random interleaving (each stream
// stays in order, as a gRPC stream does).

#include <cstdint>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "cluster/placement.h"
#include "cluster/records.h"
#include "gtest/gtest.h"
#include "replication/log_entry.h"
#include "replication/replica.h"
#include "replication/replicated_store.h"
#include "storage/memory_store.h"
#include "storage/message_store.h"

namespace hourglass::replication {
namespace {

using cluster::ShardRecord;
using storage::MessageStore;
using storage::Table;
using storage::WriteBatch;

constexpr int kSeeds = 5000;
constexpr int kSteps = 300;
constexpr int kMinInSync = 2;

struct Node {
  std::string id;
  std::unique_ptr<MessageStore> store;
  std::unique_ptr<ReplicatedStore> primary;  // while it acts as primary
  std::unique_ptr<Replica> replica;          // while it acts as a backup
  bool up = true;       // the process runs
  bool paused = false;  // runs but is frozen (SIGSTOP)
  bool lease = true;    // etcd holds its lease
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

struct Pending {
  std::string node;
  int64_t epoch;
  int64_t index;
  std::string key;
};

class Simulation {
 public:
  explicit Simulation(uint64_t seed) : rng_(seed) {
    for (const char* id : {"a", "b", "c"}) {
      Node node;
      node.id = id;
      node.store = storage::MemoryStore::Open();
      nodes_.push_back(std::move(node));
    }
    record_ = ShardRecord{1, "a", {"a", "b", "c"}, {"a", "b", "c"}};
  }

  // Runs the steps; false (with `failure` set) once the checker fails.
  bool Run() {
    for (int step = 0; step < kSteps; ++step) {
      Step();
      if (!Check(absl::StrCat("step ", step, " (", last_action_, ")"))) {
        return false;
      }
    }
    Heal();
    return Check("after healing") && CheckConverged();
  }

  const std::string& failure() const { return failure_; }
  size_t acknowledged() const { return acknowledged_.size(); }
  int64_t epochs() const { return record_.epoch; }

 private:
  Node& node(const std::string& id) {
    for (Node& n : nodes_) {
      if (n.id == id) return n;
    }
    std::abort();
  }
  int Uniform(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }

  void Step() {
    // Each action with its share of the steps, in percent.
    struct Action {
      int percent;
      const char* name;
      void (Simulation::*run)();
    };
    static constexpr Action kActions[] = {
        {25, "write", &Simulation::Write},
        {20, "ship", &Simulation::Ship},
        {20, "apply", &Simulation::Apply},
        {15, "answer", &Simulation::Answer},
        {4, "break a stream", &Simulation::BreakStream},
        {3, "crash", &Simulation::Crash},
        {3, "restart", &Simulation::Restart},
        {2, "pause", &Simulation::Pause},
        {3, "resume", &Simulation::Resume},
        {5, "control", &Simulation::Control},
    };
    int roll = Uniform(100);
    for (const Action& action : kActions) {
      if (roll < action.percent) {
        last_action_ = action.name;
        (this->*action.run)();
        break;
      }
      roll -= action.percent;
    }
    // What every running node does on its own between steps: follow the
    // record, (re)connect streams, keep the in-sync set, and answer clients.
    for (Node& n : nodes_) {
      if (n.acts()) Observe(n);
    }
    Connect();
    KeepInSyncSet();
    Acknowledge();
  }

  // A client writes to a node that acts as a primary (a stale one too).
  void Write() {
    std::vector<Node*> primaries;
    for (Node& n : nodes_) {
      if (n.acts() && n.primary != nullptr) primaries.push_back(&n);
    }
    if (primaries.empty()) return;
    Node& n = *primaries[Uniform(static_cast<int>(primaries.size()))];
    const std::string key = absl::StrCat("m", next_key_++);
    WriteBatch batch;
    batch.Put(Table::kMessages, key, "v");
    absl::StatusOr<int64_t> index = n.primary->Append(batch);
    if (index.ok()) {
      pending_.push_back({n.id, n.primary->epoch(), *index, key});
    }
  }

  Stream* RandomStream(bool (*usable)(const Stream&)) {
    std::vector<Stream*> candidates;
    for (auto& [ends, stream] : streams_) {
      if (stream.open && usable(stream)) candidates.push_back(&stream);
    }
    if (candidates.empty()) return nullptr;
    return candidates[Uniform(static_cast<int>(candidates.size()))];
  }
  std::pair<std::string, std::string> EndsOf(const Stream* s) {
    for (auto& [ends, stream] : streams_) {
      if (&stream == s) return ends;
    }
    std::abort();
  }

  void Ship() {
    Stream* s = RandomStream([](const Stream&) { return true; });
    if (s == nullptr) return;
    auto [from, to] = EndsOf(s);
    Node& primary = node(from);
    if (!primary.acts() || primary.primary == nullptr ||
        primary.primary->epoch() != s->epoch) {
      return;
    }
    absl::StatusOr<std::vector<std::shared_ptr<const std::string>>> entries =
        primary.primary->ReadFrom(s->next, 1 + Uniform(3) * 60,
                                  absl::InfinitePast());
    if (!entries.ok()) {
      *s = Stream();  // Closed, or behind what is kept: the backup rebuilds.
      if (entries.status().code() == absl::StatusCode::kOutOfRange) {
        Rebuild(primary, node(to));
      }
      return;
    }
    for (const auto& bytes : *entries) s->sent.push_back(*bytes);
    s->next += static_cast<int64_t>(entries->size());
  }

  void Apply() {
    Stream* s = RandomStream([](const Stream& s) { return !s.sent.empty(); });
    if (s == nullptr) return;
    Node& backup = node(EndsOf(s).second);
    if (!backup.acts() || backup.replica == nullptr) return;
    absl::StatusOr<LogEntry> entry = DecodeEntry(s->sent.front());
    s->sent.pop_front();
    std::vector<LogEntry> entries;
    entries.push_back(*std::move(entry));
    if (!backup.replica->Apply(s->epoch, std::move(entries)).ok()) {
      *s = Stream();  // The backup ends the stream.
      return;
    }
    s->answers.push_back(backup.replica->durable());
  }

  void Answer() {
    Stream* s = RandomStream([](const Stream& s) { return !s.answers.empty(); });
    if (s == nullptr) return;
    auto [from, to] = EndsOf(s);
    Node& primary = node(from);
    if (!primary.acts() || primary.primary == nullptr ||
        primary.primary->epoch() != s->epoch) {
      return;
    }
    const LogPosition position = s->answers.front();
    s->answers.pop_front();
    primary.primary->ReportProgress(to, position, position);
  }

  void BreakStream() {
    Stream* s = RandomStream([](const Stream&) { return true; });
    if (s != nullptr) *s = Stream();
  }

  void Crash() {
    Node& n = nodes_[Uniform(static_cast<int>(nodes_.size()))];
    if (!n.up) return;
    n.up = false;
    n.paused = false;
    n.lease = false;
    n.primary.reset();
    n.replica.reset();
    for (auto& [ends, stream] : streams_) {
      if (ends.first == n.id || ends.second == n.id) stream = Stream();
    }
  }

  void Restart() {
    for (Node& n : nodes_) {
      if (!n.up) {
        n.up = true;
        n.lease = true;
        return;
      }
    }
  }

  void Pause() {
    Node& n = nodes_[Uniform(static_cast<int>(nodes_.size()))];
    if (!n.acts()) return;
    n.paused = true;
    n.lease = false;  // It expires while the node is frozen.
  }

  void Resume() {
    for (Node& n : nodes_) {
      if (n.paused) {
        n.paused = false;
        n.lease = true;  // It joins again, under a new lease.
        return;
      }
    }
  }

  // The controller: a primary without a lease is replaced by the most
  // advanced in-sync backup alive (PlanShard), at the next epoch.
  void Control() {
    std::map<std::string, cluster::NodeRecord> alive;
    for (Node& n : nodes_) {
      if (!n.lease) continue;
      cluster::NodeRecord& r = alive[n.id];
      r.address = n.id;
      if (n.acts()) {
        absl::StatusOr<LogPosition> position = ReadPosition(*n.store);
        if (position.ok()) {
          r.positions[0] = cluster::Position{record_.epoch, position->index};
        }
      }
    }
    cluster::PlacementOptions options;
    options.replication_factor = 3;
    options.position_wait_over = true;
    cluster::ShardPlan plan = cluster::PlanShard(0, record_, alive, options);
    if (plan.write.has_value()) record_ = *plan.write;
  }

  // A node follows the record: becomes its primary, steps down, or holds a
  // backup copy, as ShardHost does.
  void Observe(Node& n) {
    if (record_.primary == n.id) {
      if (n.primary != nullptr && n.primary->epoch() == record_.epoch) return;
      n.primary.reset();
      n.replica.reset();
      ReplicatedStoreOptions options;
      options.epoch = record_.epoch;
      for (const std::string& id : record_.isr) {
        if (id != n.id) options.in_sync.push_back(id);
      }
      options.min_insync = kMinInSync;
      absl::StatusOr<std::unique_ptr<ReplicatedStore>> store =
          ReplicatedStore::Open(n.store.get(), options);
      if (store.ok()) n.primary = *std::move(store);
      return;
    }
    if (n.primary != nullptr) {
      n.primary->Close("stepped down");
      n.primary.reset();
    }
    if (record_.IsReplica(n.id) && n.replica == nullptr) {
      n.replica = Replica::Open(n.store.get()).value();
    }
  }

  // Every acting primary (stale ones too) opens a stream to each other
  // replica it lacks one to, as its shippers do: hello, then from where the
  // copy ends, or a rebuild if it cannot follow.
  void Connect() {
    for (Node& primary : nodes_) {
      if (!primary.acts() || primary.primary == nullptr) continue;
      for (const std::string& id : record_.replicas) {
        if (id == primary.id) continue;
        Stream& s = streams_[{primary.id, id}];
        if (s.open && s.epoch == primary.primary->epoch()) continue;
        Node& backup = node(id);
        if (!backup.acts() || backup.replica == nullptr) continue;
        s = Stream();
        if (!backup.replica->Accept(primary.primary->epoch()).ok()) continue;
        const LogPosition copy = backup.replica->applied();
        absl::StatusOr<bool> diverged = primary.primary->Diverged(copy);
        if (!diverged.ok()) continue;
        if (*diverged) {
          Rebuild(primary, backup);
          continue;
        }
        s.open = true;
        s.epoch = primary.primary->epoch();
        s.next = copy.index + 1;
        primary.primary->ReportProgress(id, copy, backup.replica->durable());
      }
    }
  }

  // The backup's copy replaced by the primary's checkpoint.
  void Rebuild(Node& primary, Node& backup) {
    backup.replica.reset();
    std::unique_ptr<MessageStore> copy = storage::MemoryStore::Open();
    WriteBatch all;
    for (int t = 0; t < storage::kNumTables; ++t) {
      (void)primary.store->Scan(static_cast<Table>(t), "", "",
                                [&](std::string_view k, std::string_view v) {
                                  if (static_cast<Table>(t) == Table::kCounters) {
                                    all.Add(std::string(k),
                                            storage::DecodeCounter(v));
                                  } else {
                                    all.Put(static_cast<Table>(t),
                                            std::string(k), std::string(v));
                                  }
                                  return true;
                                });
    }
    (void)copy->Write(all);
    backup.store = std::move(copy);
    backup.replica = Replica::Open(backup.store.get()).value();
    ++rebuilds_;
  }

  // The primary's in-sync set: a backup without a lease leaves it, one that
  // has every entry joins it (locally first), each by compare-and-set at the
  // primary's epoch (a deposed primary's fails).
  void KeepInSyncSet() {
    for (Node& n : nodes_) {
      if (!n.acts() || n.primary == nullptr) continue;
      const bool current =
          record_.primary == n.id && record_.epoch == n.primary->epoch();
      const auto backups = n.primary->Backups();
      for (const std::string& id : record_.replicas) {
        if (id == n.id) continue;
        if (record_.InIsr(id) && !node(id).lease) {
          if (!current) continue;
          std::erase(record_.isr, id);
          n.primary->RemoveInSync(id);
        } else if (!record_.InIsr(id) && node(id).lease) {
          auto b = backups.find(id);
          if (b == backups.end() ||
              b->second.applied.index < n.primary->last().index) {
            continue;
          }
          n.primary->AddInSync(id);
          if (current) {
            record_.isr.push_back(id);
          } else {
            n.primary->RemoveInSync(id);
          }
        }
      }
    }
  }

  // Clients hear OK for the writes every in-sync backup has made durable.
  void Acknowledge() {
    for (auto it = pending_.begin(); it != pending_.end();) {
      Node& n = node(it->node);
      if (n.primary == nullptr || n.primary->epoch() != it->epoch) {
        it = pending_.erase(it);  // The outcome stays unknown.
        continue;
      }
      if (n.acts() && n.primary->Acknowledged(it->index, /*durable=*/true)) {
        acknowledged_[it->key] = it->epoch;
        acknowledgers_[it->epoch].insert(n.id);
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
  }

  bool Fail(std::string what) {
    failure_ = std::move(what);
    return false;
  }

  bool Check(const std::string& when) {
    // One primary per epoch: only it can complete a write at that epoch.
    for (const auto& [epoch, ids] : acknowledgers_) {
      if (ids.size() > 1) {
        return Fail(absl::StrCat(when, ": writes of epoch ", epoch,
                                 " acknowledged by ", absl::StrJoin(ids, ",")));
      }
    }
    // Copies at equal positions hold equal messages.
    for (Node& x : nodes_) {
      for (Node& y : nodes_) {
        if (&x == &y) continue;
        const LogPosition px = ReadPosition(*x.store).value();
        if (px.index == 0 || px != ReadPosition(*y.store).value()) continue;
        if (Messages(*x.store) != Messages(*y.store)) {
          return Fail(absl::StrCat(when, ": ", x.id, " and ", y.id,
                                   " are both at {", px.epoch, ",", px.index,
                                   "} but hold different messages"));
        }
      }
    }
    for (const std::string& id : record_.isr) {
      Node& n = node(id);
      for (const auto& [key, epoch] : acknowledged_) {
        absl::StatusOr<std::optional<std::string>> value =
            n.store->Get(Table::kMessages, key);
        if (!value.ok() || !value->has_value()) {
          return Fail(absl::StrCat(when, ": ", key, ", acknowledged at epoch ",
                                   epoch, ", is missing from ", id,
                                   ", in the in-sync set [",
                                   absl::StrJoin(record_.isr, ","),
                                   "] at epoch ", record_.epoch));
        }
      }
    }
    for (const std::string& x : record_.isr) {
      for (const std::string& y : record_.isr) {
        const LogPosition px = ReadPosition(*node(x).store).value();
        const LogPosition py = ReadPosition(*node(y).store).value();
        if (px.index > py.index) continue;
        if (Diverged(*node(y).store, py, px).value()) {
          return Fail(absl::StrCat(when, ": in-sync copies diverged: ", x,
                                   " at {", px.epoch, ",", px.index, "}, ", y,
                                   " at {", py.epoch, ",", py.index, "}"));
        }
      }
    }
    return true;
  }

  // Everything heals: nodes back, a controller round, streams drained.
  void Heal() {
    for (Node& n : nodes_) {
      n.up = true;
      n.paused = false;
      n.lease = true;
    }
    for (int round = 0; round < 200; ++round) {
      Control();
      for (Node& n : nodes_) Observe(n);
      Connect();
      for (auto& [ends, s] : streams_) {
        Node& primary = node(ends.first);
        if (!s.open || primary.primary == nullptr) continue;
        absl::StatusOr<std::vector<std::shared_ptr<const std::string>>>
            entries = primary.primary->ReadFrom(s.next, 1 << 20,
                                                absl::InfinitePast());
        if (!entries.ok()) {
          s = Stream();
          if (entries.status().code() == absl::StatusCode::kOutOfRange) {
            Rebuild(primary, node(ends.second));
          }
          continue;
        }
        for (const auto& bytes : *entries) s.sent.push_back(*bytes);
        s.next += static_cast<int64_t>(entries->size());
        while (!s.sent.empty()) {
          Node& backup = node(ends.second);
          std::vector<LogEntry> one;
          one.push_back(DecodeEntry(s.sent.front()).value());
          s.sent.pop_front();
          if (!backup.replica->Apply(s.epoch, std::move(one)).ok()) {
            s = Stream();
            break;
          }
          s.answers.push_back(backup.replica->durable());
        }
        while (!s.answers.empty()) {
          primary.primary->ReportProgress(ends.second, s.answers.front(),
                                          s.answers.front());
          s.answers.pop_front();
        }
      }
      KeepInSyncSet();
      Acknowledge();
    }
  }

  static std::vector<std::string> Messages(MessageStore& store) {
    std::vector<std::string> keys;
    (void)store.Scan(Table::kMessages, "", "",
                     [&](std::string_view k, std::string_view) {
                       keys.emplace_back(k);
                       return true;
                     });
    return keys;
  }

  // Healed, every copy holds exactly the primary's messages.
  bool CheckConverged() {
    auto messages = [](MessageStore& store) { return Messages(store); };
    const std::vector<std::string> at_primary =
        messages(*node(record_.primary).store);
    for (Node& n : nodes_) {
      if (messages(*n.store) != at_primary) {
        return Fail(absl::StrCat("healed, ", n.id, " holds ",
                                 messages(*n.store).size(),
                                 " messages, the primary ", record_.primary,
                                 " ", at_primary.size()));
      }
    }
    if (record_.isr.size() != nodes_.size()) {
      return Fail(absl::StrCat("healed, the in-sync set is only [",
                               absl::StrJoin(record_.isr, ","), "]"));
    }
    return true;
  }

  std::mt19937_64 rng_;
  std::vector<Node> nodes_;
  ShardRecord record_;
  std::map<std::pair<std::string, std::string>, Stream> streams_;
  std::vector<Pending> pending_;
  std::map<std::string, int64_t> acknowledged_;
  // By epoch, the nodes that completed a write at it.
  std::map<int64_t, std::set<std::string>> acknowledgers_;
  int next_key_ = 0;
  int rebuilds_ = 0;
  std::string last_action_;
  std::string failure_;
};

// HOURGLASS_SIMULATION_SEED=N replays seed N alone.
TEST(ReplicationSimulationTest, NothingAcknowledgedIsLostAndCopiesNeverSplit) {
  uint64_t first = 1;
  uint64_t last = kSeeds;
  if (const char* seed = std::getenv("HOURGLASS_SIMULATION_SEED")) {
    first = last = std::strtoull(seed, nullptr, 10);
  }
  std::cout << "seeds " << first << " to " << last << ", " << kSteps
            << " steps each (HOURGLASS_SIMULATION_SEED=N replays one)"
            << std::endl;
  size_t acknowledged = 0;
  int64_t epochs = 0;
  for (uint64_t seed = first; seed <= last; ++seed) {
    Simulation simulation(seed);
    ASSERT_TRUE(simulation.Run())
        << "seed " << seed << ": " << simulation.failure();
    acknowledged += simulation.acknowledged();
    epochs += simulation.epochs();
  }
  // The runs did what they are for: writes acknowledged, primaries changed.
  if (first != last) {
    EXPECT_GT(acknowledged, 20 * (last - first + 1));
    EXPECT_GT(epochs, static_cast<int64_t>(2 * (last - first + 1)));
  }
  std::cout << acknowledged << " writes acknowledged, " << epochs
            << " epochs in all" << std::endl;
}

}  // namespace
}  // namespace hourglass::replication
