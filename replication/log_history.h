#ifndef HOURGLASS_REPLICATION_LOG_HISTORY_H_
#define HOURGLASS_REPLICATION_LOG_HISTORY_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "storage/message_store.h"

namespace hourglass::replication {

// A shard's log entries read back from its store's log of writes
// (MessageStore::ReadWriteLog: RocksDB's write-ahead log), for backups
// further behind than the entries a primary keeps in memory
// (ReplicatedStore's retain_bytes): a backup a few entries behind a new
// primary, or one that was rebuilt from a checkpoint while writes went on.
//
// Every entry a copy holds was written to its store as one write holding
// the entry's position keys (log_entry.h AddPositionKeys): by the primary
// that made it, or verbatim by a backup applying it. So the store's log of
// writes, read in order, is the copy's log, and an entry is found by its
// index: writes without position keys (the accepted epoch's) are skipped.
// The entries read back are encoded as the primary ships them (EncodeEntry
// with the store's write), their needs_sync set: whether the primary that
// made one synced it is not in its write, and a backup syncing once more
// is harmless.
//
// A search starts from the file of the log whose first entry is the last
// not after the one asked for (a binary search over the files' first
// entries), and a reader that goes on where the last read ended (a
// shipper reading on) continues from the write it stopped at.
//
// Thread-safe.
class LogHistory {
 public:
  // `store` must outlive the history.
  explicit LogHistory(storage::MessageStore* store) : store_(store) {}

  // Entries `index` to `end` - 1 (fewer: as many as fit in `max_bytes`, at
  // least one), encoded for shipping. Errors:
  //   OUT_OF_RANGE  the store's log no longer holds entry `index`, or any
  //                 entry up to `end` (the store keeps no log, or it was
  //                 purged): the backup must be rebuilt.
  //   others        the store's, reading its log.
  // REQUIRES: 1 <= index < end.
  absl::StatusOr<std::vector<std::shared_ptr<const std::string>>> Read(
      int64_t index, int64_t end, size_t max_bytes);

 private:
  // The index of the first entry at or after log sequence `from`, and the
  // sequence of the write that holds it; nullopt at the end of the log.
  struct Found {
    int64_t index;
    uint64_t sequence;
  };
  absl::StatusOr<std::optional<Found>> FirstEntryFrom(uint64_t from);
  // The sequence to read from to find entry `index`: where the last read
  // ended, if it ended just before it; else the start of the last file of
  // the log whose first entry is not after it.
  absl::StatusOr<uint64_t> StartFor(int64_t index);

  storage::MessageStore* const store_;
  absl::Mutex mu_;
  // Where reads ended: the index of the entry after the last one read, and
  // the sequence of the write that held that last one. A few, for the few
  // backups reading at once.
  std::map<int64_t, uint64_t> ends_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hourglass::replication

#endif  // HOURGLASS_REPLICATION_LOG_HISTORY_H_
