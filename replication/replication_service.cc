#include "replication/replication_service.h"

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
  void SetReplica(Replica* replica) {
    absl::MutexLock lock(&mu_);
    replica_ = replica;
    // Wait until no stream is inside the old one.
    mu_.Await(absl::Condition(
        +[](int* users) { return *users == 0; }, &users_));
  }

  grpc::Status Replicate(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::ReplicateResponse, v1::ReplicateRequest>*
          stream) override {
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
      if (absl::Status s = use.replica->Apply(hello.epoch(), std::move(entries));
          !s.ok()) {
        spdlog::warn("replication: refused entries of primary {} (epoch {}): {}",
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
      ++impl->users_;
    }
    ~Use() {
      absl::MutexLock lock(&impl->mu_);
      --impl->users_;
    }
    Impl* impl;
    Replica* replica;
  };

  static bool Answer(
      const Replica& replica,
      grpc::ServerReaderWriter<v1::ReplicateResponse, v1::ReplicateRequest>*
          stream) {
    v1::ReplicateResponse response;
    ToProto(replica.applied(), response.mutable_applied());
    ToProto(replica.durable(), response.mutable_durable());
    return stream->Write(response);
  }

  absl::Mutex mu_;
  Replica* replica_ ABSL_GUARDED_BY(mu_) = nullptr;
  int users_ ABSL_GUARDED_BY(mu_) = 0;
};

ReplicationService::ReplicationService() : impl_(std::make_unique<Impl>()) {}
ReplicationService::~ReplicationService() = default;

void ReplicationService::SetReplica(Replica* replica) {
  impl_->SetReplica(replica);
}

grpc::Service* ReplicationService::service() { return impl_.get(); }

}  // namespace hourglass::replication
