#ifndef HOURGLASS_STORAGE_ROCKSDB_OPEN_H_
#define HOURGLASS_STORAGE_ROCKSDB_OPEN_H_

// Storage-internal: how RocksDbStore opens its RocksDB. RocksDB's types
// appear here, so nothing outside storage/ includes this header.

#include <array>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "rocksdb/cache.h"
#include "rocksdb/db.h"
#include "rocksdb/status.h"
#include "rocksdb/write_buffer_manager.h"
#include "storage/memtables.h"
#include "storage/message_store.h"
#include "storage/rocksdb_store.h"

namespace hourglass::storage {

struct RocksDbResources::Parts {
  std::shared_ptr<rocksdb::Cache> cache;
  std::shared_ptr<rocksdb::WriteBufferManager> write_buffers;
  size_t arena_block_bytes = 0;  // RocksDbResources::Options's.
};

// The one place where a rocksdb::Status becomes an absl::Status. `context`
// says what was being done, and to which path.
absl::Status ToStatus(const rocksdb::Status& s, const std::string& context);

// Whether `table`'s memtables are a StoreMemtables': every table but
// counters (whose merges read the memtable on write) and meta.
bool HasStoreMemtables(Table table);

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
// family, on `resources`' block cache and memtable budget, and with
// `memtables` for the tables HasStoreMemtables names (none: RocksDB's
// skiplists), keeping write-ahead log files RocksDB no longer needs for
// `keep_write_log_seconds` (RocksDbStoreOptions::keep_write_log; 0: none).
// Errors as ToStatus makes them, naming the path.
absl::StatusOr<std::shared_ptr<const OpenDatabase>> OpenRocksDb(
    const std::string& path, const RocksDbResources& resources,
    std::shared_ptr<StoreMemtables> memtables, uint64_t keep_write_log_seconds);

}  // namespace hourglass::storage

#endif  // HOURGLASS_STORAGE_ROCKSDB_OPEN_H_
