#include "tests/replication/simulation.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "cluster/placement.h"
#include "cluster/rebalance.h"
#include "storage/memory_store.h"

namespace hourglass::replication::simulation {

using cluster::ShardRecord;
using storage::MessageStore;
using storage::Table;
using storage::WriteBatch;

World::World(uint64_t seed, WorldOptions options)
    : options_(std::move(options)), rng_(seed) {
  for (size_t i = 0; i < options_.pool.size(); ++i) {
    Node n;
    n.id = options_.pool[i];
    n.member = n.up = n.lease = static_cast<int>(i) < options_.members;
    for (int s = 0; s < options_.shards; ++s) {
      n.copies.emplace_back().store = storage::MemoryStore::Open();
    }
    nodes_.push_back(std::move(n));
  }
  records_.resize(options_.shards);
  acknowledged_.resize(options_.shards);
  checked_.resize(options_.shards);
  Control();  // Creates the shards.
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
  std::vector<std::pair<Node*, int>> primaries;
  for (Node& n : nodes_) {
    for (int s = 0; s < options_.shards; ++s) {
      const Copy& c = n.copies[s];
      if (n.acts() && c.primary != nullptr && c.handing_over_to.empty()) {
        primaries.emplace_back(&n, s);
      }
    }
  }
  if (primaries.empty()) return;
  auto [n, shard] = primaries[Uniform(static_cast<int>(primaries.size()))];
  ReplicatedStore& primary = *n->copies[shard].primary;
  const std::string key = absl::StrCat("m", next_key_++);
  WriteBatch batch;
  batch.Put(Table::kMessages, key, "v");
  absl::StatusOr<LogPosition> entry = primary.Append(batch);
  if (entry.ok()) {
    pending_.push_back({shard, n->id, entry->epoch, entry->index, key});
  }
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
    *s = Stream();  // Closed, or behind what is kept: the backup rebuilds.
    if (entries.status().code() == absl::StatusCode::kOutOfRange) {
      Rebuild(shard, n, node(to));
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
  if (!replica->Apply(s->epoch, {entry}).ok()) {
    *s = Stream();  // The backup ends the stream.
    return;
  }
  s->answers.push_back(replica->durable());
}

void World::Answer() {
  Stream* s = RandomStream([](const Stream& s) { return !s.answers.empty(); });
  if (s == nullptr) return;
  const auto [shard, from, to] = KeyOf(s);
  Node& n = node(from);
  ReplicatedStore* primary = n.copies[shard].primary.get();
  if (!n.acts() || primary == nullptr || primary->epoch() != s->epoch) return;
  const LogPosition position = s->answers.front();
  s->answers.pop_front();
  primary->ReportProgress(to, position, position);
}

void World::BreakStream() {
  Stream* s = RandomStream([](const Stream&) { return true; });
  if (s != nullptr) *s = Stream();
}

namespace {

template <typename Pick>
std::vector<int> Where(int n, Pick pick) {
  std::vector<int> picked;
  for (int i = 0; i < n; ++i) {
    if (pick(i)) picked.push_back(i);
  }
  return picked;
}

}  // namespace

void World::Crash() {
  // Any member, as likely up or not (a crash of one that is down is none).
  const int count = static_cast<int>(nodes_.size());
  std::vector<int> members =
      Where(count, [&](int i) { return nodes_[i].member; });
  Node& n = nodes_[members[Uniform(static_cast<int>(members.size()))]];
  if (!n.up) return;
  n.up = n.paused = n.lease = false;
  n.positions.clear();
  for (Copy& c : n.copies) {
    c.primary.reset();
    c.replica.reset();
    c.handing_over_to.clear();
    c.handed_over.reset();
  }
  for (auto& [key, stream] : streams_) {
    if (std::get<1>(key) == n.id || std::get<2>(key) == n.id) {
      stream = Stream();
    }
  }
}

void World::Restart() {
  const int count = static_cast<int>(nodes_.size());
  std::vector<int> down =
      Where(count, [&](int i) { return nodes_[i].member && !nodes_[i].up; });
  if (down.empty()) return;
  Node& n = nodes_[down[Uniform(static_cast<int>(down.size()))]];
  n.up = n.lease = true;
}

void World::Pause() {
  const int count = static_cast<int>(nodes_.size());
  std::vector<int> members =
      Where(count, [&](int i) { return nodes_[i].member; });
  Node& n = nodes_[members[Uniform(static_cast<int>(members.size()))]];
  if (!n.acts()) return;
  n.paused = true;
  n.lease = false;  // It expires while the node is frozen.
  n.positions.clear();
}

void World::Resume() {
  const int count = static_cast<int>(nodes_.size());
  std::vector<int> paused =
      Where(count, [&](int i) { return nodes_[i].paused; });
  if (paused.empty()) return;
  Node& n = nodes_[paused[Uniform(static_cast<int>(paused.size()))]];
  n.paused = false;
  n.lease = true;  // It joins again, under a new lease.
}

void World::Join() {
  const int count = static_cast<int>(nodes_.size());
  std::vector<int> candidates = Where(count, [&](int i) {
    const Node& n = nodes_[i];
    if (!n.member) return true;
    if (n.up) return false;
    for (const auto& record : records_) {
      if (record.has_value() && record->InIsr(n.id)) return false;
    }
    return true;
  });
  if (candidates.empty()) return;
  Node& n = nodes_[candidates[Uniform(static_cast<int>(candidates.size()))]];
  for (Copy& c : n.copies) c.store = storage::MemoryStore::Open();
  // Holding no copy, it is no eligible copy any more: it says so before it
  // joins (ClusterNode::Join), or it could be promoted empty.
  for (auto& record : records_) {
    if (record.has_value()) std::erase(record->eligible, n.id);
  }
  n.member = n.up = n.lease = true;
  ++stats_.joins;
}

void World::Drain() {
  const int count = static_cast<int>(nodes_.size());
  std::vector<int> members =
      Where(count, [&](int i) { return nodes_[i].member; });
  const std::string& id =
      nodes_[members[Uniform(static_cast<int>(members.size()))]].id;
  if (draining_.erase(id) > 0) return;
  // Operators drain while enough others stay to hold every shard.
  int staying = 0;
  for (const Node& n : nodes_) {
    staying += n.member && n.id != id && !draining_.contains(n.id);
  }
  if (staying >= options_.replication_factor) draining_.insert(id);
}

void World::Pin() {
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

void World::WriteRecord(int shard, const ShardRecord& write) {
  const std::optional<ShardRecord>& old = records_[shard];
  if (old.has_value() && write.epoch == old->epoch + 1 &&
      write.primary == old->transfer_to) {
    ++stats_.transfers;
  }
  if (old.has_value() && write.epoch == old->epoch + 1 &&
      old->IsEligible(write.primary)) {
    ++stats_.eligible_promotions;
  }
  if (old.has_value() && write.epoch != old->epoch && bad_write_.empty()) {
    MessageStore& primary = *node(write.primary).copies[shard].store;
    const LogPosition last = ReadPosition(primary).value();
    for (const std::string& id : write.isr) {
      const LogPosition copy =
          ReadPosition(*node(id).copies[shard].store).value();
      if (copy.index > last.index || Diverged(primary, last, copy).value()) {
        bad_write_ = absl::StrCat(
            "shard ", shard, ": ", write.primary, " (at {", last.epoch, ",",
            last.index, "}) became primary at epoch ", write.epoch,
            " with in-sync set [", absl::StrJoin(write.isr, ","), "] but ", id,
            " holds what it lacks (at {", copy.epoch, ",", copy.index, "})");
        break;
      }
    }
  }
  records_[shard] = write;
}

void World::Control() {
  // The controller is one of the nodes that run and hold a lease.
  if (std::none_of(nodes_.begin(), nodes_.end(),
                   [](const Node& n) { return n.acts() && n.lease; })) {
    return;
  }
  const std::map<std::string, cluster::NodeRecord> alive = AliveRecords();
  cluster::PlacementOptions placement;
  placement.replication_factor = options_.replication_factor;
  placement.min_insync = options_.min_insync;
  placement.position_wait_over = true;
  bool planned = false;
  for (int s = 0; s < options_.shards; ++s) {
    const std::optional<ShardRecord> record = records_[s];
    cluster::ShardPlan plan = cluster::PlanShard(s, record, alive, placement);
    planned |= plan.write.has_value() || !record.has_value() ||
               !alive.contains(record->primary) || !record->transfer_to.empty();
    if (plan.write.has_value()) WriteRecord(s, *plan.write);
  }
  if (planned) return;
  std::optional<cluster::RebalanceStep> step =
      cluster::PlanRebalance(Records(), alive, draining_, pins_,
                             {.replication_factor = options_.replication_factor,
                              .min_insync = options_.min_insync});
  if (!step.has_value()) return;
  const ShardRecord& old = *records_[step->shard];
  const ShardRecord& write = step->write;
  if (write.isr.size() < old.isr.size() &&
      static_cast<int>(write.isr.size()) < options_.min_insync &&
      bad_write_.empty()) {
    bad_write_ =
        absl::StrCat("a move took the in-sync set of shard ", step->shard,
                     " from [", absl::StrJoin(old.isr, ","), "] to [",
                     absl::StrJoin(write.isr, ","), "]: ", step->reason);
  }
  stats_.adds += write.replicas.size() > old.replicas.size();
  stats_.drops += write.replicas.size() < old.replicas.size();
  WriteRecord(step->shard, write);
}

void World::Settle() {
  for (Node& n : nodes_) {
    if (!n.acts()) continue;
    for (int s = 0; s < options_.shards; ++s) Observe(n, s);
    if (n.lease) ReportPositions(n);
  }
  Connect();
  KeepInSyncSets();
  Acknowledge();
}

// Member::ReportPositions: the node record's positions brought up to date
// by the real rule (placement.h PositionsToReport), from what the node's
// copies hold now (ShardHost::Position and HandedOver).
void World::ReportPositions(Node& n) {
  n.positions = cluster::PositionsToReport(
      n.id, Records(), AliveRecords(),
      [&n](int shard) -> std::optional<cluster::LogEnd> {
        const Copy& c = n.copies[shard];
        LogPosition end = ReadPosition(*c.store).value();
        if (c.replica != nullptr) end = c.replica->durable();
        if (c.primary != nullptr) end = c.primary->last();
        return cluster::LogEnd{end.epoch, end.index};
      },
      [&n](int shard) { return n.copies[shard].handed_over; });
}

// A node follows shard `shard`'s record as ShardHost does: becomes its
// primary (and hands it over when asked), steps down, holds a backup copy,
// or none.
void World::Observe(Node& n, int shard) {
  if (!records_[shard].has_value()) return;
  const ShardRecord& record = *records_[shard];
  Copy& c = n.copies[shard];
  auto step_down = [&c] {
    if (c.primary == nullptr) return;
    c.primary->Close("stepped down");
    c.primary.reset();
    c.handing_over_to.clear();
    c.handed_over.reset();
  };
  if (record.primary != n.id) {
    step_down();
    if (!record.IsReplica(n.id)) {
      c.replica.reset();
    } else if (c.replica == nullptr) {
      c.replica = Replica::Open(c.store.get()).value();
    }
    return;
  }
  if (c.primary != nullptr && c.primary->epoch() != record.epoch) step_down();
  if (c.primary == nullptr) {
    c.replica.reset();
    ReplicatedStoreOptions options;
    options.epoch = record.epoch;
    for (const std::string& id : record.isr) {
      if (id != n.id) options.in_sync.push_back(id);
    }
    options.min_insync = options_.min_insync;
    absl::StatusOr<std::unique_ptr<ReplicatedStore>> store =
        ReplicatedStore::Open(c.store.get(), options);
    if (!store.ok()) {
      // It led at this epoch before (a restart): it takes the next one by
      // compare-and-set, as ShardHost does (Member::TakeNewEpoch); a
      // deposed node's write would fail, and it has no lease to write with.
      if (absl::IsFailedPrecondition(store.status()) && n.lease &&
          ReadAcceptedEpoch(*c.store).value() == record.epoch) {
        ShardRecord next = record;
        ++next.epoch;
        next.transfer_to.clear();
        records_[shard] = next;
        ++stats_.epochs_taken;
      }
      return;
    }
    c.primary = *std::move(store);
  }
  if (record.transfer_to.empty()) {
    c.handing_over_to.clear();  // None asked, or given up: writes resume.
    c.handed_over.reset();
    return;
  }
  // ShardHost::HandOverLocked: writes stop; once the target holds the
  // whole log durably, the position is reported.
  if (c.handing_over_to != record.transfer_to) {
    c.handing_over_to = record.transfer_to;
    c.handed_over.reset();
  }
  if (c.handed_over.has_value()) return;
  const int64_t last = c.primary->last().index;
  const auto backups = c.primary->Backups();
  auto target = backups.find(record.transfer_to);
  if (target != backups.end() && target->second.durable.index >= last) {
    c.handed_over = last;
  }
}

// Every acting primary opens a stream to each other replica it lacks one
// to, as its shippers do: hello, then from where the copy ends, or a
// rebuild if it cannot follow. Streams to nodes no longer replicas end.
void World::Connect() {
  for (auto& [key, s] : streams_) {
    const auto& [shard, from, to] = key;
    if (s.open && node(from).acts() && !records_[shard]->IsReplica(to)) {
      s = Stream();
    }
  }
  for (Node& n : nodes_) {
    if (!n.acts()) continue;
    for (int shard = 0; shard < options_.shards; ++shard) {
      ReplicatedStore* primary = n.copies[shard].primary.get();
      if (primary == nullptr) continue;
      for (const std::string& id : records_[shard]->replicas) {
        if (id == n.id) continue;
        Stream& s = streams_[{shard, n.id, id}];
        if (s.open && s.epoch == primary->epoch()) continue;
        Node& backup = node(id);
        Replica* replica = backup.copies[shard].replica.get();
        if (!backup.acts() || replica == nullptr) continue;
        s = Stream();
        if (!replica->Accept(primary->epoch()).ok()) continue;
        const LogPosition copy = replica->applied();
        absl::StatusOr<bool> diverged = primary->Diverged(copy);
        if (!diverged.ok()) continue;
        if (*diverged) {
          Rebuild(shard, n, backup);
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

// The backup's copy replaced by the primary's checkpoint.
void World::Rebuild(int shard, Node& primary, Node& backup) {
  Copy& c = backup.copies[shard];
  c.replica.reset();
  std::unique_ptr<MessageStore> copy = storage::MemoryStore::Open();
  WriteBatch all;
  MessageStore& from = *primary.copies[shard].store;
  for (int t = 0; t < storage::kNumTables; ++t) {
    (void)from.Scan(static_cast<Table>(t), "", "",
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
  (void)copy->Write(all);
  c.store = std::move(copy);
  c.replica = Replica::Open(c.store.get()).value();
  ++stats_.rebuilds;
}

// Each primary's in-sync set: a backup no longer a replica leaves it
// locally (the controller dropped it from the record), one without a lease
// leaves it, one that has every entry joins it (locally first), each by
// compare-and-set at the primary's epoch (a deposed primary's fails).
void World::KeepInSyncSets() {
  for (Node& n : nodes_) {
    if (!n.acts()) continue;
    for (int shard = 0; shard < options_.shards; ++shard) {
      ReplicatedStore* primary = n.copies[shard].primary.get();
      if (primary == nullptr) continue;
      ShardRecord& record = *records_[shard];
      const bool current =
          record.primary == n.id && record.epoch == primary->epoch();
      const auto backups = primary->Backups();
      for (const auto& [id, state] : backups) {
        if (current && state.in_sync && !record.IsReplica(id)) {
          primary->RemoveInSync(id);
        }
      }
      for (const std::string& id : record.replicas) {
        if (id == n.id) continue;
        if (record.InIsr(id) && !Alive(id)) {
          if (!current) continue;
          const ShardRecord from = record;
          std::erase(record.isr, id);
          cluster::KeepEligible(from, record, options_.min_insync);
          primary->RemoveInSync(id);
        } else if (!record.InIsr(id) && Alive(id)) {
          auto b = backups.find(id);
          if (b == backups.end() ||
              b->second.applied.index < primary->last().index) {
            continue;
          }
          primary->AddInSync(id);
          if (current) {
            const ShardRecord from = record;
            record.isr.push_back(id);
            cluster::KeepEligible(from, record, options_.min_insync);
          } else {
            primary->RemoveInSync(id);
          }
        }
      }
    }
  }
}

// Clients hear OK for the writes every in-sync backup has made durable.
void World::Acknowledge() {
  for (auto it = pending_.begin(); it != pending_.end();) {
    Node& n = node(it->node);
    ReplicatedStore* primary = n.copies[it->shard].primary.get();
    if (primary == nullptr || primary->epoch() != it->epoch) {
      it = pending_.erase(it);  // The outcome stays unknown.
      continue;
    }
    if (n.acts() &&
        primary->Acknowledged({it->epoch, it->index}, /*durable=*/true)) {
      acknowledged_[it->shard][it->key] = it->epoch;
      acknowledgers_[{it->shard, it->epoch}].insert(n.id);
      ++stats_.acknowledged;
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace hourglass::replication::simulation
