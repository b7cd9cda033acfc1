#include "client/internal/subscribe_stream.h"

#include <algorithm>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "client/internal/convert.h"
#include "grpcpp/support/client_callback.h"

namespace hourglass::client::internal {
namespace {

// The gRPC side of a SubscribeStream of either RPC; Response is Delivery
// (Subscribe) or DeliveryBatch (SubscribeBatches).
template <typename Response>
class Reactor final
    : public SubscribeStream,
      public grpc::ClientBidiReactor<hourglass::v1::SubscribeRequest,
                                     Response> {
 public:
  static constexpr bool kBatches =
      std::is_same_v<Response, hourglass::v1::DeliveryBatch>;

  Reactor(Callbacks callbacks, size_t max_ack_ids)
      : SubscribeStream(std::move(callbacks), max_ack_ids) {}
  ~Reactor() override { Shutdown(); }

  void Begin(hourglass::v1::Broker::Stub& stub,
             const std::function<void(grpc::ClientContext&)>& prepare,
             const hourglass::v1::Open& open) override {
    prepare(context_);
    if constexpr (kBatches) {
      stub.async()->SubscribeBatches(&context_, this);
    } else {
      stub.async()->Subscribe(&context_, this);
    }
    QueueOpen(open);
    this->StartRead(&read_);
    this->AddHold();  // Released once the reads ended (HandleReadsEnded).
    this->StartCall();
    Kick();
  }

 private:
  void StartWriteOf(const hourglass::v1::SubscribeRequest* request) override {
    this->StartWrite(request);
  }
  void StartWritesDoneOf() override { this->StartWritesDone(); }
  void RemoveHoldOf() override { this->RemoveHold(); }

  void OnReadInitialMetadataDone(bool ok) override {
    HandleInitialMetadata(ok);
  }
  void OnReadDone(bool ok) override {
    if (!ok) {
      HandleReadsEnded();
      return;
    }
    const absl::Time now = absl::Now();
    if constexpr (kBatches) {
      pointers_.clear();
      for (hourglass::v1::Delivery& d : *read_.mutable_deliveries()) {
        pointers_.push_back(&d);
      }
      HandleDeliveries(pointers_, now);
    } else {
      hourglass::v1::Delivery* delivery = &read_;
      HandleDeliveries(absl::MakeConstSpan(&delivery, 1), now);
    }
    read_.Clear();
    this->StartRead(&read_);
  }
  void OnWriteDone(bool ok) override { HandleWriteDone(ok); }
  void OnWritesDoneDone(bool /*ok*/) override { HandleWritesDoneDone(); }
  void OnDone(const grpc::Status& status) override { HandleDone(status); }

  // Touched by the read chain only.
  Response read_;
  std::vector<hourglass::v1::Delivery*> pointers_;
};

}  // namespace

std::unique_ptr<SubscribeStream> SubscribeStream::Create(Rpc rpc,
                                                         Callbacks callbacks,
                                                         size_t max_ack_ids) {
  if (rpc == Rpc::kSubscribeBatches) {
    return std::make_unique<Reactor<hourglass::v1::DeliveryBatch>>(
        std::move(callbacks), max_ack_ids);
  }
  return std::make_unique<Reactor<hourglass::v1::Delivery>>(
      std::move(callbacks), max_ack_ids);
}

std::unique_ptr<SubscribeStream> SubscribeStream::Start(
    Rpc rpc, hourglass::v1::Broker::Stub& stub,
    const std::function<void(grpc::ClientContext&)>& prepare,
    const hourglass::v1::Open& open, Callbacks callbacks, size_t max_ack_ids) {
  std::unique_ptr<SubscribeStream> stream =
      Create(rpc, std::move(callbacks), max_ack_ids);
  stream->Begin(stub, prepare, open);
  return stream;
}

SubscribeStream::SubscribeStream(Callbacks callbacks, size_t max_ack_ids)
    : max_ack_ids_(std::max<size_t>(max_ack_ids, 1)),
      callbacks_(std::move(callbacks)) {}

void SubscribeStream::QueueOpen(const hourglass::v1::Open& open) {
  hourglass::v1::SubscribeRequest request;
  *request.mutable_open() = open;
  Queue(std::move(request), /*merge_acks=*/false);
}

uint64_t SubscribeStream::Ack(absl::Span<const std::string> ids) {
  hourglass::v1::SubscribeRequest request;
  for (const std::string& id : ids) request.mutable_ack()->add_ids(id);
  return Queue(std::move(request), /*merge_acks=*/true);
}

uint64_t SubscribeStream::Nack(const std::string& id, absl::Duration delay) {
  hourglass::v1::SubscribeRequest request;
  request.mutable_nack()->set_id(id);
  *request.mutable_nack()->mutable_delay() = ToProto(delay);
  return Queue(std::move(request), /*merge_acks=*/false);
}

uint64_t SubscribeStream::Write(hourglass::v1::SubscribeRequest request) {
  return Queue(std::move(request), /*merge_acks=*/false);
}

uint64_t SubscribeStream::Queue(hourglass::v1::SubscribeRequest request,
                                bool merge_acks) {
  uint64_t sequence;
  Next next;
  {
    absl::MutexLock lock(&mu_);
    if (writes_stopped_ || closing_) return 0;
    Queued* last = queue_.empty() ? nullptr : &queue_.back();
    if (merge_acks && last != nullptr && last->request.has_ack() &&
        static_cast<size_t>(last->request.ack().ids_size() +
                            request.ack().ids_size()) <= max_ack_ids_) {
      for (std::string& id : *request.mutable_ack()->mutable_ids()) {
        last->request.mutable_ack()->add_ids(std::move(id));
      }
      sequence = last->sequence;
    } else {
      sequence = ++last_sequence_;
      queue_.push_back({std::move(request), sequence});
    }
    next = ClaimLocked();
  }
  DoStart(next);
  return sequence;
}

void SubscribeStream::Kick() {
  Next next;
  {
    absl::MutexLock lock(&mu_);
    next = ClaimLocked();
  }
  DoStart(next);
}

bool SubscribeStream::WaitWritten(uint64_t sequence, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto settled = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return written_sequence_ >= sequence || writes_stopped_;
  };
  mu_.AwaitWithDeadline(absl::Condition(&settled), deadline);
  return written_sequence_ >= sequence;
}

void SubscribeStream::CloseWrites() {
  Next next;
  {
    absl::MutexLock lock(&mu_);
    closing_ = true;
    next = ClaimLocked();
  }
  DoStart(next);
}

bool SubscribeStream::finished() {
  absl::MutexLock lock(&mu_);
  return finished_;
}

std::optional<grpc::Status> SubscribeStream::WaitDone(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithDeadline(absl::Condition(&finished_), deadline);
  if (!finished_) return std::nullopt;
  return status_;
}

void SubscribeStream::Shutdown() {
  context_.TryCancel();
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&finished_));
}

SubscribeStream::Next SubscribeStream::ClaimLocked() {
  if (writing_ || writes_stopped_) return Next::kNone;
  if (!queue_.empty()) {
    writing_request_ = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;
    ++starting_;
    return Next::kWrite;
  }
  if (closing_ && !writes_done_) {
    writes_done_ = true;
    writes_stopped_ = true;
    writing_ = true;
    ++starting_;
    return Next::kWritesDone;
  }
  return Next::kNone;
}

void SubscribeStream::DoStart(Next next) {
  switch (next) {
    case Next::kNone:
      return;
    case Next::kWrite:
      // writing_request_ is the writer's until OnWriteDone.
      StartWriteOf(&writing_request_.request);
      break;
    case Next::kWritesDone:
      StartWritesDoneOf();
      break;
  }
  bool release = false;
  {
    absl::MutexLock lock(&mu_);
    --starting_;
    if (reads_ended_ && starting_ == 0 && !hold_released_) {
      hold_released_ = true;
      release = true;
    }
  }
  if (release) RemoveHoldOf();
}

void SubscribeStream::HandleInitialMetadata(bool ok) {
  {
    absl::MutexLock lock(&mu_);
    if (subscribed_reported_) return;
    subscribed_reported_ = true;
  }
  // The broker sends initial metadata once the consumer is subscribed; a
  // refused open ends the stream without it.
  if (callbacks_.on_subscribed != nullptr) callbacks_.on_subscribed(ok);
}

void SubscribeStream::HandleDeliveries(
    absl::Span<hourglass::v1::Delivery* const> deliveries,
    absl::Time received_at) {
  callbacks_.on_deliveries(deliveries, received_at, responses_++);
}

void SubscribeStream::HandleReadsEnded() {
  bool report = false;
  bool release = false;
  {
    absl::MutexLock lock(&mu_);
    reads_ended_ = true;
    writes_stopped_ = true;
    queue_.clear();
    report = !subscribed_reported_;
    subscribed_reported_ = true;
    if (starting_ == 0 && !hold_released_) {
      hold_released_ = true;
      release = true;
    }
  }
  if (report && callbacks_.on_subscribed != nullptr) {
    callbacks_.on_subscribed(false);
  }
  if (release) RemoveHoldOf();
}

void SubscribeStream::HandleWriteDone(bool ok) {
  Next next;
  {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (ok) {
      written_sequence_ = writing_request_.sequence;
    } else {
      // The stream is broken; its end comes through the reads.
      writes_stopped_ = true;
      queue_.clear();
    }
    next = ClaimLocked();
  }
  DoStart(next);
}

void SubscribeStream::HandleWritesDoneDone() {
  absl::MutexLock lock(&mu_);
  writing_ = false;
}

void SubscribeStream::HandleDone(const grpc::Status& status) {
  {
    absl::MutexLock lock(&mu_);
    status_ = status;
  }
  if (callbacks_.on_done != nullptr) {
    callbacks_.on_done(status, RedirectOf(context_, status));
  }
  // gRPC's last use of the object: once mu_ is free, it may be destroyed.
  absl::MutexLock lock(&mu_);
  finished_ = true;
}

}  // namespace hourglass::client::internal
