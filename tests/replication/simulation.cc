#include "tests/replication/simulation.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "cluster/placement.h"
#include "storage/memory_store.h"

namespace hourglass::replication::simulation {
namespace {

namespace act = cluster::replica_action;
using cluster::ShardRecord;
using storage::MessageStore;
using storage::Table;
using storage::WriteBatch;

// Everything `store` holds, as one batch.
WriteBatch ContentsOf(MessageStore& store) {
  WriteBatch all;
  for (int t = 0; t < storage::kNumTables; ++t) {
    (void)store.Scan(static_cast<Table>(t), "", "",
                     [&](std::string_view k, std::string_view v) {
                       if (static_cast<Table>(t) == Table::kCounters) {
                         all.Add(std::string(k), storage::DecodeCounter(v));
                       } else {
                         all.Put(static_cast<Table>(t), std::string(k),
                                 std::string(v));
                       }
                       return true;
                     });
  }
  return all;
}

template <typename Pick>
std::vector<int> Where(int n, Pick pick) {
  std::vector<int> picked;
  for (int i = 0; i < n; ++i) {
    if (pick(i)) picked.push_back(i);
  }
  return picked;
}

cluster::LogEnd EndOf(LogPosition p) { return {p.epoch, p.index}; }

}  // namespace

absl::Status PowerLossStore::SyncLog() {
  if (absl::Status s = inner().SyncLog(); !s.ok()) return s;
  synced_ = ContentsOf(inner());
  return absl::OkStatus();
}

void PowerLossStore::LosePower() {
  std::unique_ptr<MessageStore> disk = storage::MemoryStore::Open();
  (void)disk->Write(synced_);
  ReplaceInner(std::move(disk));
}

World::World(uint64_t seed, WorldOptions options)
    : options_(std::move(options)),
      rng_(seed),
      now_(absl::FromUnixSeconds(1'800'000'000)),
      controller_({.shards = options_.shards,
                   .replication_factor = options_.replication_factor,
                   .min_insync = options_.min_insync,
                   .position_wait = kPositionWait}) {
  for (size_t i = 0; i < options_.pool.size(); ++i) {
    Node n;
    n.id = options_.pool[i];
    n.member = n.up = n.lease = static_cast<int>(i) < options_.members;
    for (int s = 0; s < options_.shards; ++s) {
      Copy& c = n.copies.emplace_back();
      c.store = std::make_unique<PowerLossStore>();
      c.machine = NewMachine(n.id, s);
    }
    nodes_.push_back(std::move(n));
  }
  records_.resize(options_.shards);
  revisions_.resize(options_.shards);
  acknowledged_.resize(options_.shards);
  checked_.resize(options_.shards);
  Control();  // Creates the shards.
}

std::unique_ptr<cluster::ReplicaMachine> World::NewMachine(
    const std::string& id, int shard) const {
  return std::make_unique<cluster::ReplicaMachine>(
      cluster::ReplicaMachineOptions{.node = id,
                                     .shard = shard,
                                     .min_insync = options_.min_insync,
                                     .lag_timeout = kLagTimeout});
}

int World::Uniform(int n) {
  return std::uniform_int_distribution<int>(0, n - 1)(rng_);
}

World::Node& World::node(const std::string& id) {
  for (Node& n : nodes_) {
    if (n.id == id) return n;
  }
  std::abort();
}

void World::Write() {
  std::vector<std::pair<Node*, int>> serving;
  for (Node& n : nodes_) {
    for (int s = 0; s < options_.shards; ++s) {
      const Copy& c = n.copies[s];
      if (n.acts() && c.primary != nullptr && c.engine) {
        serving.emplace_back(&n, s);
      }
    }
  }
  if (serving.empty()) return;
  auto [n, shard] = serving[Uniform(static_cast<int>(serving.size()))];
  Copy& c = n->copies[shard];
  const std::string key = absl::StrCat("m", next_key_++);
  WriteBatch batch;
  const bool durable = Uniform(4) != 0;
  batch.Put(Table::kMessages, key, "v");
  batch.set_needs_sync(durable);
  absl::StatusOr<LogPosition> entry = c.primary->Append(batch);
  if (!entry.ok()) return;
  // The primary syncs its own store before it answers (the commit queue
  // does), then waits for its backups.
  if (durable) (void)c.store->SyncLog();
  pending_.push_back({shard, n->id, *entry, durable, now_, key});
}

World::Stream* World::RandomStream(bool (*usable)(const Stream&)) {
  std::vector<Stream*> candidates;
  for (auto& [key, stream] : streams_) {
    if (stream.open && usable(stream)) candidates.push_back(&stream);
  }
  if (candidates.empty()) return nullptr;
  return candidates[Uniform(static_cast<int>(candidates.size()))];
}

World::StreamKey World::KeyOf(const Stream* s) {
  for (auto& [key, stream] : streams_) {
    if (&stream == s) return key;
  }
  std::abort();
}

void World::Ship() {
  Stream* s = RandomStream([](const Stream&) { return true; });
  if (s == nullptr) return;
  const auto [shard, from, to] = KeyOf(s);
  Node& n = node(from);
  ReplicatedStore* primary = n.copies[shard].primary.get();
  if (!n.acts() || primary == nullptr || primary->epoch() != s->epoch) return;
  absl::StatusOr<std::vector<std::shared_ptr<const std::string>>> entries =
      primary->ReadFrom(s->next, 1 + Uniform(3) * 60, absl::InfinitePast());
  if (!entries.ok()) {
    EndStream({shard, from, to}, *s);  // Closed, or behind what is kept.
    if (entries.status().code() == absl::StatusCode::kOutOfRange) {
      node(to).copies[shard].rebuild_asked = "behind the entries kept";
    }
    return;
  }
  for (const auto& bytes : *entries) s->sent.push_back(*bytes);
  s->next += static_cast<int64_t>(entries->size());
}

void World::Apply() {
  Stream* s = RandomStream([](const Stream& s) { return !s.sent.empty(); });
  if (s == nullptr) return;
  const auto [shard, from, to] = KeyOf(s);
  Node& backup = node(to);
  Replica* replica = backup.copies[shard].replica.get();
  if (!backup.acts() || replica == nullptr) return;
  const std::string bytes = std::move(s->sent.front());
  s->sent.pop_front();
  const LogEntry entry = DecodeEntry(bytes).value();
  if (!replica->Write(s->epoch, {entry}).ok()) {
    EndStream({shard, from, to}, *s);  // The backup ends the stream.
    return;
  }
  s->answers.emplace_back(replica->applied(), replica->durable());
}

void World::SyncBackup() {
  Stream* s = RandomStream([](const Stream&) { return true; });
  if (s == nullptr) return;
  const auto [shard, from, to] = KeyOf(s);
  Node& backup = node(to);
  Replica* replica = backup.copies[shard].replica.get();
  if (!backup.acts() || replica == nullptr) return;
  if (replica->durable() == replica->applied()) return;
  if (!replica->Sync().ok()) return;
  s->answers.emplace_back(replica->applied(), replica->durable());
}

void World::Answer() {
  Stream* s = RandomStream([](const Stream& s) { return !s.answers.empty(); });
  if (s == nullptr) return;
  const auto [shard, from, to] = KeyOf(s);
  Node& n = node(from);
  ReplicatedStore* primary = n.copies[shard].primary.get();
  if (!n.acts() || primary == nullptr || primary->epoch() != s->epoch) return;
  const auto [applied, durable] = s->answers.front();
  s->answers.pop_front();
  primary->ReportProgress(to, applied, durable);
}

void World::BreakStream() {
  Stream* s = RandomStream([](const Stream&) { return true; });
  if (s != nullptr) EndStream(KeyOf(s), *s);
}

void World::Forget(Node& n) {
  n.positions.clear();
  for (int s = 0; s < options_.shards; ++s) {
    Copy& c = n.copies[s];
    c.primary.reset();
    c.engine = false;
    c.replica.reset();
    c.shippers.clear();
    c.rebuild_asked.clear();
    c.machine = NewMachine(n.id, s);
    StopStreamsOf(n.id, s);
  }
}

void World::EndStream(const StreamKey& key, Stream& s) {
  const auto& [shard, from, to] = key;
  ReplicatedStore* primary = node(from).copies[shard].primary.get();
  if (s.open && primary != nullptr) primary->Disconnected(to);
  s = Stream();
}

void World::StopStreamsOf(const std::string& id, int shard) {
  for (auto& [key, stream] : streams_) {
    const auto& [s, from, to] = key;
    if (s == shard && (from == id || to == id)) EndStream(key, stream);
  }
}

void World::Crash() {
  // Any member, as likely up or not (a crash of one that is down is none).
  const int count = static_cast<int>(nodes_.size());
  std::vector<int> members =
      Where(count, [&](int i) { return nodes_[i].member; });
  Node& n = nodes_[members[Uniform(static_cast<int>(members.size()))]];
  if (!n.up) return;
  n.up = n.paused = false;
  if (etcd_up_) {
    n.lease = false;
  } else {
    n.lease_ends = true;
  }
  Forget(n);
}

bool World::SurvivesDiskLoss(const Node& target) {
  // A single fault: the controller still has a copy to promote holding
  // every acknowledged write, in each shard (losing two disks at once may
  // lose writes; the promise is about one).
  for (int s = 0; s < options_.shards; ++s) {
    if (!records_[s].has_value()) continue;
    const ShardRecord& record = *records_[s];
    std::vector<MessageStore*> promotable;
    for (Node& other : nodes_) {
      MessageStore* store = other.copies[s].store.get();
      if (&other != &target && !other.wiped && store != nullptr &&
          (record.InIsr(other.id) || record.IsEligible(other.id))) {
        promotable.push_back(store);
      }
    }
    if (promotable.empty()) return false;
    for (const auto& acknowledged : acknowledged_[s]) {
      const std::string& key = acknowledged.first;
      if (std::none_of(
              promotable.begin(), promotable.end(),
              [&key](MessageStore* store) {
                return store->Get(Table::kMessages, key).value().has_value();
              })) {
        return false;
      }
    }
  }
  return true;
}

void World::LoseDisk() {
  const int count = static_cast<int>(nodes_.size());
  std::vector<int> members = Where(count, [&](int i) {
    return nodes_[i].member && !nodes_[i].wiped && SurvivesDiskLoss(nodes_[i]);
  });
  if (members.empty()) return;
  Node& n = nodes_[members[Uniform(static_cast<int>(members.size()))]];
  if (n.up) {
    n.up = n.paused = false;
    if (etcd_up_) {
      n.lease = false;
    } else {
      n.lease_ends = true;
    }
  }
  Forget(n);
  for (Copy& c : n.copies) c.store.reset();
  n.wiped = true;
}

void World::Restart() {
  const int count = static_cast<int>(nodes_.size());
  std::vector<int> down = Where(count, [&](int i) {
    return nodes_[i].member && !nodes_[i].up && !nodes_[i].lease;
  });
  if (down.empty() || !etcd_up_) return;
  Node& n = nodes_[down[Uniform(static_cast<int>(down.size()))]];
  if (n.wiped) {
    // ClusterNode::Join: not while a record counts on the copy it lost
    // (primary, or in sync); an eligible copy it no longer is, it says so.
    for (int s = 0; s < options_.shards; ++s) {
      const std::optional<ShardRecord>& record = records_[s];
      if (record.has_value() &&
          (record->primary == n.id || record->InIsr(n.id))) {
        return;
      }
    }
    for (int s = 0; s < options_.shards; ++s) {
      if (records_[s].has_value() && records_[s]->IsEligible(n.id)) {
        ShardRecord next = *records_[s];
        std::erase(next.eligible, n.id);
        WriteRecord(s, next);
      }
    }
    n.wiped = false;
  }
  n.up = n.lease = true;
}

void World::Pause() {
  const int count = static_cast<int>(nodes_.size());
  std::vector<int> members =
      Where(count, [&](int i) { return nodes_[i].member; });
  Node& n = nodes_[members[Uniform(static_cast<int>(members.size()))]];
  if (!n.acts()) return;
  n.paused = true;
  // Its lease expires while it is frozen.
  if (etcd_up_) {
    n.lease = false;
    n.positions.clear();
  } else {
    n.lease_ends = true;
  }
}

void World::Resume() {
  const int count = static_cast<int>(nodes_.size());
  std::vector<int> paused =
      Where(count, [&](int i) { return nodes_[i].paused; });
  if (paused.empty()) return;
  Node& n = nodes_[paused[Uniform(static_cast<int>(paused.size()))]];
  n.paused = false;
  // It joins again under a new lease (Member::Register), once etcd answers.
  if (etcd_up_) n.lease = true;
}

void World::PauseBackups() {
  const int shard = Uniform(options_.shards);
  if (!records_[shard].has_value()) return;
  const ShardRecord& record = *records_[shard];
  for (const std::string& id : record.replicas) {
    Node& n = node(id);
    if (id == record.primary || !n.acts()) continue;
    n.paused = true;
    if (etcd_up_) {
      n.lease = false;
      n.positions.clear();
    } else {
      n.lease_ends = true;
    }
  }
}

void World::PowerLoss() {
  for (Node& n : nodes_) {
    if (!n.member) continue;
    n.up = n.paused = false;
    if (etcd_up_) {
      n.lease = false;
    } else {
      n.lease_ends = true;
    }
    Forget(n);
    for (Copy& c : n.copies) {
      if (c.store != nullptr) c.store->LosePower();
    }
  }
  // What waited for an answer has none: its outcome stays unknown.
  pending_.clear();
  ++stats_.power_losses;
}

void World::EtcdDown() { etcd_up_ = false; }

void World::EtcdUp() {
  if (etcd_up_) return;
  etcd_up_ = true;
  for (Node& n : nodes_) {
    if (n.lease_ends || (n.member && !n.acts())) {
      n.lease = false;
      n.positions.clear();
    }
    n.lease_ends = false;
    // A node that runs and lost its lease joins again.
    if (n.member && n.acts() && !n.lease) n.lease = true;
  }
}

void World::Join() {
  if (!etcd_up_) return;
  const int count = static_cast<int>(nodes_.size());
  std::vector<int> candidates = Where(count, [&](int i) {
    const Node& n = nodes_[i];
    if (!n.member) return true;
    if (n.up || n.lease) return false;
    for (const auto& record : records_) {
      if (record.has_value() &&
          (record->InIsr(n.id) || record->primary == n.id)) {
        return false;
      }
    }
    // Joining empty, it loses the disk it had.
    return n.wiped || SurvivesDiskLoss(n);
  });
  if (candidates.empty()) return;
  Node& n = nodes_[candidates[Uniform(static_cast<int>(candidates.size()))]];
  Forget(n);
  for (Copy& c : n.copies) c.store = std::make_unique<PowerLossStore>();
  // Holding no copy, it is no eligible copy any more: it says so before it
  // joins (ClusterNode::Join), or it could be promoted empty.
  for (int s = 0; s < options_.shards; ++s) {
    if (records_[s].has_value() && records_[s]->IsEligible(n.id)) {
      ShardRecord next = *records_[s];
      std::erase(next.eligible, n.id);
      WriteRecord(s, next);
    }
  }
  n.member = n.up = n.lease = true;
  n.wiped = false;
  ++stats_.joins;
}

void World::Drain() {
  const int count = static_cast<int>(nodes_.size());
  std::vector<int> members =
      Where(count, [&](int i) { return nodes_[i].member; });
  const std::string& id =
      nodes_[members[Uniform(static_cast<int>(members.size()))]].id;
  if (!etcd_up_) return;
  if (draining_.erase(id) > 0) return;
  // Operators drain while enough others stay to hold every shard.
  int staying = 0;
  for (const Node& n : nodes_) {
    staying += n.member && n.id != id && !draining_.contains(n.id);
  }
  if (staying >= options_.replication_factor) draining_.insert(id);
}

void World::Pin() {
  if (!etcd_up_) return;
  const int shard = Uniform(options_.shards);
  if (pins_.contains(shard) && Uniform(2) == 0) {
    pins_.erase(shard);
    return;
  }
  // Cluster.MoveShard refuses a node not alive or draining.
  const int count = static_cast<int>(nodes_.size());
  std::vector<int> eligible = Where(count, [&](int i) {
    return nodes_[i].lease && !draining_.contains(nodes_[i].id);
  });
  if (eligible.empty()) return;
  pins_[shard] =
      nodes_[eligible[Uniform(static_cast<int>(eligible.size()))]].id;
}

std::map<std::string, cluster::NodeRecord> World::AliveRecords() {
  std::map<std::string, cluster::NodeRecord> alive;
  for (const Node& n : nodes_) {
    if (!n.lease) continue;
    cluster::NodeRecord& r = alive[n.id];
    r.address = n.id;
    if (auto zone = options_.zones.find(n.id); zone != options_.zones.end()) {
      r.zone = zone->second;
    }
    r.positions = n.positions;
  }
  return alive;
}

std::map<int, ShardRecord> World::Records() const {
  std::map<int, ShardRecord> records;
  for (int s = 0; s < options_.shards; ++s) {
    if (records_[s].has_value()) records[s] = *records_[s];
  }
  return records;
}

cluster::ClusterView World::View() {
  cluster::ClusterView view;
  view.nodes = AliveRecords();
  for (int s = 0; s < options_.shards; ++s) {
    if (records_[s].has_value()) view.shards[s] = {*records_[s], revisions_[s]};
  }
  view.draining = draining_;
  view.pins = pins_;
  return view;
}

void World::WriteRecord(int shard, const ShardRecord& write) {
  const std::optional<ShardRecord>& old = records_[shard];
  if (old.has_value()) {
    if (write.epoch == old->epoch + 1 && write.primary == old->transfer_to &&
        !old->transfer_to.empty()) {
      ++stats_.transfers;
    }
    if (write.epoch == old->epoch + 1 && old->IsEligible(write.primary) &&
        !old->InIsr(write.primary)) {
      ++stats_.eligible_promotions;
    }
    if (write.primary.empty() && !old->primary.empty()) ++stats_.given_back;
    if (broken_.empty() &&
        (write.epoch < old->epoch ||
         (write.primary != old->primary && !write.primary.empty() &&
          write.epoch == old->epoch))) {
      broken_ =
          absl::StrCat("shard ", shard, ": the record went from epoch ",
                       old->epoch, " (primary ", old->primary, ") to epoch ",
                       write.epoch, " (primary ", write.primary, ")");
    }
  }
  if (old.has_value() && write.epoch != old->epoch && !write.primary.empty() &&
      broken_.empty()) {
    // A new primary holds every in-sync copy (they are prefixes of its
    // log) and every acknowledged write.
    Node& primary_node = node(write.primary);
    MessageStore* primary = primary_node.copies[shard].store.get();
    if (primary == nullptr) {
      broken_ = absl::StrCat("shard ", shard, ": ", write.primary,
                             " became primary at epoch ", write.epoch,
                             " with no copy");
    } else {
      const LogPosition last = ReadPosition(*primary).value();
      for (const std::string& id : write.isr) {
        MessageStore* store = node(id).copies[shard].store.get();
        if (store == nullptr) continue;
        const LogPosition copy = ReadPosition(*store).value();
        if (copy.index > last.index || Diverged(*primary, last, copy).value()) {
          broken_ = absl::StrCat(
              "shard ", shard, ": ", write.primary, " (at {", last.epoch, ",",
              last.index, "}) became primary at epoch ", write.epoch,
              " with in-sync set [", absl::StrJoin(write.isr, ","), "] but ",
              id, " holds what it lacks (at {", copy.epoch, ",", copy.index,
              "})");
          break;
        }
      }
      const std::vector<std::string> held = Messages(*primary);
      for (const auto& [key, epoch] : acknowledged_[shard]) {
        if (broken_.empty() &&
            !std::binary_search(held.begin(), held.end(), key)) {
          broken_ = absl::StrCat(
              "shard ", shard, ": ", write.primary, " became primary at epoch ",
              write.epoch, " without ", key, ", acknowledged at epoch ", epoch);
        }
      }
    }
  }
  records_[shard] = write;
  ++revisions_[shard];
}

void World::Control() {
  if (!etcd_up_) return;
  // The controller is the first node that runs and holds a lease; another
  // node leading starts from nothing (Member resets its controller).
  std::string leader;
  for (const Node& n : nodes_) {
    if (n.acts() && n.lease) {
      leader = n.id;
      break;
    }
  }
  if (leader != controller_node_) controller_.Reset();
  controller_node_ = leader;
  if (leader.empty()) return;
  const cluster::ClusterView view = View();
  const cluster::Controller::Decision decision = controller_.Decide(view, now_);
  for (const cluster::ControllerWrite& write : decision.writes) {
    // Compare-and-set on the record's revision.
    if (write.mod_revision.has_value()
            ? !records_[write.shard].has_value() ||
                  revisions_[write.shard] != *write.mod_revision
            : records_[write.shard].has_value()) {
      continue;
    }
    const std::optional<ShardRecord>& old = records_[write.shard];
    if (old.has_value() && write.record.epoch == old->epoch &&
        write.record.primary == old->primary) {
      // PlanRebalance's step: the in-sync set never shrinks below
      // min_insync in a move.
      if (write.record.isr.size() < old->isr.size() &&
          static_cast<int>(write.record.isr.size()) < options_.min_insync &&
          broken_.empty()) {
        broken_ = absl::StrCat(
            "a move took the in-sync set of shard ", write.shard, " from [",
            absl::StrJoin(old->isr, ","), "] to [",
            absl::StrJoin(write.record.isr, ","), "]: ", write.reason);
      }
      stats_.adds += write.record.replicas.size() > old->replicas.size();
      stats_.drops += write.record.replicas.size() < old->replicas.size();
    }
    WriteRecord(write.shard, write.record);
  }
}

void World::Settle() {
  now_ += kStep;
  for (Node& n : nodes_) {
    if (!n.acts()) continue;
    for (int s = 0; s < options_.shards; ++s) StepMachine(n, s);
  }
  for (Node& n : nodes_) {
    if (n.acts() && n.lease && etcd_up_) ReportPositions(n);
  }
  Connect();
  Acknowledge();
}

// The facts a node's ShardHost would gather (node/shard_host.cc).
cluster::ReplicaFacts World::Facts(Node& n, int shard) {
  Copy& c = n.copies[shard];
  cluster::ReplicaFacts facts;
  facts.now = now_;
  facts.record = records_[shard];
  facts.record_revision = revisions_[shard];
  for (const auto& [id, record] : AliveRecords()) facts.alive[id] = id;
  facts.has_copy = c.store != nullptr;
  if (c.replica != nullptr) {
    facts.accepted_epoch = c.replica->accepted_epoch();
  } else if (c.store != nullptr) {
    facts.accepted_epoch = ReadAcceptedEpoch(*c.store).value();
  }
  facts.rebuild_asked = c.rebuild_asked;
  facts.following = c.replica != nullptr;
  if (c.primary != nullptr) {
    cluster::ReplicaFacts::Primary& primary =
        facts.primary.emplace(cluster::ReplicaFacts::Primary{});
    primary.epoch = c.primary->epoch();
    primary.close_reason = c.primary->close_reason();
    primary.closed = !primary.close_reason.empty();
    primary.last = EndOf(c.primary->last());
    primary.acknowledged = EndOf(c.primary->acknowledged());
    for (const auto& [id, state] : c.primary->Backups()) {
      primary.backups[id] = {EndOf(state.applied),
                             EndOf(state.durable),
                             state.last_heard,
                             state.lacking_since,
                             c.primary->BytesAfter(state.applied.index),
                             state.in_sync,
                             state.counted,
                             state.connected};
    }
  }
  facts.shippers = c.shippers;
  facts.engine = c.engine ? cluster::ReplicaFacts::Engine::kOpen
                          : cluster::ReplicaFacts::Engine::kClosed;
  return facts;
}

void World::StepMachine(Node& n, int shard) {
  const cluster::ReplicaFacts facts = Facts(n, shard);
  for (const cluster::ReplicaAction& action :
       n.copies[shard].machine->Step(facts)) {
    CarryOut(n, shard, action, facts.record_revision);
  }
}

// What ShardHost does for each action, over the simulated copies.
void World::CarryOut(Node& n, int shard, const cluster::ReplicaAction& action,
                     int64_t revision) {
  Copy& c = n.copies[shard];
  if (const auto* open = std::get_if<act::OpenPrimary>(&action)) {
    if (c.store == nullptr) return;
    c.replica.reset();
    StopStreamsOf(n.id, shard);
    ReplicatedStoreOptions options;
    options.epoch = open->epoch;
    options.in_sync = open->in_sync;
    options.min_insync = options_.min_insync;
    options.ack_timeout = kAckTimeout;
    options.now = [this] { return now_; };
    absl::StatusOr<std::unique_ptr<ReplicatedStore>> store =
        ReplicatedStore::Open(c.store.get(), options);
    if (store.ok()) c.primary = *std::move(store);
  } else if (std::holds_alternative<act::StepDown>(action)) {
    if (c.primary != nullptr) c.primary->Close("stepped down");
    c.primary.reset();
    c.engine = false;
    c.shippers.clear();
    StopStreamsOf(n.id, shard);
  } else if (const auto* start = std::get_if<act::StartShipper>(&action)) {
    c.shippers[start->node] = start->address;
  } else if (const auto* stop = std::get_if<act::StopShipper>(&action)) {
    c.shippers.erase(stop->node);
    const StreamKey key{shard, n.id, stop->node};
    EndStream(key, streams_[key]);
  } else if (const auto* add = std::get_if<act::AddInSync>(&action)) {
    if (c.primary != nullptr) c.primary->AddInSync(add->node);
  } else if (const auto* count = std::get_if<act::CountInSync>(&action)) {
    if (c.primary != nullptr) c.primary->CountInSync(count->node);
  } else if (const auto* remove = std::get_if<act::RemoveInSync>(&action)) {
    if (c.primary != nullptr) c.primary->RemoveInSync(remove->node);
  } else if (const auto* write = std::get_if<act::WriteRecord>(&action)) {
    // Member::WriteAsPrimary: a compare-and-set, with a lease, etcd up.
    if (etcd_up_ && n.lease && revisions_[shard] == revision &&
        records_[shard].has_value() && records_[shard]->primary == n.id) {
      WriteRecord(shard, write->next);
    }
  } else if (std::holds_alternative<act::OpenEngine>(action)) {
    // The engine opens at once here; writes then reach the store.
    if (c.primary != nullptr) c.engine = true;
  } else if (std::holds_alternative<act::CloseEngine>(action)) {
    c.engine = false;
  } else if (std::holds_alternative<act::Follow>(action)) {
    if (c.store != nullptr && c.replica == nullptr) {
      c.replica = Replica::Open(c.store.get()).value();
    }
  } else if (std::holds_alternative<act::StopFollowing>(action)) {
    c.replica.reset();
    StopStreamsOf(n.id, shard);
  } else if (const auto* rebuild = std::get_if<act::Rebuild>(&action)) {
    Rebuild(shard, node(rebuild->from), n);
  } else if (std::holds_alternative<act::OpenCopy>(action)) {
    if (c.store == nullptr) c.store = std::make_unique<PowerLossStore>();
  } else if (std::holds_alternative<act::RemoveCopy>(action)) {
    c.replica.reset();
    c.store.reset();
    StopStreamsOf(n.id, shard);
  }
  // Refuse, KeepCopy, HandedOver: nothing to simulate (HandedOver is
  // reported from the machine, ReportPositions).
}

// Member::ReportPositions: the node record's positions brought up to date
// by the real rule (placement.h PositionsToReport), from what the node's
// copies hold now (ShardHost::Position and HandedOver).
void World::ReportPositions(Node& n) {
  n.positions = cluster::PositionsToReport(
      n.id, Records(), AliveRecords(),
      [&n](int shard) -> std::optional<cluster::LogEnd> {
        const Copy& c = n.copies[shard];
        if (c.store == nullptr) return std::nullopt;
        LogPosition end = ReadPosition(*c.store).value();
        if (c.replica != nullptr) return std::nullopt;  // Still following.
        if (c.primary != nullptr) end = c.primary->last();
        return EndOf(end);
      },
      [&n](int shard) { return n.copies[shard].machine->handed_over(); });
}

// Every acting primary opens a stream to each backup it runs a shipper
// for, as its shippers do: hello, then from where the copy ends, or a
// request to rebuild if it cannot follow. Streams without a shipper end.
void World::Connect() {
  for (auto& [key, s] : streams_) {
    const auto& [shard, from, to] = key;
    const Copy& c = node(from).copies[shard];
    if (s.open && (c.primary == nullptr || !c.shippers.contains(to) ||
                   c.primary->epoch() != s.epoch)) {
      EndStream(key, s);
    }
  }
  for (Node& n : nodes_) {
    if (!n.acts()) continue;
    for (int shard = 0; shard < options_.shards; ++shard) {
      Copy& c = n.copies[shard];
      ReplicatedStore* primary = c.primary.get();
      if (primary == nullptr) continue;
      for (const auto& [id, address] : c.shippers) {
        Stream& s = streams_[{shard, n.id, id}];
        if (s.open) continue;
        Node& backup = node(id);
        Copy& b = backup.copies[shard];
        Replica* replica = b.replica.get();
        if (!backup.acts() || replica == nullptr) continue;
        if (!replica->Accept(primary->epoch()).ok()) continue;
        const LogPosition copy = replica->applied();
        absl::StatusOr<bool> diverged = primary->Diverged(copy);
        if (!diverged.ok()) continue;
        if (*diverged) {
          b.rebuild_asked = "its copy diverged";
          continue;
        }
        s.open = true;
        s.epoch = primary->epoch();
        s.next = copy.index + 1;
        primary->ReportProgress(id, copy, replica->durable());
      }
    }
  }
}

// The backup's copy replaced by the primary's checkpoint (synced: a
// rebuild syncs every file).
void World::Rebuild(int shard, Node& primary, Node& backup) {
  Copy& c = backup.copies[shard];
  MessageStore* from = primary.copies[shard].store.get();
  if (from == nullptr || primary.copies[shard].primary == nullptr ||
      !primary.acts()) {
    return;  // The fetch fails; the backup keeps its copy.
  }
  c.replica.reset();
  StopStreamsOf(backup.id, shard);
  auto copy = std::make_unique<PowerLossStore>();
  (void)copy->Write(ContentsOf(*from));
  (void)copy->SyncLog();
  c.store = std::move(copy);
  c.rebuild_asked.clear();
  ++stats_.rebuilds;
}

// Clients hear the outcome of their writes as the primary's store gives
// it (ReplicatedStore::Outcome: acknowledged, or failed once the in-sync
// set fell below min_insync or the ack timeout passed, which closes the
// store).
void World::Acknowledge() {
  for (auto it = pending_.begin(); it != pending_.end();) {
    Node& n = node(it->node);
    ReplicatedStore* primary = n.copies[it->shard].primary.get();
    if (primary == nullptr || primary->epoch() != it->entry.epoch ||
        !n.acts()) {
      if (primary == nullptr || primary->epoch() != it->entry.epoch) {
        it = pending_.erase(it);  // The outcome stays unknown.
      } else {
        ++it;
      }
      continue;
    }
    const std::optional<absl::Status> outcome =
        primary->Outcome(it->entry, it->durable, it->since);
    if (!outcome.has_value()) {
      ++it;
      continue;
    }
    if (outcome->ok()) {
      // On at least min_insync copies when it is answered, as far as the
      // primary can know: a copy whose disk was lost since it reported
      // counts (the primary learns of the loss when the node's lease
      // ends).
      int copies = 0;
      for (Node& other : nodes_) {
        MessageStore* store = other.copies[it->shard].store.get();
        copies += other.wiped ||
                  (store != nullptr &&
                   store->Get(Table::kMessages, it->key).value().has_value());
      }
      if (broken_.empty() && copies < options_.min_insync) {
        broken_ = absl::StrCat("shard ", it->shard, ": ", it->key,
                               " was acknowledged by ", n.id, " held by ",
                               copies, " copies, fewer than min_insync");
      }
      // Every copy leading at a later epoch holds it (it was in the old
      // primary's in-sync set, which held the write before anyone was
      // promoted from it).
      for (Node& other : nodes_) {
        const Copy& c = other.copies[it->shard];
        if (broken_.empty() && c.primary != nullptr &&
            c.primary->epoch() > it->entry.epoch && c.store != nullptr &&
            !c.store->Get(Table::kMessages, it->key).value().has_value()) {
          broken_ = absl::StrCat("shard ", it->shard, ": ", it->key,
                                 ", acknowledged at epoch ", it->entry.epoch,
                                 " by ", n.id, ", is missing from ", other.id,
                                 ", primary at epoch ", c.primary->epoch());
        }
      }
      if (it->durable) {
        acknowledged_[it->shard][it->key] = it->entry.epoch;
        acknowledgers_[{it->shard, it->entry.epoch}].insert(n.id);
        ++stats_.acknowledged;
      }
    }
    it = pending_.erase(it);
  }
}

}  // namespace hourglass::replication::simulation
