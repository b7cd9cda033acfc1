#include "storage/rocksdb_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/base/config.h"
#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rocksdb/db.h"
#include "rocksdb/options.h"
#include "rocksdb/utilities/checkpoint.h"
#include "rocksdb/write_batch.h"
#include "spdlog/spdlog.h"
#include "storage/data_dir.h"
#include "storage/format_version.h"
#include "storage/keys.h"
#include "storage/rocksdb_batch.h"
#include "storage/rocksdb_open.h"
#include "storage/rocksdb_write_log.h"

namespace hourglass::storage {
namespace {

class RocksDbStoreImpl final : public MessageStore {
 public:
  RocksDbStoreImpl(std::string path, bool sync, uint64_t keep_write_log_seconds,
                   std::unique_ptr<DataDirLock> lock,
                   std::shared_ptr<RocksDbResources> resources,
                   std::shared_ptr<StoreMemtables> memtables,
                   std::shared_ptr<const OpenDatabase> database)
      : path_(std::move(path)),
        sync_(sync),
        keep_write_log_seconds_(keep_write_log_seconds),
        lock_(std::move(lock)),
        resources_(std::move(resources)),
        memtables_(std::move(memtables)),
        encoding_(EncodingOf(*database)),
        ids_(*IdsOf(encoding_)),
        database_(std::move(database)) {}

  ~RocksDbStoreImpl() override {
    // Closes the database before lock_ is released.
    absl::MutexLock lock(&database_mu_);
    database_.reset();
  }

  absl::Status Write(const WriteBatch& batch) override {
    const WriteBatch* const batches[] = {&batch};
    return WriteAll(batches);
  }

  absl::Status WriteAll(absl::Span<const WriteBatch* const> batches) override {
    return WriteBatches(batches, nullptr);
  }

  std::string_view WriteEncoding() const override { return encoding_; }

  absl::Status WriteAllEncoded(absl::Span<const WriteBatch* const> batches,
                               std::string& encoded) override {
    return WriteBatches(batches, &encoded);
  }

  absl::Status WriteEncoded(
      absl::Span<const std::string_view> encoded) override {
    absl::StatusOr<std::string> rep = JoinBatches(encoded);
    if (!rep.ok()) return rep.status();
    rocksdb::WriteBatch batch(*std::move(rep));
    std::vector<OperationView> counter_ops;
    if (absl::Status read = ReadBatch(batch, ids_,
                                      [&](const OperationView& op) {
                                        if (op.table == Table::kCounters) {
                                          counter_ops.push_back(op);
                                        }
                                      });
        !read.ok()) {
      return read;
    }
    absl::StatusOr<std::shared_ptr<const OpenDatabase>> database =
        WritableDatabase();
    if (!database.ok()) return database.status();
    return WriteTo(**database, batch, counter_ops);
  }

  // WriteAll, copying the write into `*encoded` unless that is null.
  absl::Status WriteBatches(absl::Span<const WriteBatch* const> batches,
                            std::string* encoded) {
    size_t reserve = 0;
    for (const WriteBatch* batch : batches) {
      reserve += batch->ByteSize() + 16 * batch->size();
    }
    return WriteEach(
        reserve,
        [batches](auto&& visit) {
          for (const WriteBatch* batch : batches) {
            for (const WriteBatch::Operation& op : batch->operations()) {
              if (!visit(op)) return false;
            }
          }
          return true;
        },
        encoded);
  }

  absl::Status WriteOperations(
      absl::Span<const OperationView> operations) override {
    size_t reserve = 0;
    for (const OperationView& op : operations) {
      reserve += op.key.size() + op.value.size() + 16;
    }
    return WriteEach(reserve, [operations](auto&& visit) {
      for (const OperationView& op : operations) {
        if (!visit(op)) return false;
      }
      return true;
    });
  }

  absl::Status SyncLog() override {
    if (!sync_) return absl::OkStatus();
    // After a failed write, the log cannot be synced until reopened: and
    // RocksDB 7.8 asserts on a sync of a log whose write failed. So the
    // database is reopened first, as a write does (Recover), and a sync
    // alone brings the store back once the cause is gone: a backup syncs
    // its copy before anything else when it follows a primary again
    // (replication::Replica::Open). (A write that fails while this sync is
    // under way can still reach it; the window is the few instructions
    // between RocksDB's failed append and Failed below.)
    absl::StatusOr<std::shared_ptr<const OpenDatabase>> database =
        WritableDatabase();
    if (!database.ok()) return database.status();
    // Syncs the WAL files without holding up concurrent writes.
    const rocksdb::Status s = (*database)->db->SyncWAL();
    if (!s.ok()) return Failed(ToStatus(s, Context("sync log")));
    return absl::OkStatus();
  }

  absl::StatusOr<std::optional<std::string>> Get(
      Table table, std::string_view key) override {
    const std::shared_ptr<const OpenDatabase> database = Database();
    if (database == nullptr) return WriteFailure();
    std::string value;
    const rocksdb::Status s = database->db->Get(
        rocksdb::ReadOptions(), database->Handle(table), key, &value);
    if (s.IsNotFound()) return std::nullopt;
    if (!s.ok()) return ToStatus(s, Context("read"));
    return value;
  }

  absl::StatusOr<std::vector<std::optional<std::string>>> MultiGet(
      Table table, const std::vector<std::string>& keys) override {
    const std::shared_ptr<const OpenDatabase> database = Database();
    if (database == nullptr) return WriteFailure();
    std::vector<rocksdb::Slice> slices(keys.begin(), keys.end());
    std::vector<rocksdb::PinnableSlice> values(keys.size());
    std::vector<rocksdb::Status> statuses(keys.size());
    database->db->MultiGet(rocksdb::ReadOptions(), database->Handle(table),
                           keys.size(), slices.data(), values.data(),
                           statuses.data());
    std::vector<std::optional<std::string>> out;
    out.reserve(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      if (statuses[i].IsNotFound()) {
        out.push_back(std::nullopt);
      } else if (!statuses[i].ok()) {
        return ToStatus(statuses[i], Context("read"));
      } else {
        out.push_back(values[i].ToString());
      }
    }
    return out;
  }

  absl::Status Scan(Table table, std::string_view from, std::string_view to,
                    absl::FunctionRef<bool(std::string_view, std::string_view)>
                        visit) override {
    const std::shared_ptr<const OpenDatabase> database = Database();
    if (database == nullptr) return WriteFailure();
    rocksdb::ReadOptions options;
    const std::string upper(to);
    rocksdb::Slice upper_slice(upper);
    if (!to.empty()) options.iterate_upper_bound = &upper_slice;
    std::unique_ptr<rocksdb::Iterator> it(
        database->db->NewIterator(options, database->Handle(table)));
    for (it->Seek(from); it->Valid(); it->Next()) {
      if (!visit(it->key().ToStringView(), it->value().ToStringView())) break;
    }
    return ToStatus(it->status(), Context("scan"));
  }

  absl::StatusOr<std::optional<std::string>> LastKey(Table table) override {
    const std::shared_ptr<const OpenDatabase> database = Database();
    if (database == nullptr) return WriteFailure();
    std::unique_ptr<rocksdb::Iterator> it(database->db->NewIterator(
        rocksdb::ReadOptions(), database->Handle(table)));
    it->SeekToLast();
    if (!it->status().ok()) return ToStatus(it->status(), Context("scan"));
    if (!it->Valid()) return std::nullopt;
    return it->key().ToString();
  }

  std::vector<std::pair<std::string, int64_t>> NonZeroCounters() override {
    absl::MutexLock lock(&counters_mu_);
    return {counters_.begin(), counters_.end()};
  }

  // Reads the counters table into memory, for NonZeroCounters. Called once,
  // by Open, before anything writes.
  absl::Status LoadCounters() {
    std::map<std::string, int64_t, std::less<>> counters;
    absl::Status scanned =
        Scan(Table::kCounters, "", "",
             [&](std::string_view key, std::string_view value) {
               if (const int64_t n = DecodeCounter(value); n != 0) {
                 counters.emplace(key, n);
               }
               return true;
             });
    if (!scanned.ok()) return scanned;
    absl::MutexLock lock(&counters_mu_);
    counters_ = std::move(counters);
    return absl::OkStatus();
  }

  void SetWriteOnly(bool write_only) override {
    if (memtables_ == nullptr) return;  // Not switchable_memtables.
    if (memtables_->set_write_only(write_only) == write_only) return;
    // New memtables at once for the tables that hold keys (an empty one
    // decides at its first key, StoreMemtables): while write-only, append
    // memtables; after, sorted ones, as each read of an append memtable
    // still written would sort a copy of it (one no longer written is
    // sorted once, by its flush or the first read). The flush is only
    // asked for: not waited for, nor held back to spare a write stall.
    const std::shared_ptr<const OpenDatabase> database = Database();
    if (database == nullptr) return;  // A reopen makes new ones.
    std::vector<rocksdb::ColumnFamilyHandle*> tables;
    for (int i = 0; i < kNumTables; ++i) {
      if (HasStoreMemtables(static_cast<Table>(i))) {
        tables.push_back(database->tables[i]);
      }
    }
    rocksdb::FlushOptions flush;
    flush.wait = false;
    flush.allow_write_stall = true;
    const rocksdb::Status s = database->db->Flush(flush, tables);
    if (!s.ok()) {
      spdlog::warn(
          "data dir {}: cannot switch to new memtables (write-only: {}): {}",
          path_, write_only, s.ToString());
    }
  }

  absl::Status ReadWriteLog(
      uint64_t from,
      absl::FunctionRef<bool(uint64_t, std::string_view)> visit) override {
    if (keep_write_log_seconds_ == 0) return NoWriteLogKept();
    const std::shared_ptr<const OpenDatabase> database = Database();
    if (database == nullptr) return WriteFailure();
    return ReadRocksDbWriteLog(*database->db, path_, from, visit);
  }

  absl::StatusOr<std::vector<uint64_t>> WriteLogStarts() override {
    if (keep_write_log_seconds_ == 0) return NoWriteLogKept();
    const std::shared_ptr<const OpenDatabase> database = Database();
    if (database == nullptr) return WriteFailure();
    return RocksDbWriteLogStarts(*database->db, path_);
  }

  std::unique_ptr<WriteLogHold> HoldWriteLog() override {
    if (keep_write_log_seconds_ == 0) return nullptr;
    const std::shared_ptr<const OpenDatabase> database = Database();
    if (database == nullptr) return nullptr;
    return HoldRocksDbWriteLog(database, path_);
  }

  StoreStats Stats() override {
    StoreStats stats;
    const std::shared_ptr<const OpenDatabase> database = Database();
    if (database == nullptr) return stats;
    rocksdb::DB& db = *database->db;
    uint64_t value = 0;
    if (db.GetAggregatedIntProperty("rocksdb.estimate-live-data-size",
                                    &value)) {
      stats.live_data_bytes = value;
    }
    if (db.GetAggregatedIntProperty("rocksdb.estimate-pending-compaction-bytes",
                                    &value)) {
      stats.pending_compaction_bytes = value;
    }
    if (db.GetAggregatedIntProperty("rocksdb.total-sst-files-size", &value)) {
      stats.disk_bytes += value;
    }
    if (db.GetAggregatedIntProperty("rocksdb.total-blob-file-size", &value)) {
      stats.disk_bytes += value;
    }
    // The write-ahead log: up to max_total_wal_size, often most of the disk
    // a broker with few flushed tables uses.
    rocksdb::VectorLogPtr logs;
    if (db.GetSortedWalFiles(logs).ok()) {
      for (const std::unique_ptr<rocksdb::LogFile>& log : logs) {
        stats.disk_bytes += log->SizeFileBytes();
      }
    }
    return stats;
  }

  absl::StatusOr<CheckpointInfo> Checkpoint(const std::string& dir) override {
    namespace fs = std::filesystem;
    if (dir.empty() || dir.front() != '/') {
      return absl::InvalidArgumentError(
          absl::StrCat("snapshot dir \"", dir, "\" is not an absolute path"));
    }
    fs::path target = fs::path(dir).lexically_normal();
    if (!target.has_filename()) target = target.parent_path();  // "/a/b/"
    std::error_code error;
    if (fs::exists(fs::symlink_status(target, error))) {
      return absl::AlreadyExistsError(
          absl::StrCat("snapshot dir ", dir, " already exists"));
    }
    if (!fs::is_directory(target.parent_path(), error)) {
      return absl::NotFoundError(absl::StrCat(
          "the parent directory of ", "snapshot dir ", dir, " does not exist"));
    }
    const std::shared_ptr<const OpenDatabase> database = Database();
    if (database == nullptr) return WriteFailure();
    rocksdb::Checkpoint* raw = nullptr;
    rocksdb::Status s = rocksdb::Checkpoint::Create(database->db.get(), &raw);
    std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
    // log_size_for_flush 0: the memtables are flushed first, so the copy is
    // tables plus at most a short log.
    if (s.ok()) s = checkpoint->CreateCheckpoint(target.string(), 0);
    if (!s.ok()) {
      fs::remove_all(target, error);
      return ToStatus(s, absl::StrCat("snapshot into ", dir));
    }
    chmod(target.c_str(), 0700);  // Like a data dir: it holds every message.
    CheckpointInfo info;
    info.dir = dir;
    for (const fs::directory_entry& entry :
         fs::directory_iterator(target, error)) {
      if (!entry.is_regular_file(error)) continue;
      ++info.files;
      info.bytes += entry.file_size(error);
    }
    return info;
  }

 private:
  // The open database, or null while none is (a reopen failed).
  std::shared_ptr<const OpenDatabase> Database() {
    absl::MutexLock lock(&database_mu_);
    return database_;
  }

  // Brings the store back after a failed write. RocksDB stops writing after
  // one fails, and recovers once the cause is gone: from a full disk by
  // itself, when space returns, or when resumed. But RocksDB 7.8 then keeps
  // the log whose write failed if every memtable was empty (the failed write
  // was the first in a fresh log, as after a flush or an open): the next
  // write would append to that log and assert (in Debian's build) or fail
  // for ever. So once RocksDB has recovered, the database is closed and
  // opened again, which starts a fresh log; the log's torn tail, if any, is
  // dropped on replay (only what no write returned OK for). Needs no read
  // in flight: with one, answers the failure and the next write tries
  // again. Returns OK once the store writes again.
  absl::Status Recover() {
    absl::MutexLock lock(&database_mu_);
    if (database_ != nullptr) {
      // While RocksDB recovers by itself, Resume is busy.
      const rocksdb::Status resumed = database_->db->Resume();
      if (!resumed.ok()) {
        return resumed.IsBusy() ? WriteFailure()
                                : ToStatus(resumed, Context("resume"));
      }
      // Under database_mu_ no reader can take a new reference: a count of
      // one is exact.
      if (database_.use_count() > 1) return WriteFailure();
      database_.reset();
    }
    absl::StatusOr<std::shared_ptr<const OpenDatabase>> reopened =
        OpenRocksDb(path_, *resources_, memtables_, keep_write_log_seconds_);
    if (!reopened.ok()) {
      spdlog::error("cannot reopen data dir {} after a failed write: {}", path_,
                    reopened.status().ToString());
      return reopened.status();
    }
    database_ = *std::move(reopened);
    needs_reopen_.store(false, std::memory_order_release);
    spdlog::warn("data dir {} writes again (reopened after a failed write)",
                 path_);
    return absl::OkStatus();
  }

  // Writes the operations `for_each` visits (it calls its argument with
  // each, a WriteBatch::Operation or an OperationView, in order, and stops
  // when that returns false) as one RocksDB write of about `reserve` bytes,
  // then applies those on Table::kCounters to counters_. The operations
  // must outlive the call.
  // Also copies the write, as RocksDB wrote it, into `*encoded` unless
  // that is null.
  template <typename ForEach>
  absl::Status WriteEach(size_t reserve, const ForEach& for_each,
                         std::string* encoded = nullptr) {
    absl::StatusOr<std::shared_ptr<const OpenDatabase>> database =
        WritableDatabase();
    if (!database.ok()) return database.status();
    rocksdb::WriteBatch rocks_batch(reserve);
    // The operations on Table::kCounters, applied to counters_ once written.
    std::vector<OperationView> counter_ops;
    rocksdb::Status built;
    for_each([&](const auto& op) {
      if (op.table == Table::kCounters) {
        counter_ops.push_back({op.table, op.kind, op.key, op.value});
      }
      rocksdb::ColumnFamilyHandle* cf = (*database)->Handle(op.table);
      const rocksdb::Slice key(op.key.data(), op.key.size());
      const rocksdb::Slice value(op.value.data(), op.value.size());
      switch (op.kind) {
        case WriteBatch::Operation::Kind::kPut:
          built = rocks_batch.Put(cf, key, value);
          break;
        case WriteBatch::Operation::Kind::kDelete:
          built = IsWriteOnce(op.table) ? rocks_batch.SingleDelete(cf, key)
                                        : rocks_batch.Delete(cf, key);
          break;
        case WriteBatch::Operation::Kind::kAdd:
          built = rocks_batch.Merge(cf, key, value);
          break;
      }
      return built.ok();
    });
    if (!built.ok()) return ToStatus(built, Context("build write batch"));
    if (absl::Status s = WriteTo(**database, rocks_batch, counter_ops);
        !s.ok()) {
      return s;
    }
    if (encoded != nullptr) *encoded = rocks_batch.Data();
    return absl::OkStatus();
  }

  // The database to write to, reopened first if a failed write asked for
  // it (Recover).
  absl::StatusOr<std::shared_ptr<const OpenDatabase>> WritableDatabase() {
    if (needs_reopen_.load(std::memory_order_acquire)) {
      if (absl::Status reopened = Recover(); !reopened.ok()) return reopened;
    }
    std::shared_ptr<const OpenDatabase> database = Database();
    if (database == nullptr) return WriteFailure();
    return database;
  }

  // Writes `batch` to `database`, then applies `counter_ops` (its
  // operations on Table::kCounters) to counters_.
  absl::Status WriteTo(const OpenDatabase& database, rocksdb::WriteBatch& batch,
                       absl::Span<const OperationView> counter_ops) {
    // Never synced here: SyncLog does it, without holding up other writes.
    const rocksdb::Status s = WriteToDb(*database.db, batch);
    if (!s.ok()) return Failed(ToStatus(s, Context("write")));
    if (!counter_ops.empty()) {
      absl::MutexLock lock(&counters_mu_);
      for (const OperationView& op : counter_ops) {
        ApplyToCountersLocked(op.kind, op.key, op.value);
      }
    }
    return absl::OkStatus();
  }

  absl::Status NoWriteLogKept() const {
    return absl::UnimplementedError(absl::StrCat(
        "data dir ", path_, " was opened to keep no log of its writes"));
  }

  std::string Context(const char* what) const {
    return absl::StrCat(what, " in data dir ", path_);
  }

  // Applies one written operation on Table::kCounters to counters_.
  void ApplyToCountersLocked(WriteBatch::Operation::Kind kind,
                             std::string_view key, std::string_view value)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(counters_mu_) {
    auto it = counters_.find(key);
    int64_t n = it == counters_.end() ? 0 : it->second;
    switch (kind) {
      case WriteBatch::Operation::Kind::kPut:
        n = DecodeCounter(value);
        break;
      case WriteBatch::Operation::Kind::kDelete:
        n = 0;
        break;
      case WriteBatch::Operation::Kind::kAdd:
        // In uint64_t, so that an overflow wraps instead of being undefined.
        n = static_cast<int64_t>(static_cast<uint64_t>(n) +
                                 static_cast<uint64_t>(DecodeCounter(value)));
        break;
    }
    if (n == 0) {
      if (it != counters_.end()) counters_.erase(it);
    } else if (it != counters_.end()) {
      it->second = n;
    } else {
      counters_.emplace(key, n);
    }
  }

  // Constant after construction.
  const std::string path_;
  const bool sync_;
  const uint64_t keep_write_log_seconds_;
  // Released after the database closes (the destructor closes it).
  const std::unique_ptr<DataDirLock> lock_;
  // The block cache and memtable budget, kept across reopens.
  const std::shared_ptr<RocksDbResources> resources_;
  // Which memtables new ones are (SetWriteOnly), kept across reopens; null
  // without RocksDbStoreOptions::switchable_memtables.
  const std::shared_ptr<StoreMemtables> memtables_;
  // WriteEncoding(), and the column family ids it names, in Table order.
  const std::string encoding_;
  const TableIds ids_;

  // Readers copy the pointer and use the database without the lock; only
  // Recover replaces it, when nobody holds a copy.
  absl::Mutex database_mu_;
  std::shared_ptr<const OpenDatabase> database_ ABSL_GUARDED_BY(database_mu_);

#ifdef ABSL_HAVE_THREAD_SANITIZER
  // Debian's RocksDB is not built with ThreadSanitizer. Concurrent writers
  // join a write group whose leader appends every member's batch to the
  // log, and leadership passes between threads through atomics inside the
  // library that ThreadSanitizer cannot see: it would report the log's
  // buffers as raced. Under ThreadSanitizer only, writes therefore go one at
  // a time, behind a lock it does see; every other build lets RocksDB group
  // them.
  rocksdb::Status WriteToDb(rocksdb::DB& db, rocksdb::WriteBatch& batch) {
    absl::MutexLock lock(&tsan_write_mu_);
    return db.Write(rocksdb::WriteOptions(), &batch);
  }
  absl::Mutex tsan_write_mu_;
#else
  rocksdb::Status WriteToDb(rocksdb::DB& db, rocksdb::WriteBatch& batch) {
    return db.Write(rocksdb::WriteOptions(), &batch);
  }
#endif

  // Records a failed write or sync: until the store recovers (Recover),
  // writes and syncs answer `failure`. Returns it.
  absl::Status Failed(absl::Status failure) {
    {
      absl::MutexLock lock(&failure_mu_);
      failure_ = failure;
    }
    needs_reopen_.store(true, std::memory_order_release);
    return failure;
  }
  absl::Status WriteFailure() {
    absl::MutexLock lock(&failure_mu_);
    return failure_;
  }

  // Set after a failed write; the next write calls Recover first.
  std::atomic<bool> needs_reopen_{false};
  absl::Mutex failure_mu_;
  absl::Status failure_ ABSL_GUARDED_BY(failure_mu_);

  // The non-zero counters of Table::kCounters, as the table holds them once
  // the Writes that returned are applied. A Write changes them after the
  // database took it, under the lock: concurrent Writes may reach them in
  // another order than the database's, which leaves the same sums since
  // Adds commute (a Put or Delete of a counter, which the contract rules
  // out, would not).
  absl::Mutex counters_mu_;
  std::map<std::string, int64_t, std::less<>> counters_
      ABSL_GUARDED_BY(counters_mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<MessageStore>> RocksDbStore::Open(
    const RocksDbStoreOptions& options) {
  if (options.path.empty()) {
    return absl::InvalidArgumentError("data dir path is empty");
  }
  if (absl::Status created = CreateDataDir(options.path); !created.ok()) {
    return created;
  }

  // Our own lock, taken before RocksDB touches the directory: RocksDB
  // rotates its info log before it takes its LOCK, so a second broker would
  // otherwise disturb the first one's files before being refused.
  absl::StatusOr<std::unique_ptr<DataDirLock>> lock =
      DataDirLock::Acquire(options.path);
  if (!lock.ok()) return lock.status();
  // RocksDB opens its LOCK following links: refuse one planted there. A
  // process that may write into the directory could still plant one
  // between this check and RocksDB's open; the directory's mode (0700 when
  // hourglassd creates it) is what keeps such processes out.
  if (const std::string rocksdb_lock = options.path + "/LOCK";
      IsSymlink(rocksdb_lock)) {
    return SymlinkRefused(rocksdb_lock);
  }

  std::shared_ptr<RocksDbResources> resources = options.shared;
  if (resources == nullptr) {
    resources = RocksDbResources::Create(
        {.block_cache_bytes = options.block_cache_bytes});
  }
  std::shared_ptr<StoreMemtables> memtables;
  if (options.switchable_memtables) {
    memtables = std::make_shared<StoreMemtables>();
  }
  const auto keep_write_log_seconds =
      static_cast<uint64_t>(absl::ToInt64Seconds(
          absl::Ceil(options.keep_write_log, absl::Seconds(1))));
  absl::StatusOr<std::shared_ptr<const OpenDatabase>> database =
      OpenRocksDb(options.path, *resources, memtables, keep_write_log_seconds);
  if (!database.ok()) return database.status();
  auto store = std::make_unique<RocksDbStoreImpl>(
      options.path, options.sync, keep_write_log_seconds, *std::move(lock),
      std::move(resources), std::move(memtables), *std::move(database));
  if (absl::Status version = UpgradeFormat(*store, options); !version.ok()) {
    return version;
  }
  if (absl::Status counters = store->LoadCounters(); !counters.ok()) {
    return counters;
  }
  return store;
}

}  // namespace hourglass::storage
