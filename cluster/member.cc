#include "cluster/member.h"

#include <pthread.h>

#include <algorithm>
#include <charconv>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "cluster/controller.h"
#include "cluster/election.h"
#include "cluster/keys.h"
#include "cluster/lease_keeper.h"
#include "cluster/placement.h"
#include "cluster/rebalance.h"
#include "cluster/shard_count.h"
#include "cluster/watch.h"
#include "spdlog/spdlog.h"

namespace hourglass::cluster {
namespace {

// The shard number of a shards/<n> name; nullopt for what is not one.
std::optional<int> ParseShard(std::string_view name) {
  int shard = 0;
  const auto [end, error] =
      std::from_chars(name.data(), name.data() + name.size(), shard);
  if (error != std::errc() || end != name.data() + name.size() || shard < 0) {
    return std::nullopt;
  }
  return shard;
}

// A restore creates its cluster (MemberOptions::create_with): the shard
// count and every shard's record in one transaction, only if the cluster
// does not exist yet (FAILED_PRECONDITION otherwise).
absl::Status CreateRestoredCluster(EtcdClient& client,
                                   const MemberOptions& options) {
  std::vector<std::pair<std::string, std::string>> records;
  for (const auto& [shard, record] : options.create_with) {
    records.emplace_back(ShardKey(options.cluster, shard),
                         EncodeShardRecord(record));
  }
  absl::StatusOr<TxnResult> created = client.CreateIfAbsentWith(
      ShardCountKey(options.cluster), absl::StrCat(options.shards), records);
  if (!created.ok()) return created.status();
  if (created->succeeded) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "cluster ", options.cluster,
      " exists in etcd: a node restoring a snapshot creates a new cluster; "
      "give it a --cluster name of its own, or start it without "
      "--restore_from"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Member>> Member::Join(EtcdClient& client,
                                                     MemberOptions options,
                                                     Callbacks callbacks) {
  if (absl::Status s = ValidateName("--cluster", options.cluster); !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidateName("--node_id", options.node_id); !s.ok()) {
    return s;
  }
  if (!options.zone.empty()) {
    if (absl::Status s = ValidateName("--zone", options.zone); !s.ok()) {
      return s;
    }
  }
  if (options.address.empty()) {
    return absl::InvalidArgumentError(
        "cluster member: no address to advertise");
  }
  if (options.shards < 1 || options.replication_factor < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster member: --shards (", options.shards,
                     ") and --replication_factor (", options.replication_factor,
                     ") must be at least 1"));
  }
  if (!options.create_with.empty() &&
      (static_cast<int>(options.create_with.size()) != options.shards ||
       options.create_with.begin()->first != 0 ||
       options.create_with.rbegin()->first != options.shards - 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster member: ", options.create_with.size(),
                     " shard records to create the cluster with, for ",
                     options.shards, " shards: give one for each"));
  }
  if (!options.position_wait.has_value()) {
    options.position_wait = options.lease_ttl;
  }
  if (!options.create_with.empty()) {
    if (absl::Status created = CreateRestoredCluster(client, options);
        !created.ok()) {
      return created;
    }
  } else if (absl::StatusOr<ShardCount> count =
                 AgreeOnShardCount(client, options.cluster, options.shards);
             !count.ok()) {
    // Checked again (hourglassd agreed before it built its shards), in
    // case the cluster was removed from etcd and created anew since.
    return count.status();
  }
  std::unique_ptr<Member> member(
      new Member(client, std::move(options), std::move(callbacks)));
  if (absl::Status registered = member->Register(); !registered.ok()) {
    return registered;
  }
  const MemberOptions& o = member->options_;
  spdlog::info("cluster: node {} joined cluster {} at {} (lease {:x}, TTL {})",
               o.node_id, o.cluster, o.address, member->lease(),
               absl::FormatDuration(o.lease_ttl));
  member->thread_ = std::thread([m = member.get()] {
    pthread_setname_np(pthread_self(), "hg-member");
    m->Run();
  });
  return member;
}

absl::Status Member::Register() {
  const MemberOptions& o = options_;
  absl::StatusOr<Lease> lease = client_.GrantLease(o.lease_ttl);
  if (!lease.ok()) return lease.status();
  std::unique_ptr<LeaseKeeper> keeper = LeaseKeeper::Start(
      client_, *lease, [this, id = lease->id](absl::Status status) {
        OnLeaseChange(id, std::move(status));
      });

  // nodes/<id>, once no other lease holds it.
  const std::string key = NodeKey(o.cluster, o.node_id);
  NodeRecord record;
  record.address = o.address;
  record.zone = o.zone;
  const std::string value = EncodeNodeRecord(record);
  const absl::Time give_up = absl::Now() + o.lease_ttl + absl::Seconds(1);
  while (true) {
    absl::StatusOr<TxnResult> created =
        client_.CreateIfAbsent(key, value, lease->id);
    if (!created.ok()) return created.status();
    if (created->succeeded) break;
    if (absl::Now() >= give_up) {
      std::string holder = "unknown address";
      if (created->current.has_value()) {
        absl::StatusOr<NodeRecord> other =
            DecodeNodeRecord(created->current->value);
        if (other.ok()) holder = other->address;
      }
      return absl::AlreadyExistsError(absl::StrCat(
          "--node_id=", o.node_id, " is already a live member of cluster ",
          o.cluster, " (at ", holder, "); give each node its own --node_id"));
    }
    absl::SleepFor(o.retry_delay);
  }

  ElectionOptions election;
  election.key = ControllerKey(o.cluster);
  election.candidate = o.node_id;
  election.lease = lease->id;
  election.retry_delay = o.retry_delay;
  absl::StatusOr<std::unique_ptr<Election>> started = Election::Start(
      client_, std::move(election),
      [this](bool leading, const std::optional<Leader>& leader) {
        if (leading) {
          spdlog::info("cluster: node {} is the controller (term {})",
                       node_id(), leader->term);
        }
        absl::MutexLock lock(&mu_);
        wake_ = true;
      });
  if (!started.ok()) return started.status();
  // The parts of an earlier lease, if any, go without the lock: their
  // threads may be calling back.
  std::unique_ptr<LeaseKeeper> old_keeper;
  std::unique_ptr<Election> old_election;
  {
    absl::MutexLock lock(&parts_mu_);
    old_keeper = std::exchange(keeper_, std::move(keeper));
    old_election = std::exchange(election_, *std::move(started));
  }
  if (old_election != nullptr) old_election->Abandon();
  if (old_keeper != nullptr) old_keeper->Abandon();
  absl::MutexLock lock(&mu_);
  lost_ = false;
  return absl::OkStatus();
}

void Member::OnLeaseChange(int64_t lease, absl::Status status) {
  if (status.ok()) {
    spdlog::info(
        "cluster: node {} reached etcd again and kept its lease {:x}: it "
        "is a member as before",
        node_id(), lease);
    return;
  }
  if (absl::IsUnavailable(status)) {
    // The rule for an etcd outage (docs/cluster.md): shards keep serving with
    // their current primaries (backups refuse a deposed primary's epoch, so
    // this is safe) and nothing fails over until etcd answers again.
    spdlog::warn(
        "cluster: node {} cannot renew its lease {:x} ({}): it keeps its "
        "shards as they are, and joins again if etcd ended the lease",
        node_id(), lease, std::string(status.message()));
    return;
  }
  spdlog::error(
      "cluster: node {} lost its lease {:x}: {}; it joins again under a new "
      "one, its shards keeping their roles until their records change",
      node_id(), lease, std::string(status.message()));
  {
    absl::MutexLock lock(&mu_);
    lost_ = true;
    wake_ = true;
  }
  if (callbacks_.on_lost) callbacks_.on_lost(std::move(status));
}

Member::Member(EtcdClient& client, MemberOptions options, Callbacks callbacks)
    : client_(client),
      options_(std::move(options)),
      prefix_(ClusterPrefix(options_.cluster)),
      callbacks_(std::move(callbacks)),
      controller_({.shards = options_.shards,
                   .replication_factor = options_.replication_factor,
                   .min_insync = options_.min_insync,
                   .position_wait = *options_.position_wait}) {}

Member::~Member() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    wake_ = true;
  }
  if (thread_.joinable()) thread_.join();
  watch_.reset();
  std::unique_ptr<Election> election;
  std::unique_ptr<LeaseKeeper> keeper;
  {
    absl::MutexLock lock(&parts_mu_);
    election = std::move(election_);
    keeper = std::move(keeper_);
  }
  election.reset();  // Resigns if it leads.
  keeper.reset();    // Revokes the lease, unless abandoned: nodes/<id> goes.
}

void Member::Abandon() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    wake_ = true;
  }
  if (thread_.joinable()) thread_.join();
  watch_.reset();
  // Neither resigns: the node's keys go when its lease expires.
  absl::MutexLock lock(&parts_mu_);
  if (election_ != nullptr) election_->Abandon();
  if (keeper_ != nullptr) keeper_->Abandon();
}

int64_t Member::lease() const {
  absl::MutexLock lock(&parts_mu_);
  return keeper_ == nullptr ? 0 : keeper_->id();
}

ClusterView Member::view() const {
  absl::MutexLock lock(&mu_);
  return view_;
}

bool Member::AwaitView(absl::FunctionRef<bool(const ClusterView&)> condition,
                       absl::Time deadline) const {
  absl::MutexLock lock(&mu_);
  auto holds = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return synced_ && condition(view_);
  };
  return mu_.AwaitWithDeadline(absl::Condition(&holds), deadline);
}

bool Member::controlling() const {
  absl::MutexLock lock(&parts_mu_);
  return election_ != nullptr && election_->leading();
}

bool Member::etcd_reachable() const {
  absl::MutexLock lock(&parts_mu_);
  return keeper_ != nullptr && !keeper_->overdue() && !keeper_->lost();
}

std::optional<int64_t> Member::LeadingTerm() const {
  absl::MutexLock lock(&parts_mu_);
  if (election_ == nullptr || !election_->leading()) return std::nullopt;
  std::optional<Leader> leader = election_->leader();
  if (!leader.has_value()) return std::nullopt;
  return leader->term;
}

absl::StatusOr<bool> Member::SetIsr(int shard, const ShardRecord& from,
                                    std::vector<std::string> isr,
                                    LogEnd acknowledged) {
  if (isr.empty() || isr.front() != options_.node_id) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the in-sync set of shard ", shard, " must begin with its primary ",
        options_.node_id, ", not [", absl::StrJoin(isr, ","), "]"));
  }
  for (const std::string& node : isr) {
    if (!from.IsReplica(node)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the in-sync set of shard ", shard, " can hold its replicas only (",
          absl::StrJoin(from.replicas, ","), "), not ", node));
    }
  }
  ShardRecord next = from;
  next.isr = std::move(isr);
  next.acknowledged = std::max(next.acknowledged, acknowledged);
  KeepEligible(from, next, options_.min_insync);
  return WriteAsPrimary(
      shard, from, next,
      absl::StrCat("set the in-sync set of shard ", shard, " at epoch ",
                   next.epoch, " to [", absl::StrJoin(next.isr, ","),
                   "] (was [", absl::StrJoin(from.isr, ","),
                   "]); eligible copies [", absl::StrJoin(next.eligible, ","),
                   "]"));
}

absl::StatusOr<bool> Member::WriteAsPrimary(int shard, const ShardRecord& from,
                                            const ShardRecord& next,
                                            std::string_view what) {
  ClusterView::Shard current;
  {
    absl::MutexLock lock(&mu_);
    auto it = view_.shards.find(shard);
    if (it == view_.shards.end() ||
        it->second.record.primary != options_.node_id) {
      return absl::FailedPreconditionError(absl::StrCat(
          "node ", options_.node_id, " is not the primary of shard ", shard));
    }
    current = it->second;
  }
  // Decided on a record that has changed since: the caller decides again
  // on the new one.
  if (current.record != from) return false;
  absl::StatusOr<TxnResult> written =
      client_.PutIfModRevision(ShardKey(options_.cluster, shard),
                               EncodeShardRecord(next), current.mod_revision);
  if (!written.ok()) return written.status();
  if (written->succeeded) {
    spdlog::info("cluster: primary {} {}", options_.node_id, what);
  }
  return written->succeeded;
}

void Member::Run() {
  while (true) {
    bool resync = false;
    bool lost = false;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      resync = !synced_ || watch_ended_;
      lost = lost_;
    }
    if (lost) {
      // The cluster took this node for dead: it joins again under a new
      // lease. (Until it has, its election cannot win: its lease is gone.)
      if (absl::Status s = Register(); !s.ok()) {
        spdlog::warn("cluster: node {} cannot join cluster {} again yet: {}",
                     options_.node_id, options_.cluster,
                     std::string(s.message()));
        WaitForWork(absl::Now() + options_.retry_delay);
        continue;
      }
      spdlog::info("cluster: node {} joined cluster {} again (lease {:x})",
                   options_.node_id, options_.cluster, lease());
      continue;
    }
    if (resync) {
      if (absl::Status s = Resync(); !s.ok()) {
        spdlog::warn("cluster: node {} cannot read cluster {}: {}",
                     options_.node_id, options_.cluster,
                     std::string(s.message()));
        WaitForWork(absl::Now() + options_.retry_delay);
        continue;
      }
    }
    const ClusterView view = this->view();
    if (callbacks_.on_view && view.revision != delivered_revision_) {
      delivered_revision_ = view.revision;
      callbacks_.on_view(view);
    }
    ReportPositions(view);
    absl::Time next = absl::Now() + options_.retry_delay * 4;
    if (std::optional<int64_t> term = LeadingTerm(); term.has_value()) {
      next = std::min(next, Control(view, *term));
    } else {
      controller_.Reset();
    }
    WaitForWork(next);
  }
}

void Member::Wake() {
  absl::MutexLock lock(&mu_);
  wake_ = true;
}

void Member::WaitForWork(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithDeadline(absl::Condition(&wake_), deadline);
  wake_ = false;
}

absl::Status Member::Resync() {
  watch_.reset();
  absl::StatusOr<RangeResult> all = client_.GetPrefix(prefix_);
  if (!all.ok()) return all.status();
  {
    absl::MutexLock lock(&mu_);
    view_ = ClusterView();
    view_.revision = all->revision;
    for (const KeyValue& kv : all->kvs) {
      WatchEvent event;
      event.kv = kv;
      Apply(event);
    }
    view_.revision = all->revision;
    watch_ended_ = false;
  }
  WatchOptions options;
  options.key = prefix_;
  options.prefix = true;
  options.from_revision = all->revision + 1;
  Watch::Callbacks callbacks;
  callbacks.on_event = [this](const WatchEvent& event) {
    absl::MutexLock lock(&mu_);
    Apply(event);
    wake_ = true;
  };
  callbacks.on_end = [this](absl::Status status) {
    spdlog::info("cluster: node {} watches cluster {} again: {}",
                 options_.node_id, options_.cluster,
                 std::string(status.message()));
    absl::MutexLock lock(&mu_);
    watch_ended_ = true;
    wake_ = true;
  };
  absl::StatusOr<std::unique_ptr<Watch>> watch =
      Watch::Start(client_, std::move(options), std::move(callbacks));
  if (!watch.ok()) return watch.status();
  watch_ = *std::move(watch);
  absl::MutexLock lock(&mu_);
  synced_ = true;
  return absl::OkStatus();
}

void Member::Apply(const WatchEvent& event) {
  const KeyValue& kv = event.kv;
  view_.revision = std::max(view_.revision, kv.mod_revision);
  if (!kv.key.starts_with(prefix_)) return;
  const std::string_view rest = std::string_view(kv.key).substr(prefix_.size());
  const bool put = event.type == WatchEvent::Type::kPut;
  if (rest == "controller") {
    view_.controller = put ? kv.value : "";
  } else if (rest.starts_with("nodes/")) {
    const std::string id(rest.substr(6));
    if (!put) {
      view_.nodes.erase(id);
      return;
    }
    absl::StatusOr<NodeRecord> node = DecodeNodeRecord(kv.value);
    if (!node.ok()) {
      spdlog::warn("cluster: ignoring {}: {}", kv.key,
                   std::string(node.status().message()));
      return;
    }
    view_.nodes[id] = *std::move(node);
  } else if (rest.starts_with("drains/")) {
    const std::string id(rest.substr(7));
    if (put) {
      view_.draining.insert(id);
    } else {
      view_.draining.erase(id);
    }
  } else if (rest.starts_with("pins/")) {
    const std::optional<int> shard = ParseShard(rest.substr(5));
    if (!shard.has_value()) return;
    if (put) {
      view_.pins[*shard] = kv.value;
    } else {
      view_.pins.erase(*shard);
    }
  } else if (rest.starts_with("shards/")) {
    const std::optional<int> shard = ParseShard(rest.substr(7));
    if (!shard.has_value()) return;
    if (!put) {
      view_.shards.erase(*shard);
      return;
    }
    absl::StatusOr<ShardRecord> record = DecodeShardRecord(kv.value);
    if (!record.ok()) {
      spdlog::warn("cluster: ignoring {}: {}", kv.key,
                   std::string(record.status().message()));
      return;
    }
    view_.shards[*shard] = {*std::move(record), kv.mod_revision};
  }
}

void Member::ReportPositions(const ClusterView& view) {
  auto self = view.nodes.find(options_.node_id);
  if (self == view.nodes.end()) return;
  NodeRecord record = self->second;
  std::map<int, ShardRecord> shards;
  for (const auto& [shard, s] : view.shards) shards[shard] = s.record;
  record.positions = PositionsToReport(
      options_.node_id, shards, view.nodes,
      [&](int shard) -> std::optional<LogEnd> {
        if (!callbacks_.position) return std::nullopt;
        return callbacks_.position(shard);
      },
      [&](int shard) -> std::optional<int64_t> {
        if (!callbacks_.handed_over) return std::nullopt;
        return callbacks_.handed_over(shard);
      });
  if (record.positions == self->second.positions) return;
  for (const auto& [shard, position] : record.positions) {
    auto before = self->second.positions.find(shard);
    if (before != self->second.positions.end() && before->second == position) {
      continue;
    }
    const ShardRecord& r = shards.at(shard);
    spdlog::info(
        "cluster: node {} reports index {} (of epoch {}) of shard {} at "
        "epoch {} ({})",
        options_.node_id, position.index, position.last_epoch, shard,
        position.epoch,
        r.primary == options_.node_id
            ? absl::StrCat("it stopped writing and ", r.transfer_to,
                           " holds it all")
        : r.primary.empty()
            ? std::string("its primary gave it back")
            : absl::StrCat("its primary ", r.primary, " is gone"));
  }
  for (const auto& [shard, position] : self->second.positions) {
    if (!record.positions.contains(shard)) {
      spdlog::info("cluster: node {} withdraws its report on shard {}",
                   options_.node_id, shard);
    }
  }
  absl::StatusOr<int64_t> put =
      client_.Put(NodeKey(options_.cluster, options_.node_id),
                  EncodeNodeRecord(record), lease());
  if (!put.ok()) {
    spdlog::warn("cluster: node {} could not report its positions: {}",
                 options_.node_id, std::string(put.status().message()));
  }
}

absl::Time Member::Control(const ClusterView& view, int64_t term) {
  Controller::Decision decision = controller_.Decide(view, absl::Now());
  for (const std::string& reason : decision.waiting) {
    spdlog::warn("cluster: controller {}: {}", options_.node_id, reason);
  }
  for (const ControllerWrite& write : decision.writes) {
    if (!WriteShard(write, term)) break;
  }
  return decision.next;
}

bool Member::WriteShard(const ControllerWrite& write, int64_t term) {
  const Fence fence{ControllerKey(options_.cluster), term};
  const std::string key = ShardKey(options_.cluster, write.shard);
  const std::string value = EncodeShardRecord(write.record);
  absl::StatusOr<TxnResult> written =
      write.mod_revision.has_value()
          ? client_.PutIfModRevision(key, value, *write.mod_revision, 0, fence)
          : client_.CreateIfAbsent(key, value, 0, fence);
  if (!written.ok()) {
    spdlog::warn("cluster: controller {} could not write {}: {}",
                 options_.node_id, key,
                 std::string(written.status().message()));
    return true;
  }
  if (written->fenced_out) {
    spdlog::info("cluster: node {} is no longer the controller (term {})",
                 options_.node_id, term);
    return false;
  }
  if (!written->succeeded) return true;  // Changed meanwhile: the watch tells.
  spdlog::info("cluster: controller {}: {}", options_.node_id, write.reason);
  absl::MutexLock lock(&mu_);
  // Ahead of the watch, so that the next round plans from it.
  view_.shards[write.shard] = {write.record, written->revision};
  return true;
}

absl::Status SetDraining(EtcdClient& client, std::string_view cluster,
                         std::string_view node_id, bool drain) {
  if (absl::Status valid = ValidateName("node id", node_id); !valid.ok()) {
    return valid;
  }
  const std::string key = DrainKey(cluster, node_id);
  if (drain) return client.Put(key, "", 0).status();
  return client.Delete(key).status();
}

absl::Status SetPin(EtcdClient& client, std::string_view cluster, int shard,
                    const std::optional<std::string>& node_id) {
  if (shard < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard ", shard, " is not a shard number"));
  }
  const std::string key = PinKey(cluster, shard);
  if (!node_id.has_value()) return client.Delete(key).status();
  if (absl::Status valid = ValidateName("node id", *node_id); !valid.ok()) {
    return valid;
  }
  return client.Put(key, *node_id, 0).status();
}

}  // namespace hourglass::cluster
