#ifndef HOURGLASS_REPLICATION_LOG_ENTRY_H_
#define HOURGLASS_REPLICATION_LOG_ENTRY_H_

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "storage/message_store.h"

namespace hourglass::replication {

// The version of the entries' format: 1 since an entry may carry the
// bytes its primary's store wrote (Entry.store_write). A backup says which
// it reads in each answer, and a primary ships only to a backup that reads
// its own: a backup of an earlier build, which answers 0, would skip the
// store write as an unknown field and apply an empty batch.
inline constexpr int32_t kEntryFormat = 1;

// Where a copy of a shard's log ends: the epoch and index of its last
// entry; {0, 0} for none. Indexes count from 1 across epochs.
//
// Positions order by epoch, then index. Two positions on one log (copies
// that are prefixes of it) order as their indexes do, since epochs only
// grow along a log; a copy ending at a lower epoch holds less of a newer
// primary's history whatever its index. So a copy holds entry `e` of a log
// it follows exactly when its position is not below `e`, and of two copies
// the one with the higher position holds more of the newest history (the
// rule Raft uses to compare logs, and Kafka's leader epochs, KIP-101).
struct LogPosition {
  int64_t epoch = 0;
  int64_t index = 0;

  friend bool operator==(const LogPosition&, const LogPosition&) = default;
  friend auto operator<=>(const LogPosition&, const LogPosition&) = default;
};

// One entry of the log, decoded: a write batch of the primary, as it wrote
// it (with its own position keys: a backup applies it verbatim). Its
// operations view the bytes it was decoded from, which must outlive it.
struct LogEntry {
  int64_t epoch = 0;
  int64_t index = 0;
  bool needs_sync = false;  // the primary's batch's needs_sync()
  // The batch: its operations, or (when store_write is not empty) the
  // bytes its store wrote, in the format store_encoding names.
  std::vector<storage::OperationView> operations;
  std::string_view store_encoding;
  std::string_view store_write;
};

// The entry as replication.proto's Entry, serialized: what the primary
// keeps and ships. Its operations are those of `batches`, one batch after
// the other; needs_sync is `needs_sync`. The bytes are those protobuf's
// serializer gives (fields in order, defaults left out), written straight
// from the batches without building the message.
std::string EncodeEntry(int64_t epoch, int64_t index,
                        absl::Span<const storage::WriteBatch* const> batches,
                        bool needs_sync);
// The same, the batch being `store_write`: what a store whose
// WriteEncoding() is `store_encoding` wrote (MessageStore::WriteAllEncoded).
std::string EncodeEntry(int64_t epoch, int64_t index, bool needs_sync,
                        std::string_view store_encoding,
                        std::string_view store_write);
// The same for one batch, with its own needs_sync().
inline std::string EncodeEntry(int64_t epoch, int64_t index,
                               const storage::WriteBatch& batch) {
  const storage::WriteBatch* const batches[] = {&batch};
  return EncodeEntry(epoch, index, batches, batch.needs_sync());
}
// The entry `bytes` hold, its keys and values (or store write) views into
// them. INVALID_ARGUMENT for bytes that are not an Entry, name a table that
// does not exist, or hold both operations and a store write. Reads the wire
// format in place (unknown fields skipped, as protobuf does; groups, which
// proto3 never writes, refused), without building the message or copying a key
// or value.
absl::StatusOr<LogEntry> DecodeEntry(std::string_view bytes);

// Adds to `batch` the position keys of entry {epoch, index}: the position,
// and the epoch's start when the entry is its first (`previous` is the
// position before it).
void AddPositionKeys(LogPosition previous, LogPosition next,
                     storage::WriteBatch& batch);

// This copy's position ({0, 0} for a store that never replicated), and the
// highest epoch it accepted (0 for none). Errors: the store's; DATA_LOSS
// for a malformed value.
absl::StatusOr<LogPosition> ReadPosition(storage::MessageStore& store);
absl::StatusOr<int64_t> ReadAcceptedEpoch(storage::MessageStore& store);

// Whether a copy that ends at `copy` has entries the log of `store` (which
// ends at `last`) does not: entries past `last`, or entries of an epoch
// beyond the point where `store`'s history moved to the next epoch. Such a
// copy cannot follow `store` (a store cannot take writes back): it is
// rebuilt. Errors: the store's.
absl::StatusOr<bool> Diverged(storage::MessageStore& store, LogPosition last,
                              LogPosition copy);

}  // namespace hourglass::replication

#endif  // HOURGLASS_REPLICATION_LOG_ENTRY_H_
