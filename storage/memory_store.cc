#include "storage/memory_store.h"

#include <array>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace hourglass::storage {
namespace {

class MemoryStoreImpl final : public MessageStore {
 public:
  absl::Status Write(const WriteBatch& batch) override {
    absl::MutexLock lock(&mu_);
    if (absl::Status s = CheckWriteOnceLocked(batch); !s.ok()) return s;
    for (const WriteBatch::Operation& op : batch.operations()) {
      Map& table = tables_[static_cast<int>(op.table)];
      switch (op.kind) {
        case WriteBatch::Operation::Kind::kPut:
          table.insert_or_assign(op.key, op.value);
          break;
        case WriteBatch::Operation::Kind::kDelete:
          if (auto it = table.find(op.key); it != table.end()) table.erase(it);
          break;
        case WriteBatch::Operation::Kind::kAdd: {
          std::string& value = table[op.key];
          value = EncodeCounter(DecodeCounter(value) + DecodeCounter(op.value));
          break;
        }
      }
    }
    return absl::OkStatus();
  }

  absl::Status SyncLog() override { return absl::OkStatus(); }

  // INTERNAL if `batch` puts a key of a write-once table (IsWriteOnce) that
  // exists at that point of the batch; checked before anything is applied.
  absl::Status CheckWriteOnceLocked(const WriteBatch& batch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    // Keys this batch has put (true) or deleted (false) so far.
    std::map<std::pair<Table, std::string_view>, bool> changed;
    for (const WriteBatch::Operation& op : batch.operations()) {
      if (!IsWriteOnce(op.table)) continue;
      const bool put = op.kind == WriteBatch::Operation::Kind::kPut;
      auto [it, first] = changed.try_emplace({op.table, op.key}, put);
      if (!put) {
        it->second = false;
        continue;
      }
      const bool exists =
          first ? tables_[static_cast<int>(op.table)].contains(op.key)
                : it->second;
      if (exists) {
        return absl::InternalError(absl::StrCat(
            "overwrite of key \"", absl::CHexEscape(op.key),
            "\" of write-once table ", std::string(TableName(op.table)),
            " (a bug in the broker)"));
      }
      it->second = true;
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::optional<std::string>> Get(
      Table table, std::string_view key) override {
    absl::ReaderMutexLock lock(&mu_);
    const Map& map = tables_[static_cast<int>(table)];
    auto it = map.find(key);
    if (it == map.end()) return std::nullopt;
    return it->second;
  }

  absl::StatusOr<std::vector<std::optional<std::string>>> MultiGet(
      Table table, const std::vector<std::string>& keys) override {
    absl::ReaderMutexLock lock(&mu_);
    const Map& map = tables_[static_cast<int>(table)];
    std::vector<std::optional<std::string>> values;
    values.reserve(keys.size());
    for (const std::string& key : keys) {
      auto it = map.find(key);
      values.push_back(it == map.end() ? std::nullopt
                                       : std::optional(it->second));
    }
    return values;
  }

  absl::Status Scan(Table table, std::string_view from, std::string_view to,
                    absl::FunctionRef<bool(std::string_view, std::string_view)>
                        visit) override {
    // Visit copies, a chunk at a time, so that `visit` may call back into
    // the store and an early stop costs at most one chunk.
    constexpr size_t kChunk = 256;
    std::string next(from);
    std::vector<std::pair<std::string, std::string>> chunk;
    while (true) {
      chunk.clear();
      {
        absl::ReaderMutexLock lock(&mu_);
        const Map& map = tables_[static_cast<int>(table)];
        for (auto it = map.lower_bound(next);
             it != map.end() && (to.empty() || it->first < to) &&
             chunk.size() < kChunk;
             ++it) {
          chunk.emplace_back(it->first, it->second);
        }
      }
      for (const auto& [key, value] : chunk) {
        if (!visit(key, value)) return absl::OkStatus();
      }
      if (chunk.size() < kChunk) return absl::OkStatus();
      next = chunk.back().first;
      next.push_back('\0');  // The least key after the last one visited.
    }
  }

  absl::StatusOr<std::optional<std::string>> LastKey(Table table) override {
    absl::ReaderMutexLock lock(&mu_);
    const Map& map = tables_[static_cast<int>(table)];
    if (map.empty()) return std::nullopt;
    return map.rbegin()->first;
  }

  std::vector<std::pair<std::string, int64_t>> NonZeroCounters() override {
    absl::ReaderMutexLock lock(&mu_);
    std::vector<std::pair<std::string, int64_t>> counters;
    for (const auto& [key, value] :
         tables_[static_cast<int>(Table::kCounters)]) {
      if (const int64_t n = DecodeCounter(value); n != 0) {
        counters.emplace_back(key, n);
      }
    }
    return counters;
  }

  absl::StatusOr<CheckpointInfo> Checkpoint(const std::string& dir) override {
    return absl::UnimplementedError(
        "the memory store keeps no files to copy into a snapshot");
  }

  StoreStats Stats() override {
    absl::ReaderMutexLock lock(&mu_);
    StoreStats stats;
    for (const Map& map : tables_) {
      for (const auto& [key, value] : map) {
        stats.live_data_bytes += key.size() + value.size();
      }
    }
    return stats;
  }

 private:
  using Map = std::map<std::string, std::string, std::less<>>;

  absl::Mutex mu_;
  std::array<Map, kNumTables> tables_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<MessageStore> MemoryStore::Open() {
  return std::make_unique<MemoryStoreImpl>();
}

}  // namespace hourglass::storage
