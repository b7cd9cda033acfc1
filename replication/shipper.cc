#include "replication/shipper.h"

#include <pthread.h>

#include <algorithm>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "replication/replication.grpc.pb.h"
#include "spdlog/spdlog.h"

namespace hourglass::replication {
namespace {

namespace v1 = ::hourglass::replication::v1;

LogPosition FromProto(const v1::Position& p) {
  return LogPosition{p.epoch(), p.index()};
}

absl::Status FromGrpc(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

// How long ReadFrom waits for new entries before checking for stop.
constexpr absl::Duration kPoll = absl::Milliseconds(100);

}  // namespace

Shipper::Shipper(ReplicatedStore* store, std::shared_ptr<grpc::Channel> channel,
                 ShipperOptions options)
    : store_(store),
      channel_(std::move(channel)),
      options_(std::move(options)) {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "hg-shipper");
    Run();
  });
}

Shipper::~Shipper() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    if (context_ != nullptr) context_->TryCancel();
  }
  thread_.join();
}

std::string Shipper::needs_rebuild() const {
  absl::MutexLock lock(&mu_);
  return needs_rebuild_;
}

absl::Status Shipper::last_error() const {
  absl::MutexLock lock(&mu_);
  return last_error_;
}

void Shipper::Run() {
  absl::Status logged;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
    }
    absl::Status ended = Stream();
    store_->Disconnected(options_.backup);
    {
      absl::MutexLock lock(&mu_);
      last_error_ = ended;
      if (stopping_) return;
    }
    if (!ended.ok() && ended != logged) {
      spdlog::warn("replication: shipping shard {} to {} ({}): {}",
                   options_.shard, options_.backup, options_.address,
                   std::string(ended.message()));
    }
    logged = ended;
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.retry_delay);
  }
}

void Shipper::AskToRebuild(
    grpc::ClientReaderWriterInterface<v1::ReplicateRequest,
                                      v1::ReplicateResponse>& stream,
    const std::string& why) {
  spdlog::warn(
      "replication: backup {} of shard {} must be rebuilt from a "
      "checkpoint: {}",
      options_.backup, options_.shard, why);
  v1::ReplicateRequest request;
  request.set_rebuild(true);
  stream.Write(request);
  stream.WritesDone();
}

bool Shipper::SendInParts(
    grpc::ClientReaderWriterInterface<v1::ReplicateRequest,
                                      v1::ReplicateResponse>& stream,
    const std::string& entry) {
  const size_t part = std::max<size_t>(options_.max_request_bytes, 1);
  for (size_t offset = 0; offset < entry.size(); offset += part) {
    v1::ReplicateRequest request;
    request.set_entry_part(entry.substr(offset, part));
    request.set_more_parts(offset + part < entry.size());
    if (!stream.Write(request)) return false;
  }
  return true;
}

absl::Status Shipper::Stream() {
  auto stub = v1::Replication::NewStub(channel_);
  grpc::ClientContext context;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::CancelledError("stopping");
    context_ = &context;
  }
  struct Unset {
    ~Unset() {
      absl::MutexLock lock(&shipper->mu_);
      shipper->context_ = nullptr;
    }
    Shipper* shipper;
  } unset{this};

  auto stream = stub->Replicate(&context);
  v1::ReplicateRequest hello;
  hello.mutable_hello()->set_shard(options_.shard);
  hello.mutable_hello()->set_epoch(store_->epoch());
  hello.mutable_hello()->set_primary(options_.primary);
  v1::ReplicateResponse response;
  if (!stream->Write(hello) || !stream->Read(&response)) {
    return FromGrpc(stream->Finish());
  }
  if (response.entry_format() != kEntryFormat) {
    context.TryCancel();
    (void)stream->Finish();
    return absl::FailedPreconditionError(
        absl::StrCat("it reads log entries of format ", response.entry_format(),
                     ", this primary writes format ", kEntryFormat,
                     ": run the same hourglassd release on every node"));
  }
  // The copy's position counts as progress only once it is known to be on
  // this log: a copy that took another primary's entry at some index must
  // not count as holding this log's entry there.
  LogPosition applied = FromProto(response.applied());
  absl::StatusOr<bool> diverged = store_->Diverged(applied);
  if (!diverged.ok()) return diverged.status();
  if (*diverged) {
    const std::string why = absl::StrCat(
        "its copy ends at entry ", applied.index, " of epoch ", applied.epoch,
        ", which this primary's log (at ", store_->last().index,
        ") does not hold: it diverged and must be rebuilt");
    {
      absl::MutexLock lock(&mu_);
      needs_rebuild_ = why;
    }
    AskToRebuild(*stream, why);
    (void)stream->Finish();
    return absl::FailedPreconditionError(why);
  }
  {
    absl::MutexLock lock(&mu_);
    needs_rebuild_.clear();
  }
  store_->ReportProgress(options_.backup, applied,
                         FromProto(response.durable()));
  spdlog::info("replication: shipping shard {} to {} from entry {}",
               options_.shard, options_.backup, applied.index + 1);

  // Answers come on a thread of their own, so that requests need not wait
  // for them: the backup answers each request once applied, and again
  // after each of its syncs, and reports go to the store as they come.
  {
    absl::MutexLock lock(&mu_);
    answered_ = applied.index;
    reader_done_ = false;
  }
  std::thread reader([this, &stream] {
    v1::ReplicateResponse answer;
    while (stream->Read(&answer)) {
      const LogPosition now = FromProto(answer.applied());
      store_->ReportProgress(options_.backup, now, FromProto(answer.durable()));
      absl::MutexLock lock(&mu_);
      answered_ = now.index;
    }
    absl::MutexLock lock(&mu_);
    reader_done_ = true;
  });

  absl::Status ended = absl::CancelledError("stopping");
  bool write_failed = false;
  int64_t next = applied.index + 1;  // The first entry not sent yet.
  while (true) {
    {
      // At most max_in_flight entries sent and not yet applied.
      absl::MutexLock lock(&mu_);
      auto window = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || reader_done_ ||
               next - 1 - answered_ < options_.max_in_flight;
      };
      mu_.AwaitWithTimeout(absl::Condition(&window), kPoll);
      if (stopping_ || reader_done_) break;
      if (!window()) continue;
    }
    absl::StatusOr<std::vector<std::shared_ptr<const std::string>>> entries =
        store_->ReadFrom(next, options_.max_request_bytes, absl::Now() + kPoll);
    if (!entries.ok()) {
      if (entries.status().code() == absl::StatusCode::kOutOfRange) {
        const std::string why = absl::StrCat("it is behind the entries kept: ",
                                             entries.status().message());
        {
          absl::MutexLock lock(&mu_);
          needs_rebuild_ = why;
        }
        AskToRebuild(*stream, why);
        ended = absl::FailedPreconditionError(why);
        break;
      }
      ended = entries.status();
      break;
    }
    if (entries->empty()) continue;
    // A failed write: the backup ended the stream; its status says why (a
    // newer epoch accepted, an entry out of order). An entry larger than a
    // request may be comes alone (ReadFrom stops before it otherwise).
    if (entries->front()->size() > options_.max_request_bytes) {
      if (!SendInParts(*stream, *entries->front())) {
        write_failed = true;
        break;
      }
      next += 1;
      continue;
    }
    v1::ReplicateRequest request;
    for (const auto& bytes : *entries) request.add_entries(*bytes);
    if (!stream->Write(request)) {
      write_failed = true;
      break;
    }
    next += static_cast<int64_t>(entries->size());
  }
  bool backup_ended;
  {
    absl::MutexLock lock(&mu_);
    backup_ended = reader_done_ || write_failed;
  }
  // The backup ends the stream itself when it ended already, or after a
  // rebuild request; otherwise this side does.
  const bool rebuild = absl::IsFailedPrecondition(ended);
  if (!backup_ended && !rebuild) context.TryCancel();
  reader.join();
  const grpc::Status finished = stream->Finish();
  return backup_ended && !rebuild ? FromGrpc(finished) : ended;
}

}  // namespace hourglass::replication
