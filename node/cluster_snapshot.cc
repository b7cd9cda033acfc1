#include "node/cluster_snapshot.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "api/redirect.h"
#include "node/primary_gate.h"
#include "replication/log_entry.h"
#include "storage/rocksdb_store.h"

namespace hourglass::node {
namespace {

namespace fs = std::filesystem;

constexpr char kManifest[] = "CLUSTER_SNAPSHOT";
constexpr char kManifestTitle[] = "hourglass cluster snapshot";

// Writes `contents` to the new file `path` and syncs it.
absl::Status WriteSynced(const std::string& path, const std::string& contents) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  }
  const bool written = ::write(fd, contents.data(), contents.size()) ==
                           static_cast<ssize_t>(contents.size()) &&
                       ::fsync(fd) == 0;
  const int error = errno;
  ::close(fd);
  if (!written) {
    return absl::UnavailableError(
        absl::StrCat("cannot write ", path, ": ", std::strerror(error)));
  }
  return absl::OkStatus();
}

// The shard count of the manifest at `path`; DATA_LOSS if it is not one.
absl::StatusOr<int> ReadManifest(const std::string& path) {
  std::ifstream in(path);
  std::string title;
  std::string word;
  std::string count;
  std::getline(in, title);
  in >> word >> count;
  int shards = 0;
  const auto [end, error] =
      std::from_chars(count.data(), count.data() + count.size(), shards);
  if (!in || title != kManifestTitle || word != "shards" ||
      error != std::errc() || end != count.data() + count.size() ||
      shards < 1 || shards > ShardRouter::kMaxShards) {
    return absl::DataLossError(
        absl::StrCat(path, " is not a cluster snapshot's manifest (\"",
                     kManifestTitle, "\" and a line \"shards N\", N from 1 to ",
                     ShardRouter::kMaxShards, ")"));
  }
  return shards;
}

// Removes what a failed step left: `dir` itself if it did not exist
// before, or else its contents.
void Clean(const std::string& dir, bool existed) {
  std::error_code ignored;
  if (!existed) {
    fs::remove_all(dir, ignored);
    return;
  }
  for (const fs::directory_entry& entry :
       fs::directory_iterator(dir, ignored)) {
    fs::remove_all(entry.path(), ignored);
  }
}

// One SnapshotShards call: a shard at a time, each step started by the
// callback of the one before. Lives as long as a step holds it.
class SnapshotRun : public std::enable_shared_from_this<SnapshotRun> {
 public:
  using Done = broker::Broker::Callback<absl::StatusOr<broker::SnapshotInfo>>;

  SnapshotRun(const std::vector<PrimaryGate*>& gates,
              ShardRouter::Remote* remote, std::string dir, Done done)
      : gates_(gates),
        remote_(remote),
        dir_(std::move(dir)),
        done_(std::move(done)) {
    info_.dir = dir_;
    info_.format_version = storage::RocksDbStore::kFormatVersion;
    info_.started_at = absl::Now();
    info_.shards = static_cast<int>(gates_.size());
  }

  void Start() {
    const fs::path dir(dir_);
    std::error_code error;
    if (!dir.is_absolute()) {
      return Fail(absl::InvalidArgumentError(absl::StrCat(
          "snapshot directory ", dir_, " is not an absolute path")));
    }
    if (fs::exists(dir, error)) {
      return Fail(absl::AlreadyExistsError(
          absl::StrCat("snapshot directory ", dir_, " exists")));
    }
    if (!fs::is_directory(dir.parent_path(), error)) {
      return Fail(absl::NotFoundError(absl::StrCat(
          "the parent of snapshot directory ", dir_, " is not a directory")));
    }
    if (!fs::create_directories(dir / "shards", error)) {
      return Fail(absl::UnavailableError(
          absl::StrCat("cannot create ", dir_, "/shards: ", error.message())));
    }
    created_ = true;
    Step(0);
  }

 private:
  void Step(int shard) {
    if (shard == static_cast<int>(gates_.size())) return Finish();
    PrimaryGate* gate = gates_[shard];
    const std::string target = ShardDir(dir_, shard);
    const absl::Status refusal = gate->refusal();
    if (refusal.ok()) {
      gate->CreateSnapshot(
          target, [self = shared_from_this(),
                   shard](absl::StatusOr<broker::SnapshotInfo> written) {
            if (!written.ok()) return self->Fail(written.status(), shard);
            self->Add(written->files, written->bytes);
            self->Step(shard + 1);
          });
      return;
    }
    const std::optional<api::Primary> primary = api::PrimaryOf(refusal);
    if (remote_ == nullptr || !primary.has_value()) {
      // No primary to ask (a failover under way): its refusal says why,
      // and the call may be retried.
      return Fail(refusal, shard);
    }
    remote_->Checkpoint(primary->address, shard, target,
                        [self = shared_from_this(), shard](
                            absl::StatusOr<storage::CheckpointInfo> copied) {
                          if (!copied.ok())
                            return self->Fail(copied.status(), shard);
                          self->Add(copied->files, copied->bytes);
                          self->Step(shard + 1);
                        });
  }

  void Add(uint64_t files, uint64_t bytes) {
    info_.files += files;
    info_.bytes += bytes;
  }

  void Finish() {
    if (absl::Status s = WriteSynced(
            absl::StrCat(dir_, "/", kManifest),
            absl::StrCat(kManifestTitle, "\nshards ", gates_.size(), "\n"));
        !s.ok()) {
      return Fail(s);
    }
    info_.took = absl::Now() - info_.started_at;
    std::move(done_)(std::move(info_));
  }

  void Fail(const absl::Status& status, std::optional<int> shard = {}) {
    if (created_) Clean(dir_, /*existed=*/false);
    if (!shard.has_value()) return std::move(done_)(status);
    std::move(done_)(absl::Status(
        status.code(), absl::StrCat("shard ", *shard, " of ", gates_.size(),
                                    ": ", status.message())));
  }

  // Constant after construction.
  const std::vector<PrimaryGate*> gates_;
  ShardRouter::Remote* const remote_;
  const std::string dir_;

  // Used by one step at a time (each starts the next).
  Done done_;
  broker::SnapshotInfo info_;
  bool created_ = false;
};

// The newest epoch the store at `dir` holds writes of or accepted.
absl::StatusOr<int64_t> NewestEpoch(const std::string& dir) {
  absl::StatusOr<std::unique_ptr<storage::MessageStore>> store =
      storage::RocksDbStore::Open({.path = dir, .sync = false});
  if (!store.ok()) {
    return absl::UnavailableError(
        absl::StrCat("the copy restored in ", dir,
                     " does not open: ", store.status().message()));
  }
  absl::StatusOr<replication::LogPosition> position =
      replication::ReadPosition(**store);
  if (!position.ok()) return position.status();
  absl::StatusOr<int64_t> accepted = replication::ReadAcceptedEpoch(**store);
  if (!accepted.ok()) return accepted.status();
  return std::max(position->epoch, *accepted);
}

}  // namespace

std::string ShardDir(const std::string& dir, int shard) {
  return absl::StrCat(dir, "/shards/", shard);
}

void SnapshotShards(
    const std::vector<PrimaryGate*>& gates, ShardRouter::Remote* remote,
    std::string dir,
    broker::Broker::Callback<absl::StatusOr<broker::SnapshotInfo>> done) {
  std::make_shared<SnapshotRun>(gates, remote, std::move(dir), std::move(done))
      ->Start();
}

absl::StatusOr<RestoredCluster> RestoreClusterSnapshot(
    const std::string& snapshot, const std::string& data_dir, int shards) {
  std::error_code error;
  if (!fs::is_directory(snapshot, error)) {
    return absl::NotFoundError(
        absl::StrCat("snapshot ", snapshot, " is not a directory"));
  }
  const bool existed = fs::exists(data_dir, error);
  if (existed &&
      (!fs::is_directory(data_dir, error) || !fs::is_empty(data_dir, error))) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--data_dir ", data_dir,
        " is not empty: a restore goes into a new or empty data dir"));
  }
  // Where each shard's copy comes from.
  std::vector<std::string> sources;
  const std::string manifest = absl::StrCat(snapshot, "/", kManifest);
  if (fs::exists(manifest, error)) {
    absl::StatusOr<int> count = ReadManifest(manifest);
    if (!count.ok()) return count.status();
    for (int shard = 0; shard < *count; ++shard) {
      sources.push_back(ShardDir(snapshot, shard));
      if (!fs::is_directory(sources.back(), error)) {
        return absl::DataLossError(
            absl::StrCat("cluster snapshot ", snapshot, " of ", *count,
                         " shards lacks ", sources.back()));
      }
    }
  } else {
    sources.push_back(snapshot);  // One store: shard 0 of 1.
  }
  if (shards != 0 && static_cast<size_t>(shards) != sources.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("snapshot ", snapshot, " holds ", sources.size(), " shard",
                     sources.size() == 1 ? "" : "s", ", not --shards=", shards,
                     ": give no --shards to take the snapshot's"));
  }
  RestoredCluster restored;
  for (size_t shard = 0; shard < sources.size(); ++shard) {
    const std::string target = ShardDir(data_dir, static_cast<int>(shard));
    absl::Status copied;
    if (!fs::create_directories(fs::path(target).parent_path(), error) &&
        error) {
      copied = absl::UnavailableError(absl::StrCat(
          "cannot create ", data_dir, "/shards: ", error.message()));
    }
    if (copied.ok()) {
      copied = storage::RocksDbStore::Restore(sources[shard], target);
    }
    absl::StatusOr<int64_t> epoch =
        copied.ok() ? NewestEpoch(target) : absl::StatusOr<int64_t>(copied);
    if (!epoch.ok()) {
      Clean(data_dir, existed);
      if (sources.size() == 1) return epoch.status();
      return absl::Status(
          epoch.status().code(),
          absl::StrCat("shard ", shard, ": ", epoch.status().message()));
    }
    restored.epochs.push_back(*epoch);
    for (const fs::directory_entry& file :
         fs::recursive_directory_iterator(target, error)) {
      if (file.is_regular_file(error)) restored.bytes += file.file_size(error);
    }
  }
  return restored;
}

}  // namespace hourglass::node
