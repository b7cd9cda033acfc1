#include "storage/message_store.h"

#include <algorithm>
#include <array>
#include <utility>

#include "absl/container/flat_hash_map.h"

namespace hourglass::storage {

std::string_view TableName(Table table) {
  switch (table) {
    case Table::kMessages:
      return "messages";
    case Table::kIds:
      return "ids";
    case Table::kSchedule:
      return "schedule";
    case Table::kReady:
      return "ready";
    case Table::kInFlight:
      return "inflight";
    case Table::kMeta:
      return "meta";
    case Table::kTopicDue:
      return "topic_due";
    case Table::kCounters:
      return "counters";
    case Table::kScheduleCounts:
      return "schedule_counts";
  }
  return "unknown";
}

void WriteBatch::Put(Table table, std::string key, std::string value) {
  byte_size_ += key.size() + value.size();
  operations_.push_back(
      {table, Operation::Kind::kPut, std::move(key), std::move(value)});
}

void WriteBatch::Delete(Table table, std::string key) {
  byte_size_ += key.size();
  operations_.push_back(
      {table, Operation::Kind::kDelete, std::move(key), std::string()});
}

void WriteBatch::Add(Table table, std::string key, int64_t delta) {
  byte_size_ += key.size() + 8;
  operations_.push_back(
      {table, Operation::Kind::kAdd, std::move(key), EncodeCounter(delta)});
}

std::string EncodeCounter(int64_t value) {
  std::string out(8, '\0');
  const uint64_t bits = static_cast<uint64_t>(value);
  for (int i = 0; i < 8; ++i) {
    out[i] = static_cast<char>((bits >> (56 - 8 * i)) & 0xff);
  }
  return out;
}

int64_t DecodeCounter(std::string_view value) {
  if (value.size() != 8) return 0;
  uint64_t bits = 0;
  for (char c : value) bits = (bits << 8) | static_cast<uint8_t>(c);
  return static_cast<int64_t>(bits);
}

void WriteBatch::Append(WriteBatch&& other) {
  needs_sync_ = operations_.empty() ? other.needs_sync_
                                    : needs_sync_ || other.needs_sync_;
  if (operations_.empty()) {
    operations_ = std::move(other.operations_);
  } else {
    // Grows geometrically: a group commit appends batch after batch, and
    // growing to the exact size each time would move every operation
    // again at each append.
    const size_t needed = operations_.size() + other.operations_.size();
    if (needed > operations_.capacity()) {
      operations_.reserve(std::max(needed, 2 * operations_.capacity()));
    }
    for (Operation& op : other.operations_)
      operations_.push_back(std::move(op));
  }
  byte_size_ += other.byte_size_;
  other.operations_.clear();
  other.byte_size_ = 0;
}

absl::Status MessageStore::WriteAll(
    absl::Span<const WriteBatch* const> batches) {
  if (batches.size() == 1) return Write(*batches[0]);
  WriteBatch all;
  size_t operations = 0;
  for (const WriteBatch* batch : batches) operations += batch->size();
  all.Reserve(operations);
  for (const WriteBatch* batch : batches) {
    WriteBatch copy = *batch;
    all.Append(std::move(copy));
  }
  return Write(all);
}

absl::Status MessageStore::WriteOperations(
    absl::Span<const OperationView> operations) {
  WriteBatch batch;
  batch.Reserve(operations.size());
  for (const OperationView& op : operations) AppendCopy(op, batch);
  return Write(batch);
}

void AppendCopy(const OperationView& op, WriteBatch& batch) {
  switch (op.kind) {
    case WriteBatch::Operation::Kind::kPut:
      batch.Put(op.table, std::string(op.key), std::string(op.value));
      break;
    case WriteBatch::Operation::Kind::kDelete:
      batch.Delete(op.table, std::string(op.key));
      break;
    case WriteBatch::Operation::Kind::kAdd:
      batch.Add(op.table, std::string(op.key), DecodeCounter(op.value));
      break;
  }
}

absl::Status MessageStore::WriteEncoded(
    absl::Span<const std::string_view> /*encoded*/) {
  return absl::UnimplementedError("this store has no write format of its own");
}

void WriteBatch::CombineAdds() {
  // Each counter's Add so far, by the index it has in the result; a map
  // per table.
  std::array<absl::flat_hash_map<std::string, size_t>, kNumTables> first;
  size_t kept = 0;
  for (size_t i = 0; i < operations_.size(); ++i) {
    Operation& op = operations_[i];
    if (op.kind == Operation::Kind::kAdd) {
      absl::flat_hash_map<std::string, size_t>& seen =
          first[static_cast<int>(op.table)];
      auto it = seen.find(op.key);
      if (it != seen.end()) {
        Operation& sum = operations_[it->second];
        // In uint64_t, so that an overflow wraps instead of being undefined.
        sum.value = EncodeCounter(static_cast<int64_t>(
            static_cast<uint64_t>(DecodeCounter(sum.value)) +
            static_cast<uint64_t>(DecodeCounter(op.value))));
        byte_size_ -= op.key.size() + op.value.size();
        continue;
      }
      seen.emplace(op.key, kept);
    } else if (IsCounterTable(op.table)) {
      first[static_cast<int>(op.table)].clear();
    }
    if (kept != i) operations_[kept] = std::move(op);
    ++kept;
  }
  operations_.resize(kept);
}

}  // namespace hourglass::storage
