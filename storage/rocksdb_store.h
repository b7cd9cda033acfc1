#ifndef HOURGLASS_STORAGE_ROCKSDB_STORE_H_
#define HOURGLASS_STORAGE_ROCKSDB_STORE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "storage/message_store.h"

namespace hourglass::storage {

// What the stores of one process share when it hosts several (a cluster
// node's shards): one block cache, one budget for all their memtables, and
// RocksDB's pools of background threads (which every store of a process
// shares anyway: two flush and compaction threads in all, not per store).
// Without it, each store has a cache and a memtable budget of its own.
//
// Thread-safe. Stores keep it alive as long as they are open.
class RocksDbResources {
 public:
  struct Options {
    // The block cache of all the stores together. Default: 64 MiB.
    size_t block_cache_bytes = size_t{64} << 20;
    // Memtables of all the stores together; past it, the largest is
    // flushed. Default: 128 MiB.
    size_t write_buffer_bytes = size_t{128} << 20;
    // The blocks memtables take memory in (RocksDB's arena_block_size); 0
    // for RocksDB's default, an eighth of a memtable (2 to 4 MiB). The
    // write buffer budget counts whole blocks: stores of many shards need
    // small ones, or the blocks of their nearly empty memtables (10 tables
    // a store) fill the budget and keep it flushing. Default: 0.
    size_t arena_block_bytes = 0;
  };
  static std::shared_ptr<RocksDbResources> Create(const Options& options);
  ~RocksDbResources();

  // Bytes the block cache holds now, over every store.
  size_t block_cache_usage() const;
  // Bytes of memtables now, over every store.
  size_t memtable_usage() const;

  // RocksDB's objects; only storage/ sees inside.
  struct Parts;
  const Parts& parts() const { return *parts_; }

 private:
  explicit RocksDbResources(std::unique_ptr<Parts> parts);
  const std::unique_ptr<Parts> parts_;
};

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
  // Ignored with `shared`. Default: 64 MiB.
  size_t block_cache_bytes = size_t{64} << 20;

  // The cache and memtable budget to share with the process's other
  // stores. Default: none (a cache of block_cache_bytes and a memtable
  // budget of 128 MiB of the store's own).
  std::shared_ptr<RocksDbResources> shared;

  // Gives the tables memtables that follow SetWriteOnly
  // (storage/memtables.h), for a store that may be a backup's copy (cluster
  // mode): append memtables while write-only, skiplists otherwise, through
  // one more indirection per memtable call, and without concurrent
  // memtable writes. Without it, SetWriteOnly does nothing. Default: false.
  bool switchable_memtables = false;

  // How long the write-ahead log's files are kept once RocksDB no longer
  // needs them (their writes are in the tables), for
  // MessageStore::ReadWriteLog: a cluster node's shards keep theirs so that
  // backups behind a primary's memory catch up from its log on disk. They
  // take disk space of about the rate of writes times 1.5 times this
  // (RocksDB deletes them every half of it). Whole seconds; zero keeps
  // none, and the store then reads none back (ReadWriteLog is
  // UNIMPLEMENTED). Default: zero.
  absl::Duration keep_write_log = absl::ZeroDuration();

  // Called once Open has upgraded the data in place from an older format
  // version (`from`) to RocksDbStore::kFormatVersion, after the upgrade is
  // durable. Default: none.
  std::function<void(uint32_t from, uint32_t to)> on_upgrade;

  // Called while Open upgrades a data dir from format 3, which counts every
  // scheduled message once (storage/schedule_counts.h), with how many it
  // has counted so far: after each million. Default: none.
  std::function<void(uint64_t counted)> on_upgrade_progress;
};

// The production MessageStore: one RocksDB database, one column family per
// Table. The on-disk format is versioned (meta/format_version); the rules
// for upgrades and rollbacks are in storage/README.md.
class RocksDbStore {
 public:
  // The format this build writes. Format 3 added meta/store_id; format 4
  // the schedule_counts table.
  static constexpr uint32_t kFormatVersion = 4;
  // The oldest format this build opens; Open upgrades it in place to
  // kFormatVersion, after which older builds refuse the data dir.
  static constexpr uint32_t kOldestFormatVersion = 3;

  // Opens or creates the database in options.path. Errors name the path:
  //   FAILED_PRECONDITION  another process holds the directory's lock
  //                        (<path>/hourglassd.lock), that lock file or
  //                        RocksDB's <path>/LOCK is a symbolic link (never
  //                        followed), the data has a format version
  //                        outside [kOldestFormatVersion, kFormatVersion],
  //                        the path or a parent is not a directory, or the
  //                        directory is not an Hourglass store.
  //   PERMISSION_DENIED    the directory cannot be read or written.
  //   DATA_LOSS            the data is corrupt.
  //   UNAVAILABLE          another I/O error.
  static absl::StatusOr<std::unique_ptr<MessageStore>> Open(
      const RocksDbStoreOptions& options);

  // Copies a snapshot (a directory MessageStore::Checkpoint wrote, or a
  // copy of a stopped broker's data dir) into `data_dir`, which must be
  // missing or empty; a missing one is created with mode 0700. Open then
  // opens it (and checks its format). Errors, after which `data_dir` is as
  // it was:
  //   NOT_FOUND            `snapshot` is missing or holds no store (no
  //                        CURRENT file).
  //   FAILED_PRECONDITION  `data_dir` exists and is not an empty directory.
  //   UNAVAILABLE          an I/O error.
  static absl::Status Restore(const std::string& snapshot,
                              const std::string& data_dir);
};

// The operations of `encoded`, a write that WriteAllEncoded of a RocksDB
// store whose WriteEncoding() is `encoding` gave, as a batch that owns
// them: for a store that cannot write those bytes as they are (a store of
// another kind, or whose tables have other column family ids).
// INVALID_ARGUMENT for an encoding no RocksDB store names, or bytes that
// are not such a write.
absl::StatusOr<WriteBatch> DecodeRocksDbWrite(std::string_view encoding,
                                              std::string_view encoded);

}  // namespace hourglass::storage

#endif  // HOURGLASS_STORAGE_ROCKSDB_STORE_H_
