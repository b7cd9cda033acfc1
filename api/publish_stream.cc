#include "api/publish_stream.h"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "api/proto_time.h"
#include "api/status.h"

namespace hourglass::api {
namespace {

using hourglass::v1::PublishAnswer;
using hourglass::v1::PublishRequest;
using hourglass::v1::PublishStreamResponse;

PublishAnswer ToAnswer(
    absl::StatusOr<std::vector<broker::PublishReceipt>> receipts) {
  PublishAnswer answer;
  if (receipts.ok()) {
    AddReceipts(*receipts, answer.mutable_receipts());
  } else {
    const grpc::Status status = ToGrpcStatus(receipts.status());
    answer.set_code(static_cast<int32_t>(status.error_code()));
    answer.set_message(status.error_message());
  }
  return answer;
}

// The reactor. Reads run one at a time (each OnReadDone starts the next,
// unless max_pending_ requests await their answers); writes run one at a
// time, in request order, each of every answer ready at the front of
// answers_ (up to kMaxResponseBytes). Thread-safe: reactions and the
// publishes' callbacks (on the engine's threads) may come concurrently;
// mu_ guards the shared state and is never held while calling publish_.
class PublishStream final
    : public grpc::ServerBidiReactor<PublishRequest, PublishStreamResponse> {
 public:
  PublishStream(PublishCall publish, size_t max_pending)
      : publish_(std::move(publish)), max_pending_(max_pending) {
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
  // Touched only by the read chain: StartRead and the OnReadDone it causes.
  PublishRequest request_;

  absl::Mutex mu_;
  // The answers from request first_index_ on, in request order; unset until
  // known. While writing_, the first in_response_ are in response_ (moved
  // out), which gRPC holds until OnWriteDone.
  std::deque<std::optional<PublishAnswer>> answers_ ABSL_GUARDED_BY(mu_);
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
    answers_.emplace_back();
    ++publishing_;
  }
  // Outside mu_: the answer may come at once, on this thread. reading_
  // stays set until publish_ returns: request_ is its until then, and an
  // OnWriteDone meanwhile must not start the next read into it.
  publish_(request_,
           [this, index](
               absl::StatusOr<std::vector<broker::PublishReceipt>> receipts) {
             Answer(index, ToAnswer(std::move(receipts)));
           });
  absl::MutexLock lock(&mu_);
  reading_ = false;
  ReadNextLocked();
}

void PublishStream::Answer(uint64_t index, PublishAnswer answer) {
  absl::MutexLock lock(&mu_);
  answers_[index - first_index_] = std::move(answer);
  --publishing_;
  WriteNextLocked();
  MaybeFinishLocked();
}

void PublishStream::WriteNextLocked() {
  if (writing_ || cancelled_) return;
  response_.Clear();
  size_t bytes = 0;
  for (std::optional<PublishAnswer>& answer : answers_) {
    if (!answer.has_value()) break;
    const size_t size = answer->ByteSizeLong();
    if (response_.answers_size() > 0 && bytes + size > kMaxResponseBytes) {
      break;
    }
    bytes += size;
    *response_.add_answers() = std::move(*answer);
  }
  if (response_.answers_size() == 0) return;
  in_response_ = static_cast<size_t>(response_.answers_size());
  writing_ = true;
  StartWrite(&response_);
}

void PublishStream::OnWriteDone(bool ok) {
  absl::MutexLock lock(&mu_);
  writing_ = false;
  answers_.erase(answers_.begin(),
                 answers_.begin() + static_cast<ptrdiff_t>(in_response_));
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
      answers_.size() >= max_pending_) {
    return;
  }
  reading_ = true;
  StartRead(&request_);
}

void PublishStream::MaybeFinishLocked() {
  if (finished_ || publishing_ > 0 || writing_) return;
  if (!cancelled_ && !(reads_done_ && answers_.empty())) return;
  finished_ = true;
  Finish(cancelled_ ? grpc::Status(grpc::StatusCode::CANCELLED, "cancelled")
                    : grpc::Status::OK);
}

}  // namespace

grpc::ServerBidiReactor<PublishRequest, PublishStreamResponse>*
NewPublishStream(PublishCall publish, size_t max_pending) {
  return new PublishStream(std::move(publish), max_pending);
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
