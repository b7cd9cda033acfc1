#include "tests/soak/consumer.h"

#include <cstdint>
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

}  // namespace

Consumer::Consumer(Shared* shared, int group, int index)
    : shared_(shared),
      group_(group),
      rng_(WorkerRng(shared->config.seed, kRole, index)) {}

void Consumer::Start() {
  thread_ = std::thread([this] { Run(); });
}

void Consumer::Join() { thread_.join(); }

client::ConsumerOptions Consumer::NextOptions() {
  client::ConsumerOptions options;
  options.topic = shared_->config.topic;
  options.group = GroupName(group_);
  options.rpc = client::ConsumerOptions::Rpc::kSubscribe;
  options.reconnect = false;
  options.max_in_flight = absl::Uniform(absl::IntervalClosed, rng_, 1u, 64u);
  options.ack_timeout =
      absl::Milliseconds(absl::Uniform(absl::IntervalClosed, rng_, 1000, 2500));
  return options;
}

void Consumer::Run() {
  Backoff backoff(&rng_);
  while (!shared_->stop_all.HasBeenNotified()) {
    if (connection_ == nullptr) {
      connection_ = Connect(*shared_, shared_->stop_all, backoff);
      if (connection_ == nullptr) return;
    }
    End end;
    absl::StatusOr<std::unique_ptr<client::Consumer>> subscription =
        client::Consumer::Subscribe(connection_->channel, NextOptions());
    if (subscription.ok()) {
      end = Serve(**subscription);
      subscription->reset();
    } else {
      // Refused, or the broker went away meanwhile.
      ++shared_->counters.stream_ends;
      if (subscription.status().code() != absl::StatusCode::kUnavailable) {
        ReportUnexpected(*shared_, "Subscribe", subscription.status());
      }
      end = End::kLost;
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

Consumer::End Consumer::Serve(client::Consumer& subscription) {
  Ledger& ledger = *shared_->ledger;
  const absl::Time leave_at =
      absl::Now() +
      shared_->config.mean_connected * absl::Exponential<double>(rng_, 1.0);
  // Deliveries read but not answered when the stream ends still count as
  // delivered.
  auto record_rest = [&] {
    for (const client::Delivery& d :
         subscription.Receive(SIZE_MAX, absl::InfinitePast())) {
      ledger.Delivered(group_, d, d.received_at);
    }
  };
  while (true) {
    if (shared_->stop_all.HasBeenNotified()) {
      subscription.Cancel();
      subscription.ended(absl::Now() + kCloseTimeout);
      record_rest();
      return End::kStop;
    }
    const std::vector<client::Delivery> received =
        subscription.Receive(SIZE_MAX, absl::Now() + kPoll);
    const bool answered = Answer(subscription, received);
    if (std::optional<absl::Status> status = subscription.ended();
        status.has_value() || !answered) {
      if (!status.has_value()) {
        status = subscription.ended(absl::Now() + kCloseTimeout);
      }
      record_rest();
      ++shared_->counters.stream_ends;
      if (status.has_value() &&
          status->code() != absl::StatusCode::kUnavailable) {
        ReportUnexpected(*shared_, "Subscribe", *status);
      }
      return End::kLost;
    }
    if (!shared_->stop_producing.HasBeenNotified() && absl::Now() >= leave_at) {
      ++shared_->counters.disconnects;
      if (absl::Bernoulli(rng_, 0.5)) {
        subscription.Cancel();
        subscription.ended(absl::Now() + kCloseTimeout);
      } else {
        const absl::Status status =
            subscription.Close(absl::Now() + kCloseTimeout);
        if (!status.ok() && status.code() != absl::StatusCode::kUnavailable) {
          ReportUnexpected(*shared_, "Subscribe (closed)", status);
        }
      }
      record_rest();
      return End::kDisconnected;
    }
  }
}

bool Consumer::Answer(client::Consumer& subscription,
                      const std::vector<client::Delivery>& received) {
  Ledger& ledger = *shared_->ledger;
  const bool draining = shared_->stop_producing.HasBeenNotified();
  // All recorded first: a failed write below ends the answers.
  for (const client::Delivery& d : received) {
    ledger.Delivered(group_, d, d.received_at);
  }
  std::vector<std::string> acks;
  for (const client::Delivery& d : received) {
    const bool must_ack =
        draining || d.attempt >= shared_->config.max_attempts / 2;
    const double choice = absl::Uniform(rng_, 0.0, 1.0);
    if (must_ack || choice >= kNack + kIgnore) {
      acks.push_back(d.id);
    } else if (choice < kNack) {
      if (!subscription
               .Nack(d.id, kMaxNackDelay * absl::Uniform(rng_, 0.0, 1.0))
               .ok()) {
        return false;
      }
      ++shared_->counters.nacks;
    } else {
      ++shared_->counters.ignored;
    }
  }
  if (acks.empty()) return true;
  if (!subscription.Ack(acks).ok()) return false;
  for (const std::string& id : acks) ledger.Acked(group_, id);
  return true;
}

}  // namespace hourglass::soak
