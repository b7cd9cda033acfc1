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

bool IsPositionPut(const storage::WriteBatch::Operation& op) {
  return op.table == storage::Table::kMeta &&
         op.kind == storage::WriteBatch::Operation::Kind::kPut &&
         op.key == storage::kReplicationPositionKey && op.value.size() == 16;
}

bool IsEpochStartPut(const storage::WriteBatch::Operation& op) {
  return op.table == storage::Table::kMeta &&
         op.kind == storage::WriteBatch::Operation::Kind::kPut &&
         op.key.starts_with(storage::kReplicationEpochStartPrefix);
}

// An entry found in a logged write: its position, and its operations when
// the write holds more than this entry.
struct LoggedEntry {
  LogPosition position;
  std::optional<storage::WriteBatch> alone;
};

// The entries the logged write `encoded` (of a store whose WriteEncoding()
// is `encoding`) holds, in order. A primary writes each entry on its own,
// but a backup writes the entries of a request as one write (Replica), so
// a write may hold several: each ends with its position key, and the
// epoch-start key after it if it starts an epoch (AddPositionKeys). None
// for a write that is no entry (the accepted epoch's). INVALID_ARGUMENT for
// bytes that are no such write, or one that ends with operations of no
// entry.
absl::StatusOr<std::vector<LoggedEntry>> EntriesOf(std::string_view encoding,
                                                   std::string_view encoded) {
  absl::StatusOr<storage::WriteBatch> batch =
      storage::DecodeRocksDbWrite(encoding, encoded);
  if (!batch.ok()) return batch.status();
  const auto& operations = batch->operations();
  std::vector<LoggedEntry> entries;
  size_t begin = 0;  // The current entry's first operation.
  for (size_t i = 0; i < operations.size(); ++i) {
    if (!IsPositionPut(operations[i])) continue;
    const std::string_view value = operations[i].value;
    const LogPosition position{
        static_cast<int64_t>(storage::ReadU64(value)),
        static_cast<int64_t>(storage::ReadU64(value.substr(8)))};
    if (i + 1 < operations.size() && IsEpochStartPut(operations[i + 1])) ++i;
    storage::WriteBatch alone;
    for (size_t k = begin; k <= i; ++k) {
      const storage::WriteBatch::Operation& op = operations[k];
      storage::AppendCopy({op.table, op.kind, op.key, op.value}, alone);
    }
    entries.push_back({position, std::move(alone)});
    begin = i + 1;
  }
  if (begin == 0) return entries;  // No entry at all.
  if (begin != operations.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a logged write ends with ", operations.size() - begin,
                     " operations after its last entry"));
  }
  // One entry: shipped as the write itself, which a backup of the same
  // format writes as it is.
  if (entries.size() == 1) entries.front().alone.reset();
  return entries;
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
        absl::StatusOr<std::vector<LoggedEntry>> entries =
            EntriesOf(store_->WriteEncoding(), encoded);
        if (!entries.ok()) {
          bad = entries.status();
          return false;
        }
        if (entries->empty()) return true;
        found = Found{entries->front().position.index, sequence};
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
  if (!starts.ok()) return NotKept(index, starts.status().message());
  // The last file whose first entry is not after `index`. A file purged
  // since the listing is passed over as one that starts too early.
  int lo = 0;
  int hi = static_cast<int>(starts->size()) - 1;
  std::optional<uint64_t> start;
  while (lo <= hi) {
    const int mid = lo + (hi - lo) / 2;
    absl::StatusOr<std::optional<Found>> first = FirstEntryFrom((*starts)[mid]);
    if (!first.ok() && !absl::IsNotFound(first.status())) {
      return NotKept(index, first.status().message());
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
  absl::StatusOr<std::vector<std::shared_ptr<const std::string>>> read =
      ReadOnce(index, end, max_bytes);
  // Where the last read ended may be purged while later entries are kept:
  // search again.
  if (absl::IsOutOfRange(read.status()) && ForgetEnd(index)) {
    read = ReadOnce(index, end, max_bytes);
  }
  return read;
}

bool LogHistory::ForgetEnd(int64_t index) {
  absl::MutexLock lock(&mu_);
  return ends_.erase(index) > 0;
}

absl::StatusOr<std::vector<std::shared_ptr<const std::string>>>
LogHistory::ReadOnce(int64_t index, int64_t end, size_t max_bytes) {
  absl::StatusOr<uint64_t> start = StartFor(index);
  if (!start.ok()) return start.status();
  std::vector<std::shared_ptr<const std::string>> out;
  size_t bytes = 0;
  int64_t next = index;
  uint64_t last_sequence = 0;
  absl::Status bad;
  absl::Status read = store_->ReadWriteLog(
      *start, [&](uint64_t sequence, std::string_view encoded) {
        absl::StatusOr<std::vector<LoggedEntry>> entries =
            EntriesOf(store_->WriteEncoding(), encoded);
        if (!entries.ok()) {
          bad = entries.status();
          return false;
        }
        for (const LoggedEntry& found : *entries) {
          if (found.position.index < next) continue;
          if (found.position.index > next) return false;  // A gap.
          auto entry = std::make_shared<const std::string>(
              found.alone.has_value()
                  ? EncodeEntry(found.position.epoch, next, *found.alone)
                  : EncodeEntry(found.position.epoch, next,
                                /*needs_sync=*/true, store_->WriteEncoding(),
                                encoded));
          if (!out.empty() && bytes + entry->size() > max_bytes) return false;
          bytes += entry->size();
          out.push_back(std::move(entry));
          last_sequence = sequence;
          if (++next == end) return false;
        }
        return true;
      });
  if (out.empty()) {
    if (absl::IsNotFound(read)) return NotKept(index, read.message());
    // A log that cannot be read on (damaged, or changed under the
    // iterator) is as good as gone: a rebuild is always safe.
    if (!read.ok()) return NotKept(index, read.message());
    if (!bad.ok()) return NotKept(index, bad.message());
    return NotKept(index, "not found in it");
  }
  absl::MutexLock lock(&mu_);
  ends_.erase(index);
  ends_[next] = last_sequence;
  while (ends_.size() > kMaxEnds) ends_.erase(ends_.begin());
  return out;
}

}  // namespace hourglass::replication
