#ifndef HOURGLASS_STORAGE_DATA_DIR_H_
#define HOURGLASS_STORAGE_DATA_DIR_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// The data directory as RocksDbStore uses it: created with mode 0700,
// locked by one process at a time, never through a symbolic link. Internal
// to storage/ (rocksdb_store.cc); RocksDbStore::Restore, which copies a
// snapshot into one, is defined beside these (data_dir.cc).
namespace hourglass::storage {

// The error for a symbolic link found where a lock file goes: following
// it would let whoever planted it have a file of their choosing created or
// locked.
absl::Status SymlinkRefused(const std::string& path);

// Creates data dir `path` with mode 0700 if it does not exist, and its
// missing parents as the umask says; an existing one keeps its mode.
// Errors: PERMISSION_DENIED, or FAILED_PRECONDITION (say, a parent or the
// path itself is a file), naming the path.
absl::Status CreateDataDir(const std::string& path);

// Whether `path` is a symbolic link (false if it does not exist).
bool IsSymlink(const std::string& path);

// Holds an exclusive flock on <data dir>/hourglassd.lock for its lifetime.
class DataDirLock {
 public:
  // FAILED_PRECONDITION if another process (or another store in this one)
  // holds the lock, or the lock file is a symbolic link (never followed);
  // PERMISSION_DENIED or UNAVAILABLE if the file cannot be opened.
  static absl::StatusOr<std::unique_ptr<DataDirLock>> Acquire(
      const std::string& dir);

  DataDirLock(const DataDirLock&) = delete;
  DataDirLock& operator=(const DataDirLock&) = delete;
  ~DataDirLock();  // Closing the file releases the flock.

 private:
  explicit DataDirLock(int fd) : fd_(fd) {}
  const int fd_;
};

}  // namespace hourglass::storage

#endif  // HOURGLASS_STORAGE_DATA_DIR_H_
