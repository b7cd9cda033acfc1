#include "api/publish_stream.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "api/proto_time.h"
#include "api/redirect.h"
#include "api/status.h"

namespace hourglass::api {
namespace {

using hourglass::v1::PublishAnswer;
using hourglass::v1::PublishRequest;
using hourglass::v1::PublishStreamResponse;

// About the bytes of the answer to `request`: a receipt per message.
size_t EstimateAnswerBytes(const PublishRequest& request) {
  // A receipt holds its id (an assigned one has 19 bytes), a timestamp,
  // the duplicate flag and framing; an error, its code and message.
  constexpr size_t kAssignedIdBytes = 19;
  constexpr size_t kReceiptBytes = 24;
  constexpr size_t kAnswerBytes = 32;
  size_t bytes = kAnswerBytes;
  for (const hourglass::v1::Message& m : request.messages()) {
    bytes += std::max(m.id().size(), kAssignedIdBytes) + kReceiptBytes;
  }
  return bytes;
}

PublishAnswer ToAnswer(
    absl::StatusOr<std::vector<broker::PublishReceipt>> receipts) {
  PublishAnswer answer;
  if (receipts.ok()) {
    AddReceipts(*receipts, answer.mutable_receipts());
  } else {
    const grpc::Status status = ToGrpcStatus(receipts.status());
    answer.set_code(static_cast<int32_t>(status.error_code()));
    answer.set_message(status.error_message());
    if (std::optional<Primary> primary = PrimaryOf(receipts.status())) {
      answer.set_primary(primary->address);
      answer.set_epoch(primary->epoch);
      answer.set_shard_count(static_cast<uint32_t>(primary->shard_count));
    }
  }
  return answer;
}

// The reactor. Reads run one at a time (each OnReadDone starts the next,
// unless max_pending_ requests await their answers); writes run one at a
// time, in request order, each of every answer ready at the front of
// answers_ (up to kMaxResponseBytes). Thread-safe: reactions and the
// publishes' callbacks (on the broker's threads) may come concurrently;
// mu_ guards the shared state and is never held while calling publish_.
class PublishStream final
    : public grpc::ServerBidiReactor<PublishRequest, PublishStreamResponse> {
 public:
  PublishStream(PublishCall publish, PublishStreamOptions options)
      : publish_(std::move(publish)),
        max_pending_(options.max_pending),
        max_pending_bytes_(options.max_pending_bytes),
        on_finish_(std::move(options.on_finish)) {
    // At once, not with the first answer: in tests, an earlier version's
    // first answer, which carried the metadata and a buffer hint, was never
    // sent.
    StartSendInitialMetadata();
    absl::MutexLock lock(&mu_);
    ReadNextLocked();
  }

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    MaybeFinishLocked();
  }
  void OnDone() override { delete this; }

 private:
  // The answer to request `index`, from any thread.
  void Answer(uint64_t index, PublishAnswer answer);
  // Writes the answers ready at the front, unless a write is in progress.
  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reads the next request unless enough await their answers.
  void ReadNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Finishes once nothing is left to answer or write.
  void MaybeFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  PublishCall publish_;  // Called by the read chain only.
  const size_t max_pending_;
  const size_t max_pending_bytes_;
  // Called by MaybeFinishLocked, once.
  absl::AnyInvocable<void() &&> on_finish_;
  // Touched only by the read chain: StartRead and the OnReadDone it causes.
  PublishRequest request_;

  absl::Mutex mu_;
  // The answers from request first_index_ on, in request order; unset until
  // known. While writing_, the first in_response_ are in response_ (moved
  // out), which gRPC holds until OnWriteDone.
  struct Pending {
    std::optional<PublishAnswer> answer;
    size_t bytes = 0;  // Its size once known; until then, the estimate.
  };
  std::deque<Pending> answers_ ABSL_GUARDED_BY(mu_);
  // The sum of their bytes (max_pending_bytes_).
  size_t pending_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t first_index_ ABSL_GUARDED_BY(mu_) = 0;
  PublishStreamResponse response_ ABSL_GUARDED_BY(mu_);
  size_t in_response_ ABSL_GUARDED_BY(mu_) = 0;
  // Publishes whose callback has not run yet.
  size_t publishing_ ABSL_GUARDED_BY(mu_) = 0;
  // A read is pending, or its request is being published.
  bool reading_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  // Why publish_ refused a request, if it did: the stream's end status.
  std::optional<absl::Status> refused_ ABSL_GUARDED_BY(mu_);
};

void PublishStream::OnReadDone(bool ok) {
  uint64_t index;
  {
    absl::MutexLock lock(&mu_);
    if (!ok || cancelled_) {
      // The client ended its side, or went away.
      reading_ = false;
      reads_done_ = true;
      MaybeFinishLocked();
      return;
    }
    index = first_index_ + answers_.size();
    const size_t estimate = EstimateAnswerBytes(request_);
    answers_.push_back({std::nullopt, estimate});
    pending_bytes_ += estimate;
    ++publishing_;
  }
  // Outside mu_: the answer may come at once, on this thread. reading_
  // stays set until publish_ returns: request_ is its until then, and an
  // OnWriteDone meanwhile must not start the next read into it.
  absl::Status taken = publish_(
      request_,
      [this,
       index](absl::StatusOr<std::vector<broker::PublishReceipt>> receipts) {
        Answer(index, ToAnswer(std::move(receipts)));
      });
  absl::MutexLock lock(&mu_);
  reading_ = false;
  if (!taken.ok()) {
    // Refused whole: no answer for it (its place is the last, as no read
    // came after it), and no more requests.
    pending_bytes_ -= answers_.back().bytes;
    answers_.pop_back();
    --publishing_;
    refused_ = std::move(taken);
    reads_done_ = true;
    MaybeFinishLocked();
    return;
  }
  ReadNextLocked();
}

void PublishStream::Answer(uint64_t index, PublishAnswer answer) {
  const size_t bytes = answer.ByteSizeLong();
  absl::MutexLock lock(&mu_);
  Pending& pending = answers_[index - first_index_];
  pending_bytes_ = pending_bytes_ - pending.bytes + bytes;
  pending.bytes = bytes;
  pending.answer = std::move(answer);
  --publishing_;
  WriteNextLocked();
  MaybeFinishLocked();
}

void PublishStream::WriteNextLocked() {
  if (writing_ || cancelled_) return;
  response_.Clear();
  size_t bytes = 0;
  for (Pending& pending : answers_) {
    if (!pending.answer.has_value()) break;
    if (response_.answers_size() > 0 &&
        bytes + pending.bytes > kMaxResponseBytes) {
      break;
    }
    bytes += pending.bytes;
    *response_.add_answers() = std::move(*pending.answer);
  }
  if (response_.answers_size() == 0) return;
  in_response_ = static_cast<size_t>(response_.answers_size());
  writing_ = true;
  StartWrite(&response_);
}

void PublishStream::OnWriteDone(bool ok) {
  absl::MutexLock lock(&mu_);
  writing_ = false;
  for (size_t i = 0; i < in_response_; ++i) {
    pending_bytes_ -= answers_.front().bytes;
    answers_.pop_front();
  }
  first_index_ += in_response_;
  in_response_ = 0;
  if (!ok) {
    cancelled_ = true;  // The client is gone; OnCancel follows.
  } else {
    WriteNextLocked();
    ReadNextLocked();
  }
  MaybeFinishLocked();
}

void PublishStream::ReadNextLocked() {
  if (reading_ || reads_done_ || cancelled_ ||
      answers_.size() >= max_pending_ ||
      (!answers_.empty() && pending_bytes_ >= max_pending_bytes_)) {
    return;
  }
  reading_ = true;
  StartRead(&request_);
}

void PublishStream::MaybeFinishLocked() {
  if (finished_ || publishing_ > 0 || writing_) return;
  if (!cancelled_ && !(reads_done_ && answers_.empty())) return;
  finished_ = true;
  // Before Finish: a client that saw the end may start the next stream.
  if (on_finish_) std::move(on_finish_)();
  if (cancelled_) {
    Finish(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
  } else if (refused_.has_value()) {
    Finish(ToGrpcStatus(*refused_));
  } else {
    Finish(grpc::Status::OK);
  }
}

}  // namespace

grpc::ServerBidiReactor<PublishRequest, PublishStreamResponse>*
NewPublishStream(PublishCall publish, PublishStreamOptions options) {
  return new PublishStream(std::move(publish), std::move(options));
}

void AddReceipts(
    const std::vector<broker::PublishReceipt>& receipts,
    google::protobuf::RepeatedPtrField<hourglass::v1::Receipt>* out) {
  out->Reserve(out->size() + static_cast<int>(receipts.size()));
  for (const broker::PublishReceipt& r : receipts) {
    hourglass::v1::Receipt* receipt = out->Add();
    receipt->set_id(r.id);
    ToProto(r.deliver_at, receipt->mutable_deliver_at());
    receipt->set_duplicate(r.duplicate);
  }
}

}  // namespace hourglass::api
