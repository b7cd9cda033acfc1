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
#include "broker/store_errors.h"
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

namespace act = cluster::replica_action;

// How often the host steps its machine without a new view: to open an
// engine that failed to open, and to keep the in-sync set.
constexpr absl::Duration kTick = absl::Milliseconds(250);

cluster::LogEnd EndOf(replication::LogPosition position) {
  return {position.epoch, position.index};
}

}  // namespace

ShardHost::ShardHost(std::unique_ptr<storage::MessageStore> base,
                     ShardHostOptions options, PrimaryGate* gate,
                     replication::ReplicationService* replication)
    : options_(std::move(options)),
      gate_(gate),
      replication_(replication),
      machine_({.node = options_.node_id,
                .shard = options_.shard,
                .min_insync = options_.min_insync,
                .lag_timeout = options_.lag_timeout}),
      repeated_errors_(std::make_unique<broker::RateLimitedLog>(
          absl::Seconds(10), options_.clock)) {
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
  StopFollowingLocked();
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
  // Still following: the copy may yet grow, so it has no final position.
  if (replica_ != nullptr) return std::nullopt;
  if (store_ != nullptr) return EndOf(store_->last());
  if (base_ == nullptr) return std::nullopt;
  absl::StatusOr<replication::LogPosition> position =
      replication::ReadPosition(*base_);
  if (!position.ok()) return std::nullopt;
  return EndOf(*position);
}

std::optional<int64_t> ShardHost::HandedOver() {
  absl::MutexLock lock(&role_mu_);
  return machine_.handed_over();
}

std::optional<ShardHost::Progress> ShardHost::progress() const {
  absl::MutexLock lock(&role_mu_);
  if (store_ == nullptr) return std::nullopt;
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
  return machine_.role();
}

int64_t ShardHost::epoch() const {
  absl::MutexLock lock(&role_mu_);
  return store_ != nullptr ? store_->epoch() : 0;
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
  const Role role = machine_.role();
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
            role == Role::kBackup && record.InIsr(options_.node_id);
      }
    }
  }
  if (role == Role::kPrimary) {
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
    if (view.has_value()) Step(*view);
    // Each tick too: the primary's store health has no callback here.
    TellHealth();
  }
}

void ShardHost::Step(const cluster::ClusterView& view) {
  std::optional<cluster::ShardRecord> record;
  std::vector<cluster::ReplicaAction> later;
  {
    absl::MutexLock lock(&role_mu_);
    if (opener_.joinable()) TakeOpenedEngineLocked();
    const cluster::ReplicaFacts facts = FactsLocked(view);
    record = facts.record;
    for (cluster::ReplicaAction& action : machine_.Step(facts)) {
      if (!CarryOutLocked(action, view)) later.push_back(std::move(action));
    }
  }
  // Without the lock: etcd, a checkpoint fetch, a copy's files.
  for (const cluster::ReplicaAction& action : later) {
    if (const auto* write = std::get_if<act::WriteRecord>(&action)) {
      WriteRecord(*record, *write);
    } else if (const auto* rebuild = std::get_if<act::Rebuild>(&action)) {
      Rebuild(rebuild->from, rebuild->why);
    } else if (std::holds_alternative<act::RemoveCopy>(action)) {
      std::string removed;
      {
        absl::MutexLock lock(&role_mu_);
        if (base_ != nullptr) removed = DiscardCopyLocked();
      }
      DeleteRemovedCopy(removed);
    } else if (std::holds_alternative<act::HandedOver>(action) ||
               std::holds_alternative<act::StopFollowing>(action)) {
      // A position to report: where the hand-over stopped, or where the
      // copy stays now that it no longer follows.
      cluster::Member* member;
      {
        absl::MutexLock lock(&mu_);
        member = member_;
      }
      if (member != nullptr) member->Wake();
    }
  }
}

cluster::ReplicaFacts ShardHost::FactsLocked(const cluster::ClusterView& view) {
  cluster::ReplicaFacts facts;
  facts.now = absl::Now();
  auto it = view.shards.find(options_.shard);
  if (it != view.shards.end()) {
    facts.record = it->second.record;
    facts.record_revision = it->second.mod_revision;
  }
  for (const auto& [id, node] : view.nodes) facts.alive[id] = node.address;
  facts.leaving = left_;
  facts.has_copy = base_ != nullptr;
  if (replica_ != nullptr) {
    facts.accepted_epoch = replica_->accepted_epoch();
  } else if (base_ != nullptr) {
    absl::StatusOr<int64_t> accepted = replication::ReadAcceptedEpoch(*base_);
    facts.accepted_epoch = accepted.ok() ? *accepted : 0;
  }
  {
    absl::MutexLock lock(&mu_);
    facts.rebuild_asked = rebuild_;
  }
  facts.following = replica_ != nullptr;
  if (store_ != nullptr) {
    cluster::ReplicaFacts::Primary& primary =
        facts.primary.emplace(cluster::ReplicaFacts::Primary{});
    primary.epoch = store_->epoch();
    primary.close_reason = store_->close_reason();
    primary.closed = !primary.close_reason.empty();
    primary.last = EndOf(store_->last());
    primary.acknowledged = EndOf(store_->acknowledged());
    for (const auto& [node, state] : store_->Backups()) {
      primary.backups[node] = {EndOf(state.applied),
                               EndOf(state.durable),
                               state.last_heard,
                               state.lacking_since,
                               store_->BytesAfter(state.applied.index),
                               state.in_sync,
                               state.counted,
                               state.connected};
    }
  }
  facts.shippers = shipper_addresses_;
  if (engine_ != nullptr) {
    facts.engine = cluster::ReplicaFacts::Engine::kOpen;
  } else if (opener_.joinable()) {
    facts.engine = cluster::ReplicaFacts::Engine::kOpening;
  }
  facts.engine_error = engine_error_;
  return facts;
}

bool ShardHost::CarryOutLocked(const cluster::ReplicaAction& action,
                               const cluster::ClusterView& view) {
  if (const auto* open = std::get_if<act::OpenPrimary>(&action)) {
    OpenPrimaryLocked(*open);
  } else if (const auto* down = std::get_if<act::StepDown>(&action)) {
    StepDownLocked(down->reason);
  } else if (const auto* start = std::get_if<act::StartShipper>(&action)) {
    StartShipperLocked(start->node, start->address);
  } else if (const auto* stop = std::get_if<act::StopShipper>(&action)) {
    shippers_.erase(stop->node);
    shipper_addresses_.erase(stop->node);
  } else if (const auto* add = std::get_if<act::AddInSync>(&action)) {
    if (store_ != nullptr) store_->AddInSync(add->node);
    if (!add->why.empty())
      spdlog::info("cluster: primary {} {}", options_.node_id, add->why);
  } else if (const auto* count = std::get_if<act::CountInSync>(&action)) {
    if (store_ != nullptr) store_->CountInSync(count->node);
  } else if (const auto* remove = std::get_if<act::RemoveInSync>(&action)) {
    if (store_ != nullptr) store_->RemoveInSync(remove->node);
    if (!remove->why.empty()) {
      spdlog::warn("cluster: primary {} {}", options_.node_id, remove->why);
    }
  } else if (std::holds_alternative<act::OpenEngine>(action)) {
    if (store_ != nullptr && engine_ == nullptr && !opener_.joinable()) {
      StartOpeningEngineLocked();
    }
  } else if (const auto* close = std::get_if<act::CloseEngine>(&action)) {
    spdlog::info("cluster: node {} hands shard {} over (epoch {}): {}",
                 options_.node_id, options_.shard, machine_.epoch(),
                 close->reason);
    CloseEngineLocked(absl::UnavailableError(close->reason));
  } else if (std::holds_alternative<act::Refuse>(action)) {
    gate_->Close(ShardRefusal(view, options_.shard, options_.shard_count,
                              options_.node_id));
  } else if (std::holds_alternative<act::Follow>(action)) {
    FollowLocked();
  } else if (std::holds_alternative<act::StopFollowing>(action)) {
    StopFollowingLocked();
    return false;  // The member is woken without the lock: see Step.
  } else if (std::holds_alternative<act::OpenCopy>(action)) {
    OpenCopyLocked();
  } else if (const auto* keep = std::get_if<act::KeepCopy>(&action)) {
    spdlog::warn(
        "cluster: node {} keeps its copy of shard {} in {}, which the shard's "
        "record (epoch {}) does not name: the copy followed epoch {}, newer "
        "than the record's (was etcd's data replaced?)",
        options_.node_id, options_.shard, options_.store_dir,
        keep->record_epoch, keep->accepted_epoch);
  } else if (const auto* handed = std::get_if<act::HandedOver>(&action)) {
    spdlog::info(
        "cluster: node {} stopped writing shard {} at entry {}, which the "
        "transfer's target holds durably",
        options_.node_id, options_.shard, handed->index);
    return false;  // The member is woken without the lock.
  } else {
    return false;  // WriteRecord, Rebuild, RemoveCopy.
  }
  return true;
}

void ShardHost::OpenPrimaryLocked(const act::OpenPrimary& open) {
  if (base_ == nullptr) return;
  StopFollowingLocked();
  replication::ReplicatedStoreOptions store_options;
  store_options.epoch = open.epoch;
  store_options.in_sync = open.in_sync;
  store_options.min_insync = options_.min_insync;
  store_options.ack_timeout = options_.ack_timeout;
  absl::StatusOr<std::unique_ptr<replication::ReplicatedStore>> store =
      replication::ReplicatedStore::Open(base_.get(), std::move(store_options));
  if (!store.ok()) {
    spdlog::error(
        "cluster: node {} cannot become the primary of shard {} at epoch {}: "
        "{}",
        options_.node_id, options_.shard, open.epoch,
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
  engine_error_.clear();
  spdlog::info(
      "cluster: node {} is the primary of shard {} at epoch {} (in-sync set "
      "{}, log at entry {})",
      options_.node_id, options_.shard, open.epoch,
      absl::StrJoin(open.in_sync, ","), store_->last().index);
}

void ShardHost::StartShipperLocked(const std::string& node,
                                   const std::string& address) {
  if (store_ == nullptr) return;
  replication::ShipperOptions options;
  options.shard = options_.shard;
  options.primary = options_.node_id;
  options.backup = node;
  options.address = address;
  options.max_request_bytes = options_.peer_request_bytes;
  shippers_.erase(node);  // One to another address first stops.
  shipper_addresses_[node] = address;
  shippers_[node] = std::make_unique<replication::Shipper>(
      store_.get(), options_.peer_channel(address), std::move(options));
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
    return;  // The next step tries again (or gives the shard back).
  }
  engine_ = **std::move(opened);
  engine_->Start();
  gate_->Open(engine_.get());
  spdlog::info("cluster: node {} serves shard {} at epoch {} (recovered in {})",
               options_.node_id, options_.shard, machine_.epoch(),
               absl::FormatDuration(absl::Now() - opening_since_));
}

void ShardHost::StopOpeningEngineLocked(const absl::Status& why) {
  if (!opener_.joinable()) return;
  opener_.join();
  absl::MutexLock lock(&mu_);
  if (opened_.has_value() && opened_->ok()) (**opened_)->Shutdown(why);
  opened_.reset();
}

void ShardHost::CloseEngineLocked(const absl::Status& why) {
  gate_->Close(why);
  // No writer may be left: an engine opening writes too.
  StopOpeningEngineLocked(why);
  if (engine_ != nullptr) {
    engine_->Shutdown(why);
    engine_.reset();
  }
}

void ShardHost::FollowLocked() {
  if (base_ == nullptr || replica_ != nullptr) return;
  absl::StatusOr<std::unique_ptr<replication::Replica>> replica =
      replication::Replica::Open(base_.get());
  if (!replica.ok()) {
    if (std::optional<uint64_t> unlogged = repeated_errors_->Allow("follow")) {
      spdlog::error(
          "cluster: node {} cannot hold shard {} as a backup: {} ({} more "
          "since the last report)",
          options_.node_id, options_.shard,
          std::string(replica.status().message()), *unlogged);
    }
    return;
  }
  replica_ = *std::move(replica);
  replication_->SetReplica(options_.shard, replica_.get());
  spdlog::info(
      "cluster: node {} is a backup of shard {} (its copy ends at entry {} "
      "of epoch {})",
      options_.node_id, options_.shard, replica_->applied().index,
      replica_->applied().epoch);
}

void ShardHost::StopFollowingLocked() {
  if (replica_ == nullptr) return;
  replication_->SetReplica(options_.shard, nullptr);
  replica_.reset();
}

void ShardHost::OpenCopyLocked() {
  if (base_ != nullptr) return;
  // Named again after its copy was removed (or a rebuild failed to reopen
  // it): it opens what is there, an empty copy after a removal, which the
  // primary fills (from its log, or a checkpoint).
  absl::StatusOr<std::unique_ptr<storage::MessageStore>> opened =
      options_.open_store(options_.store_dir);
  if (!opened.ok()) {
    if (std::optional<uint64_t> unlogged = repeated_errors_->Allow("open")) {
      spdlog::error(
          "cluster: node {} cannot open a copy of shard {} in {}: {} ({} more "
          "since the last report)",
          options_.node_id, options_.shard, options_.store_dir,
          std::string(opened.status().message()), *unlogged);
    }
    return;
  }
  base_ = *std::move(opened);
}

void ShardHost::WriteRecord(const cluster::ShardRecord& from,
                            const act::WriteRecord& write) {
  cluster::Member* member;
  {
    absl::MutexLock lock(&mu_);
    member = member_;
  }
  if (member == nullptr) return;
  absl::StatusOr<bool> written =
      member->WriteAsPrimary(options_.shard, from, write.next, write.what);
  if (written.ok() && *written && !write.then.empty()) {
    spdlog::info("cluster: primary {} {}", options_.node_id, write.then);
  }
  if (!written.ok()) {
    spdlog::warn(
        "cluster: node {} cannot write shard {}'s record yet (it tries "
        "again): {}",
        options_.node_id, options_.shard,
        std::string(written.status().message()));
  }
}

void ShardHost::Rebuild(const std::string& primary_address,
                        const std::string& why) {
  const std::string& dir = options_.store_dir;
  const std::string fresh = dir + ".rebuild";
  const std::string old = dir + ".old";
  {
    absl::MutexLock lock(&role_mu_);
    if (store_ != nullptr) return;
    spdlog::warn(
        "cluster: node {} rebuilds its copy of shard {} from the checkpoint "
        "of primary {}: {}",
        options_.node_id, options_.shard, primary_address, why);
    // No stream applies to the copy from here on; requests to rebuild made
    // before are all in rebuild_, and are this rebuild.
    StopFollowingLocked();
    {
      absl::MutexLock wake_lock(&mu_);
      rebuild_.clear();
    }
    base_.reset();  // Closed: its directory is about to be replaced.
  }
  TellHealth();  // Not ready while the copy is fetched, which takes long.
  const absl::Time start = absl::Now();
  std::error_code ignored;
  std::filesystem::remove_all(fresh, ignored);
  absl::StatusOr<storage::CheckpointInfo> fetched =
      replication::FetchCheckpoint(options_.peer_channel(primary_address),
                                   options_.shard, {.node = options_.node_id},
                                   fresh, absl::Hours(1));
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
    spdlog::error("cluster: node {} cannot open its copy of shard {} in {}: {}",
                  options_.node_id, options_.shard, dir,
                  std::string(reopened.status().message()));
    return;
  }
  base_ = *std::move(reopened);
  if (!fetched.ok()) {
    spdlog::error(
        "cluster: node {} could not rebuild its copy of shard {}, and keeps "
        "the old one: {}",
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
      "cluster: node {} rebuilt its copy of shard {} in {}: {} files, {} "
      "bytes, up to entry {}",
      options_.node_id, options_.shard,
      absl::FormatDuration(absl::Now() - start), fetched->files, fetched->bytes,
      position.ok() ? position->index : -1);
}

std::string RemovedCopyDir(const std::string& store_dir) {
  return store_dir + ".removed";
}

std::string ShardHost::DiscardCopyLocked() {
  const std::string& dir = options_.store_dir;
  spdlog::info("cluster: node {} holds no copy of shard {} any more",
               options_.node_id, options_.shard);
  StopFollowingLocked();
  base_.reset();  // Closed before its files go.
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

void ShardHost::DeleteRemovedCopy(const std::string& removed) {
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

void ShardHost::StepDownLocked(const std::string& reason) {
  if (store_ == nullptr) return;
  spdlog::warn(
      "cluster: node {} stops being the primary of shard {} at epoch {}: {}",
      options_.node_id, options_.shard, store_->epoch(), reason);
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
}

}  // namespace hourglass::node
