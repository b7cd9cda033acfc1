#include "replication/checkpoint_fetch.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "replication/replication.grpc.pb.h"

namespace hourglass::replication {
namespace {

namespace v1 = ::hourglass::replication::v1;

// A file being written, synced and closed by Close.
class OutFile {
 public:
  OutFile() = default;
  OutFile(const OutFile&) = delete;
  OutFile& operator=(const OutFile&) = delete;
  ~OutFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  absl::Status Open(const std::filesystem::path& path) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd_ < 0) return Error("create", path);
    path_ = path;
    return absl::OkStatus();
  }
  absl::Status Append(const std::string& data) {
    size_t done = 0;
    while (done < data.size()) {
      const ssize_t n = ::write(fd_, data.data() + done, data.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Error("write", path_);
      done += static_cast<size_t>(n);
    }
    return absl::OkStatus();
  }
  absl::Status Close() {
    if (fd_ < 0) return absl::OkStatus();
    const bool synced = ::fsync(fd_) == 0;
    const int fd = std::exchange(fd_, -1);
    if (!synced || ::close(fd) != 0) return Error("sync", path_);
    return absl::OkStatus();
  }

 private:
  static absl::Status Error(const char* what,
                            const std::filesystem::path& path) {
    return absl::UnavailableError(absl::StrCat(
        "cannot ", what, " ", path.string(), ": ", std::strerror(errno)));
  }

  int fd_ = -1;
  std::filesystem::path path_;
};

absl::StatusOr<storage::CheckpointInfo> Fetch(
    std::shared_ptr<grpc::Channel> channel, int shard,
    const CheckpointAsker& asker, const std::filesystem::path& dir,
    absl::Duration timeout) {
  auto stub = v1::Replication::NewStub(std::move(channel));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  v1::FetchCheckpointRequest request;
  request.set_shard(shard);
  request.set_node(asker.node);
  request.set_snapshot(asker.snapshot);
  std::unique_ptr<grpc::ClientReader<v1::CheckpointChunk>> reader =
      stub->FetchCheckpoint(&context, request);
  storage::CheckpointInfo info;
  info.dir = dir.string();
  std::unique_ptr<OutFile> file;
  std::string current;
  v1::CheckpointChunk chunk;
  while (reader->Read(&chunk)) {
    if (chunk.file().empty() || chunk.file().find('/') != std::string::npos ||
        chunk.file() == "." || chunk.file() == "..") {
      context.TryCancel();
      (void)reader->Finish();
      return absl::UnavailableError(absl::StrCat(
          "the primary sent a checkpoint file named \"", chunk.file(), "\""));
    }
    if (file == nullptr || chunk.file() != current) {
      if (file != nullptr) {
        if (absl::Status s = file->Close(); !s.ok()) return s;
      }
      file = std::make_unique<OutFile>();
      if (absl::Status s = file->Open(dir / chunk.file()); !s.ok()) return s;
      current = chunk.file();
      ++info.files;
    }
    if (absl::Status s = file->Append(chunk.data()); !s.ok()) return s;
    info.bytes += chunk.data().size();
  }
  const grpc::Status status = reader->Finish();
  if (!status.ok()) {
    return absl::Status(
        static_cast<absl::StatusCode>(status.error_code()),
        absl::StrCat("fetching the checkpoint: ", status.error_message()));
  }
  if (file == nullptr) {
    return absl::UnavailableError("the primary sent an empty checkpoint");
  }
  if (absl::Status s = file->Close(); !s.ok()) return s;
  if (info.files == 0) {
    return absl::UnavailableError("the primary sent an empty checkpoint");
  }
  return info;
}

}  // namespace

absl::StatusOr<storage::CheckpointInfo> FetchCheckpoint(
    std::shared_ptr<grpc::Channel> channel, int shard,
    const CheckpointAsker& asker, const std::string& dir,
    absl::Duration timeout) {
  std::error_code error;
  if (std::filesystem::exists(dir, error)) {
    return absl::AlreadyExistsError(absl::StrCat(dir, " exists"));
  }
  if (!std::filesystem::create_directory(dir, error)) {
    return absl::UnavailableError(
        absl::StrCat("cannot create ", dir, ": ", error.message()));
  }
  absl::StatusOr<storage::CheckpointInfo> info =
      Fetch(std::move(channel), shard, asker, dir, timeout);
  if (!info.ok()) std::filesystem::remove_all(dir, error);
  return info;
}

}  // namespace hourglass::replication
