#include "cmd/hourglass/bench_consumer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cmd/hourglass/bench_workload.h"
#include "cmd/hourglass/duration.h"

namespace hourglass::cli {

std::shared_ptr<BenchConsumer> BenchConsumer::Start(
    Connection& connection, const hourglass::v1::Open& open,
    BenchCounters& counters, SeenSet& seen, BenchControl& control) {
  std::shared_ptr<BenchConsumer> c(
      new BenchConsumer(connection, counters, seen, control));
  c->connection_.broker().async()->Subscribe(&c->context_, c.get());
  {
    absl::MutexLock lock(&c->mu_);
    *c->write_.mutable_open() = open;
    c->writing_ = true;
  }
  c->StartWrite(&c->write_);
  c->StartRead(&c->read_);
  c->AddHold();  // Removed by Finish.
  c->StartCall();
  return c;
}

bool BenchConsumer::WaitSubscribed(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto answered = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return subscribed_.has_value() || reads_ended_;
  };
  mu_.AwaitWithDeadline(absl::Condition(&answered), deadline);
  return subscribed_.value_or(false);
}

grpc::Status BenchConsumer::Finish(absl::Time deadline) {
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
  RemoveHold();
  absl::MutexLock lock(&mu_);
  auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return status_.has_value();
  };
  mu_.Await(absl::Condition(&done));
  return *status_;
}

void BenchConsumer::OnReadInitialMetadataDone(bool ok) {
  // The broker sends initial metadata once the consumer is subscribed; a
  // refused open ends the stream without it.
  absl::MutexLock lock(&mu_);
  subscribed_ = ok;
}

void BenchConsumer::Count(absl::Time now) {
  counters_.deliveries.fetch_add(1, std::memory_order_relaxed);
  const absl::Time deliver_at = FromProto(read_.deliver_at());
  if (now < deliver_at) counters_.early.fetch_add(1, std::memory_order_relaxed);
  uint64_t sequence;
  if (!ReadSequence(read_.payload(), sequence)) {
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

void BenchConsumer::OnReadDone(bool ok) {
  if (!ok) {
    absl::MutexLock lock(&mu_);
    reads_ended_ = true;
    return;
  }
  const absl::Time now = absl::Now();
  {
    // Queued before the delivery is counted: once the last one is counted,
    // Finish may half-close the stream, and this ack must go before that,
    // or the broker hands the delivery to another consumer (a duplicate).
    absl::MutexLock lock(&mu_);
    acks_.push_back(read_.id());
  }
  Count(now);
  NextWrite next;
  {
    absl::MutexLock lock(&mu_);
    next = ClaimWriteLocked();
  }
  StartNext(next);
  StartRead(&read_);
}

BenchConsumer::NextWrite BenchConsumer::ClaimWriteLocked() {
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

void BenchConsumer::StartNext(NextWrite next) {
  switch (next) {
    case NextWrite::kWrite:
      StartWrite(&write_);  // write_ is the writer's until OnWriteDone.
      break;
    case NextWrite::kWritesDone:
      StartWritesDone();
      break;
    case NextWrite::kNone:
      break;
  }
}

void BenchConsumer::OnWriteDone(bool ok) {
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

void BenchConsumer::OnWritesDoneDone(bool ok) {
  absl::MutexLock lock(&mu_);
  writing_ = false;
}

void BenchConsumer::OnDone(const grpc::Status& status) {
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

}  // namespace hourglass::cli
