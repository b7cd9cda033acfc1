#include "replication/replica.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "storage/keys.h"
#include "storage/rocksdb_store.h"

namespace hourglass::replication {

absl::StatusOr<std::unique_ptr<Replica>> Replica::Open(
    storage::MessageStore* store) {
  // What the copy holds is reported durable from here on: make it so. A
  // process that crashed after applying entries it had not synced left
  // them in the system's cache, which a power loss would still take
  // (found by the simulation's whole-cluster power losses).
  if (absl::Status synced = store->SyncLog(); !synced.ok()) return synced;
  absl::StatusOr<LogPosition> position = ReadPosition(*store);
  if (!position.ok()) return position.status();
  absl::StatusOr<int64_t> epoch = ReadAcceptedEpoch(*store);
  if (!epoch.ok()) return epoch.status();
  // A store written as a primary has entries of epochs it never recorded
  // as accepted: its own.
  auto replica = std::unique_ptr<Replica>(
      new Replica(store, *position, std::max(*epoch, position->epoch)));
  store->SetWriteOnly(true);
  return replica;
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

absl::Status Replica::Apply(int64_t epoch, absl::Span<const LogEntry> entries) {
  if (absl::Status s = Write(epoch, entries); !s.ok()) return s;
  return Sync();
}

absl::Status Replica::Write(int64_t epoch, absl::Span<const LogEntry> entries) {
  absl::MutexLock lock(&mu_);
  if (epoch != accepted_epoch_) {
    return absl::FailedPreconditionError(
        absl::StrCat("entries of the primary of epoch ", epoch,
                     ", but this replica ", "follows epoch ", accepted_epoch_));
  }
  // The entries that follow the last one, up to the first bad one, become
  // one store write: one log record and one pass through the store's write
  // path per request rather than per entry.
  absl::Status bad;
  size_t good = 0;
  int64_t next = applied_.index + 1;
  for (const LogEntry& entry : entries) {
    if (entry.epoch > epoch) {
      bad = absl::FailedPreconditionError(
          absl::StrCat("entry ", entry.index, " is of epoch ", entry.epoch,
                       ", later than its primary's ", epoch));
      break;
    }
    if (entry.index != next) {
      bad = absl::OutOfRangeError(
          absl::StrCat("entry ", entry.index,
                       " does not follow this replica's last, ", next - 1));
      break;
    }
    ++good;
    ++next;
  }
  if (good == 0) return bad;
  const LogPosition last{entries[good - 1].epoch, entries[good - 1].index};
  bool needs_sync = false;
  for (size_t i = 0; i < good; ++i) {
    needs_sync = needs_sync || entries[i].needs_sync;
  }
  if (absl::Status s = WriteToStore(entries.first(good)); !s.ok()) return s;
  applied_ = last;
  unsynced_ = unsynced_ || needs_sync;
  return bad;
}

absl::Status Replica::WriteToStore(absl::Span<const LogEntry> entries) {
  // Entries whose store wrote in this store's format go in as they are.
  const std::string_view encoding = store_->WriteEncoding();
  std::vector<std::string_view> writes;
  for (const LogEntry& entry : entries) {
    if (entry.store_write.empty() || entry.store_encoding != encoding) break;
    writes.push_back(entry.store_write);
  }
  if (writes.size() == entries.size()) return store_->WriteEncoded(writes);

  // Otherwise operations, written straight from the views into the
  // entries' bytes, or into the batches decoded from other stores' writes.
  std::vector<storage::WriteBatch> decoded;
  decoded.reserve(entries.size());
  size_t operations = 0;
  for (const LogEntry& entry : entries) {
    if (entry.store_write.empty()) {
      operations += entry.operations.size();
      continue;
    }
    absl::StatusOr<storage::WriteBatch> batch =
        storage::DecodeRocksDbWrite(entry.store_encoding, entry.store_write);
    if (!batch.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "log entry ", entry.index, ": ", batch.status().message()));
    }
    operations += batch->size();
    decoded.push_back(*std::move(batch));
  }
  if (entries.size() == 1 && decoded.empty()) {
    return store_->WriteOperations(entries[0].operations);
  }
  std::vector<storage::OperationView> all;
  all.reserve(operations);
  auto next_decoded = decoded.begin();
  for (const LogEntry& entry : entries) {
    if (entry.store_write.empty()) {
      all.insert(all.end(), entry.operations.begin(), entry.operations.end());
      continue;
    }
    for (const storage::WriteBatch::Operation& op :
         (next_decoded++)->operations()) {
      all.push_back({op.table, op.kind, op.key, op.value});
    }
  }
  return store_->WriteOperations(all);
}

absl::Status Replica::Sync() {
  absl::MutexLock sync_lock(&sync_mu_);
  LogPosition applied;
  bool unsynced;
  {
    absl::MutexLock lock(&mu_);
    applied = applied_;
    unsynced = unsynced_;
    unsynced_ = false;
  }
  // Without the lock: Write goes on meanwhile. The store's sync makes
  // every write that returned before it durable, so at least `applied`.
  if (unsynced) {
    if (absl::Status s = store_->SyncLog(); !s.ok()) {
      absl::MutexLock lock(&mu_);
      unsynced_ = true;
      return s;
    }
  }
  absl::MutexLock lock(&mu_);
  if (applied.index > durable_.index) durable_ = applied;
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
