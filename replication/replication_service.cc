#include "replication/replication_service.h"

#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "replication/replication.grpc.pb.h"
#include "spdlog/spdlog.h"

namespace hourglass::replication {
namespace {

namespace v1 = ::hourglass::replication::v1;

grpc::Status ToGrpc(const absl::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

void ToProto(LogPosition position, v1::Position* out) {
  out->set_epoch(position.epoch);
  out->set_index(position.index);
}

}  // namespace

class ReplicationService::Impl final : public v1::Replication::Service {
 public:
  explicit Impl(CallerCheck check) : check_(std::move(check)) {}

  void SetReplica(Replica* replica) {
    absl::MutexLock lock(&mu_);
    replica_ = replica;
    // Wait until no stream is inside the old one.
    mu_.Await(absl::Condition(
        +[](int* users) { return *users == 0; }, &users_));
  }

  void SetSource(storage::MessageStore* store, const std::string& scratch) {
    absl::MutexLock lock(&mu_);
    source_ = store;
    scratch_ = scratch;
    mu_.Await(absl::Condition(
        +[](int* users) { return *users == 0; }, &users_));
  }

  void SetRebuildHandler(absl::AnyInvocable<void(std::string)> handler) {
    absl::MutexLock lock(&mu_);
    on_rebuild_ = std::move(handler);
  }

  grpc::Status FetchCheckpoint(
      grpc::ServerContext* context, const v1::FetchCheckpointRequest* request,
      grpc::ServerWriter<v1::CheckpointChunk>* writer) override {
    if (absl::Status let_in = LetIn(*context); !let_in.ok()) {
      return ToGrpc(let_in);
    }
    Use use(this);
    if (use.source == nullptr) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "this node is not the primary of the shard");
    }
    std::random_device random;
    const std::filesystem::path dir =
        std::filesystem::path(use.scratch) /
        absl::StrCat("checkpoint-", request->shard(), "-", random());
    absl::StatusOr<storage::CheckpointInfo> made =
        use.source->Checkpoint(dir.string());
    if (!made.ok()) return ToGrpc(made.status());
    spdlog::info(
        "replication: sending a checkpoint of shard {} ({} files, "
        "{} bytes) to {}",
        request->shard(), made->files, made->bytes, context->peer());
    grpc::Status status = grpc::Status::OK;
    std::vector<char> buffer(1 << 20);
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (!entry.is_regular_file()) continue;
      std::ifstream in(entry.path(), std::ios::binary);
      bool first = true;
      while (in && status.ok()) {
        in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
        const std::streamsize got = in.gcount();
        if (got <= 0 && !first) break;
        v1::CheckpointChunk chunk;
        chunk.set_file(entry.path().filename().string());
        chunk.set_data(buffer.data(),
                       static_cast<size_t>(std::max<std::streamsize>(got, 0)));
        first = false;
        if (!writer->Write(chunk)) {
          status = grpc::Status(grpc::StatusCode::CANCELLED,
                                "the backup stopped reading");
        }
        if (got < static_cast<std::streamsize>(buffer.size())) break;
      }
      if (!status.ok()) break;
    }
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
    if (status.ok()) checkpoints_sent_.fetch_add(1, std::memory_order_relaxed);
    return status;
  }

  uint64_t checkpoints_sent() const {
    return checkpoints_sent_.load(std::memory_order_relaxed);
  }

  grpc::Status Replicate(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::ReplicateResponse, v1::ReplicateRequest>*
          stream) override {
    if (absl::Status let_in = LetIn(*context); !let_in.ok()) {
      return ToGrpc(let_in);
    }
    v1::ReplicateRequest request;
    if (!stream->Read(&request)) return grpc::Status::OK;
    if (!request.has_hello()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "the first request must hold a hello");
    }
    const v1::Hello hello = request.hello();
    {
      Use use(this);
      if (use.replica == nullptr) {
        return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                            "this node holds no backup copy of the shard");
      }
      if (absl::Status s = use.replica->Accept(hello.epoch()); !s.ok()) {
        return ToGrpc(s);
      }
      if (!Answer(*use.replica, stream)) return grpc::Status::OK;
    }
    spdlog::info("replication: following primary {} of shard {} at epoch {}",
                 hello.primary(), hello.shard(), hello.epoch());
    while (stream->Read(&request)) {
      if (context->IsCancelled()) break;
      if (request.rebuild()) {
        const std::string why =
            absl::StrCat("primary ", hello.primary(), " (epoch ", hello.epoch(),
                         ") says this copy cannot follow its log");
        // Inside a Use: whoever unsets the replica next waits for it.
        Use use(this);
        if (use.replica != nullptr && on_rebuild_) on_rebuild_(why);
        return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                            "rebuilding from the primary's checkpoint");
      }
      std::vector<LogEntry> entries;
      entries.reserve(request.entries_size());
      for (const std::string& bytes : request.entries()) {
        absl::StatusOr<LogEntry> entry = DecodeEntry(bytes);
        if (!entry.ok()) return ToGrpc(entry.status());
        entries.push_back(*std::move(entry));
      }
      Use use(this);
      if (use.replica == nullptr) {
        return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                            "this node no longer holds a backup copy");
      }
      // What is applied is answered at once (the primary's writes wait
      // for that), then again once synced (its syncs wait for that): the
      // primary's next writes need not wait for this node's fsync.
      absl::Status s = use.replica->Write(hello.epoch(), std::move(entries));
      if (s.ok() && !Answer(*use.replica, stream)) break;
      if (s.ok()) s = use.replica->Sync();
      if (!s.ok()) {
        spdlog::warn(
            "replication: refused entries of primary {} (epoch {}): {}",
            hello.primary(), hello.epoch(), std::string(s.message()));
        return ToGrpc(s);
      }
      if (!Answer(*use.replica, stream)) break;
    }
    return grpc::Status::OK;
  }

 private:
  // A stream's use of the replica, counted so that SetReplica can wait.
  struct Use {
    explicit Use(Impl* impl) : impl(impl) {
      absl::MutexLock lock(&impl->mu_);
      replica = impl->replica_;
      source = impl->source_;
      scratch = impl->scratch_;
      ++impl->users_;
    }
    ~Use() {
      absl::MutexLock lock(&impl->mu_);
      --impl->users_;
    }
    Impl* impl;
    Replica* replica;
    storage::MessageStore* source;
    std::string scratch;
  };

  static bool Answer(const Replica& replica,
                     grpc::ServerReaderWriter<v1::ReplicateResponse,
                                              v1::ReplicateRequest>* stream) {
    v1::ReplicateResponse response;
    ToProto(replica.applied(), response.mutable_applied());
    ToProto(replica.durable(), response.mutable_durable());
    return stream->Write(response);
  }

  // The caller check's verdict on `context`.
  absl::Status LetIn(const grpc::ServerContext& context) const {
    return check_ ? check_(context) : absl::OkStatus();
  }

  // Constant after construction.
  const CallerCheck check_;

  absl::Mutex mu_;
  Replica* replica_ ABSL_GUARDED_BY(mu_) = nullptr;
  storage::MessageStore* source_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::string scratch_ ABSL_GUARDED_BY(mu_);
  // Set once at start-up, before streams (SetRebuildHandler).
  absl::AnyInvocable<void(std::string)> on_rebuild_;
  std::atomic<uint64_t> checkpoints_sent_{0};
  int users_ ABSL_GUARDED_BY(mu_) = 0;
};

ReplicationService::ReplicationService(CallerCheck check)
    : impl_(std::make_unique<Impl>(std::move(check))) {}
ReplicationService::~ReplicationService() = default;

void ReplicationService::SetReplica(Replica* replica) {
  impl_->SetReplica(replica);
}

void ReplicationService::SetSource(storage::MessageStore* store,
                                   const std::string& scratch_dir) {
  impl_->SetSource(store, scratch_dir);
}

void ReplicationService::SetRebuildHandler(
    absl::AnyInvocable<void(std::string why)> handler) {
  impl_->SetRebuildHandler(std::move(handler));
}

uint64_t ReplicationService::checkpoints_sent() const {
  return impl_->checkpoints_sent();
}

grpc::Service* ReplicationService::service() { return impl_.get(); }

}  // namespace hourglass::replication
