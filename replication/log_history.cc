#include "replication/log_history.h"

#include <optional>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "replication/log_entry.h"
#include "storage/keys.h"
#include "storage/rocksdb_store.h"

namespace hourglass::replication {
namespace {

// Reads kept per history: one for each backup reading at once, and a few
// more.
constexpr size_t kMaxEnds = 8;

// The position of the entry `encoded` (a write of a store whose
// WriteEncoding() is `encoding`) holds, or nullopt for a write that is no
// entry. INVALID_ARGUMENT for bytes that are no such write.
absl::StatusOr<std::optional<LogPosition>> PositionOf(
    std::string_view encoding, std::string_view encoded) {
  absl::StatusOr<storage::WriteBatch> batch =
      storage::DecodeRocksDbWrite(encoding, encoded);
  if (!batch.ok()) return batch.status();
  // The position keys come last in an entry (AddPositionKeys).
  const auto& operations = batch->operations();
  for (auto op = operations.rbegin(); op != operations.rend(); ++op) {
    if (op->table == storage::Table::kMeta &&
        op->key == storage::kReplicationPositionKey &&
        op->kind == storage::WriteBatch::Operation::Kind::kPut &&
        op->value.size() == 16) {
      return LogPosition{static_cast<int64_t>(storage::ReadU64(op->value)),
                         static_cast<int64_t>(storage::ReadU64(
                             std::string_view(op->value).substr(8)))};
    }
  }
  return std::nullopt;
}

absl::Status NotKept(int64_t index, absl::string_view why) {
  return absl::OutOfRangeError(
      absl::StrCat("the store's log no longer holds entry ", index, ": ", why));
}

}  // namespace

absl::StatusOr<std::optional<LogHistory::Found>> LogHistory::FirstEntryFrom(
    uint64_t from) {
  std::optional<Found> found;
  absl::Status bad;
  absl::Status read = store_->ReadWriteLog(
      from, [&](uint64_t sequence, std::string_view encoded) {
        absl::StatusOr<std::optional<LogPosition>> position =
            PositionOf(store_->WriteEncoding(), encoded);
        if (!position.ok()) {
          bad = position.status();
          return false;
        }
        if (!position->has_value()) return true;
        found = Found{(*position)->index, sequence};
        return false;
      });
  if (!read.ok()) return read;
  if (!bad.ok()) return bad;
  return found;
}

absl::StatusOr<uint64_t> LogHistory::StartFor(int64_t index) {
  {
    absl::MutexLock lock(&mu_);
    if (auto end = ends_.find(index); end != ends_.end()) return end->second;
  }
  absl::StatusOr<std::vector<uint64_t>> starts = store_->WriteLogStarts();
  if (!starts.ok()) {
    return absl::IsUnimplemented(starts.status())
               ? NotKept(index, starts.status().message())
               : starts.status();
  }
  // The last file whose first entry is not after `index`. A file purged
  // since the listing is passed over as one that starts too early.
  int lo = 0;
  int hi = static_cast<int>(starts->size()) - 1;
  std::optional<uint64_t> start;
  while (lo <= hi) {
    const int mid = lo + (hi - lo) / 2;
    absl::StatusOr<std::optional<Found>> first = FirstEntryFrom((*starts)[mid]);
    if (!first.ok() && !absl::IsNotFound(first.status())) {
      return first.status();
    }
    if (first.ok() && (!first->has_value() || (*first)->index > index)) {
      hi = mid - 1;
    } else {
      if (first.ok()) start = (*starts)[mid];
      lo = mid + 1;
    }
  }
  if (!start.has_value()) {
    return NotKept(index, "its oldest file starts after it");
  }
  return *start;
}

absl::StatusOr<std::vector<std::shared_ptr<const std::string>>>
LogHistory::Read(int64_t index, int64_t end, size_t max_bytes) {
  absl::StatusOr<uint64_t> start = StartFor(index);
  if (!start.ok()) return start.status();
  std::vector<std::shared_ptr<const std::string>> out;
  size_t bytes = 0;
  int64_t next = index;
  uint64_t last_sequence = 0;
  absl::Status bad;
  absl::Status read = store_->ReadWriteLog(
      *start, [&](uint64_t sequence, std::string_view encoded) {
        absl::StatusOr<std::optional<LogPosition>> position =
            PositionOf(store_->WriteEncoding(), encoded);
        if (!position.ok()) {
          bad = position.status();
          return false;
        }
        if (!position->has_value() || (*position)->index < next) return true;
        if ((*position)->index > next) return false;  // A gap: not kept.
        auto entry = std::make_shared<const std::string>(
            EncodeEntry((*position)->epoch, next, /*needs_sync=*/true,
                        store_->WriteEncoding(), encoded));
        if (!out.empty() && bytes + entry->size() > max_bytes) return false;
        bytes += entry->size();
        out.push_back(std::move(entry));
        last_sequence = sequence;
        return ++next < end;
      });
  if (absl::IsNotFound(read)) return NotKept(index, read.message());
  if (!read.ok()) return read;
  if (!bad.ok()) return bad;
  if (out.empty()) return NotKept(index, "not found in it");
  absl::MutexLock lock(&mu_);
  ends_.erase(index);
  ends_[next] = last_sequence;
  while (ends_.size() > kMaxEnds) ends_.erase(ends_.begin());
  return out;
}

}  // namespace hourglass::replication
