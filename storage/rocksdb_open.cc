// Opening a store's RocksDB (storage-internal): every table's options, the
// resources stores share, and the open database RocksDbStoreImpl holds.

#include "storage/rocksdb_open.h"

#include <cstdarg>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "rocksdb/cache.h"
#include "rocksdb/convenience.h"
#include "rocksdb/filter_policy.h"
#include "rocksdb/merge_operator.h"
#include "rocksdb/options.h"
#include "rocksdb/slice_transform.h"
#include "rocksdb/table.h"
#include "rocksdb/utilities/table_properties_collectors.h"
#include "rocksdb/write_buffer_manager.h"
#include "spdlog/spdlog.h"
#include "storage/keys.h"

namespace hourglass::storage {
namespace {

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

}  // namespace

// The one place where a rocksdb::Status becomes an absl::Status. `context`
// says what was being done, and to which path.
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

namespace {

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
// instead of at the top of the skiplist. While the table's StoreMemtables
// (`memtables`, if any) make append memtables, which take no hints, no key
// is in its domain: RocksDB would otherwise hash each key's prefix and look
// it up in its table of hints (a tenth of a backup's apply thread).
class TrailingIntegersPrefix final : public rocksdb::SliceTransform {
 public:
  TrailingIntegersPrefix(size_t suffix_bytes,
                         std::shared_ptr<const StoreMemtables> memtables)
      : suffix_bytes_(suffix_bytes),
        memtables_(std::move(memtables)),
        name_(absl::StrCat("HourglassTrailingIntegers", suffix_bytes)) {}
  const char* Name() const override { return name_.c_str(); }
  rocksdb::Slice Transform(const rocksdb::Slice& key) const override {
    return rocksdb::Slice(key.data(), key.size() - suffix_bytes_);
  }
  bool InDomain(const rocksdb::Slice& key) const override {
    return key.size() >= suffix_bytes_ &&
           (memtables_ == nullptr || !memtables_->write_only());
  }

 private:
  const size_t suffix_bytes_;
  const std::shared_ptr<const StoreMemtables> memtables_;
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
    Table table, const std::shared_ptr<rocksdb::Cache>& cache,
    size_t arena_block_bytes,
    const std::shared_ptr<StoreMemtables>& memtables) {
  rocksdb::ColumnFamilyOptions cf;
  cf.compression = BestCompression();
  cf.level_compaction_dynamic_level_bytes = true;
  cf.write_buffer_size = size_t{16} << 20;
  // A burst (a million messages coming due) writes and deletes faster than
  // one flush at a time keeps up with: a few full memtables may wait for
  // their flush, and L0 may grow a while, before writes are slowed.
  cf.max_write_buffer_number = 4;
  cf.arena_block_size = arena_block_bytes;  // 0: RocksDB's default.
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
  const bool switchable = memtables != nullptr && HasStoreMemtables(table);
  if (switchable) cf.memtable_factory = memtables;
  if (std::optional<size_t> integers = HintedIntegerBytes(table)) {
    cf.memtable_insert_with_hint_prefix_extractor =
        std::make_shared<TrailingIntegersPrefix>(
            *integers, switchable ? memtables : nullptr);
  }
  cf.table_factory.reset(rocksdb::NewBlockBasedTableFactory(blocks));
  return cf;
}

}  // namespace

bool HasStoreMemtables(Table table) {
  return table != Table::kCounters && table != Table::kMeta;
}

RocksDbResources::RocksDbResources(std::unique_ptr<Parts> parts)
    : parts_(std::move(parts)) {}
RocksDbResources::~RocksDbResources() = default;

std::shared_ptr<RocksDbResources> RocksDbResources::Create(
    const Options& options) {
  auto parts = std::make_unique<Parts>();
  parts->cache = rocksdb::NewLRUCache(options.block_cache_bytes);
  parts->write_buffers =
      std::make_shared<rocksdb::WriteBufferManager>(options.write_buffer_bytes);
  parts->arena_block_bytes = options.arena_block_bytes;
  return std::shared_ptr<RocksDbResources>(
      new RocksDbResources(std::move(parts)));
}

size_t RocksDbResources::block_cache_usage() const {
  return parts_->cache->GetUsage();
}

size_t RocksDbResources::memtable_usage() const {
  return parts_->write_buffers->memory_usage();
}

absl::StatusOr<std::shared_ptr<const OpenDatabase>> OpenRocksDb(
    const std::string& path, const RocksDbResources& resources,
    std::shared_ptr<StoreMemtables> memtables,
    uint64_t keep_write_log_seconds) {
  const std::shared_ptr<rocksdb::Cache>& cache = resources.parts().cache;
  rocksdb::DBOptions db_options;
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  // Two cores: one background flush and one compaction at a time.
  db_options.IncreaseParallelism(2);
  db_options.max_background_jobs = 2;
  // Bounds the log replayed at start, so restart time stays flat.
  db_options.max_total_wal_size = size_t{256} << 20;
  // Log files no longer needed move to <path>/archive, where RocksDB deletes
  // them once older than this (checking every half of it): what
  // ReadWriteLog reads beside the live files.
  db_options.WAL_ttl_seconds = keep_write_log_seconds;
  // Bounds memtable memory across all tables, and all stores sharing it.
  db_options.write_buffer_manager = resources.parts().write_buffers;
  db_options.bytes_per_sync = size_t{1} << 20;
  // When writes must be slowed, not below 64 MiB/s (RocksDB's default of
  // 16 MiB/s holds a burst back for seconds).
  db_options.delayed_write_rate = size_t{64} << 20;
  db_options.info_log = std::make_shared<RocksDbLog>();
  // Append memtables (StoreMemtables) take one insert at a time: a write
  // group's leader inserts its members' batches itself. A store has few
  // writers anyway, mostly one (its commit queue's, or its replica's).
  if (memtables != nullptr) db_options.allow_concurrent_memtable_write = false;

  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  families.emplace_back(rocksdb::kDefaultColumnFamilyName,
                        rocksdb::ColumnFamilyOptions());
  for (int i = 0; i < kNumTables; ++i) {
    const Table table = static_cast<Table>(i);
    families.emplace_back(
        std::string(TableName(table)),
        TableOptions(table, cache, resources.parts().arena_block_bytes,
                     memtables));
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

}  // namespace hourglass::storage
