#include "cmd/hourglass-bench/consumer.h"

#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "cmd/common/duration.h"
#include "cmd/hourglass-bench/workload.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"
#include "hourglass/v1/broker.grpc.pb.h"

namespace hourglass::bench {
namespace {

// The stream of BenchConsumer over either RPC; Response is Delivery
// (Subscribe) or DeliveryBatch (SubscribeBatches).
template <typename Response>
class Stream final
    : public BenchConsumer,
      public grpc::ClientBidiReactor<hourglass::v1::SubscribeRequest,
                                     Response> {
 public:
  static constexpr bool kBatches =
      std::is_same_v<Response, hourglass::v1::DeliveryBatch>;

  Stream(cli::Connection& connection, BenchCounters& counters, SeenSet& seen,
         BenchControl& control)
      : connection_(connection),
        counters_(counters),
        seen_(seen),
        control_(control) {}

  // Starts the call with `open`. Once, right after construction.
  void Start(const hourglass::v1::Open& open);

  bool WaitSubscribed(absl::Time deadline) override;
  grpc::Status Finish(absl::Time deadline) override;
  const cli::Connection& connection() const override { return connection_; }
  const LatencyHistogram& lateness() const override { return lateness_; }
  absl::Time first_arrival() const override { return first_arrival_; }
  absl::Time last_arrival() const override { return last_arrival_; }

 private:
  enum class NextWrite { kNone, kWrite, kWritesDone };

  void OnReadInitialMetadataDone(bool ok) override;
  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnWritesDoneDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

  // Counts `delivery`, which arrived at `now`.
  void Count(const hourglass::v1::Delivery& delivery, absl::Time now);
  // Claims the writer for the queued acks, or for ending the client's side
  // once Finish asked for it; fills write_ for kWrite.
  NextWrite ClaimWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartNext(NextWrite next);

  // Constant after construction.
  cli::Connection& connection_;
  BenchCounters& counters_;
  SeenSet& seen_;
  BenchControl& control_;

  grpc::ClientContext context_;

  // Touched by the read chain only (StartRead and the OnReadDone it
  // causes), and read by Finish's caller once the chain has ended.
  Response read_;
  LatencyHistogram lateness_;
  absl::Time first_arrival_ = absl::InfiniteFuture();
  absl::Time last_arrival_ = absl::InfinitePast();

  absl::Mutex mu_;
  // The request being written; owned by the writer while writing_.
  hourglass::v1::SubscribeRequest write_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool write_failed_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::string> acks_ ABSL_GUARDED_BY(mu_);
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool writes_done_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<bool> subscribed_ ABSL_GUARDED_BY(mu_);
  bool reads_ended_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> status_ ABSL_GUARDED_BY(mu_);
};

template <typename Response>
void Stream<Response>::Start(const hourglass::v1::Open& open) {
  if constexpr (kBatches) {
    connection_.broker().async()->SubscribeBatches(&context_, this);
  } else {
    connection_.broker().async()->Subscribe(&context_, this);
  }
  {
    absl::MutexLock lock(&mu_);
    *write_.mutable_open() = open;
    writing_ = true;
  }
  this->StartWrite(&write_);
  this->StartRead(&read_);
  this->AddHold();  // Removed by Finish.
  this->StartCall();
}

template <typename Response>
bool Stream<Response>::WaitSubscribed(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto answered = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return subscribed_.has_value() || reads_ended_;
  };
  mu_.AwaitWithDeadline(absl::Condition(&answered), deadline);
  return subscribed_.value_or(false);
}

template <typename Response>
grpc::Status Stream<Response>::Finish(absl::Time deadline) {
  NextWrite next;
  {
    absl::MutexLock lock(&mu_);
    closing_ = true;
    next = ClaimWriteLocked();
  }
  StartNext(next);
  bool ended;
  {
    absl::MutexLock lock(&mu_);
    auto reads_ended = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return reads_ended_;
    };
    ended = mu_.AwaitWithDeadline(absl::Condition(&reads_ended), deadline);
  }
  // Outside mu_: cancelling may run reactions.
  if (!ended) context_.TryCancel();
  this->RemoveHold();
  absl::MutexLock lock(&mu_);
  auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return status_.has_value();
  };
  mu_.Await(absl::Condition(&done));
  return *status_;
}

template <typename Response>
void Stream<Response>::OnReadInitialMetadataDone(bool ok) {
  // The broker sends initial metadata once the consumer is subscribed; a
  // refused open ends the stream without it.
  absl::MutexLock lock(&mu_);
  subscribed_ = ok;
}

template <typename Response>
void Stream<Response>::Count(const hourglass::v1::Delivery& delivery,
                             absl::Time now) {
  counters_.deliveries.fetch_add(1, std::memory_order_relaxed);
  const absl::Time deliver_at = cli::FromProto(delivery.deliver_at());
  if (now < deliver_at) counters_.early.fetch_add(1, std::memory_order_relaxed);
  uint64_t sequence;
  if (!ReadSequence(delivery.payload(), sequence)) {
    counters_.foreign.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (!seen_.Insert(sequence)) {
    counters_.duplicates.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  lateness_.Record(now - deliver_at);
  if (now < first_arrival_) first_arrival_ = now;
  if (now > last_arrival_) last_arrival_ = now;
  control_.Delivered(
      counters_.delivered.fetch_add(1, std::memory_order_acq_rel) + 1);
}

template <typename Response>
void Stream<Response>::OnReadDone(bool ok) {
  if (!ok) {
    absl::MutexLock lock(&mu_);
    reads_ended_ = true;
    return;
  }
  const absl::Time now = absl::Now();
  {
    // Queued before the deliveries are counted: once the last one is
    // counted, Finish may half-close the stream, and its ack must go before
    // that, or the broker hands the delivery to another consumer (a
    // duplicate).
    absl::MutexLock lock(&mu_);
    if constexpr (kBatches) {
      for (const hourglass::v1::Delivery& d : read_.deliveries()) {
        acks_.push_back(d.id());
      }
    } else {
      acks_.push_back(read_.id());
    }
  }
  if constexpr (kBatches) {
    for (const hourglass::v1::Delivery& d : read_.deliveries()) Count(d, now);
  } else {
    Count(read_, now);
  }
  NextWrite next;
  {
    absl::MutexLock lock(&mu_);
    next = ClaimWriteLocked();
  }
  StartNext(next);
  this->StartRead(&read_);
}

template <typename Response>
typename Stream<Response>::NextWrite Stream<Response>::ClaimWriteLocked() {
  if (writing_ || write_failed_ || reads_ended_) return NextWrite::kNone;
  if (!acks_.empty()) {
    write_.Clear();
    auto* ids = write_.mutable_ack()->mutable_ids();
    ids->Reserve(static_cast<int>(acks_.size()));
    for (std::string& id : acks_) ids->Add(std::move(id));
    acks_.clear();
    writing_ = true;
    return NextWrite::kWrite;
  }
  if (closing_ && !writes_done_) {
    writes_done_ = true;
    writing_ = true;
    return NextWrite::kWritesDone;
  }
  return NextWrite::kNone;
}

template <typename Response>
void Stream<Response>::StartNext(NextWrite next) {
  switch (next) {
    case NextWrite::kWrite:
      this->StartWrite(&write_);  // write_ is the writer's until OnWriteDone.
      break;
    case NextWrite::kWritesDone:
      this->StartWritesDone();
      break;
    case NextWrite::kNone:
      break;
  }
}

template <typename Response>
void Stream<Response>::OnWriteDone(bool ok) {
  NextWrite next;
  {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) {
      // The stream is broken; its end comes through the reads.
      write_failed_ = true;
      acks_.clear();
    }
    next = ClaimWriteLocked();
  }
  StartNext(next);
}

template <typename Response>
void Stream<Response>::OnWritesDoneDone(bool ok) {
  absl::MutexLock lock(&mu_);
  writing_ = false;
}

template <typename Response>
void Stream<Response>::OnDone(const grpc::Status& status) {
  // gRPC's last use of this object: once mu_ is free, Finish returns and
  // its caller may destroy the object.
  if (!status.ok() && status.error_code() != grpc::StatusCode::CANCELLED) {
    counters_.stream_errors.fetch_add(1, std::memory_order_relaxed);
    counters_.NoteError(
        absl::StrCat("Subscribe: ", connection_.Check(status).message()));
  }
  absl::MutexLock lock(&mu_);
  status_ = status;
}

}  // namespace

std::shared_ptr<BenchConsumer> BenchConsumer::Start(
    Rpc rpc, cli::Connection& connection, const hourglass::v1::Open& open,
    BenchCounters& counters, SeenSet& seen, BenchControl& control) {
  if (rpc == Rpc::kSubscribeBatches) {
    auto stream = std::make_shared<Stream<hourglass::v1::DeliveryBatch>>(
        connection, counters, seen, control);
    stream->Start(open);
    return stream;
  }
  auto stream = std::make_shared<Stream<hourglass::v1::Delivery>>(
      connection, counters, seen, control);
  stream->Start(open);
  return stream;
}

}  // namespace hourglass::bench
