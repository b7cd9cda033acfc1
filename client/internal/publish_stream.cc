#include "client/internal/publish_stream.h"

#include <utility>
#include <vector>

#include "absl/time/clock.h"

namespace hourglass::client::internal {

PublishStream::PublishStream(
    hourglass::v1::Broker::Stub& stub,
    const std::function<void(grpc::ClientContext&)>& prepare) {
  prepare(context_);
  stub.async()->PublishStream(&context_, this);
  StartRead(&response_);
  AddHold();  // Until the reads end and no Start* can follow (Started).
  StartCall();
}

PublishStream::~PublishStream() {
  context_.TryCancel();
  std::vector<grpc::Alarm*> pending;
  {
    absl::MutexLock lock(&mu_);
    destroying_ = true;
    auto armed = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return arming_ == 0;
    };
    mu_.Await(absl::Condition(&armed));
    for (auto& w : watchdogs_) {
      if (!w->ran) pending.push_back(&w->alarm);
    }
  }
  // Outside mu_: a cancelled alarm may run its callback inline.
  for (grpc::Alarm* alarm : pending) alarm->Cancel();
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!finished_) return false;
    for (const auto& w : watchdogs_) {
      if (!w->ran) return false;
    }
    return true;
  };
  mu_.Await(absl::Condition(&idle));
}

void PublishStream::Send(const hourglass::v1::PublishRequest* request,
                         absl::Time deadline, AnswerCallback done) {
  Start start;
  std::optional<absl::Time> arm;
  grpc::Status failure;
  {
    absl::MutexLock lock(&mu_);
    if (status_.has_value()) {
      failure = FailureLocked();
    } else if (closing_) {
      failure = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                             "the PublishStream is closing");
    } else {
      // After the reads ended it waits for OnDone, which fails it with the
      // stream's status.
      unwritten_.push_back({request, deadline, std::move(done)});
      start = ClaimLocked();
      arm = ArmLocked();
    }
  }
  if (!failure.ok()) {
    done(failure, nullptr);
    return;
  }
  if (arm.has_value()) Arm(*arm);
  DoStart(start);
}

void PublishStream::CloseWrites() {
  Start start;
  {
    absl::MutexLock lock(&mu_);
    closing_ = true;
    start = ClaimLocked();
  }
  DoStart(start);
}

bool PublishStream::usable() {
  absl::MutexLock lock(&mu_);
  return !reads_ended_ && !closing_;
}

bool PublishStream::finished() {
  absl::MutexLock lock(&mu_);
  if (!finished_) return false;
  for (const auto& w : watchdogs_) {
    if (!w->ran) return false;
  }
  return true;
}

std::optional<grpc::Status> PublishStream::WaitDone(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithDeadline(absl::Condition(&finished_), deadline);
  if (!finished_) return std::nullopt;
  return status_;
}

PublishStream::Start PublishStream::ClaimLocked() {
  Start start;
  if (writing_ || reads_ended_) return start;
  if (!unwritten_.empty()) {
    start.kind = Start::Kind::kWrite;
    start.request = unwritten_.front().request;
    answering_.push_back(std::move(unwritten_.front()));
    unwritten_.pop_front();
    start.buffer_hint = !unwritten_.empty();
  } else if (closing_ && !writes_done_) {
    start.kind = Start::Kind::kWritesDone;
    writes_done_ = true;
  } else {
    return start;
  }
  writing_ = true;
  ++starting_;
  return start;
}

void PublishStream::DoStart(Start start) {
  switch (start.kind) {
    case Start::Kind::kNone:
      return;
    case Start::Kind::kWrite: {
      grpc::WriteOptions options;
      if (start.buffer_hint) options.set_buffer_hint();
      StartWrite(start.request, options);
      break;
    }
    case Start::Kind::kWritesDone:
      StartWritesDone();
      break;
  }
  Started();
}

void PublishStream::Started() {
  bool release = false;
  {
    absl::MutexLock lock(&mu_);
    --starting_;
    if (reads_ended_ && starting_ == 0 && !hold_released_) {
      hold_released_ = true;
      release = true;
    }
  }
  if (release) RemoveHold();
}

void PublishStream::OnWriteDone(bool ok) {
  Start start;
  {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    // A failed write means a broken stream: its end comes through the reads.
    if (!ok) return;
    start = ClaimLocked();
  }
  DoStart(start);
}

void PublishStream::OnWritesDoneDone(bool /*ok*/) {
  absl::MutexLock lock(&mu_);
  writing_ = false;
}

void PublishStream::OnReadDone(bool ok) {
  if (!ok) {
    // The requests still waiting fail in OnDone, with the stream's status.
    bool release = false;
    {
      absl::MutexLock lock(&mu_);
      reads_ended_ = true;
      if (starting_ == 0 && !hold_released_) {
        hold_released_ = true;
        release = true;
      }
    }
    if (release) RemoveHold();
    return;
  }
  // A response answers the oldest requests waiting, in order. The answers
  // move out of response_ before the next read reuses it.
  std::vector<std::pair<AnswerCallback, hourglass::v1::PublishAnswer>> answered;
  answered.reserve(static_cast<size_t>(response_.answers_size()));
  bool too_many = false;
  std::optional<absl::Time> arm;
  {
    absl::MutexLock lock(&mu_);
    for (hourglass::v1::PublishAnswer& answer : *response_.mutable_answers()) {
      if (answering_.empty()) {
        too_many = true;
        too_many_answers_ = true;
        break;
      }
      answered.emplace_back(std::move(answering_.front().done),
                            std::move(answer));
      answering_.pop_front();
    }
    arm = ArmLocked();
  }
  if (arm.has_value()) Arm(*arm);
  // A broker bug; the requests after it cannot be matched to answers.
  if (too_many) context_.TryCancel();
  StartRead(&response_);
  for (auto& [done, answer] : answered) done(grpc::Status::OK, &answer);
}

void PublishStream::OnDone(const grpc::Status& status) {
  std::vector<Pending> failed;
  grpc::Status failure;
  std::vector<grpc::Alarm*> watching;
  {
    absl::MutexLock lock(&mu_);
    status_ = status;
    // No more watchdogs; those set go at once (below).
    auto armed = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return arming_ == 0;
    };
    mu_.Await(absl::Condition(&armed));
    for (auto& w : watchdogs_) {
      if (!w->ran) watching.push_back(&w->alarm);
    }
    failure = FailureLocked();
    for (Pending& p : answering_) failed.push_back(std::move(p));
    for (Pending& p : unwritten_) failed.push_back(std::move(p));
    answering_.clear();
    unwritten_.clear();
  }
  for (grpc::Alarm* alarm : watching) alarm->Cancel();
  for (Pending& p : failed) p.done(failure, nullptr);
  // gRPC's last use of the object: once mu_ is free, it may be destroyed.
  absl::MutexLock lock(&mu_);
  finished_ = true;
}

grpc::Status PublishStream::FailureLocked() {
  if (deadline_passed_) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        "no answer on the PublishStream by the deadline");
  }
  if (too_many_answers_) {
    return grpc::Status(grpc::StatusCode::INTERNAL,
                        "the broker sent more answers on the PublishStream "
                        "than it was sent requests");
  }
  if (status_->ok()) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "the PublishStream ended before answering");
  }
  return *status_;
}

std::optional<absl::Time> PublishStream::ArmLocked() {
  if (watchdog_armed_ || answering_.empty() ||
      answering_.front().deadline == absl::InfiniteFuture() ||
      status_.has_value() || destroying_) {
    return std::nullopt;
  }
  watchdog_armed_ = true;
  ++arming_;
  return answering_.front().deadline;
}

void PublishStream::Arm(absl::Time at) {
  Watchdog* watchdog;
  std::deque<std::unique_ptr<Watchdog>> ran;
  {
    absl::MutexLock lock(&mu_);
    // Alarms whose callback has run are dropped here, never inside their
    // own callback.
    while (!watchdogs_.empty() && watchdogs_.front()->ran) {
      ran.push_back(std::move(watchdogs_.front()));
      watchdogs_.pop_front();
    }
    watchdogs_.push_back(std::make_unique<Watchdog>());
    watchdog = watchdogs_.back().get();
  }
  watchdog->alarm.Set(absl::ToChronoTime(at), [this, watchdog](bool fired) {
    OnWatchdog(watchdog, fired);
  });
  absl::MutexLock lock(&mu_);
  --arming_;
}

void PublishStream::OnWatchdog(Watchdog* watchdog, bool fired) {
  bool cancel = false;
  std::optional<absl::Time> arm;
  {
    absl::MutexLock lock(&mu_);
    watchdog_armed_ = false;
    if (fired && !answering_.empty()) {
      if (answering_.front().deadline <= absl::Now()) {
        deadline_passed_ = true;
        cancel = true;
      } else {
        // The request it was set for has been answered: watch the next.
        arm = ArmLocked();
      }
    }
  }
  if (arm.has_value()) Arm(*arm);
  if (cancel) context_.TryCancel();
  absl::MutexLock lock(&mu_);
  watchdog->ran = true;
}

}  // namespace hourglass::client::internal
