#include "replication/replica.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "storage/keys.h"

namespace hourglass::replication {

absl::StatusOr<std::unique_ptr<Replica>> Replica::Open(
    storage::MessageStore* store) {
  absl::StatusOr<LogPosition> position = ReadPosition(*store);
  if (!position.ok()) return position.status();
  absl::StatusOr<int64_t> epoch = ReadAcceptedEpoch(*store);
  if (!epoch.ok()) return epoch.status();
  // A store written as a primary has entries of epochs it never recorded
  // as accepted: its own.
  return std::unique_ptr<Replica>(
      new Replica(store, *position, std::max(*epoch, position->epoch)));
}

Replica::Replica(storage::MessageStore* store, LogPosition position,
                 int64_t epoch)
    : store_(store),
      applied_(position),
      durable_(position),
      accepted_epoch_(epoch) {}

absl::Status Replica::Accept(int64_t epoch) {
  absl::MutexLock lock(&mu_);
  if (epoch < accepted_epoch_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "epoch ", epoch, " is older than epoch ", accepted_epoch_,
        ", which this replica accepted: its primary has been replaced"));
  }
  if (epoch == accepted_epoch_) return absl::OkStatus();
  storage::WriteBatch batch;
  std::string value;
  storage::AppendU64(value, static_cast<uint64_t>(epoch));
  batch.Put(storage::Table::kMeta, std::string(storage::kReplicationEpochKey),
            std::move(value));
  if (absl::Status s = store_->Write(batch); !s.ok()) return s;
  if (absl::Status s = store_->SyncLog(); !s.ok()) return s;
  accepted_epoch_ = epoch;
  return absl::OkStatus();
}

absl::Status Replica::Apply(int64_t epoch, std::vector<LogEntry> entries) {
  if (absl::Status s = Write(epoch, std::move(entries)); !s.ok()) return s;
  return Sync();
}

absl::Status Replica::Write(int64_t epoch, std::vector<LogEntry> entries) {
  absl::MutexLock lock(&mu_);
  if (epoch != accepted_epoch_) {
    return absl::FailedPreconditionError(
        absl::StrCat("entries of the primary of epoch ", epoch,
                     ", but this replica ", "follows epoch ", accepted_epoch_));
  }
  for (LogEntry& entry : entries) {
    if (entry.epoch > epoch) {
      return absl::FailedPreconditionError(
          absl::StrCat("entry ", entry.index, " is of epoch ", entry.epoch,
                       ", later than its primary's ", epoch));
    }
    if (entry.index != applied_.index + 1) {
      return absl::OutOfRangeError(absl::StrCat(
          "entry ", entry.index, " does not follow this replica's last, ",
          applied_.index));
    }
    if (absl::Status s = store_->Write(entry.batch); !s.ok()) return s;
    applied_ = LogPosition{entry.epoch, entry.index};
    unsynced_ = unsynced_ || entry.batch.needs_sync();
  }
  return absl::OkStatus();
}

absl::Status Replica::Sync() {
  absl::MutexLock lock(&mu_);
  if (unsynced_) {
    if (absl::Status s = store_->SyncLog(); !s.ok()) return s;
    unsynced_ = false;
  }
  durable_ = applied_;
  return absl::OkStatus();
}

LogPosition Replica::applied() const {
  absl::MutexLock lock(&mu_);
  return applied_;
}

LogPosition Replica::durable() const {
  absl::MutexLock lock(&mu_);
  return durable_;
}

int64_t Replica::accepted_epoch() const {
  absl::MutexLock lock(&mu_);
  return accepted_epoch_;
}

}  // namespace hourglass::replication
