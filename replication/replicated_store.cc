#include "replication/replicated_store.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "storage/keys.h"

namespace hourglass::replication {

absl::StatusOr<std::unique_ptr<ReplicatedStore>> ReplicatedStore::Open(
    storage::MessageStore* base, ReplicatedStoreOptions options) {
  absl::StatusOr<LogPosition> last = ReadPosition(*base);
  if (!last.ok()) return last.status();
  if (options.epoch < 1 || options.epoch < last->epoch) {
    return absl::InvalidArgumentError(
        absl::StrCat("a primary at epoch ", options.epoch,
                     " cannot write after entries of epoch ", last->epoch));
  }
  // The primary's own epoch is one it accepted: if it becomes a backup
  // again, it refuses primaries older than the one it was.
  absl::StatusOr<int64_t> accepted = ReadAcceptedEpoch(*base);
  if (!accepted.ok()) return accepted.status();
  if (*accepted > options.epoch) {
    return absl::FailedPreconditionError(absl::StrCat(
        "a primary at epoch ", options.epoch, " on a copy that accepted epoch ",
        *accepted, ": a newer primary exists"));
  }
  // A primary never writes at an epoch this copy accepted before: it led
  // (or followed) at it already, and another copy may hold entries of it
  // that this one lost (unsynced when the power went). The same (epoch,
  // index) would then name two different entries.
  if (*accepted == options.epoch) {
    return absl::FailedPreconditionError(absl::StrCat(
        "a primary at epoch ", options.epoch,
        " on a copy that accepted that epoch before: take a new epoch"));
  }
  storage::WriteBatch batch;
  std::string value;
  storage::AppendU64(value, static_cast<uint64_t>(options.epoch));
  batch.Put(storage::Table::kMeta, std::string(storage::kReplicationEpochKey),
            std::move(value));
  if (absl::Status s = base->Write(batch); !s.ok()) return s;
  if (absl::Status s = base->SyncLog(); !s.ok()) return s;
  // The engine reads what it writes (a backup's copy was write-only).
  base->SetWriteOnly(false);
  return std::unique_ptr<ReplicatedStore>(
      new ReplicatedStore(base, std::move(options), *last));
}

ReplicatedStore::ReplicatedStore(storage::MessageStore* base,
                                 ReplicatedStoreOptions options,
                                 LogPosition last)
    : base_(base), options_(std::move(options)), history_(base), last_(last) {
  for (const std::string& node : options_.in_sync) {
    in_sync_.insert(node);
    counted_.insert(node);
    backups_[node].in_sync = true;
    backups_[node].counted = true;
  }
}

absl::Status ReplicatedStore::Write(const storage::WriteBatch& batch) {
  absl::StatusOr<LogPosition> entry = Append(batch);
  if (!entry.ok()) return entry.status();
  return AwaitAcknowledged(*entry, /*durable=*/false);
}

absl::Status ReplicatedStore::SyncLog() {
  const LogPosition entry = last();
  if (absl::Status s = base_->SyncLog(); !s.ok()) return s;
  return AwaitAcknowledged(entry, /*durable=*/true);
}

absl::Status ReplicatedStore::AwaitAcknowledged(LogPosition entry,
                                                bool durable) {
  absl::MutexLock lock(&mu_);
  auto decided = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !closed_.empty() || TooFewInSyncLocked() ||
           AckedLocked(entry, durable);
  };
  const bool in_time =
      mu_.AwaitWithTimeout(absl::Condition(&decided), options_.ack_timeout);
  return *OutcomeLocked(entry, durable, /*timed_out=*/!in_time);
}

std::optional<absl::Status> ReplicatedStore::Outcome(LogPosition entry,
                                                     bool durable,
                                                     absl::Time since) {
  absl::MutexLock lock(&mu_);
  return OutcomeLocked(entry, durable,
                       options_.now() - since >= options_.ack_timeout);
}

std::optional<absl::Status> ReplicatedStore::OutcomeLocked(LogPosition entry,
                                                           bool durable,
                                                           bool timed_out) {
  if (AckedLocked(entry, durable)) {
    if (durable) acknowledged_ = std::max(acknowledged_, entry);
    return absl::OkStatus();
  }
  if (!closed_.empty()) return absl::UnavailableError(closed_);
  if (TooFewInSyncLocked()) {
    // Kafka answers NOT_ENOUGH_REPLICAS_AFTER_APPEND here: the entry is in
    // this copy, perhaps in others, but not on enough to survive a loss.
    // The store closes too: its writer was told of a failure, yet the
    // entry is in the store, so what the writer holds in memory (the
    // engine's wheel and windows) may no longer be what the store holds;
    // the primary steps down, and whoever leads next reads the store.
    CloseLocked(std::string(
        TooFewInSyncErrorLocked(
            absl::StrCat("entry ", entry.index, " of epoch ", entry.epoch,
                         " was written but not acknowledged (it may or may "
                         "not be kept): "))
            .message()));
    return absl::UnavailableError(closed_);
  }
  if (!timed_out) return std::nullopt;
  CloseLocked(absl::StrCat("entry ", entry.index, " of epoch ", entry.epoch,
                           " was not acknowledged by every in-sync backup (",
                           absl::StrJoin(in_sync_, ","), ") within ",
                           absl::FormatDuration(options_.ack_timeout),
                           "; this primary stopped writing"));
  return absl::UnavailableError(closed_);
}

bool ReplicatedStore::TooFewInSyncLocked() const {
  return counted_.size() + 1 < static_cast<size_t>(options_.min_insync);
}

absl::Status ReplicatedStore::TooFewInSyncErrorLocked(
    std::string_view what) const {
  return absl::UnavailableError(absl::StrCat(
      std::string(what), "the shard's in-sync set has ", counted_.size() + 1,
      " members (the primary", counted_.empty() ? "" : " and ",
      absl::StrJoin(counted_, ","), "), fewer than --min_insync=",
      options_.min_insync, ": writes wait until a backup catches up"));
}

absl::StatusOr<LogPosition> ReplicatedStore::Append(
    const storage::WriteBatch& batch) {
  absl::MutexLock write_lock(&write_mu_);
  LogPosition previous;
  {
    absl::MutexLock lock(&mu_);
    if (!closed_.empty()) return absl::UnavailableError(closed_);
    if (TooFewInSyncLocked()) return TooFewInSyncErrorLocked("");
    previous = last_;
  }
  const LogPosition next{options_.epoch, previous.index + 1};
  // The entry is `batch` followed by its position keys, written and encoded
  // from the two without copying `batch`: as the bytes the store wrote, if
  // it has a format of its own, which backups then write as they are.
  storage::WriteBatch position;
  AddPositionKeys(previous, next, position);
  const storage::WriteBatch* const entry[] = {&batch, &position};
  std::string written;
  if (absl::Status s = base_->WriteAllEncoded(entry, written); !s.ok()) {
    return s;
  }
  auto bytes = std::make_shared<const std::string>(
      written.empty()
          ? EncodeEntry(next.epoch, next.index, entry, batch.needs_sync())
          : EncodeEntry(next.epoch, next.index, batch.needs_sync(),
                        base_->WriteEncoding(), written));
  absl::MutexLock lock(&mu_);
  last_ = next;
  kept_bytes_ += bytes->size();
  kept_.push_back({next.index, std::move(bytes), options_.now()});
  while (kept_.size() > 1 && kept_bytes_ > options_.retain_bytes) {
    kept_bytes_ -= kept_.front().bytes->size();
    kept_.pop_front();
  }
  return next;
}

bool ReplicatedStore::Acknowledged(LogPosition entry, bool durable) const {
  absl::MutexLock lock(&mu_);
  return AckedLocked(entry, durable);
}

bool ReplicatedStore::AckedLocked(LogPosition entry, bool durable) const {
  if (TooFewInSyncLocked()) return false;
  for (const std::string& node : in_sync_) {
    auto it = backups_.find(node);
    if (it == backups_.end()) return false;
    // Positions on this log (ReportProgress): a copy holds the entry when
    // its position is not below it (LogPosition's order).
    const LogPosition& position =
        durable ? it->second.durable : it->second.applied;
    if (position < entry) return false;
  }
  return true;
}

absl::StatusOr<std::vector<std::shared_ptr<const std::string>>>
ReplicatedStore::ReadFrom(int64_t index, size_t max_bytes,
                          absl::Time deadline) {
  int64_t oldest_kept;
  {
    absl::MutexLock lock(&mu_);
    auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !closed_.empty() || last_.index >= index;
    };
    if (!ready() && deadline > absl::Now()) {
      mu_.AwaitWithDeadline(absl::Condition(&ready), deadline);
    }
    if (!closed_.empty()) return absl::UnavailableError(closed_);
    std::vector<std::shared_ptr<const std::string>> out;
    if (last_.index < index) return out;
    oldest_kept = kept_.empty() ? last_.index + 1 : kept_.front().index;
    if (oldest_kept <= index) {
      size_t bytes = 0;
      for (size_t i = static_cast<size_t>(index - oldest_kept);
           i < kept_.size(); ++i) {
        if (!out.empty() && bytes + kept_[i].bytes->size() > max_bytes) break;
        bytes += kept_[i].bytes->size();
        out.push_back(kept_[i].bytes);
      }
      return out;
    }
  }
  // Older than the entries in memory: from the store's log, without the
  // lock (it reads files).
  absl::StatusOr<std::vector<std::shared_ptr<const std::string>>> read =
      history_.Read(index, oldest_kept, max_bytes);
  if (absl::IsOutOfRange(read.status())) {
    return absl::OutOfRangeError(absl::StrCat(
        "entry ", index, " is no longer kept (the oldest in memory is ",
        oldest_kept, "; ", read.status().message(), ")"));
  }
  return read;
}

absl::StatusOr<bool> ReplicatedStore::Diverged(LogPosition copy) {
  return replication::Diverged(*base_, last(), copy);
}

void ReplicatedStore::ReportProgress(const std::string& node,
                                     LogPosition applied, LogPosition durable) {
  const absl::Time now = options_.now();
  std::unique_ptr<storage::MessageStore::WriteLogHold> done;  // After mu_.
  absl::MutexLock lock(&mu_);
  BackupState& state = backups_[node];
  state.applied = applied;
  state.durable = durable;
  state.last_heard = now;
  state.connected = true;
  auto held = log_holds_.find(node);
  if (held != log_holds_.end() && (applied.index >= held->second.until_index ||
                                   now >= held->second.expires)) {
    done = std::move(held->second.hold);
    log_holds_.erase(held);
  }
}

void ReplicatedStore::KeepLogFor(
    const std::string& node,
    std::unique_ptr<storage::MessageStore::WriteLogHold> hold,
    absl::Time expires) {
  if (hold == nullptr) return;
  std::unique_ptr<storage::MessageStore::WriteLogHold> replaced;  // After mu_.
  absl::MutexLock lock(&mu_);
  LogHold& kept = log_holds_[node];
  replaced = std::exchange(kept.hold, std::move(hold));
  kept.until_index = last_.index;
  kept.expires = expires;
}

void ReplicatedStore::Disconnected(const std::string& node) {
  absl::MutexLock lock(&mu_);
  auto it = backups_.find(node);
  if (it != backups_.end()) it->second.connected = false;
}

std::map<std::string, ReplicatedStore::BackupState> ReplicatedStore::Backups()
    const {
  absl::MutexLock lock(&mu_);
  std::map<std::string, BackupState> backups = backups_;
  for (auto& [node, state] : backups) {
    const int64_t lacking = state.applied.index + 1;
    if (lacking > last_.index) {
      state.lacking_since = absl::InfiniteFuture();
    } else if (kept_.empty() || kept_.front().index > lacking) {
      state.lacking_since = absl::InfinitePast();
    } else {
      state.lacking_since = kept_[lacking - kept_.front().index].written;
    }
  }
  return backups;
}

LogPosition ReplicatedStore::last() const {
  absl::MutexLock lock(&mu_);
  return last_;
}

LogPosition ReplicatedStore::acknowledged() const {
  absl::MutexLock lock(&mu_);
  return acknowledged_;
}

size_t ReplicatedStore::BytesAfter(int64_t index) const {
  absl::MutexLock lock(&mu_);
  size_t bytes = 0;
  for (auto it = kept_.rbegin(); it != kept_.rend() && it->index > index;
       ++it) {
    bytes += it->bytes->size();
  }
  return bytes;
}

void ReplicatedStore::AddInSync(const std::string& node) {
  absl::MutexLock lock(&mu_);
  in_sync_.insert(node);
  backups_[node].in_sync = true;
}

void ReplicatedStore::CountInSync(const std::string& node) {
  absl::MutexLock lock(&mu_);
  if (!in_sync_.contains(node)) return;
  counted_.insert(node);
  backups_[node].counted = true;
}

bool ReplicatedStore::AwaitDurable(const std::string& node, int64_t index,
                                   absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto has_it = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = backups_.find(node);
    return it != backups_.end() && it->second.durable.index >= index;
  };
  auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !closed_.empty() || has_it();
  };
  mu_.AwaitWithDeadline(absl::Condition(&done), deadline);
  return closed_.empty() && has_it();
}

void ReplicatedStore::RemoveInSync(const std::string& node) {
  absl::MutexLock lock(&mu_);
  in_sync_.erase(node);
  counted_.erase(node);
  backups_[node].in_sync = false;
  backups_[node].counted = false;
}

void ReplicatedStore::Close(const std::string& reason) {
  std::map<std::string, LogHold> holds;  // Let go after mu_.
  absl::MutexLock lock(&mu_);
  CloseLocked(reason);
  holds.swap(log_holds_);
}

void ReplicatedStore::CloseLocked(const std::string& reason) {
  if (closed_.empty()) closed_ = reason.empty() ? "closed" : reason;
}

bool ReplicatedStore::closed() const {
  absl::MutexLock lock(&mu_);
  return !closed_.empty();
}

std::string ReplicatedStore::close_reason() const {
  absl::MutexLock lock(&mu_);
  return closed_;
}

}  // namespace hourglass::replication
