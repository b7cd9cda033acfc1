#ifndef HOURGLASS_STORAGE_ROCKSDB_STORE_H_
#define HOURGLASS_STORAGE_ROCKSDB_STORE_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "storage/message_store.h"

namespace hourglass::storage {

struct RocksDbStoreOptions {
  // Data directory; created with mode 0700 if missing (its missing parents
  // as the umask says). An existing one keeps its mode. Required.
  std::string path;

  // true (--durability=sync, the default): SyncLog fsyncs the write-ahead
  // log, so what it covers survives power loss. false (--durability=async):
  // SyncLog does nothing; writes reach the OS, so they survive a crash of
  // hourglassd but not of the machine.
  bool sync = true;

  // Size of the block cache shared by all tables (--block_cache_mb).
  // Default: 64 MiB.
  size_t block_cache_bytes = size_t{64} << 20;
};

// The production MessageStore: one RocksDB database, one column family per
// Table. The on-disk format is versioned (meta/format_version).
class RocksDbStore {
 public:
  // The format this build reads and writes.
  static constexpr uint32_t kFormatVersion = 2;

  // Opens or creates the database in options.path. Errors name the path:
  //   FAILED_PRECONDITION  another process holds the directory's lock
  //                        (<path>/hourglassd.lock), that lock file or
  //                        RocksDB's <path>/LOCK is a symbolic link (never
  //                        followed), the data has another format version,
  //                        the path or a parent is not a directory, or the
  //                        directory is not an Hourglass store.
  //   PERMISSION_DENIED    the directory cannot be read or written.
  //   DATA_LOSS            the data is corrupt.
  //   UNAVAILABLE          another I/O error.
  static absl::StatusOr<std::unique_ptr<MessageStore>> Open(
      const RocksDbStoreOptions& options);
};

}  // namespace hourglass::storage

#endif  // HOURGLASS_STORAGE_ROCKSDB_STORE_H_
