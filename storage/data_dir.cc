#include "storage/data_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "storage/rocksdb_store.h"

namespace hourglass::storage {

absl::Status SymlinkRefused(const std::string& path) {
  return absl::FailedPreconditionError(
      absl::StrCat("cannot open ", path,
                   ": it is a symbolic link, which hourglassd does not follow "
                   "(remove it; the lock file is made afresh)"));
}

absl::Status CreateDataDir(const std::string& path) {
  std::filesystem::path dir = std::filesystem::path(path).lexically_normal();
  if (!dir.has_filename()) dir = dir.parent_path();  // "data/"
  std::error_code error;
  if (const std::filesystem::path parent = dir.parent_path(); !parent.empty()) {
    std::filesystem::create_directories(parent, error);
  }
  if (!error && mkdir(dir.c_str(), 0700) != 0) {
    error = std::error_code(errno, std::generic_category());
    struct stat st;
    if (error == std::errc::file_exists && stat(dir.c_str(), &st) == 0) {
      error = S_ISDIR(st.st_mode)
                  ? std::error_code()
                  : std::make_error_code(std::errc::not_a_directory);
    }
  }
  if (!error) return absl::OkStatus();
  const std::string message =
      absl::StrCat("cannot create data dir ", path, ": ", error.message());
  return error == std::errc::permission_denied
             ? absl::PermissionDeniedError(message)
             : absl::FailedPreconditionError(message);
}

bool IsSymlink(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

absl::StatusOr<std::unique_ptr<DataDirLock>> DataDirLock::Acquire(
    const std::string& dir) {
  const std::string path = dir + "/hourglassd.lock";
  const int fd =
      open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    const int error = errno;
    if (error == ELOOP) return SymlinkRefused(path);
    const std::string message =
        absl::StrCat("cannot open ", path, ": ", std::strerror(error));
    return error == EACCES ? absl::PermissionDeniedError(message)
                           : absl::UnavailableError(message);
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    close(fd);
    if (error == EWOULDBLOCK) {
      return absl::FailedPreconditionError(
          absl::StrCat("data dir ", dir, " is in use by another hourglassd (",
                       path, " is locked)"));
    }
    return absl::UnavailableError(
        absl::StrCat("cannot lock ", path, ": ", std::strerror(error)));
  }
  return std::unique_ptr<DataDirLock>(new DataDirLock(fd));
}

DataDirLock::~DataDirLock() { close(fd_); }

absl::Status RocksDbStore::Restore(const std::string& snapshot,
                                   const std::string& data_dir) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::is_regular_file(fs::path(snapshot) / "CURRENT", error)) {
    return absl::NotFoundError(absl::StrCat(
        "snapshot ", snapshot, " holds no Hourglass store (no CURRENT file)"));
  }
  const bool existed = fs::exists(data_dir, error);
  if (existed &&
      (!fs::is_directory(data_dir, error) || !fs::is_empty(data_dir, error))) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot restore into data dir ", data_dir,
        ": it is not an empty directory (restore needs a new or empty one)"));
  }
  if (absl::Status created = CreateDataDir(data_dir); !created.ok()) {
    return created;
  }
  // Copies every file but the locks and RocksDB's info logs, which belong
  // to the process that had the snapshot open; on failure, removes what it
  // copied.
  std::vector<fs::path> copied;
  auto fail = [&](const std::string& what) {
    for (const fs::path& path : copied) fs::remove(path, error);
    if (!existed) fs::remove(data_dir, error);
    return absl::UnavailableError(absl::StrCat("cannot restore ", snapshot,
                                               " into ", data_dir, ": ", what));
  };
  for (const fs::directory_entry& entry :
       fs::directory_iterator(snapshot, error)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file(error) || name == "LOCK" ||
        name == "hourglassd.lock" || name.starts_with("LOG")) {
      continue;
    }
    const fs::path to = fs::path(data_dir) / name;
    if (!fs::copy_file(entry.path(), to, error)) {
      return fail(absl::StrCat(name, ": ", error.message()));
    }
    copied.push_back(to);
  }
  if (error) return fail(error.message());
  return absl::OkStatus();
}

}  // namespace hourglass::storage
