#include "node/shard_host.h"

#include <pthread.h>

#include <algorithm>
#include <filesystem>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "broker/metrics.h"
#include "grpcpp/grpcpp.h"
#include "node/primary_gate.h"
#include "node/shard_refusal.h"
#include "replication/checkpoint_fetch.h"
#include "replication/log_entry.h"
#include "replication/replica.h"
#include "replication/replicated_store.h"
#include "replication/replication_service.h"
#include "replication/shipper.h"
#include "spdlog/spdlog.h"

namespace hourglass::node {
namespace {

// How often the host looks again without a new view: to open an engine
// that failed to open, and to keep the in-sync set.
constexpr absl::Duration kTick = absl::Milliseconds(250);

// How far behind the last entry a backup out of the in-sync set may be for
// the primary to start adding it: about what a shipper has in flight (a
// request of up to 4 MiB), which it applies in well under lag_timeout.
constexpr size_t kRejoinBytes = size_t{4} << 20;

}  // namespace

ShardHost::ShardHost(std::unique_ptr<storage::MessageStore> base,
                     ShardHostOptions options, PrimaryGate* gate,
                     replication::ReplicationService* replication)
    : options_(std::move(options)), gate_(gate), replication_(replication) {
  {
    absl::MutexLock lock(&role_mu_);
    base_ = std::move(base);
  }
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "hg-shard-host");
    Run();
  });
}

ShardHost::~ShardHost() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    wake_ = true;
  }
  thread_.join();
  absl::MutexLock lock(&role_mu_);
  StepDownLocked("this node is shutting down");
  if (replica_ != nullptr) {
    replication_->SetReplica(options_.shard, nullptr);
    replica_.reset();
  }
}

void ShardHost::Attach(cluster::Member* member) {
  absl::MutexLock lock(&mu_);
  member_ = member;
  wake_ = true;
}

void ShardHost::OnView(const cluster::ClusterView& view) {
  absl::MutexLock lock(&mu_);
  view_ = view;
  wake_ = true;
}

std::optional<cluster::LogEnd> ShardHost::Position() {
  absl::MutexLock lock(&role_mu_);
  replication::LogPosition end;
  if (replica_ != nullptr) {
    end = replica_->durable();
  } else if (store_ != nullptr) {
    end = store_->last();
  } else if (base_ != nullptr) {
    absl::StatusOr<replication::LogPosition> position =
        replication::ReadPosition(*base_);
    if (!position.ok()) return std::nullopt;
    end = *position;
  } else {
    return std::nullopt;
  }
  return cluster::LogEnd{end.epoch, end.index};
}

std::optional<ShardHost::Progress> ShardHost::progress() const {
  absl::MutexLock lock(&role_mu_);
  if (role_ != Role::kPrimary || store_ == nullptr) return std::nullopt;
  Progress progress;
  progress.last_index = store_->last().index;
  for (const auto& [node, state] : store_->Backups()) {
    progress.backups.push_back(
        {node, state.applied.index, store_->BytesAfter(state.applied.index),
         state.durable.index, state.last_heard, state.in_sync});
  }
  return progress;
}

int64_t ShardHost::position() const {
  absl::MutexLock lock(&role_mu_);
  if (replica_ != nullptr) return replica_->applied().index;
  if (store_ != nullptr) return store_->last().index;
  if (base_ == nullptr) return 0;
  absl::StatusOr<replication::LogPosition> position =
      replication::ReadPosition(*base_);
  return position.ok() ? position->index : 0;
}

ShardHost::Role ShardHost::role() const {
  absl::MutexLock lock(&role_mu_);
  return role_;
}

int64_t ShardHost::epoch() const {
  absl::MutexLock lock(&role_mu_);
  return role_ == Role::kPrimary ? epoch_ : 0;
}

void ShardHost::RequestRebuild(std::string why) {
  absl::MutexLock lock(&mu_);
  rebuild_ = std::move(why);
  wake_ = true;
}

void ShardHost::StepDown(const std::string& reason) {
  {
    absl::MutexLock lock(&role_mu_);
    left_ = true;
    StepDownLocked(reason);
  }
  TellHealth();
}

ShardHost::Health ShardHost::health() const {
  absl::MutexLock lock(&role_mu_);
  Health health;
  if (left_) return health;
  {
    absl::MutexLock view_lock(&mu_);
    if (view_.has_value()) {
      auto it = view_->shards.find(options_.shard);
      if (it != view_->shards.end()) {
        const cluster::ShardRecord& record = it->second.record;
        health.named = record.primary == options_.node_id ||
                       record.IsReplica(options_.node_id);
        health.named_primary = record.primary == options_.node_id;
        health.node.member =
            role_ == Role::kBackup && record.InIsr(options_.node_id);
      }
    }
  }
  if (role_ == Role::kPrimary) {
    // The engine opens once the in-sync set is large enough; its store
    // health says whether writes are taken (a full disk, too few in-sync
    // backups left to acknowledge them).
    health.node.primary =
        engine_ != nullptr && engine_->store_health().status().ok();
    health.node.member = health.node.primary;
  }
  return health;
}

void ShardHost::WatchHealth(absl::AnyInvocable<void(Health)> listener) {
  absl::MutexLock lock(&health_mu_);
  health_listener_ = std::move(listener);
  told_ = health();
  health_listener_(told_);
}

void ShardHost::TellHealth() {
  absl::MutexLock lock(&health_mu_);
  const Health now = health();
  if (now == told_) return;
  told_ = now;
  if (health_listener_) health_listener_(now);
}

void ShardHost::Run() {
  while (true) {
    std::optional<cluster::ClusterView> view;
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&wake_), kTick);
      wake_ = false;
      if (stopping_) return;
      if (member_ != nullptr) view = view_;
    }
    bool left;
    {
      absl::MutexLock lock(&role_mu_);
      left = left_;
    }
    if (view.has_value() && !left) Reconcile(*view);
    // Each tick too: the primary's store health has no callback here.
    TellHealth();
  }
}

void ShardHost::Reconcile(const cluster::ClusterView& view) {
  auto it = view.shards.find(options_.shard);
  if (it == view.shards.end()) {
    absl::MutexLock lock(&role_mu_);
    if (role_ == Role::kPrimary) {
      StepDownLocked(
          absl::StrCat("shard ", options_.shard, " has no record in etcd"));
    }
    gate_->Close(ShardRefusal(view, options_.shard, options_.shard_count,
                              options_.node_id));
    return;
  }
  const cluster::ShardRecord& record = it->second.record;
  if (record.primary != options_.node_id) {
    // Calls in the old primary's engine, if this node was it, are waited
    // for; the engine steps down below.
    gate_->Close(ShardRefusal(view, options_.shard, options_.shard_count,
                              options_.node_id));
  }
  if (record.primary == options_.node_id) {
    // The record is written without the role's lock: the host's calls
    // (health, progress, the cluster map) need not wait for etcd.
    if (std::optional<std::string> why = GivingBack(record)) {
      GiveBack(record, *why);
    } else if (MustTakeNewEpoch(record)) {
      TakeNewEpoch(record);
    } else {
      BecomePrimary(view, record);
    }
  } else if (record.IsReplica(options_.node_id)) {
    std::string why;
    {
      absl::MutexLock lock(&mu_);
      why = rebuild_;
    }
    auto primary = view.nodes.find(record.primary);
    if (!why.empty() && primary != view.nodes.end()) {
      Rebuild(primary->second.address, why);
    }
    BecomeBackup();
  } else {
    BecomeNone(record.epoch);
  }
}

std::optional<std::string> ShardHost::GivingBack(
    const cluster::ShardRecord& record) {
  absl::MutexLock lock(&role_mu_);
  if (role_ == Role::kPrimary && epoch_ == record.epoch && store_->closed() &&
      !left_) {
    // Its writes were not acknowledged in time (ReplicatedStore's
    // ack_timeout): the store refuses every write from here on.
    const std::string why = store_->close_reason();
    StepDownLocked(why);
    given_back_ = {record.epoch, why};
  }
  if (!given_back_.has_value()) return std::nullopt;
  if (given_back_->first != record.epoch) {
    given_back_.reset();  // Another epoch: given back, or not needed.
    return std::nullopt;
  }
  return given_back_->second;
}

void ShardHost::GiveBack(const cluster::ShardRecord& record,
                         const std::string& why) {
  cluster::Member* member;
  {
    absl::MutexLock lock(&mu_);
    member = member_;
  }
  if (member == nullptr) return;
  absl::StatusOr<bool> written = member->GiveBack(options_.shard, record, why);
  if (!written.ok()) {
    spdlog::warn(
        "cluster: node {} cannot give shard {} back yet (it tries again): {}",
        options_.node_id, options_.shard,
        std::string(written.status().message()));
  }
}

bool ShardHost::MustTakeNewEpoch(const cluster::ShardRecord& record) {
  absl::MutexLock lock(&role_mu_);
  if (role_ == Role::kPrimary && epoch_ == record.epoch) return false;
  if (base_ == nullptr || left_) return false;
  // The copy accepted the record's epoch before: this node led at it (and
  // restarted), so entries of it may exist that this copy no longer holds
  // (unsynced when the power went) while another copy does.
  absl::StatusOr<int64_t> accepted = replication::ReadAcceptedEpoch(*base_);
  return accepted.ok() && *accepted >= record.epoch;
}

void ShardHost::TakeNewEpoch(const cluster::ShardRecord& record) {
  cluster::Member* member;
  {
    absl::MutexLock lock(&mu_);
    member = member_;
  }
  if (member == nullptr) return;
  absl::StatusOr<bool> written = member->TakeNewEpoch(options_.shard, record);
  if (!written.ok()) {
    spdlog::warn(
        "cluster: node {} cannot take a new epoch of shard {} yet (it tries "
        "again): {}",
        options_.node_id, options_.shard,
        std::string(written.status().message()));
  }
}

void ShardHost::BecomePrimary(const cluster::ClusterView& view,
                              const cluster::ShardRecord& record) {
  absl::MutexLock lock(&role_mu_);
  if (role_ == Role::kPrimary && epoch_ != record.epoch) {
    StepDownLocked(absl::StrCat("epoch ", epoch_, " ended"));
  }
  if (left_) return;  // StepDown came after the view was read.
  if (role_ != Role::kPrimary) {
    if (base_ == nullptr) return;  // A rebuild failed: no copy to serve.
    if (replica_ != nullptr) {
      replication_->SetReplica(options_.shard, nullptr);
      replica_.reset();
    }
    std::vector<std::string> in_sync;
    for (const std::string& node : record.isr) {
      if (node != options_.node_id) in_sync.push_back(node);
    }
    replication::ReplicatedStoreOptions store_options;
    store_options.epoch = record.epoch;
    store_options.in_sync = in_sync;
    store_options.min_insync = options_.min_insync;
    store_options.ack_timeout = options_.ack_timeout;
    absl::StatusOr<std::unique_ptr<replication::ReplicatedStore>> store =
        replication::ReplicatedStore::Open(base_.get(),
                                           std::move(store_options));
    if (!store.ok()) {
      spdlog::error(
          "cluster: node {} cannot become the primary of shard {} "
          "at epoch {}: {}",
          options_.node_id, options_.shard, record.epoch,
          std::string(store.status().message()));
      return;
    }
    store_ = *std::move(store);
    // Checkpoints for rebuilds go next to the store: same file system, so
    // RocksDB links its files rather than copying them.
    replication_->SetSource(
        options_.shard, store_.get(),
        std::filesystem::path(options_.store_dir).parent_path().string());
    if (options_.metrics != nullptr) {
      options_.metrics->Counters(metrics::Metric::kClusterPromotionsTotal)
          .Add({std::to_string(options_.shard)})
          .Increment();
    }
    role_ = Role::kPrimary;
    epoch_ = record.epoch;
    primary_since_ = absl::Now();
    engine_error_.clear();
    spdlog::info(
        "cluster: node {} is the primary of shard {} at epoch {} "
        "(in-sync set {}, log at entry {})",
        options_.node_id, options_.shard, record.epoch,
        absl::StrJoin(record.isr, ","), store_->last().index);
  }
  // Shippers first: opening the engine writes, and writes wait for the
  // in-sync backups.
  SyncShippers(view, record);
  KeepInSyncSet(view, record);
  if (!record.transfer_to.empty()) {
    HandOverLocked(record.transfer_to);
    return;
  }
  if (!handing_over_to_.empty()) {
    spdlog::warn(
        "cluster: node {} keeps shard {}: the controller gave up handing it "
        "over to {}",
        options_.node_id, options_.shard, handing_over_to_);
    handing_over_to_.clear();
    absl::MutexLock lock(&mu_);
    handed_over_.reset();
  }
  if (engine_ != nullptr) return;
  if (opener_.joinable()) {
    TakeOpenedEngineLocked();
  } else {
    StartOpeningEngineLocked();
  }
}

void ShardHost::StartOpeningEngineLocked() {
  opening_since_ = absl::Now();
  opener_ = std::thread([this, store = store_.get()] {
    absl::StatusOr<std::unique_ptr<broker::Engine>> engine =
        broker::Engine::Open(store, options_.clock, options_.engine);
    absl::MutexLock lock(&mu_);
    opened_ = std::move(engine);
    wake_ = true;
  });
}

void ShardHost::TakeOpenedEngineLocked() {
  std::optional<absl::StatusOr<std::unique_ptr<broker::Engine>>> opened;
  {
    absl::MutexLock lock(&mu_);
    if (!opened_.has_value()) return;  // Still opening.
    opened = std::move(opened_);
    opened_.reset();
  }
  opener_.join();
  if (!opened->ok()) {
    const std::string error(opened->status().message());
    if (error != engine_error_) {
      spdlog::warn("cluster: node {} cannot open shard {} yet: {}",
                   options_.node_id, options_.shard, error);
    }
    engine_error_ = error;
    return;  // The next tick tries again (or gives the shard back).
  }
  engine_ = **std::move(opened);
  engine_->Start();
  gate_->Open(engine_.get());
  spdlog::info(
      "cluster: node {} serves shard {} at epoch {} (recovered in "
      "{})",
      options_.node_id, options_.shard, epoch_,
      absl::FormatDuration(absl::Now() - opening_since_));
}

void ShardHost::StopOpeningEngineLocked(const absl::Status& why) {
  if (!opener_.joinable()) return;
  opener_.join();
  absl::MutexLock lock(&mu_);
  if (opened_.has_value() && opened_->ok()) (**opened_)->Shutdown(why);
  opened_.reset();
}

void ShardHost::HandOverLocked(const std::string& to) {
  if (handing_over_to_ != to) {
    handing_over_to_ = to;
    spdlog::info("cluster: node {} hands shard {} over to {} (epoch {})",
                 options_.node_id, options_.shard, to, epoch_);
    const std::string why =
        absl::StrCat("shard ", options_.shard, " is being handed over from ",
                     options_.node_id, " to ", to, "; retry shortly");
    gate_->Close(absl::UnavailableError(why));
    // No writer may be left: an engine opening writes too.
    StopOpeningEngineLocked(absl::UnavailableError(why));
    if (engine_ != nullptr) {
      engine_->Shutdown(absl::UnavailableError(why));
      engine_.reset();
    }
    absl::MutexLock lock(&mu_);
    handed_over_.reset();
  }
  {
    absl::MutexLock lock(&mu_);
    if (handed_over_.has_value()) return;
  }
  // Nothing is written any more: the log ends here.
  const int64_t last = store_->last().index;
  if (!store_->AwaitDurable(to, last, absl::Now() + kTick)) return;
  cluster::Member* member;
  {
    absl::MutexLock lock(&mu_);
    handed_over_ = last;
    member = member_;
  }
  spdlog::info(
      "cluster: node {} stopped writing shard {} at entry {}, which {} "
      "holds durably",
      options_.node_id, options_.shard, last, to);
  if (member != nullptr) member->Wake();
}

std::optional<int64_t> ShardHost::HandedOver() {
  absl::MutexLock lock(&mu_);
  return handed_over_;
}

void ShardHost::SyncShippers(const cluster::ClusterView& view,
                             const cluster::ShardRecord& record) {
  std::map<std::string, std::string> wanted;
  for (const std::string& node : record.replicas) {
    if (node == options_.node_id) continue;
    auto it = view.nodes.find(node);
    if (it != view.nodes.end()) wanted[node] = it->second.address;
  }
  for (auto it = shippers_.begin(); it != shippers_.end();) {
    auto want = wanted.find(it->first);
    if (want == wanted.end() || want->second != shipper_addresses_[it->first]) {
      shipper_addresses_.erase(it->first);
      it = shippers_.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& [node, address] : wanted) {
    if (shippers_.contains(node)) continue;
    replication::ShipperOptions options;
    options.shard = options_.shard;
    options.primary = options_.node_id;
    options.backup = node;
    options.address = address;
    shipper_addresses_[node] = address;
    shippers_[node] = std::make_unique<replication::Shipper>(
        store_.get(), options_.peer_channel(address), std::move(options));
  }
}

cluster::LogEnd ShardHost::Acknowledged() const {
  const replication::LogPosition acknowledged = store_->acknowledged();
  return {acknowledged.epoch, acknowledged.index};
}

void ShardHost::KeepInSyncSet(const cluster::ClusterView& view,
                              const cluster::ShardRecord& record) {
  cluster::Member* member;
  {
    absl::MutexLock lock(&mu_);
    member = member_;
  }
  if (member == nullptr || record.epoch != epoch_) return;
  const absl::Time now = absl::Now();
  const replication::LogPosition last = store_->last();
  const std::map<std::string, replication::ReplicatedStore::BackupState>
      backups = store_->Backups();
  // An in-sync set that names a node the replicas do not (written before
  // Member::SetIsr checked its record) loses it: no shipper feeds that
  // node, and the controller could promote it.
  for (const std::string& node : record.isr) {
    if (record.IsReplica(node)) continue;
    std::vector<std::string> isr;
    for (const std::string& n : record.isr) {
      if (record.IsReplica(n)) isr.push_back(n);
    }
    absl::StatusOr<bool> written =
        member->SetIsr(options_.shard, record, isr, Acknowledged());
    if (written.ok() && *written) {
      spdlog::warn(
          "cluster: primary {} removed {} from the in-sync set of shard {}: "
          "it is not a replica",
          options_.node_id, node, options_.shard);
    }
    return;  // One change per view.
  }
  // A backup the controller moved away (cluster/rebalance.h): it left the
  // record's replicas and in-sync set together, so writes stop waiting for
  // it. Views come in order, and this primary adds a backup only to the
  // record it decided on (Member::SetIsr), so one absent from the replicas
  // now is not in the record's in-sync set.
  for (const auto& [node, state] : backups) {
    if (state.in_sync && !record.IsReplica(node)) {
      store_->RemoveInSync(node);
      spdlog::info(
          "cluster: primary {} no longer waits for {} in shard {}: it is not "
          "a replica any more",
          options_.node_id, node, options_.shard);
    }
  }
  for (const std::string& node : record.replicas) {
    if (node == options_.node_id) continue;
    auto state = backups.find(node);
    const replication::ReplicatedStore::BackupState st =
        state == backups.end() ? replication::ReplicatedStore::BackupState{}
                               : state->second;
    const bool alive = view.nodes.contains(node);
    if (record.InIsr(node)) {
      // Lacking an entry written more than lag_timeout ago: silent, or
      // answering but applying nothing (a full disk). (A backup that went
      // long without news because nothing was written is not stuck: what
      // counts is how old the first entry it lacks is.)
      const bool stuck_behind =
          now - std::max(st.lacking_since, primary_since_) >
          options_.lag_timeout;
      if (!alive || stuck_behind) {
        std::vector<std::string> isr;
        for (const std::string& n : record.isr) {
          if (n != node) isr.push_back(n);
        }
        absl::StatusOr<bool> written =
            member->SetIsr(options_.shard, record, isr, Acknowledged());
        if (written.ok() && *written) {
          store_->RemoveInSync(node);
          spdlog::warn(
              "cluster: primary {} removed {} from the in-sync set "
              "of shard {}: {} (at entry {} of {})",
              options_.node_id, node, options_.shard,
              alive ? "behind and making no progress" : "its node is gone",
              st.applied.index, last.index);
        }
        return;  // One change per view: the next starts from the new record.
      }
    } else if (st.in_sync) {
      // Added here, and the record that says so has not come yet: adding
      // it again from this older record would not be written (SetIsr), and
      // would take it out of the writes' set meanwhile.
      continue;
    } else if (alive && now - st.last_heard < options_.lag_timeout &&
               st.applied.epoch == last.epoch &&
               store_->BytesAfter(st.applied.index) <= kRejoinBytes) {
      // Close behind (under sustained writes a follower is rarely at the
      // very last entry when asked): writes wait for it from now on, so it
      // falls no further behind, and it has every entry acknowledged so far
      // once it has made the last one written before this durable. Joins
      // the record only then; gives up after lag_timeout.
      store_->AddInSync(node);
      const int64_t mark = store_->last().index;
      if (!store_->AwaitDurable(node, mark, now + options_.lag_timeout)) {
        store_->RemoveInSync(node);
        spdlog::warn(
            "cluster: primary {} did not add {} to the in-sync set of shard "
            "{}: it did not make entry {} durable within {}",
            options_.node_id, node, options_.shard, mark,
            absl::FormatDuration(options_.lag_timeout));
        return;
      }
      std::vector<std::string> isr = record.isr;
      isr.push_back(node);
      absl::StatusOr<bool> written =
          member->SetIsr(options_.shard, record, isr, Acknowledged());
      if (!written.ok() || !*written) {
        store_->RemoveInSync(node);
        return;
      }
      spdlog::info(
          "cluster: primary {} added {} to the in-sync set of shard "
          "{} (at entry {})",
          options_.node_id, node, options_.shard, mark);
      return;
    }
  }
}

void ShardHost::BecomeBackup() {
  absl::MutexLock lock(&role_mu_);
  if (role_ == Role::kPrimary) {
    StepDownLocked("a newer primary exists");
  }
  if (role_ == Role::kBackup) return;
  if (base_ == nullptr && discarded_) {
    // Named again after its copy was removed: it starts from an empty
    // one, as a node that joins does, which the primary fills (from its
    // log, or a checkpoint).
    absl::StatusOr<std::unique_ptr<storage::MessageStore>> opened =
        options_.open_store(options_.store_dir);
    if (!opened.ok()) {
      spdlog::error(
          "cluster: node {} cannot open a new copy of shard {} in "
          "{}: {}",
          options_.node_id, options_.shard, options_.store_dir,
          std::string(opened.status().message()));
      return;
    }
    base_ = *std::move(opened);
    discarded_ = false;
  }
  if (base_ == nullptr) return;
  absl::StatusOr<std::unique_ptr<replication::Replica>> replica =
      replication::Replica::Open(base_.get());
  if (!replica.ok()) {
    spdlog::error("cluster: node {} cannot hold shard {} as a backup: {}",
                  options_.node_id, options_.shard,
                  std::string(replica.status().message()));
    return;
  }
  replica_ = *std::move(replica);
  replication_->SetReplica(options_.shard, replica_.get());
  role_ = Role::kBackup;
  spdlog::info(
      "cluster: node {} is a backup of shard {} (its copy ends at "
      "entry {} of epoch {})",
      options_.node_id, options_.shard, replica_->applied().index,
      replica_->applied().epoch);
}

void ShardHost::Rebuild(const std::string& primary_address,
                        const std::string& why) {
  const std::string& dir = options_.store_dir;
  const std::string fresh = dir + ".rebuild";
  const std::string old = dir + ".old";
  {
    absl::MutexLock lock(&role_mu_);
    if (role_ == Role::kPrimary) return;
    spdlog::warn(
        "cluster: node {} rebuilds its copy of shard {} from the "
        "checkpoint of primary {}: {}",
        options_.node_id, options_.shard, primary_address, why);
    // No stream applies to the copy from here on; requests to rebuild
    // made before are all in rebuild_, and are this rebuild.
    replication_->SetReplica(options_.shard, nullptr);
    replica_.reset();
    {
      absl::MutexLock wake_lock(&mu_);
      rebuild_.clear();
    }
    base_.reset();  // Closed: its directory is about to be replaced.
    role_ = Role::kNone;
  }
  TellHealth();  // Not ready while the copy is fetched, which takes long.
  const absl::Time start = absl::Now();
  std::error_code ignored;
  std::filesystem::remove_all(fresh, ignored);
  absl::StatusOr<storage::CheckpointInfo> fetched =
      replication::FetchCheckpoint(options_.peer_channel(primary_address),
                                   options_.shard, fresh, absl::Hours(1));
  if (fetched.ok()) {
    std::filesystem::remove_all(old, ignored);
    std::error_code error;
    std::filesystem::rename(dir, old, error);
    if (!error) std::filesystem::rename(fresh, dir, error);
    if (error) {
      fetched = absl::UnavailableError(absl::StrCat(
          "cannot move the checkpoint into ", dir, ": ", error.message()));
    }
    std::filesystem::remove_all(old, ignored);
  }
  absl::StatusOr<std::unique_ptr<storage::MessageStore>> reopened =
      options_.open_store(dir);
  absl::MutexLock lock(&role_mu_);
  if (!reopened.ok()) {
    spdlog::error(
        "cluster: node {} cannot open its copy of shard {} in {}: "
        "{}",
        options_.node_id, options_.shard, dir,
        std::string(reopened.status().message()));
    return;
  }
  base_ = *std::move(reopened);
  if (!fetched.ok()) {
    spdlog::error(
        "cluster: node {} could not rebuild its copy of shard {}, "
        "and keeps the old one: {}",
        options_.node_id, options_.shard,
        std::string(fetched.status().message()));
    return;
  }
  if (options_.metrics != nullptr) {
    options_.metrics->Counters(metrics::Metric::kReplicationCheckpointsTotal)
        .Add({std::to_string(options_.shard), "received"})
        .Increment();
  }
  absl::StatusOr<replication::LogPosition> position =
      replication::ReadPosition(*base_);
  spdlog::info(
      "cluster: node {} rebuilt its copy of shard {} in {}: {} "
      "files, {} bytes, up to entry {}",
      options_.node_id, options_.shard,
      absl::FormatDuration(absl::Now() - start), fetched->files, fetched->bytes,
      position.ok() ? position->index : -1);
}

std::string RemovedCopyDir(const std::string& store_dir) {
  return store_dir + ".removed";
}

void ShardHost::BecomeNone(int64_t record_epoch) {
  std::string removed;
  {
    absl::MutexLock lock(&role_mu_);
    if (role_ == Role::kPrimary) StepDownLocked("no longer a replica");
    if (replica_ != nullptr) {
      replication_->SetReplica(options_.shard, nullptr);
      replica_.reset();
    }
    if (role_ != Role::kNone) {
      spdlog::info("cluster: node {} holds no copy of shard {} any more",
                   options_.node_id, options_.shard);
    }
    role_ = Role::kNone;
    if (base_ != nullptr) removed = DiscardCopyLocked(record_epoch);
  }
  if (removed.empty()) return;
  // The files go without the lock: the host's calls need not wait for a
  // large copy's deletion.
  uint64_t bytes = 0;
  std::error_code error;
  for (auto it = std::filesystem::recursive_directory_iterator(removed, error);
       !error && it != std::filesystem::recursive_directory_iterator();
       it.increment(error)) {
    std::error_code size_error;
    if (it->is_regular_file(size_error)) bytes += it->file_size(size_error);
  }
  std::filesystem::remove_all(removed, error);
  if (error) {
    spdlog::error("cluster: node {} cannot delete {}: {}", options_.node_id,
                  removed, error.message());
    return;
  }
  spdlog::info(
      "cluster: node {} removed its copy of shard {} ({}, {} bytes): the "
      "shard's record does not name it",
      options_.node_id, options_.shard, options_.store_dir, bytes);
}

std::string ShardHost::DiscardCopyLocked(int64_t record_epoch) {
  const std::string& dir = options_.store_dir;
  // A copy that followed a newer epoch than the record's is not one the
  // record left behind: etcd's data was lost or replaced. It stays.
  absl::StatusOr<int64_t> accepted = replication::ReadAcceptedEpoch(*base_);
  if (!accepted.ok() || *accepted > record_epoch) {
    if (!kept_copy_) {
      spdlog::warn(
          "cluster: node {} keeps its copy of shard {} in {}, which the "
          "shard's record (epoch {}) does not name: {}",
          options_.node_id, options_.shard, dir, record_epoch,
          accepted.ok()
              ? absl::StrCat("the copy followed epoch ", *accepted,
                             ", newer than the record's (was etcd's data "
                             "replaced?)")
              : std::string(accepted.status().message()));
      kept_copy_ = true;
    }
    return "";
  }
  base_.reset();  // Closed before its files go.
  discarded_ = true;
  // Renamed first, so that a node killed while the files go finds either
  // its copy whole or none at start (ClusterNode::Open deletes what is
  // left of the files).
  const std::string removed = RemovedCopyDir(dir);
  std::error_code error;
  std::filesystem::remove_all(removed, error);
  std::filesystem::rename(dir, removed, error);
  if (error) {
    spdlog::error(
        "cluster: node {} cannot remove its old copy of shard {} in {}: {}",
        options_.node_id, options_.shard, dir, error.message());
    return "";
  }
  return removed;
}

void ShardHost::StepDownLocked(const std::string& reason) {
  if (role_ != Role::kPrimary) return;
  spdlog::warn(
      "cluster: node {} stops being the primary of shard {} at "
      "epoch {}: {}",
      options_.node_id, options_.shard, epoch_, reason);
  gate_->Close(absl::UnavailableError(absl::StrCat(
      "node ", options_.node_id, " stopped being the primary of shard ",
      options_.shard, ": ", reason)));
  // Writes waiting for backups fail now; then nothing reaches the engine.
  store_->Close(absl::StrCat("this node stopped being the primary: ", reason));
  StopOpeningEngineLocked(absl::UnavailableError(
      absl::StrCat("this node stopped being the primary: ", reason)));
  replication_->SetSource(options_.shard, nullptr, "");
  shippers_.clear();
  shipper_addresses_.clear();
  if (engine_ != nullptr) {
    engine_->Shutdown(absl::UnavailableError(
        absl::StrCat("this node stopped being the primary: ", reason)));
    engine_.reset();
  }
  store_.reset();
  role_ = Role::kNone;
  epoch_ = 0;
  handing_over_to_.clear();
  absl::MutexLock lock(&mu_);
  handed_over_.reset();
}

}  // namespace hourglass::node
