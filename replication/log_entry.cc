#include "replication/log_entry.h"

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "replication/replication.pb.h"
#include "storage/keys.h"

namespace hourglass::replication {
namespace {

namespace v1 = ::hourglass::replication::v1;
using storage::Table;
using storage::WriteBatch;

std::string EncodeU64Pair(int64_t a, int64_t b) {
  std::string out;
  storage::AppendU64(out, static_cast<uint64_t>(a));
  storage::AppendU64(out, static_cast<uint64_t>(b));
  return out;
}

}  // namespace

std::string EncodeEntry(int64_t epoch, int64_t index, const WriteBatch& batch) {
  v1::Entry entry;
  entry.set_epoch(epoch);
  entry.set_index(index);
  entry.set_needs_sync(batch.needs_sync());
  entry.mutable_operations()->Reserve(static_cast<int>(batch.size()));
  for (const WriteBatch::Operation& op : batch.operations()) {
    v1::Operation& out = *entry.add_operations();
    out.set_table(static_cast<int32_t>(op.table));
    switch (op.kind) {
      case WriteBatch::Operation::Kind::kPut:
        out.set_kind(v1::Operation::PUT);
        break;
      case WriteBatch::Operation::Kind::kDelete:
        out.set_kind(v1::Operation::DELETE);
        break;
      case WriteBatch::Operation::Kind::kAdd:
        out.set_kind(v1::Operation::ADD);
        break;
    }
    out.set_key(op.key);
    out.set_value(op.value);
  }
  return entry.SerializeAsString();
}

absl::StatusOr<LogEntry> DecodeEntry(std::string_view bytes) {
  v1::Entry entry;
  if (!entry.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::InvalidArgumentError("not a replicated log entry");
  }
  LogEntry out;
  out.epoch = entry.epoch();
  out.index = entry.index();
  out.batch.set_needs_sync(entry.needs_sync());
  out.batch.Reserve(entry.operations_size());
  for (v1::Operation& op : *entry.mutable_operations()) {
    if (op.table() < 0 || op.table() >= storage::kNumTables) {
      return absl::InvalidArgumentError(
          absl::StrCat("log entry ", entry.index(), " names table ", op.table(),
                       ", which does not exist"));
    }
    const Table table = static_cast<Table>(op.table());
    switch (op.kind()) {
      case v1::Operation::PUT:
        out.batch.Put(table, std::move(*op.mutable_key()),
                      std::move(*op.mutable_value()));
        break;
      case v1::Operation::DELETE:
        out.batch.Delete(table, std::move(*op.mutable_key()));
        break;
      case v1::Operation::ADD:
        if (!storage::IsCounterTable(table)) {
          return absl::InvalidArgumentError(
              absl::StrCat("log entry ", entry.index(), " adds to table ",
                           std::string(storage::TableName(table)),
                           ", which holds no counters"));
        }
        out.batch.Add(table, std::move(*op.mutable_key()),
                      storage::DecodeCounter(op.value()));
        break;
      default:
        return absl::InvalidArgumentError(absl::StrCat(
            "log entry ", entry.index(), " has an unknown operation ",
            static_cast<int>(op.kind())));
    }
  }
  return out;
}

void AddPositionKeys(LogPosition previous, LogPosition next,
                     WriteBatch& batch) {
  batch.Put(Table::kMeta, std::string(storage::kReplicationPositionKey),
            EncodeU64Pair(next.epoch, next.index));
  if (next.epoch != previous.epoch) {
    std::string start;
    storage::AppendU64(start, static_cast<uint64_t>(next.index));
    batch.Put(
        Table::kMeta,
        storage::ReplicationEpochStartKey(static_cast<uint64_t>(next.epoch)),
        std::move(start));
  }
}

absl::StatusOr<LogPosition> ReadPosition(storage::MessageStore& store) {
  absl::StatusOr<std::optional<std::string>> value =
      store.Get(Table::kMeta, storage::kReplicationPositionKey);
  if (!value.ok()) return value.status();
  if (!value->has_value()) return LogPosition{};
  if ((*value)->size() != 16) {
    return absl::DataLossError(
        absl::StrCat("meta/", std::string(storage::kReplicationPositionKey),
                     " has ", (*value)->size(), " bytes, not 16"));
  }
  return LogPosition{static_cast<int64_t>(storage::ReadU64(**value)),
                     static_cast<int64_t>(storage::ReadU64(
                         std::string_view(**value).substr(8)))};
}

absl::StatusOr<int64_t> ReadAcceptedEpoch(storage::MessageStore& store) {
  absl::StatusOr<std::optional<std::string>> value =
      store.Get(Table::kMeta, storage::kReplicationEpochKey);
  if (!value.ok()) return value.status();
  if (!value->has_value()) return 0;
  if ((*value)->size() != 8) {
    return absl::DataLossError(
        absl::StrCat("meta/", std::string(storage::kReplicationEpochKey),
                     " has ", (*value)->size(), " bytes, not 8"));
  }
  return static_cast<int64_t>(storage::ReadU64(**value));
}

absl::StatusOr<bool> Diverged(storage::MessageStore& store, LogPosition last,
                              LogPosition copy) {
  if (copy.index > last.index) return true;
  if (copy.index == 0) return false;
  // The epoch of this log's entry at the copy's last index: the latest
  // epoch that started at or before it. One primary writes each index of
  // an epoch once, and a copy follows only a log it is a prefix of, so the
  // copy is a prefix of this log exactly when the two agree there.
  int64_t epoch_there = 0;
  absl::Status scanned = store.Scan(
      Table::kMeta, storage::kReplicationEpochStartPrefix,
      storage::PrefixEnd(storage::kReplicationEpochStartPrefix),
      [&](std::string_view key, std::string_view value) {
        if (value.size() != 8 ||
            key.size() != storage::kReplicationEpochStartPrefix.size() + 8) {
          return true;
        }
        if (static_cast<int64_t>(storage::ReadU64(value)) > copy.index) {
          return false;  // Epochs start in increasing order of index.
        }
        epoch_there = static_cast<int64_t>(storage::ReadU64(
            key.substr(storage::kReplicationEpochStartPrefix.size())));
        return true;
      });
  if (!scanned.ok()) return scanned;
  return epoch_there != copy.epoch;
}

}  // namespace hourglass::replication
