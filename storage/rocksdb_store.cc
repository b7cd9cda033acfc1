#include "storage/rocksdb_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/base/config.h"
#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "rocksdb/cache.h"
#include "rocksdb/convenience.h"
#include "rocksdb/db.h"
#include "rocksdb/env.h"
#include "rocksdb/filter_policy.h"
#include "rocksdb/merge_operator.h"
#include "rocksdb/options.h"
#include "rocksdb/slice_transform.h"
#include "rocksdb/table.h"
#include "rocksdb/utilities/checkpoint.h"
#include "rocksdb/utilities/table_properties_collectors.h"
#include "rocksdb/write_batch.h"
#include "rocksdb/write_buffer_manager.h"
#include "spdlog/spdlog.h"
#include "storage/data_dir.h"
#include "storage/format_version.h"
#include "storage/keys.h"

namespace hourglass::storage {
namespace {

// The one place where a rocksdb::Status becomes an absl::Status. `context`
// says what was being done, and to which path.
// RocksDB's own log, into hourglassd's, from warnings up; not into a LOG
// file in the data dir. RocksDB 7.8's file logger asserts once a write to
// its file failed, and a full disk makes one fail: with its LOG there, a
// full disk would abort hourglassd instead of failing writes until space
// returns (tests/storage/full_disk_test.cc).
class RocksDbLog final : public rocksdb::Logger {
 public:
  RocksDbLog() : rocksdb::Logger(rocksdb::InfoLogLevel::WARN_LEVEL) {}

  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override {
    Logv(rocksdb::InfoLogLevel::INFO_LEVEL, format, ap);
  }
  void Logv(const rocksdb::InfoLogLevel level, const char* format,
            va_list ap) override {
    // HEADER_LEVEL is the options dump at open: ranked above FATAL, it is
    // no more than information.
    if (level < GetInfoLogLevel() ||
        level == rocksdb::InfoLogLevel::HEADER_LEVEL) {
      return;
    }
    char line[1024];
    std::vsnprintf(line, sizeof(line), format, ap);
    spdlog::log(level >= rocksdb::InfoLogLevel::ERROR_LEVEL
                    ? spdlog::level::err
                    : spdlog::level::warn,
                "rocksdb: {}", line);
  }
};

absl::Status ToStatus(const rocksdb::Status& s, const std::string& context) {
  if (s.ok()) return absl::OkStatus();
  const std::string message = absl::StrCat(context, ": ", s.ToString());
  if (s.IsNoSpace()) {
    return absl::ResourceExhaustedError(
        absl::StrCat(context, ": disk full (", s.ToString(), ")"));
  }
  if (s.IsCorruption()) return absl::DataLossError(message);
  if (s.IsIOError()) {
    if (absl::StrContains(s.ToString(), "lock file") ||
        absl::StrContains(s.ToString(), "lock hold")) {
      return absl::FailedPreconditionError(absl::StrCat(
          context, ": in use by another process (its LOCK file is held)"));
    }
    if (absl::StrContains(s.ToString(), "Permission denied")) {
      return absl::PermissionDeniedError(message);
    }
    return absl::UnavailableError(message);
  }
  if (s.IsInvalidArgument() || s.IsNotSupported()) {
    return absl::FailedPreconditionError(message);
  }
  if (s.IsBusy() || s.IsTimedOut() || s.IsTryAgain() || s.IsIncomplete()) {
    return absl::UnavailableError(message);
  }
  return absl::InternalError(message);
}

// Counters: each operand and value is an int64 (EncodeCounter); merging
// adds them, so concurrent batches change a counter without reading it.
class CounterAddOperator final : public rocksdb::AssociativeMergeOperator {
 public:
  bool Merge(const rocksdb::Slice& key, const rocksdb::Slice* existing,
             const rocksdb::Slice& value, std::string* new_value,
             rocksdb::Logger* logger) const override {
    const int64_t base =
        existing == nullptr ? 0 : DecodeCounter(existing->ToStringView());
    *new_value = EncodeCounter(base + DecodeCounter(value.ToStringView()));
    return true;
  }
  const char* Name() const override { return "HourglassCounterAdd"; }
};

// The key minus its last `suffix_bytes`: for a queue table, the name parts
// in front of the fixed-width integers. The memtable keeps, per prefix, where
// its last key went, and queue keys of one prefix are written and deleted
// mostly in increasing order, so the next insert starts its search there
// instead of at the top of the skiplist.
class TrailingIntegersPrefix final : public rocksdb::SliceTransform {
 public:
  explicit TrailingIntegersPrefix(size_t suffix_bytes)
      : suffix_bytes_(suffix_bytes),
        name_(absl::StrCat("HourglassTrailingIntegers", suffix_bytes)) {}
  const char* Name() const override { return name_.c_str(); }
  rocksdb::Slice Transform(const rocksdb::Slice& key) const override {
    return rocksdb::Slice(key.data(), key.size() - suffix_bytes_);
  }
  bool InDomain(const rocksdb::Slice& key) const override {
    return key.size() >= suffix_bytes_;
  }

 private:
  const size_t suffix_bytes_;
  const std::string name_;
};

// The trailing integer bytes that TrailingIntegersPrefix drops from keys of
// `table`, or nullopt for tables whose keys come in no order (ids, meta),
// which get no insert hints. A counter is the same key over and over: its
// prefix is the whole key.
std::optional<size_t> HintedIntegerBytes(Table table) {
  switch (table) {
    case Table::kMessages:
    case Table::kInFlight:
      return 8;  // sequence
    case Table::kSchedule:
    case Table::kReady:
    case Table::kTopicDue:
      return 16;  // deliver_at, sequence
    case Table::kCounters:
      return 0;
    case Table::kIds:
    case Table::kMeta:
    // A batch of publishes adds to the minutes, hours and days they are
    // due in, anywhere in the year: no order to hint at.
    case Table::kScheduleCounts:
      return std::nullopt;
  }
  return std::nullopt;
}

rocksdb::CompressionType BestCompression() {
  for (rocksdb::CompressionType type :
       {rocksdb::kLZ4Compression, rocksdb::kSnappyCompression}) {
    for (rocksdb::CompressionType supported :
         rocksdb::GetSupportedCompressions()) {
      if (supported == type) return type;
    }
  }
  return rocksdb::kNoCompression;
}

// Splits a table's bloom filter and index into blocks of about 4 KiB with a
// small top-level index over them, kept in the block cache like data blocks.
// A whole-file filter is about 1.25 bytes per key: a compacted `messages`
// file of a million keys has one of 1.2 MiB, more than a shard of the LRU
// cache holds (64 MiB in 64 shards), so it was not kept and every lookup
// read, copied and checksummed all of it again (17 % of the dispatcher's
// samples in a profile of a million messages being delivered). Partitions
// cache like any block, whatever the file's size.
void PartitionFilters(rocksdb::BlockBasedTableOptions& blocks) {
  blocks.index_type = rocksdb::BlockBasedTableOptions::kTwoLevelIndexSearch;
  blocks.partition_filters = true;
  // The top-level index and filter of each file stay in the cache while
  // the file is open.
  blocks.pin_top_level_index_and_filter = true;
}

// Column family options for one table. The tables have two shapes:
//
// - Looked up by key (messages, ids, meta): a bloom filter answers "absent"
//   without touching data blocks, which makes Cancel of an unknown id and
//   the idempotency check of every producer-keyed publish cheap. Message
//   payloads (up to 1 MiB) live in blob files, so compaction moves only
//   small keys and pointers instead of rewriting payloads level after level.
//
// - Queues scanned in key order (schedule, ready, inflight): every key is
//   written once and deleted once, soon after, so scans of the live head
//   would otherwise wade through tombstones of the consumed tail. A
//   deletion-triggered collector marks any SST file with a dense run of
//   deletes for compaction, which drops them. Scans use an iterate bound
//   so they never look past the range they need.
rocksdb::ColumnFamilyOptions TableOptions(
    Table table, const std::shared_ptr<rocksdb::Cache>& cache) {
  rocksdb::ColumnFamilyOptions cf;
  cf.compression = BestCompression();
  cf.level_compaction_dynamic_level_bytes = true;
  cf.write_buffer_size = size_t{16} << 20;
  // A burst (a million messages coming due) writes and deletes faster than
  // one flush at a time keeps up with: a few full memtables may wait for
  // their flush, and L0 may grow a while, before writes are slowed.
  cf.max_write_buffer_number = 4;
  cf.level0_slowdown_writes_trigger = 32;
  cf.level0_stop_writes_trigger = 64;

  rocksdb::BlockBasedTableOptions blocks;
  blocks.block_cache = cache;
  blocks.cache_index_and_filter_blocks = true;
  blocks.pin_l0_filter_and_index_blocks_in_cache = true;
  blocks.format_version = 5;

  switch (table) {
    case Table::kMessages:
      cf.enable_blob_files = true;
      cf.min_blob_size = 256;
      cf.enable_blob_garbage_collection = true;
      cf.write_buffer_size = size_t{32} << 20;
      // Deliveries read records published long before, which have left the
      // memtable: a bloom filter over its keys answers "not here" without
      // a skiplist search (most of the read's cost in a burst of them).
      cf.memtable_whole_key_filtering = true;
      cf.memtable_prefix_bloom_size_ratio = 0.02;
      [[fallthrough]];
    case Table::kIds:
    case Table::kMeta:
      blocks.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
      blocks.whole_key_filtering = true;
      PartitionFilters(blocks);
      break;
    case Table::kCounters:
      // A few keys, each changed by every batch that moves a message: merge
      // operands are collapsed as they are written, so a read never adds up
      // more than a few.
      cf.merge_operator = std::make_shared<CounterAddOperator>();
      cf.max_successive_merges = 16;
      blocks.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
      PartitionFilters(blocks);
      break;
    case Table::kScheduleCounts:
      // Counters too, but many (a key per topic and minute, hour and day
      // that ever held a scheduled message) and read by range, a topic's
      // buckets of one granularity at a time: no bloom filter. Unlike the
      // counters table, merge operands are not collapsed as they are
      // written (max_successive_merges): that reads the key on write, and
      // publishes due all over a year would read a day and an hour key
      // per message. Flushes and compactions collapse them instead.
      cf.merge_operator = std::make_shared<CounterAddOperator>();
      break;
    case Table::kTopicDue:
    case Table::kSchedule:
    case Table::kReady:
    case Table::kInFlight:
      // A file gets compacted once any 8192 consecutive entries hold 4096
      // deletes.
      cf.table_properties_collector_factories.push_back(
          rocksdb::NewCompactOnDeletionCollectorFactory(8192, 4096));
      break;
  }
  if (std::optional<size_t> integers = HintedIntegerBytes(table)) {
    cf.memtable_insert_with_hint_prefix_extractor =
        std::make_shared<TrailingIntegersPrefix>(*integers);
  }
  cf.table_factory.reset(rocksdb::NewBlockBasedTableFactory(blocks));
  return cf;
}

}  // namespace

struct RocksDbResources::Parts {
  std::shared_ptr<rocksdb::Cache> cache;
  std::shared_ptr<rocksdb::WriteBufferManager> write_buffers;
};

RocksDbResources::RocksDbResources(std::unique_ptr<Parts> parts)
    : parts_(std::move(parts)) {}
RocksDbResources::~RocksDbResources() = default;

std::shared_ptr<RocksDbResources> RocksDbResources::Create(
    const Options& options) {
  auto parts = std::make_unique<Parts>();
  parts->cache = rocksdb::NewLRUCache(options.block_cache_bytes);
  parts->write_buffers =
      std::make_shared<rocksdb::WriteBufferManager>(options.write_buffer_bytes);
  return std::shared_ptr<RocksDbResources>(
      new RocksDbResources(std::move(parts)));
}

size_t RocksDbResources::block_cache_usage() const {
  return parts_->cache->GetUsage();
}

size_t RocksDbResources::memtable_usage() const {
  return parts_->write_buffers->memory_usage();
}

namespace {

// One open RocksDB with its column family handles; closes it when
// destroyed. Immutable once opened, so threads share it freely.
struct OpenDatabase {
  ~OpenDatabase() {
    for (rocksdb::ColumnFamilyHandle* handle : tables) {
      db->DestroyColumnFamilyHandle(handle);
    }
    db->DestroyColumnFamilyHandle(default_table);
    db->Close();
  }
  rocksdb::ColumnFamilyHandle* Handle(Table table) const {
    return tables[static_cast<int>(table)];
  }

  std::unique_ptr<rocksdb::DB> db;
  // The unused default column family.
  rocksdb::ColumnFamilyHandle* default_table = nullptr;
  std::array<rocksdb::ColumnFamilyHandle*, kNumTables> tables{};
};

// Opens (or creates) the database in `path`, with every Table's column
// family, on `resources`' block cache and memtable budget.
absl::StatusOr<std::shared_ptr<const OpenDatabase>> OpenRocksDb(
    const std::string& path, const RocksDbResources& resources) {
  const std::shared_ptr<rocksdb::Cache>& cache = resources.parts().cache;
  rocksdb::DBOptions db_options;
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  // Two cores: one background flush and one compaction at a time.
  db_options.IncreaseParallelism(2);
  db_options.max_background_jobs = 2;
  // Bounds the log replayed at start, so restart time stays flat.
  db_options.max_total_wal_size = size_t{256} << 20;
  // Bounds memtable memory across all tables, and all stores sharing it.
  db_options.write_buffer_manager = resources.parts().write_buffers;
  db_options.bytes_per_sync = size_t{1} << 20;
  // When writes must be slowed, not below 64 MiB/s (RocksDB's default of
  // 16 MiB/s holds a burst back for seconds).
  db_options.delayed_write_rate = size_t{64} << 20;
  db_options.info_log = std::make_shared<RocksDbLog>();

  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  families.emplace_back(rocksdb::kDefaultColumnFamilyName,
                        rocksdb::ColumnFamilyOptions());
  for (int i = 0; i < kNumTables; ++i) {
    const Table table = static_cast<Table>(i);
    families.emplace_back(std::string(TableName(table)),
                          TableOptions(table, cache));
  }

  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw_db = nullptr;
  const rocksdb::Status s =
      rocksdb::DB::Open(db_options, path, families, &handles, &raw_db);
  if (!s.ok()) return ToStatus(s, absl::StrCat("cannot open data dir ", path));
  auto database = std::make_shared<OpenDatabase>();
  database->db.reset(raw_db);
  database->default_table = handles[0];
  for (int i = 0; i < kNumTables; ++i) database->tables[i] = handles[i + 1];
  return database;
}

class RocksDbStoreImpl final : public MessageStore {
 public:
  RocksDbStoreImpl(std::string path, bool sync,
                   std::unique_ptr<DataDirLock> lock,
                   std::shared_ptr<RocksDbResources> resources,
                   std::shared_ptr<const OpenDatabase> database)
      : path_(std::move(path)),
        sync_(sync),
        lock_(std::move(lock)),
        resources_(std::move(resources)),
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
    if (needs_reopen_.load(std::memory_order_acquire)) {
      if (absl::Status reopened = Recover(); !reopened.ok()) return reopened;
    }
    const std::shared_ptr<const OpenDatabase> database = Database();
    if (database == nullptr) return WriteFailure();
    size_t reserve = 0;
    for (const WriteBatch* batch : batches) {
      reserve += batch->ByteSize() + 16 * batch->size();
    }
    rocksdb::WriteBatch rocks_batch(reserve);
    bool changes_counters = false;
    for (const WriteBatch* batch : batches) {
      for (const WriteBatch::Operation& op : batch->operations()) {
        changes_counters |= op.table == Table::kCounters;
        rocksdb::ColumnFamilyHandle* cf = database->Handle(op.table);
        rocksdb::Status s;
        switch (op.kind) {
          case WriteBatch::Operation::Kind::kPut:
            s = rocks_batch.Put(cf, op.key, op.value);
            break;
          case WriteBatch::Operation::Kind::kDelete:
            s = IsWriteOnce(op.table) ? rocks_batch.SingleDelete(cf, op.key)
                                      : rocks_batch.Delete(cf, op.key);
            break;
          case WriteBatch::Operation::Kind::kAdd:
            s = rocks_batch.Merge(cf, op.key, op.value);
            break;
        }
        if (!s.ok()) return ToStatus(s, Context("build write batch"));
      }
    }
    // Never synced here: SyncLog does it, without holding up other writes.
    const rocksdb::Status s = WriteToDb(*database->db, rocks_batch);
    if (!s.ok()) return Failed(ToStatus(s, Context("write")));
    if (changes_counters) {
      absl::MutexLock lock(&counters_mu_);
      for (const WriteBatch* batch : batches) {
        for (const WriteBatch::Operation& op : batch->operations()) {
          if (op.table == Table::kCounters) ApplyToCountersLocked(op);
        }
      }
    }
    return absl::OkStatus();
  }

  absl::Status SyncLog() override {
    if (!sync_) return absl::OkStatus();
    // After a failed write, the log cannot be synced until reopened: and
    // RocksDB 7.8 asserts on a sync of a log whose write failed. (A write
    // that fails while this sync is under way can still reach it; the
    // window is the few instructions between RocksDB's failed append and
    // Failed below.)
    if (needs_reopen_.load(std::memory_order_acquire)) return WriteFailure();
    const std::shared_ptr<const OpenDatabase> database = Database();
    if (database == nullptr) return WriteFailure();
    // Syncs the WAL files without holding up concurrent writes.
    const rocksdb::Status s = database->db->SyncWAL();
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
        OpenRocksDb(path_, *resources_);
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

  std::string Context(const char* what) const {
    return absl::StrCat(what, " in data dir ", path_);
  }

  // Applies one written operation on Table::kCounters to counters_.
  void ApplyToCountersLocked(const WriteBatch::Operation& op)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(counters_mu_) {
    auto it = counters_.find(op.key);
    int64_t n = it == counters_.end() ? 0 : it->second;
    switch (op.kind) {
      case WriteBatch::Operation::Kind::kPut:
        n = DecodeCounter(op.value);
        break;
      case WriteBatch::Operation::Kind::kDelete:
        n = 0;
        break;
      case WriteBatch::Operation::Kind::kAdd:
        // In uint64_t, so that an overflow wraps instead of being undefined.
        n = static_cast<int64_t>(
            static_cast<uint64_t>(n) +
            static_cast<uint64_t>(DecodeCounter(op.value)));
        break;
    }
    if (n == 0) {
      if (it != counters_.end()) counters_.erase(it);
    } else if (it != counters_.end()) {
      it->second = n;
    } else {
      counters_.emplace(op.key, n);
    }
  }

  // Constant after construction.
  const std::string path_;
  const bool sync_;
  // Released after the database closes (the destructor closes it).
  const std::unique_ptr<DataDirLock> lock_;
  // The block cache and memtable budget, kept across reopens.
  const std::shared_ptr<RocksDbResources> resources_;

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
  absl::StatusOr<std::shared_ptr<const OpenDatabase>> database =
      OpenRocksDb(options.path, *resources);
  if (!database.ok()) return database.status();
  auto store = std::make_unique<RocksDbStoreImpl>(
      options.path, options.sync, *std::move(lock), std::move(resources),
      *std::move(database));
  if (absl::Status version = UpgradeFormat(*store, options); !version.ok()) {
    return version;
  }
  if (absl::Status counters = store->LoadCounters(); !counters.ok()) {
    return counters;
  }
  return store;
}

}  // namespace hourglass::storage
