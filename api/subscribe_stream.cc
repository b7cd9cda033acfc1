#include "api/subscribe_stream.h"

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "api/proto_time.h"
#include "api/status.h"
#include "google/protobuf/arena.h"
#include "grpcpp/server_context.h"

namespace hourglass::api {
namespace {

using hourglass::v1::SubscribeRequest;
using ConsumerId = broker::ConsumerId;

// A stream reports its written deliveries to the broker (each report
// takes the broker's lock once) when its outbox is empty, or when it
// has gathered this many, or this many bytes of them, or has not reported
// for this long: the broker bounds the outbox, and watches for stalls,
// by these reports.
constexpr size_t kReportWritten = 64;
constexpr size_t kReportWrittenBytes = size_t{1} << 20;
constexpr absl::Duration kReportWrittenEvery = absl::Seconds(1);

template <typename Response>
class SubscribeStream;

// What the broker holds of a stream. It may outlive the stream's
// reactor: once the reactor is done, what arrives here is dropped (the
// broker hands those deliveries back when the stream unsubscribes).
template <typename Response>
class StreamSink final : public broker::Consumer, public StreamHandle {
 public:
  StreamSink(SubscribeStream<Response>* stream, broker::Broker* broker)
      : stream_(stream), broker_(broker) {}

  void Send(std::vector<broker::Delivery> deliveries) override;
  void End(absl::Status status) override;
  void Abort(absl::Status status) override;
  void Recheck() override;
  // The answer to the stream's Broker::Subscribe.
  void Subscribed(absl::StatusOr<ConsumerId> id);
  // The reactor is done; nothing reaches it any more.
  void Detach() {
    absl::MutexLock lock(&mu_);
    stream_ = nullptr;
  }

 private:
  absl::Mutex mu_;
  SubscribeStream<Response>* stream_ ABSL_GUARDED_BY(mu_);
  broker::Broker* const broker_;
};

// The reactor of one stream; Response is Delivery (Subscribe) or
// DeliveryBatch (SubscribeBatches). Reads run one at a time (each
// OnReadDone starts the next); writes run one at a time from an outbox of
// responses, which for batches gathers what arrives while a write is in
// progress. Thread-safe: reactions, the broker's Send and End, and the
// Subscribe answer may come concurrently; mu_ guards the shared state. Lock
// order: the sink's lock, then mu_, then the broker's.
template <typename Response>
class SubscribeStream final : public SubscribeReactor<Response> {
 public:
  static constexpr bool kBatches =
      std::is_same_v<Response, hourglass::v1::DeliveryBatch>;

  SubscribeStream(grpc::CallbackServerContext* context, broker::Broker* broker,
                  const Limits& limits, StreamHooks hooks)
      : context_(context),
        broker_(broker),
        limits_(limits),
        hooks_(std::move(hooks)),
        sink_(std::make_shared<StreamSink<Response>>(this, broker)) {
    if (hooks_.opened) std::move(hooks_.opened)(sink_);
    this->StartRead(&request_);
  }

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override {
    FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
  }
  void OnDone() override {
    sink_->Detach();
    delete this;
  }

  // From the sink.
  void Enqueue(std::vector<broker::Delivery> deliveries);
  void OnSubscribed(absl::StatusOr<ConsumerId> id);
  void Recheck();

  // Ends the stream with `status` unless it is ending already. Unsent
  // deliveries are dropped; the broker takes every unacknowledged one
  // back. A write in progress finishes first, unless `abandon_write`: then
  // the call is cancelled, which ends a write that flow control holds.
  void FinishOnce(const grpc::Status& status, bool abandon_write = false);

 private:
  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Where the next delivery of the outbox goes: a response of its own, or
  // (batches) the last one, unless that is being written or full.
  hourglass::v1::Delivery& NextDeliveryLocked(size_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Handles request_ after `open`; false if it ended the stream.
  bool HandleRequest();

  grpc::CallbackServerContext* const context_;
  broker::Broker* const broker_;
  const Limits limits_;
  // authorize is called by the read chain and by Recheck (it is
  // thread-safe); opened by the constructor; on_finish by FinishOnce, once.
  StreamHooks hooks_;
  const std::shared_ptr<StreamSink<Response>> sink_;
  // Touched only by the read chain: StartRead and the OnReadDone it causes.
  SubscribeRequest request_;
  bool opened_ = false;

  absl::Mutex mu_;
  // The topic of a valid `open`; empty before.
  std::string topic_ ABSL_GUARDED_BY(mu_);
  // Set once subscribed, until the stream finishes; writes wait for it.
  std::optional<ConsumerId> consumer_ ABSL_GUARDED_BY(mu_);
  // A response waiting to be written, on an arena of its own: the
  // deliveries' messages, strings and timestamps come from a few arena
  // blocks rather than one allocation each, and go together.
  struct Outgoing {
    Outgoing()
        : response(google::protobuf::Arena::CreateMessage<Response>(&arena)) {}
    google::protobuf::Arena arena;
    Response* const response;
    // What it carries: deliveries and their DeliveryBytes.
    size_t deliveries = 0;
    size_t bytes = 0;
  };
  // The front is being written while writing_. A deque never moves its
  // elements, which the arenas need.
  std::deque<Outgoing> outbox_ ABSL_GUARDED_BY(mu_);
  // Deliveries written and not yet reported to the broker, their
  // bytes, and when the last report went.
  size_t written_ ABSL_GUARDED_BY(mu_) = 0;
  size_t written_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time reported_at_ ABSL_GUARDED_BY(mu_) = absl::Now();
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  // Set while a write must end before Finish.
  std::optional<grpc::Status> finish_after_write_ ABSL_GUARDED_BY(mu_);
};

template <typename Response>
void StreamSink<Response>::Send(std::vector<broker::Delivery> deliveries) {
  absl::MutexLock lock(&mu_);
  if (stream_ != nullptr) stream_->Enqueue(std::move(deliveries));
}

template <typename Response>
void StreamSink<Response>::End(absl::Status status) {
  absl::MutexLock lock(&mu_);
  if (stream_ != nullptr) stream_->FinishOnce(ToGrpcStatus(status));
}

template <typename Response>
void StreamSink<Response>::Abort(absl::Status status) {
  absl::MutexLock lock(&mu_);
  if (stream_ != nullptr) {
    stream_->FinishOnce(ToGrpcStatus(status), /*abandon_write=*/true);
  }
}

template <typename Response>
void StreamSink<Response>::Recheck() {
  absl::MutexLock lock(&mu_);
  if (stream_ != nullptr) stream_->Recheck();
}

template <typename Response>
void StreamSink<Response>::Subscribed(absl::StatusOr<ConsumerId> id) {
  absl::MutexLock lock(&mu_);
  if (stream_ != nullptr) {
    stream_->OnSubscribed(std::move(id));
  } else if (id.ok()) {
    broker_->Unsubscribe(*id);  // The stream ended meanwhile.
  }
}

template <typename Response>
void SubscribeStream<Response>::OnReadDone(bool ok) {
  if (!ok) {
    // The client ended its side, or went away.
    FinishOnce(grpc::Status::OK);
    return;
  }
  if (!opened_) {
    if (!request_.has_open()) {
      FinishOnce(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                              "the first request of a stream must be open"));
      return;
    }
    const hourglass::v1::Open& open = request_.open();
    absl::Status s = ValidateOpen(open, limits_);
    if (s.ok() && hooks_.authorize) s = hooks_.authorize(open.topic());
    if (!s.ok()) {
      FinishOnce(ToGrpcStatus(s));
      return;
    }
    opened_ = true;
    {
      absl::MutexLock lock(&mu_);
      topic_ = open.topic();
    }
    broker::SubscribeOptions options;
    options.topic = open.topic();
    options.group = open.group();
    options.max_in_flight = open.max_in_flight();
    if (open.has_ack_timeout()) {
      options.ack_timeout = FromProto(open.ack_timeout());
    }
    if (hooks_.may_create_group) {
      options.may_create_group = hooks_.may_create_group(open.topic());
    }
    // The next read starts once the consumer is subscribed.
    broker_->Subscribe(std::move(options), sink_,
                       [sink = sink_](absl::StatusOr<ConsumerId> id) {
                         sink->Subscribed(std::move(id));
                       });
    return;
  }
  if (HandleRequest()) this->StartRead(&request_);
}

template <typename Response>
void SubscribeStream<Response>::Recheck() {
  std::string topic;
  {
    absl::MutexLock lock(&mu_);
    if (finishing_ || topic_.empty()) return;
    topic = topic_;
  }
  if (!hooks_.authorize) return;
  if (absl::Status s = hooks_.authorize(topic); !s.ok()) {
    FinishOnce(ToGrpcStatus(s));
  }
}

template <typename Response>
bool SubscribeStream<Response>::HandleRequest() {
  std::optional<ConsumerId> consumer;
  std::string topic;
  {
    absl::MutexLock lock(&mu_);
    if (finishing_) return false;
    consumer = consumer_;
    topic = topic_;
  }
  // The token may have been revoked since the stream opened.
  if (hooks_.authorize) {
    if (absl::Status s = hooks_.authorize(topic); !s.ok()) {
      FinishOnce(ToGrpcStatus(s));
      return false;
    }
  }
  switch (request_.kind_case()) {
    case SubscribeRequest::kAck: {
      if (absl::Status s = ValidateAck(request_.ack(), limits_); !s.ok()) {
        FinishOnce(ToGrpcStatus(s));
        return false;
      }
      const std::vector<std::string_view> ids(request_.ack().ids().begin(),
                                              request_.ack().ids().end());
      broker_->Ack(*consumer, ids);
      return true;
    }
    case SubscribeRequest::kNack: {
      if (absl::Status s = ValidateNack(request_.nack(), limits_); !s.ok()) {
        FinishOnce(ToGrpcStatus(s));
        return false;
      }
      const absl::Duration delay = request_.nack().has_delay()
                                       ? FromProto(request_.nack().delay())
                                       : absl::ZeroDuration();
      broker_->Nack(*consumer, request_.nack().id(), delay);
      return true;
    }
    case SubscribeRequest::kOpen:
      FinishOnce(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                              "open may only be the first request"));
      return false;
    case SubscribeRequest::KIND_NOT_SET:
      break;
  }
  FinishOnce(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "a request must be open, ack or nack"));
  return false;
}

template <typename Response>
void SubscribeStream<Response>::OnSubscribed(absl::StatusOr<ConsumerId> id) {
  if (!id.ok()) {
    FinishOnce(ToGrpcStatus(id.status()));
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    if (!finishing_) {
      consumer_ = *id;
      // Initial metadata tells the client it is subscribed, marked so that
      // a client that cannot tell it from the empty metadata of a refusal
      // (gRPC Python) need not guess; deliveries that arrived meanwhile
      // follow it.
      context_->AddInitialMetadata(std::string(kSubscribedMetadata), "1");
      this->StartSendInitialMetadata();
      WriteNextLocked();
      this->StartRead(&request_);
      return;
    }
  }
  broker_->Unsubscribe(*id);  // Ended before the answer came.
}

template <typename Response>
void SubscribeStream<Response>::Enqueue(
    std::vector<broker::Delivery> deliveries) {
  absl::MutexLock lock(&mu_);
  if (finishing_) return;
  for (broker::Delivery& d : deliveries) {
    const size_t bytes = broker::DeliveryBytes(d);
    hourglass::v1::Delivery& out = NextDeliveryLocked(bytes);
    ++outbox_.back().deliveries;
    outbox_.back().bytes += bytes;
    out.set_id(std::move(d.id));
    out.set_topic(std::move(d.topic));
    out.set_payload(std::move(d.payload));
    for (auto& [key, value] : d.headers) {
      (*out.mutable_headers())[key] = std::move(value);
    }
    ToProto(d.deliver_at, out.mutable_deliver_at());
    ToProto(d.published_at, out.mutable_published_at());
    out.set_attempt(d.attempt);
  }
  if (!writing_) WriteNextLocked();
}

template <typename Response>
hourglass::v1::Delivery& SubscribeStream<Response>::NextDeliveryLocked(
    size_t bytes) {
  if constexpr (kBatches) {
    // The front is the batch being written while writing_: it is sealed.
    const bool sealed = outbox_.empty() || (writing_ && outbox_.size() == 1);
    if (sealed || outbox_.back().bytes + bytes > kMaxBatchBytes) {
      outbox_.emplace_back();
    }
    return *outbox_.back().response->add_deliveries();
  } else {
    return *outbox_.emplace_back().response;
  }
}

template <typename Response>
void SubscribeStream<Response>::WriteNextLocked() {
  if (outbox_.empty() || !consumer_.has_value()) return;
  writing_ = true;
  // More deliveries wait behind this one: gRPC may hold it in the stream's
  // buffer rather than make a syscall for it. The last one in the outbox
  // goes without the hint and sends everything held.
  grpc::WriteOptions options;
  if (outbox_.size() > 1) options.set_buffer_hint();
  this->StartWrite(outbox_.front().response, options);
}

template <typename Response>
void SubscribeStream<Response>::OnWriteDone(bool ok) {
  size_t written = 0;
  size_t written_bytes = 0;
  std::optional<ConsumerId> consumer;
  {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    written_ += outbox_.front().deliveries;
    written_bytes_ += outbox_.front().bytes;
    outbox_.pop_front();
    if (finishing_) {
      if (finish_after_write_.has_value()) {
        this->Finish(*finish_after_write_);
        finish_after_write_.reset();
      }
      return;
    }
    if (ok) {
      consumer = consumer_;
      // Written deliveries are reported in groups (see kReportWritten):
      // one broker call per group rather than per delivery.
      const absl::Time now = absl::Now();
      if (outbox_.empty() || written_ >= kReportWritten ||
          written_bytes_ >= kReportWrittenBytes ||
          now - reported_at_ >= kReportWrittenEvery) {
        written = std::exchange(written_, 0);
        written_bytes = std::exchange(written_bytes_, 0);
        reported_at_ = now;
      }
      WriteNextLocked();
    }
  }
  if (consumer.has_value()) {
    if (written > 0) broker_->Written(*consumer, written, written_bytes);
    return;
  }
  // The client is gone.
  FinishOnce(grpc::Status(grpc::StatusCode::UNAVAILABLE, "write failed"));
}

template <typename Response>
void SubscribeStream<Response>::FinishOnce(const grpc::Status& status,
                                           bool abandon_write) {
  std::optional<ConsumerId> consumer;
  {
    absl::MutexLock lock(&mu_);
    if (finishing_) return;
    finishing_ = true;
    // Before Finish: a client that saw the end may start the next stream.
    if (hooks_.on_finish) std::move(hooks_.on_finish)();
    consumer = std::exchange(consumer_, std::nullopt);
    if (writing_) {
      // Drop what is queued behind the write in progress.
      while (outbox_.size() > 1) outbox_.pop_back();
      finish_after_write_ = status;
      // The write fails at once, and OnWriteDone finishes the call.
      if (abandon_write) context_->TryCancel();
    } else {
      outbox_.clear();
      this->Finish(status);
    }
  }
  if (consumer.has_value()) broker_->Unsubscribe(*consumer);
}

}  // namespace

SubscribeReactor<hourglass::v1::Delivery>* NewSubscribeStream(
    grpc::CallbackServerContext* context, broker::Broker* broker,
    const Limits& limits, StreamHooks hooks) {
  return new SubscribeStream<hourglass::v1::Delivery>(context, broker, limits,
                                                      std::move(hooks));
}

SubscribeReactor<hourglass::v1::DeliveryBatch>* NewSubscribeBatchesStream(
    grpc::CallbackServerContext* context, broker::Broker* broker,
    const Limits& limits, StreamHooks hooks) {
  return new SubscribeStream<hourglass::v1::DeliveryBatch>(
      context, broker, limits, std::move(hooks));
}

}  // namespace hourglass::api
