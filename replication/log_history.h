#ifndef HOURGLASS_REPLICATION_LOG_HISTORY_H_
#define HOURGLASS_REPLICATION_LOG_HISTORY_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
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
// Every entry a copy holds reached its store in a write that ends with the
// entry's position keys (log_entry.h AddPositionKeys): a primary writes
// each entry on its own, a backup the entries of a request together, each
// as it was shipped. So the store's log of writes, read in order, is the
// copy's log: a write is cut after each entry's position keys, and an
// entry is found by its index; writes without position keys (the accepted
// epoch's) are skipped. An entry that was a write of its own is shipped as
// that write (EncodeEntry with the store's write, which a backup of the
// same format writes as it is); one cut from a write of several, as its
// operations. Either way its needs_sync is set: whether the primary that
// made it synced it is not in the write, and a backup syncing once more is
// harmless. A log that cannot be read on (damaged, or changed under the
// reader) counts as not holding the entry: the backup is rebuilt, which is
// always safe.
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
  //   OUT_OF_RANGE  the store's log does not hold entry `index` (the store
  //                 keeps no log, it was purged, or it cannot be read): the
  //                 backup must be rebuilt.
  // A read that fails after some entries returns those.
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
  // Read, from where StartFor says; and forgetting where a read ended
  // before `index` (true if one had).
  absl::StatusOr<std::vector<std::shared_ptr<const std::string>>> ReadOnce(
      int64_t index, int64_t end, size_t max_bytes);
  bool ForgetEnd(int64_t index);
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
