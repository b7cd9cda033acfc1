#include "tests/soak/canceller.h"

#include <algorithm>
#include <utility>

namespace hourglass::soak {
namespace {

constexpr int kRole = 2;
// How long the thread waits at most before it looks at the stop signal.
constexpr absl::Duration kStopCheck = absl::Milliseconds(200);

}  // namespace

Canceller::Canceller(Shared* shared)
    : shared_(shared), rng_(WorkerRng(shared->config.seed, kRole, 0)) {}

void Canceller::Start() {
  thread_ = std::thread([this] { Run(); });
}

void Canceller::Join() { thread_.join(); }

void Canceller::Offer(std::string id, absl::Time at) {
  absl::MutexLock lock(&mu_);
  if (plans_.empty() || at < plans_.top().at) woken_ = true;
  plans_.push({at, std::move(id)});
}

std::vector<Canceller::Planned> Canceller::TakeDue() {
  absl::MutexLock lock(&mu_);
  std::vector<Planned> due;
  while (!shared_->stop_producing.HasBeenNotified()) {
    const absl::Time now = absl::Now();
    while (!plans_.empty() && plans_.top().at <= now) {
      due.push_back(plans_.top());
      plans_.pop();
    }
    if (!due.empty()) return due;
    absl::Time deadline = now + kStopCheck;
    if (!plans_.empty()) deadline = std::min(deadline, plans_.top().at);
    woken_ = false;
    mu_.AwaitWithDeadline(absl::Condition(&woken_), deadline);
  }
  return due;
}

void Canceller::Run() {
  while (!shared_->stop_producing.HasBeenNotified()) {
    for (const Planned& plan : TakeDue()) CancelOne(plan.id);
  }
}

void Canceller::CancelOne(const std::string& id) {
  Backoff backoff(&rng_);
  if (connection_ == nullptr) {
    connection_ = Connect(*shared_, shared_->stop_producing, backoff);
    // Stopped: the message simply stays uncancelled.
    if (connection_ == nullptr) return;
  }
  ++shared_->counters.cancel_calls;
  const absl::Status status =
      connection_->publisher->Cancel(shared_->config.topic, id);
  const absl::Time answered_at = absl::Now();
  switch (status.code()) {
    case absl::StatusCode::kOk:
      shared_->ledger->CancelSucceeded(id, answered_at);
      return;
    case absl::StatusCode::kNotFound:
      shared_->ledger->CancelNotFound(id, answered_at);
      return;
    case absl::StatusCode::kAborted:
      // A write of the message is in progress; nothing changed. Try again
      // shortly.
      Offer(id, answered_at + absl::Milliseconds(20));
      return;
    default:
      break;
  }
  if (!OutcomeUnknown(status.code()) ||
      status.code() == absl::StatusCode::kInternal ||
      status.code() == absl::StatusCode::kUnknown) {
    ReportUnexpected(*shared_, "Cancel " + id, status);
  }
  shared_->ledger->CancelUnknown(id);
  // The broker may have gone: the next cancel reconnects.
  connection_.reset();
}

}  // namespace hourglass::soak
