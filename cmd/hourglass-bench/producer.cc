#include "cmd/hourglass-bench/producer.h"

#include <algorithm>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cmd/common/errors.h"
#include "grpcpp/support/client_callback.h"
#include "hourglass/v1/broker.grpc.pb.h"

namespace hourglass::bench {
namespace {

// A slot whose call failed waits this long before its next one, so that a
// broker that refuses everything is not hammered in a tight loop.
constexpr absl::Duration kErrorBackoff = absl::Milliseconds(10);

}  // namespace

// The producer's PublishStream: writes the slots' requests one at a time,
// in the order they are sent, and hands each answer (which come in that
// order, one or more to a response) to the slot at the front. After the stream
// breaks, every request in flight or sent later fails with the stream's status.
//
// Send and Close come from the producer's slots and main thread; the
// reactions run on gRPC's threads. Thread-safe.
class BenchProducer::Stream final
    : public grpc::ClientBidiReactor<hourglass::v1::PublishRequest,
                                     hourglass::v1::PublishStreamResponse> {
 public:
  explicit Stream(BenchProducer& producer) : producer_(producer) {}

  // Starts the call. Once, before any Send.
  void Start() {
    producer_.connection_->broker().async()->PublishStream(&context_, this);
    StartRead(&response_);
    AddHold();  // Removed by Close.
    StartCall();
  }

  // Writes the slot's request after those sent before it.
  void Send(Slot& slot) {
    std::optional<grpc::Status> broken;
    {
      absl::MutexLock lock(&mu_);
      if (!broken_.has_value()) {
        unwritten_.push_back(&slot);
        WriteNextLocked();
        return;
      }
      broken = broken_;
    }
    producer_.OnPublished(slot, *broken);
  }

  // Ends the client's side and waits for the stream's end. REQUIRES: no
  // request in flight; once.
  grpc::Status Close() {
    {
      absl::MutexLock lock(&mu_);
      closing_ = true;
      if (!writing_ && !broken_.has_value()) {
        writing_ = true;
        StartWritesDone();
      }
    }
    RemoveHold();
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](std::optional<grpc::Status>* s) { return s->has_value(); },
        &status_));
    return *status_;
  }

 private:
  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || unwritten_.empty()) return;
    writing_ = true;
    Slot* slot = unwritten_.front();
    unwritten_.pop_front();
    answering_.push_back(slot);
    grpc::WriteOptions options;
    if (!unwritten_.empty()) options.set_buffer_hint();
    StartWrite(&slot->request, options);
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) return;  // The stream broke; the reads end with its status.
    if (closing_ && unwritten_.empty()) {
      writing_ = true;
      StartWritesDone();
      return;
    }
    WriteNextLocked();
  }

  void OnWritesDoneDone(bool) override {}

  void OnReadDone(bool ok) override {
    if (!ok) {
      // The stream ended: what is in flight or queued fails now (OnDone,
      // with the stream's status, waits for Close's RemoveHold, which
      // waits for every slot).
      FailAll(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                           "the stream ended before answering"));
      return;
    }
    // A response answers the oldest requests awaiting answers, in order.
    std::vector<std::pair<Slot*, grpc::Status>> answered;
    answered.reserve(static_cast<size_t>(response_.answers_size()));
    bool too_many = false;
    {
      absl::MutexLock lock(&mu_);
      for (const hourglass::v1::PublishAnswer& answer : response_.answers()) {
        if (answering_.empty()) {
          too_many = true;
          break;
        }
        answered.emplace_back(
            answering_.front(),
            answer.code() == 0
                ? grpc::Status::OK
                : grpc::Status(static_cast<grpc::StatusCode>(answer.code()),
                               answer.message()));
        answering_.pop_front();
      }
    }
    if (too_many) {
      // A broker bug: count it, as the report must not hide it.
      producer_.counters_.errors.fetch_add(1, std::memory_order_relaxed);
      producer_.counters_.NoteError(
          "PublishStream: more answers than requests sent");
    }
    StartRead(&response_);
    // The slots may send their next requests now: gRPC serialized each
    // request when it started writing it.
    for (const auto& [slot, status] : answered) {
      producer_.OnPublished(*slot, status);
    }
  }

  void OnDone(const grpc::Status& status) override {
    absl::MutexLock lock(&mu_);
    status_ = status;
  }

  void FailAll(const grpc::Status& status) {
    std::deque<Slot*> failed;
    {
      absl::MutexLock lock(&mu_);
      broken_ = status;
      failed.swap(answering_);
      for (Slot* slot : unwritten_) failed.push_back(slot);
      unwritten_.clear();
    }
    for (Slot* slot : failed) producer_.OnPublished(*slot, status);
  }

  BenchProducer& producer_;
  grpc::ClientContext context_;
  // Touched by the read chain only.
  hourglass::v1::PublishStreamResponse response_;

  absl::Mutex mu_;
  std::deque<Slot*> unwritten_ ABSL_GUARDED_BY(mu_);
  // Written (or being written), awaiting their answers, in order.
  std::deque<Slot*> answering_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> broken_ ABSL_GUARDED_BY(mu_);
  std::optional<grpc::Status> status_ ABSL_GUARDED_BY(mu_);
};

BenchProducer::BenchProducer(std::unique_ptr<cli::Connection> connection,
                             PublishPlan& plan, BenchCounters& counters,
                             BenchControl& control, int slots, Rpc rpc)
    : connection_(std::move(connection)),
      plan_(plan),
      counters_(counters),
      control_(control) {
  for (int i = 0; i < slots; ++i) {
    slots_.push_back(std::make_unique<Slot>());
    slots_.back()->producer = this;
  }
  if (rpc == Rpc::kPublishStream) stream_ = std::make_unique<Stream>(*this);
}

BenchProducer::~BenchProducer() = default;

void BenchProducer::Start() {
  {
    absl::MutexLock lock(&mu_);
    running_ = static_cast<int>(slots_.size());
  }
  if (stream_ != nullptr) stream_->Start();
  for (auto& slot : slots_) Next(*slot, absl::InfinitePast());
}

void BenchProducer::CancelWaits() {
  for (auto& slot : slots_) {
    absl::MutexLock lock(&slot->mu);
    slot->cancelled = true;
    // Runs the alarm's callback with ok = false if it is pending.
    if (slot->alarm != nullptr) slot->alarm->Cancel();
  }
}

void BenchProducer::Wait() {
  {
    absl::MutexLock lock(&mu_);
    auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return running_ == 0;
    };
    mu_.Await(absl::Condition(&done));
  }
  if (stream_ != nullptr) {
    const grpc::Status status = stream_->Close();
    if (!status.ok() && status.error_code() != grpc::StatusCode::CANCELLED) {
      counters_.NoteError(absl::StrCat("PublishStream: ",
                                       connection_->Check(status).message()));
    }
  }
}

LatencyHistogram BenchProducer::call_latency() {
  absl::MutexLock lock(&mu_);
  return latency_;
}

void BenchProducer::Next(Slot& slot, absl::Time not_before) {
  slot.claim = plan_.Next();
  if (slot.claim.size == 0) {
    SlotDone();
    return;
  }
  const absl::Time send_at = std::max(slot.claim.send_at, not_before);
  if (send_at <= absl::Now()) {
    Send(slot);
    return;
  }
  {
    absl::MutexLock lock(&slot.mu);
    if (!slot.cancelled) {
      slot.alarm = std::make_unique<grpc::Alarm>();
      slot.alarm->Set(absl::ToChronoTime(send_at), [this, &slot](bool fired) {
        if (fired) {
          Send(slot);
        } else {
          SlotDone();
        }
      });
      return;
    }
  }
  // Outside slot.mu: once the last slot is done, the producer may go.
  SlotDone();
}

void BenchProducer::Send(Slot& slot) {
  plan_.Fill(slot.claim, slot.random, slot.request);
  slot.sent_at = absl::Now();
  counters_.publish_span.Add(slot.sent_at);
  if (stream_ != nullptr) {
    stream_->Send(slot);
    return;
  }
  slot.response.Clear();
  slot.context = std::make_unique<grpc::ClientContext>();
  connection_->SetDeadline(*slot.context);
  connection_->broker().async()->Publish(
      slot.context.get(), &slot.request, &slot.response,
      [this, &slot](grpc::Status status) { OnPublished(slot, status); });
}

void BenchProducer::OnPublished(Slot& slot, const grpc::Status& status) {
  const absl::Time now = absl::Now();
  counters_.publish_span.Add(now);
  absl::Time not_before = absl::InfinitePast();
  if (status.ok()) {
    counters_.published.fetch_add(slot.claim.size, std::memory_order_relaxed);
    counters_.publish_calls.fetch_add(1, std::memory_order_relaxed);
    absl::MutexLock lock(&mu_);
    latency_.Record(now - slot.sent_at);
  } else {
    counters_.errors.fetch_add(1, std::memory_order_relaxed);
    counters_.failed_messages.fetch_add(slot.claim.size,
                                        std::memory_order_relaxed);
    counters_.NoteError(
        absl::StrCat(stream_ != nullptr ? "PublishStream: " : "Publish: ",
                     connection_->Check(status).message()));
    not_before = now + kErrorBackoff;
  }
  Next(slot, not_before);
}

void BenchProducer::SlotDone() {
  // Under mu_, so that Wait cannot return (and the producer go) while this
  // still runs.
  absl::MutexLock lock(&mu_);
  if (--running_ == 0) control_.ProducerDone();
}

}  // namespace hourglass::bench
