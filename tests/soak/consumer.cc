#include "tests/soak/consumer.h"

#include <optional>
#include <string>
#include <utility>

#include "absl/random/distributions.h"
#include "absl/strings/str_cat.h"

namespace hourglass::soak {
namespace {

constexpr int kRole = 3;
// Shares of the deliveries answered with a nack, and with nothing.
constexpr double kNack = 0.10;
constexpr double kIgnore = 0.03;
constexpr absl::Duration kMaxNackDelay = absl::Milliseconds(500);
// How long one wait for deliveries lasts, so that the thread notices the
// soak's signals and its own time to leave.
constexpr absl::Duration kPoll = absl::Milliseconds(100);
// How long a consumer that left stays away, at most.
constexpr absl::Duration kMaxAway = absl::Seconds(1);
constexpr absl::Duration kCloseTimeout = absl::Seconds(10);

google::protobuf::Duration ToProto(absl::Duration d) {
  google::protobuf::Duration proto;
  const int64_t ms = absl::ToInt64Milliseconds(d);
  proto.set_seconds(ms / 1000);
  proto.set_nanos(static_cast<int32_t>(ms % 1000) * 1'000'000);
  return proto;
}

}  // namespace

Consumer::Consumer(Shared* shared, int group, int index)
    : shared_(shared),
      group_(group),
      rng_(WorkerRng(shared->config.seed, kRole, index)) {}

void Consumer::Start() {
  thread_ = std::thread([this] { Run(); });
}

void Consumer::Join() { thread_.join(); }

hourglass::v1::Open Consumer::NextOpen() {
  hourglass::v1::Open open;
  open.set_topic(shared_->config.topic);
  open.set_group(GroupName(group_));
  open.set_max_in_flight(absl::Uniform(absl::IntervalClosed, rng_, 1u, 64u));
  *open.mutable_ack_timeout() = ToProto(absl::Milliseconds(
      absl::Uniform(absl::IntervalClosed, rng_, 1000, 2500)));
  return open;
}

void Consumer::Run() {
  Backoff backoff(&rng_);
  while (!shared_->stop_all.HasBeenNotified()) {
    if (connection_ == nullptr) {
      connection_ = Connect(*shared_, shared_->stop_all, backoff);
      if (connection_ == nullptr) return;
    }
    End end;
    {
      testing::Subscription subscription(&connection_->broker(), NextOpen());
      end = Serve(subscription);
    }
    switch (end) {
      case End::kStop:
        return;
      case End::kLost:
        // The broker went away (or refused the stream): a new connection,
        // after a pause.
        connection_.reset();
        if (!backoff.Wait(shared_->stop_all)) return;
        break;
      case End::kDisconnected:
        backoff.Reset();
        if (shared_->stop_all.WaitForNotificationWithTimeout(
                kMaxAway * absl::Uniform(rng_, 0.0, 1.0))) {
          return;
        }
        break;
    }
  }
}

Consumer::End Consumer::Serve(testing::Subscription& subscription) {
  Ledger& ledger = *shared_->ledger;
  const absl::Time leave_at =
      absl::Now() +
      shared_->config.mean_connected * absl::Exponential<double>(rng_, 1.0);
  // Deliveries read but not answered when the stream ends still count as
  // delivered.
  auto record_rest = [&] {
    for (const testing::Received& r : subscription.TakeQueued()) {
      ledger.Delivered(group_, r.delivery, r.at);
    }
  };
  while (true) {
    if (shared_->stop_all.HasBeenNotified()) {
      subscription.Cancel();
      subscription.WaitEnd(kCloseTimeout);
      record_rest();
      return End::kStop;
    }
    std::vector<testing::Received> received = subscription.Take(1, kPoll);
    for (testing::Received& r : subscription.TakeQueued()) {
      received.push_back(std::move(r));
    }
    const bool answered = Answer(subscription, received);
    if (std::optional<grpc::Status> status =
            subscription.WaitEnd(absl::ZeroDuration());
        status.has_value() || !answered) {
      if (!status.has_value()) status = subscription.WaitEnd(kCloseTimeout);
      record_rest();
      ++shared_->counters.stream_ends;
      if (status.has_value() &&
          status->error_code() != grpc::StatusCode::UNAVAILABLE) {
        ReportUnexpected(*shared_, "Subscribe", *status);
      }
      return End::kLost;
    }
    if (!shared_->stop_producing.HasBeenNotified() && absl::Now() >= leave_at) {
      ++shared_->counters.disconnects;
      if (absl::Bernoulli(rng_, 0.5)) {
        subscription.Cancel();
        subscription.WaitEnd(kCloseTimeout);
      } else {
        const grpc::Status status = subscription.Close(kCloseTimeout);
        if (!status.ok() &&
            status.error_code() != grpc::StatusCode::UNAVAILABLE) {
          ReportUnexpected(*shared_, "Subscribe (closed)", status);
        }
      }
      record_rest();
      return End::kDisconnected;
    }
  }
}

bool Consumer::Answer(testing::Subscription& subscription,
                      const std::vector<testing::Received>& received) {
  Ledger& ledger = *shared_->ledger;
  const bool draining = shared_->stop_producing.HasBeenNotified();
  // All recorded first: a failed write below ends the answers.
  for (const testing::Received& r : received) {
    ledger.Delivered(group_, r.delivery, r.at);
  }
  std::vector<std::string> acks;
  for (const testing::Received& r : received) {
    const bool must_ack =
        draining || r.delivery.attempt() >= shared_->config.max_attempts / 2;
    const double choice = absl::Uniform(rng_, 0.0, 1.0);
    if (must_ack || choice >= kNack + kIgnore) {
      acks.push_back(r.delivery.id());
    } else if (choice < kNack) {
      if (!subscription.Nack(r.delivery.id(),
                             kMaxNackDelay * absl::Uniform(rng_, 0.0, 1.0))) {
        return false;
      }
      ++shared_->counters.nacks;
    } else {
      ++shared_->counters.ignored;
    }
  }
  if (acks.empty()) return true;
  if (!subscription.Ack(acks)) return false;
  for (const std::string& id : acks) ledger.Acked(group_, id);
  return true;
}

}  // namespace hourglass::soak
