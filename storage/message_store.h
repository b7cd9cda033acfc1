#ifndef HOURGLASS_STORAGE_MESSAGE_STORE_H_
#define HOURGLASS_STORAGE_MESSAGE_STORE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace hourglass::storage {

// The store's tables; storage/README.md shows which keys live where in each
// message state, and storage/keys.h encodes them.
enum class Table : int {
  kMessages = 0,  // sequence -> MessageRecord
  kIds,           // topic, id -> sequence, due (see storage::HasIdEntry)
  kSchedule,      // (deliver_at, sequence) -> topic
  kReady,         // topic, group, (deliver_at, sequence) -> attempt
  kInFlight,      // topic, group, sequence -> InFlightRecord
  kMeta,          // groups, loader cursor, format version
  kTopicDue,      // topic, (deliver_at, sequence) -> id: pending by topic
  kCounters,      // counter name -> int64, changed only by WriteBatch::Add
  // topic, granularity, bucket start -> int64: scheduled messages due in
  // the bucket (storage/schedule_counts.h); changed only by WriteBatch::Add.
  kScheduleCounts,
};
inline constexpr int kNumTables = 9;

// Whether `table` holds counters: int64 values (EncodeCounter) changed only
// by WriteBatch::Add, which a store applies without reading them.
constexpr bool IsCounterTable(Table table) {
  return table == Table::kCounters || table == Table::kScheduleCounts;
}

// Whether `table` is write-once: a key of it is put only while absent (put,
// later deleted, never overwritten). A store may delete such keys with a
// tombstone that relies on it (RocksDB's SingleDelete, which vanishes with
// the put it meets instead of living on until the last level), so queue
// entries written and consumed within one memtable leave nothing behind.
// MemoryStore refuses a batch that overwrites one with INTERNAL.
constexpr bool IsWriteOnce(Table table) {
  return table == Table::kSchedule || table == Table::kReady ||
         table == Table::kTopicDue;
}

// Name of the table, as used for RocksDB column families and in messages.
std::string_view TableName(Table table);

// An ordered set of puts and deletes over any tables, applied atomically by
// MessageStore::Write. Later operations on a key win over earlier ones.
//
// Not thread-safe; build it on one thread, then hand it over.
class WriteBatch {
 public:
  struct Operation {
    enum class Kind { kPut, kDelete, kAdd };
    Table table;
    Kind kind;
    std::string key;
    std::string value;  // Empty for deletes; for kAdd, EncodeCounter(delta).
  };

  void Put(Table table, std::string key, std::string value);
  void Delete(Table table, std::string key);
  // Adds `delta` to the counter `key` of `table` (an absent counter is 0).
  // Adds to one counter from concurrent batches all count: the store
  // applies them without reading first. REQUIRES: IsCounterTable(table).
  void Add(Table table, std::string key, int64_t delta);
  // The same, on Table::kCounters.
  void Add(std::string key, int64_t delta) {
    Add(Table::kCounters, std::move(key), delta);
  }
  // Moves every operation of `other` to the end of this batch (its sync
  // need joins this batch's: either needs it, the result does).
  void Append(WriteBatch&& other);
  // Replaces the Adds to each counter by one Add of their sum, where the
  // first of them was, so that a group of batches that each count a
  // message changes each counter once. Writing the result has the effect
  // of writing the batch as it was: Adds commute, and a Put or Delete of a
  // counter (which the store's contract rules out) keeps the Adds before
  // it apart from those after it.
  void CombineAdds();
  // Makes room for `operations` operations in all, so that a batch built
  // operation by operation does not grow its storage again and again.
  void Reserve(size_t operations) { operations_.reserve(operations); }

  // Whether the batch must be durable before whoever submitted it is told
  // it is done: the commit queue (storage/commit_queue.h) syncs the log
  // with MessageStore::SyncLog after writing a group that holds such a
  // batch. Default: true. Writes whose loss in a power cut at-least-once
  // delivery makes up for (a message coming due, a delivery marked in
  // flight, an ack) clear it: they still reach the log in order,
  // atomically, and survive a crash of the process, and the next sync makes
  // them durable too.
  void set_needs_sync(bool needs_sync) { needs_sync_ = needs_sync; }
  bool needs_sync() const { return needs_sync_; }

  const std::vector<Operation>& operations() const { return operations_; }
  bool empty() const { return operations_.empty(); }
  size_t size() const { return operations_.size(); }
  // Bytes of keys and values, for metrics and group-commit limits.
  size_t ByteSize() const { return byte_size_; }

 private:
  std::vector<Operation> operations_;
  size_t byte_size_ = 0;
  bool needs_sync_ = true;
};

// An operation that views its key and value instead of owning them, for
// MessageStore::WriteOperations: what a caller that holds the bytes already
// (a backup applying its primary's log entries) writes without copying
// them into a WriteBatch.
struct OperationView {
  Table table;
  WriteBatch::Operation::Kind kind;
  std::string_view key;
  std::string_view value;  // Empty for deletes; for kAdd, EncodeCounter(delta).
};

// Adds a copy of `op` to the end of `batch`.
void AppendCopy(const OperationView& op, WriteBatch& batch);

// Changes to counters, summed per counter, for adding to a batch at once
// (one WriteBatch::Add per counter rather than per message).
// Not thread-safe.
class CounterDeltas {
 public:
  void Add(std::string_view key, int64_t delta) {
    deltas_[std::string(key)] += delta;
  }
  // Adds every non-zero sum to `batch`.
  void AppendTo(WriteBatch& batch) const {
    for (const auto& [key, delta] : deltas_) {
      if (delta != 0) batch.Add(key, delta);
    }
  }

 private:
  std::map<std::string, int64_t> deltas_;
};

// Counter values in Table::kCounters: 8 bytes, big-endian two's complement.
std::string EncodeCounter(int64_t value);
// 0 unless `value` is 8 bytes.
int64_t DecodeCounter(std::string_view value);

// Sizes the store reports for metrics.
struct StoreStats {
  uint64_t live_data_bytes = 0;
  uint64_t pending_compaction_bytes = 0;
  uint64_t disk_bytes = 0;
};

// What MessageStore::Checkpoint wrote.
struct CheckpointInfo {
  std::string dir;     // Where: the `dir` asked for.
  uint64_t files = 0;  // Files in it.
  uint64_t bytes = 0;  // Their sizes, summed.
};

// A durable, ordered key-value store made of the tables above: the broker's
// only persistent state. RocksDB in production (storage/rocksdb_store.h);
// memory in tests (storage/memory_store.h).
//
// Thread-safe: every method may be called concurrently from any thread.
// Reads see every Write that returned before they started.
class MessageStore {
 public:
  virtual ~MessageStore() = default;

  // Applies every operation of `batch`, or none of them, and appends it to
  // the log without syncing it (whatever batch.needs_sync() says; that is
  // for the caller, who syncs with SyncLog): on OK the batch survives a
  // crash of the process, and a power cut once SyncLog has returned. On
  // error the batch is not visible to reads. Errors:
  //   RESOURCE_EXHAUSTED  the disk is full. Later writes succeed once space
  //                       returns.
  //   UNAVAILABLE         another I/O error.
  //   DATA_LOSS, INTERNAL the store is damaged.
  virtual absl::Status Write(const WriteBatch& batch) = 0;

  // Writes the operations of `batches`, one batch after the other, as one
  // Write of them all: atomically, with Write's errors. For a caller that
  // adds operations to a batch it does not own (the replicated store's
  // position keys) without copying it. The default copies the batches into
  // one and calls Write; a store overrides it to skip the copy.
  virtual absl::Status WriteAll(absl::Span<const WriteBatch* const> batches);

  // Writes `operations`, in order, as one Write of a batch holding them:
  // atomically, with Write's errors. The views need only outlive the call.
  // An operation must be one WriteBatch could hold (kAdd on a counter
  // table only). The default copies them into a WriteBatch and calls
  // Write; a store overrides it to skip the copy.
  virtual absl::Status WriteOperations(
      absl::Span<const OperationView> operations);

  // Writes in the store's own format, for a backup whose store is of the
  // same kind as its primary's: the backup writes the bytes the primary's
  // store wrote, neither decoding nor encoding them again.
  //
  // The name of the format (for RocksDB, its write batch format with the
  // column family id of each table), or empty for a store without one.
  // Stores whose names are equal take each other's encoded writes.
  virtual std::string_view WriteEncoding() const { return {}; }
  // WriteAll, and the write in the store's format in `encoded` (cleared by
  // a store without one).
  virtual absl::Status WriteAllEncoded(
      absl::Span<const WriteBatch* const> batches, std::string& encoded) {
    encoded.clear();
    return WriteAll(batches);
  }
  // Writes `encoded`, writes that WriteAllEncoded of a store with this
  // store's WriteEncoding() gave, one after the other, as one Write of them
  // all: atomically, with Write's errors, and also INVALID_ARGUMENT (and
  // nothing written) for bytes that are not such a write, UNIMPLEMENTED for
  // a store without a format.
  virtual absl::Status WriteEncoded(absl::Span<const std::string_view> encoded);

  // The store's log of its writes read back, for a store with a write
  // format (RocksDB's write-ahead log): a primary's backups catch up from it
  // (replication/log_history.h). Each Write has a sequence number, which
  // grows with the order of writes, and is logged in the format
  // WriteAllEncoded gives. The log holds the writes not yet flushed to the
  // tables, and as many older ones as the store keeps
  // (RocksDbStoreOptions::keep_write_log).
  //
  // Calls visit(sequence, encoded) for each logged write from the one that
  // holds sequence `from` on, in order, until visit returns false or the
  // log ends; writes that return meanwhile may or may not be seen. Errors:
  //   NOT_FOUND      the log no longer holds sequence `from`.
  //   UNIMPLEMENTED  the store logs no writes it can read back (the
  //                  default; MemoryStore; a RocksDB store opened without
  //                  keep_write_log).
  //   UNAVAILABLE    an I/O error; DATA_LOSS a damaged log.
  virtual absl::Status ReadWriteLog(
      uint64_t /*from*/,
      absl::FunctionRef<bool(uint64_t sequence, std::string_view encoded)>
      /*visit*/) {
    return absl::UnimplementedError("this store keeps no log of its writes");
  }
  // The sequence each of the log's files starts at, oldest first: where a
  // search of the log may start reading. Errors as ReadWriteLog's.
  virtual absl::StatusOr<std::vector<uint64_t>> WriteLogStarts() {
    return absl::UnimplementedError("this store keeps no log of its writes");
  }
  // Keeps every file of the log, and of the store, that exists now or is
  // written later, until the returned hold is destroyed (then they go as
  // the store's keeping rules say): for as long as a Checkpoint is on its
  // way to a backup, which then catches up from the log. Null for a store
  // without such a log (the default).
  class WriteLogHold {
   public:
    virtual ~WriteLogHold() = default;
  };
  virtual std::unique_ptr<WriteLogHold> HoldWriteLog() { return nullptr; }

  // Syncs the log, when the store was opened to sync (otherwise does
  // nothing): every Write that returned before the call becomes durable.
  // Does not block concurrent Writes, which is what lets a group commit
  // write on while it waits for an fsync (storage/commit_queue.h). Errors as
  // Write's; the writes a failed sync was to cover stay visible but may or
  // may not survive a restart, and the store may refuse writes until then.
  virtual absl::Status SyncLog() = 0;

  // The value of `key`, or nullopt if absent.
  virtual absl::StatusOr<std::optional<std::string>> Get(
      Table table, std::string_view key) = 0;

  // The values of `keys`, in their order (nullopt where absent): as Get for
  // each, in one call that the store may serve faster.
  virtual absl::StatusOr<std::vector<std::optional<std::string>>> MultiGet(
      Table table, const std::vector<std::string>& keys) = 0;

  // Calls `visit(key, value)` for each key in [from, to) in ascending
  // order, until `visit` returns false. An empty `to` means no upper bound.
  // Sees every Write that returned before the call; Writes concurrent with
  // it may or may not be seen. `visit` may call into the store.
  virtual absl::Status Scan(
      Table table, std::string_view from, std::string_view to,
      absl::FunctionRef<bool(std::string_view key, std::string_view value)>
          visit) = 0;

  // The greatest key of `table`, or nullopt if it is empty.
  virtual absl::StatusOr<std::optional<std::string>> LastKey(Table table) = 0;

  // Every counter of Table::kCounters whose value is not 0, with its value,
  // in key order: what a Scan of the table shows, without the zeros. Sees
  // every Write that returned before the call, and each concurrent Write's
  // counters all or none. Cannot fail: RocksDbStore keeps these counters in
  // memory (read once when it opens, changed by each Write), so a call
  // costs the number of non-zero counters (the topics and groups holding
  // messages), not a read of every counter ever written, most of which end
  // at 0 and stay in the table. Exact as long as counters change only by
  // WriteBatch::Add, as the table's contract says.
  virtual std::vector<std::pair<std::string, int64_t>> NonZeroCounters() = 0;

  virtual StoreStats Stats() = 0;

  // A hint from the store's owner: from a call with true until one with
  // false, the store is written but not read (a backup's copy,
  // replication/replica.h), so it may make writes cheaper and reads dearer.
  // Reads stay correct either way. After a call with false, reads cost what
  // they did before, give or take one sort of the memtables written
  // meanwhile. Default: no effect.
  virtual void SetWriteOnly(bool /*write_only*/) {}

  // Writes a consistent copy of the store into the new directory `dir`: it
  // holds every Write that returned before the call, and of each Write
  // concurrent with it all or nothing. Writes go on meanwhile. The copy is
  // a data dir that the store's Open opens as it is (a backup, or the seed
  // of a replica). Errors, after which nothing is left at `dir`:
  //   INVALID_ARGUMENT    `dir` is empty or not an absolute path.
  //   ALREADY_EXISTS      `dir` exists.
  //   NOT_FOUND           its parent directory does not exist.
  //   UNIMPLEMENTED       the store keeps no files (MemoryStore).
  //   RESOURCE_EXHAUSTED  the disk is full.
  //   UNAVAILABLE         another I/O error.
  virtual absl::StatusOr<CheckpointInfo> Checkpoint(const std::string& dir) = 0;
};

}  // namespace hourglass::storage

#endif  // HOURGLASS_STORAGE_MESSAGE_STORE_H_
