#include "replication/replication_service.h"

#include <pthread.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "replication/replicated_store.h"
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
  Impl(int shards, CallerCheck check, absl::Duration checkpoint_time_limit)
      : check_(std::move(check)),
        checkpoint_time_limit_(checkpoint_time_limit),
        shards_(static_cast<uint32_t>(shards)),
        slots_(static_cast<size_t>(shards)) {}

  void SetRecordChecks(HelloCheck hello, FetchCheck fetch) {
    hello_check_ = std::move(hello);
    fetch_check_ = std::move(fetch);
  }

  void SetReplica(int shard, Replica* replica) {
    absl::MutexLock lock(&mu_);
    Slot& slot = slots_[shard];
    slot.replica = replica;
    // Wait until no stream is inside the old one.
    mu_.Await(absl::Condition(
        +[](int* users) { return *users == 0; }, &slot.users));
  }

  void SetSource(int shard, ReplicatedStore* store,
                 const std::string& scratch) {
    absl::MutexLock lock(&mu_);
    Slot& slot = slots_[shard];
    slot.source = store;
    slot.scratch = scratch;
    mu_.Await(absl::Condition(
        +[](int* users) { return *users == 0; }, &slot.users));
  }

  void SetRebuildHandler(int shard,
                         absl::AnyInvocable<void(std::string)> handler) {
    absl::MutexLock lock(&mu_);
    slots_[shard].on_rebuild = std::move(handler);
  }

  grpc::Status FetchCheckpoint(
      grpc::ServerContext* context, const v1::FetchCheckpointRequest* request,
      grpc::ServerWriter<v1::CheckpointChunk>* writer) override {
    if (absl::Status let_in = LetIn(*context); !let_in.ok()) {
      return ToGrpc(let_in);
    }
    if (absl::Status known = Known(request->shard()); !known.ok()) {
      return ToGrpc(known);
    }
    const int shard = static_cast<int>(request->shard());
    if (fetch_check_) {
      if (absl::Status may =
              fetch_check_(shard, request->node(), request->snapshot());
          !may.ok()) {
        return ToGrpc(may);
      }
    }
    Use use(this, shard);
    if (use.source == nullptr) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          absl::StrCat("this node is not the primary of shard ",
                                       request->shard()));
    }
    // One checkpoint of a shard at a time: each pins the store's files
    // while it streams.
    {
      absl::MutexLock lock(&mu_);
      std::string& sending = slots_[shard].sending_to;
      if (!sending.empty()) {
        return grpc::Status(
            grpc::StatusCode::UNAVAILABLE,
            absl::StrCat("a checkpoint of shard ", shard, " is being sent to ",
                         sending, "; try again later"));
      }
      sending = request->node().empty() ? context->peer() : request->node();
    }
    struct Done {
      ~Done() {
        absl::MutexLock lock(&impl->mu_);
        impl->slots_[shard].sending_to.clear();
      }
      Impl* impl;
      int shard;
    } done{this, shard};
    const absl::Time deadline = absl::Now() + checkpoint_time_limit_;
    std::random_device random;
    const std::filesystem::path dir =
        std::filesystem::path(use.scratch) /
        absl::StrCat("checkpoint-", request->shard(), "-", random());
    // The backup catches up from the log once it has the copy: the log's
    // files stay until the copy is sent, and then until the backup has
    // caught up with what was written meanwhile (at most the time limit).
    std::unique_ptr<storage::MessageStore::WriteLogHold> hold =
        use.source->HoldWriteLog();
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
        } else if (absl::Now() > deadline) {
          status = grpc::Status(
              grpc::StatusCode::DEADLINE_EXCEEDED,
              absl::StrCat("sending the checkpoint of shard ", shard,
                           " took longer than ",
                           absl::FormatDuration(checkpoint_time_limit_)));
        }
        if (got < static_cast<std::streamsize>(buffer.size())) break;
      }
      if (!status.ok()) break;
    }
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
    if (status.ok()) {
      if (!request->snapshot() && !request->node().empty()) {
        use.source->KeepLogFor(request->node(), std::move(hold),
                               absl::Now() + checkpoint_time_limit_);
      }
      absl::MutexLock lock(&mu_);
      ++slots_[request->shard()].checkpoints_sent;
    }
    return status;
  }

  void SetStatsHandler(StatsHandler handler) { stats_ = std::move(handler); }

  grpc::Status GetShardStats(grpc::ServerContext* context,
                             const v1::ShardStatsRequest* request,
                             v1::ShardStatsResponse* response) override {
    if (absl::Status let_in = LetIn(*context); !let_in.ok()) {
      return ToGrpc(let_in);
    }
    for (int32_t shard : request->shards()) {
      if (shard < 0) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            absl::StrCat("shard ", shard, " does not exist"));
      }
      if (absl::Status known = Known(static_cast<uint32_t>(shard));
          !known.ok()) {
        return ToGrpc(known);
      }
    }
    if (!stats_) {
      return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                          "this node answers no shard stats");
    }
    return ToGrpc(stats_(*request, response));
  }

  uint64_t checkpoints_sent(int shard) const {
    absl::MutexLock lock(&mu_);
    return slots_[shard].checkpoints_sent;
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
    if (absl::Status known = Known(hello.shard()); !known.ok()) {
      return ToGrpc(known);
    }
    const int shard = static_cast<int>(hello.shard());
    if (hello_check_) {
      if (absl::Status confirmed =
              hello_check_(shard, hello.epoch(), hello.primary());
          !confirmed.ok()) {
        return ToGrpc(confirmed);
      }
    }
    absl::Mutex answer_mu;
    {
      Use use(this, shard);
      if (use.replica == nullptr) {
        return grpc::Status(
            grpc::StatusCode::FAILED_PRECONDITION,
            absl::StrCat("this node holds no backup copy of shard ", shard));
      }
      if (absl::Status s = use.replica->Accept(hello.epoch()); !s.ok()) {
        return ToGrpc(s);
      }
      if (!Answer(*use.replica, stream, &answer_mu)) return grpc::Status::OK;
    }
    spdlog::info("replication: following primary {} of shard {} at epoch {}",
                 hello.primary(), hello.shard(), hello.epoch());
    // What is applied is answered at once (the primary's writes wait for
    // that); the syncer syncs on a thread of its own and answers again
    // (the primary's syncs wait for that), so neither the primary's next
    // writes nor this stream's next applies wait for this node's fsync.
    StreamSyncer syncer(this, shard, context, stream, &answer_mu);
    // An entry coming in pieces (entry_part), until its last.
    std::string assembled;
    while (stream->Read(&request)) {
      if (context->IsCancelled()) break;
      if (request.rebuild()) {
        const std::string why =
            absl::StrCat("primary ", hello.primary(), " (epoch ", hello.epoch(),
                         ") says this copy cannot follow its log");
        // Inside a Use: whoever unsets the replica next waits for it.
        Use use(this, shard);
        if (use.replica != nullptr && use.on_rebuild != nullptr) {
          (*use.on_rebuild)(why);
        }
        return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                            "rebuilding from the primary's checkpoint");
      }
      // A piece of an entry too large for one request: kept until the
      // last piece completes it.
      const bool part = request.more_parts() || !request.entry_part().empty();
      if (part) {
        assembled.append(request.entry_part());
        if (request.more_parts()) continue;
      } else if (!assembled.empty()) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            "entries came before the last piece of an entry "
                            "sent in pieces");
      }
      std::vector<LogEntry> entries;
      entries.reserve(part ? 1 : request.entries_size());
      auto decode = [&entries](const std::string& bytes) {
        absl::StatusOr<LogEntry> entry = DecodeEntry(bytes);
        if (!entry.ok()) return entry.status();
        entries.push_back(*std::move(entry));
        return absl::OkStatus();
      };
      if (part) {
        if (absl::Status s = decode(assembled); !s.ok()) return ToGrpc(s);
      }
      for (const std::string& bytes : request.entries()) {
        if (absl::Status s = decode(bytes); !s.ok()) return ToGrpc(s);
      }
      Use use(this, shard);
      if (use.replica == nullptr) {
        return grpc::Status(
            grpc::StatusCode::FAILED_PRECONDITION,
            absl::StrCat("this node no longer holds a backup copy of shard ",
                         shard));
      }
      // The entries view the request's bytes, which live until the next
      // Read, or the assembled entry's.
      const absl::Status s = use.replica->Write(hello.epoch(), entries);
      assembled.clear();
      if (!s.ok()) {
        spdlog::warn(
            "replication: refused entries of primary {} (epoch {}): {}",
            hello.primary(), hello.epoch(), std::string(s.message()));
        return ToGrpc(s);
      }
      if (!Answer(*use.replica, stream, &answer_mu)) break;
      syncer.Applied();
    }
    // A failed sync cancels the stream (its Read returns false): say why.
    const absl::Status failed = syncer.Stop();
    if (!failed.ok()) return ToGrpc(failed);
    return grpc::Status::OK;
  }

 private:
  using Stream =
      grpc::ServerReaderWriter<v1::ReplicateResponse, v1::ReplicateRequest>;

  // A stream's syncer: a thread that syncs the replica once the stream
  // applied entries since its last sync, and answers with the positions.
  // Syncs group: whatever is applied while one runs is synced by the next.
  // A failed sync cancels the stream (its status is Stop's). Used by the
  // stream's thread only (the syncer's own thread aside).
  class StreamSyncer {
   public:
    StreamSyncer(Impl* impl, int shard, grpc::ServerContext* context,
                 Stream* stream, absl::Mutex* answer_mu)
        : impl_(impl),
          shard_(shard),
          context_(context),
          stream_(stream),
          answer_mu_(answer_mu),
          thread_([this] { Run(); }) {}
    ~StreamSyncer() { (void)Stop(); }

    // The stream applied entries: sync them.
    void Applied() {
      absl::MutexLock lock(&mu_);
      pending_ = true;
    }
    // Ends the thread (a sync under way finishes first); the error of a
    // failed sync, if one failed. Idempotent.
    absl::Status Stop() {
      {
        absl::MutexLock lock(&mu_);
        stopping_ = true;
      }
      if (thread_.joinable()) thread_.join();
      absl::MutexLock lock(&mu_);
      return failed_;
    }

   private:
    void Run() {
      pthread_setname_np(pthread_self(), "hg-backup-sync");
      while (true) {
        {
          absl::MutexLock lock(&mu_);
          mu_.Await(absl::Condition(
              +[](StreamSyncer* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu_) {
                return s->stopping_ || s->pending_;
              },
              this));
          if (stopping_) return;
          pending_ = false;
        }
        Use use(impl_, shard_);
        absl::Status s = use.replica == nullptr
                             ? absl::FailedPreconditionError(
                                   "this node no longer holds a backup copy")
                             : use.replica->Sync();
        if (s.ok()) {
          if (!Answer(*use.replica, stream_, answer_mu_)) return;
          continue;
        }
        spdlog::warn("replication: sync failed, ending the stream: {}",
                     std::string(s.message()));
        absl::MutexLock lock(&mu_);
        failed_ = std::move(s);
        context_->TryCancel();
        return;
      }
    }

    Impl* const impl_;
    const int shard_;
    grpc::ServerContext* const context_;
    Stream* const stream_;
    absl::Mutex* const answer_mu_;
    absl::Mutex mu_;
    bool pending_ ABSL_GUARDED_BY(mu_) = false;
    bool stopping_ ABSL_GUARDED_BY(mu_) = false;
    absl::Status failed_ ABSL_GUARDED_BY(mu_);
    // Last: starts once the fields above exist.
    std::thread thread_;
  };

  // What the service holds of one shard.
  struct Slot {
    Replica* replica = nullptr;
    ReplicatedStore* source = nullptr;
    std::string scratch;
    absl::AnyInvocable<void(std::string)> on_rebuild;
    // Calls inside replica or source now.
    int users = 0;
    // Checkpoints FetchCheckpoint sent in full.
    uint64_t checkpoints_sent = 0;
    // Whom a checkpoint is being sent to; empty while none is.
    std::string sending_to;
  };

  // A call's use of a shard's replica or source, counted so that
  // SetReplica and SetSource can wait. REQUIRES: Known(shard).
  struct Use {
    Use(Impl* impl, int shard) : impl(impl), shard(shard) {
      absl::MutexLock lock(&impl->mu_);
      Slot& slot = impl->slots_[shard];
      replica = slot.replica;
      source = slot.source;
      scratch = slot.scratch;
      if (slot.on_rebuild) on_rebuild = &slot.on_rebuild;
      ++slot.users;
    }
    ~Use() {
      absl::MutexLock lock(&impl->mu_);
      --impl->slots_[shard].users;
    }
    Impl* impl;
    int shard;
    Replica* replica;
    ReplicatedStore* source;
    std::string scratch;
    // Stays put while the use lasts: set before the shard's first replica.
    absl::AnyInvocable<void(std::string)>* on_rebuild = nullptr;
  };

  // OK for a shard this service serves; INVALID_ARGUMENT otherwise.
  absl::Status Known(uint32_t shard) const {
    if (shard < shards_) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("shard ", shard, " does not exist: this cluster has ",
                     shards_, " shards (0 to ", shards_ - 1, ")"));
  }

  // Sends the replica's positions. The stream's two threads answer under
  // `answer_mu`, which also orders the answers as the positions were read:
  // the primary never hears a position go back.
  static bool Answer(const Replica& replica, Stream* stream,
                     absl::Mutex* answer_mu) {
    absl::MutexLock lock(answer_mu);
    v1::ReplicateResponse response;
    ToProto(replica.applied(), response.mutable_applied());
    ToProto(replica.durable(), response.mutable_durable());
    response.set_entry_format(kEntryFormat);
    return stream->Write(response);
  }

  // The caller check's verdict on `context`.
  absl::Status LetIn(const grpc::ServerContext& context) const {
    return check_ ? check_(context) : absl::OkStatus();
  }

  // Constant after construction.
  const CallerCheck check_;
  const absl::Duration checkpoint_time_limit_;
  const uint32_t shards_;
  // Set before the service is served (SetStatsHandler, SetRecordChecks).
  StatsHandler stats_;
  HelloCheck hello_check_;
  FetchCheck fetch_check_;

  mutable absl::Mutex mu_;
  // One per shard (shards_ of them).
  std::vector<Slot> slots_ ABSL_GUARDED_BY(mu_);
};

ReplicationService::ReplicationService(int shards, CallerCheck check,
                                       absl::Duration checkpoint_time_limit)
    : impl_(std::make_unique<Impl>(shards, std::move(check),
                                   checkpoint_time_limit)) {}
ReplicationService::~ReplicationService() = default;

void ReplicationService::SetReplica(int shard, Replica* replica) {
  impl_->SetReplica(shard, replica);
}

void ReplicationService::SetSource(int shard, ReplicatedStore* store,
                                   const std::string& scratch_dir) {
  impl_->SetSource(shard, store, scratch_dir);
}

void ReplicationService::SetRebuildHandler(
    int shard, absl::AnyInvocable<void(std::string why)> handler) {
  impl_->SetRebuildHandler(shard, std::move(handler));
}

void ReplicationService::SetStatsHandler(StatsHandler handler) {
  impl_->SetStatsHandler(std::move(handler));
}

void ReplicationService::SetRecordChecks(HelloCheck hello, FetchCheck fetch) {
  impl_->SetRecordChecks(std::move(hello), std::move(fetch));
}

uint64_t ReplicationService::checkpoints_sent(int shard) const {
  return impl_->checkpoints_sent(shard);
}

grpc::Service* ReplicationService::service() { return impl_.get(); }

}  // namespace hourglass::replication
