#include "cmd/hourglass/subscription.h"

#include <utility>

namespace hourglass::cli {

using hourglass::v1::Delivery;

std::shared_ptr<Subscription> Subscription::Start(
    hourglass::v1::Broker::Stub& stub, const hourglass::v1::Open& open) {
  std::shared_ptr<Subscription> s(new Subscription());
  stub.async()->Subscribe(&s->context_, s.get());
  {
    absl::MutexLock lock(&s->mu_);
    *s->write_.mutable_open() = open;
    s->writing_ = true;
  }
  s->StartWrite(&s->write_);
  s->StartRead(&s->read_);
  s->AddHold();  // Removed by Finish.
  s->StartCall();
  return s;
}

bool Subscription::WaitSubscribed(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto answered = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return subscribed_.has_value() || reads_ended_ || interrupted_;
  };
  mu_.AwaitWithDeadline(absl::Condition(&answered), deadline);
  return subscribed_.value_or(false) && !interrupted_;
}

std::vector<Delivery> Subscription::Take(size_t max) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !queue_.empty() || reads_ended_ || interrupted_;
  };
  mu_.Await(absl::Condition(&ready));
  std::vector<Delivery> taken;
  if (interrupted_) return taken;
  while (!queue_.empty() && taken.size() < max) {
    unacked_.insert(queue_.front().id());
    taken.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  return taken;
}

void Subscription::Ack(const std::string& id) {
  NextWrite next;
  {
    absl::MutexLock lock(&mu_);
    unacked_.erase(id);
    acks_.push_back(id);
    next = ClaimWriteLocked();
  }
  StartNext(next);
}

void Subscription::WaitAcked() {
  absl::MutexLock lock(&mu_);
  auto settled = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return unacked_.empty() || reads_ended_ || interrupted_;
  };
  mu_.Await(absl::Condition(&settled));
}

void Subscription::Interrupt() {
  absl::MutexLock lock(&mu_);
  interrupted_ = true;
}

bool Subscription::interrupted() {
  absl::MutexLock lock(&mu_);
  return interrupted_;
}

grpc::Status Subscription::Finish(absl::Time deadline) {
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

Subscription::NextWrite Subscription::ClaimWriteLocked() {
  if (writing_ || write_failed_ || reads_ended_) return NextWrite::kNone;
  if (!acks_.empty()) {
    write_.Clear();
    for (std::string& id : acks_) write_.mutable_ack()->add_ids(std::move(id));
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

void Subscription::StartNext(NextWrite next) {
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

void Subscription::OnReadInitialMetadataDone(bool ok) {
  // The broker sends initial metadata once the consumer is subscribed; a
  // refused open ends the stream without it (ok is false then).
  absl::MutexLock lock(&mu_);
  subscribed_ = ok;
}

void Subscription::OnReadDone(bool ok) {
  if (!ok) {
    absl::MutexLock lock(&mu_);
    reads_ended_ = true;
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    queue_.push_back(std::move(read_));
  }
  read_.Clear();
  StartRead(&read_);
}

void Subscription::OnWriteDone(bool ok) {
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

void Subscription::OnWritesDoneDone(bool ok) {
  absl::MutexLock lock(&mu_);
  writing_ = false;
}

void Subscription::OnDone(const grpc::Status& status) {
  // gRPC's last use of this object: once mu_ is free, Finish returns and
  // its caller may destroy the object.
  absl::MutexLock lock(&mu_);
  status_ = status;
}

}  // namespace hourglass::cli
