#include "tests/cluster/chaos_load.h"

#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/publisher.h"
#include "tests/testing/eventually.h"

namespace hourglass::testing {

using ::hourglass::client::Channel;
using ::hourglass::client::ChannelOptions;
using ::hourglass::client::Consumer;
using ::hourglass::client::ConsumerOptions;
using ::hourglass::client::Delivery;
using ::hourglass::client::Message;
using ::hourglass::client::Publisher;
using ::hourglass::client::Receipt;

ChaosLoad::~ChaosLoad() {
  StopPublishing();
  Close();
}

absl::Status ChaosLoad::Start() {
  ChannelOptions options;
  options.address = addresses_;
  options.call_timeout = absl::Seconds(10);
  absl::StatusOr<std::shared_ptr<Channel>> channel = Channel::Create(options);
  if (!channel.ok()) return channel.status();
  channel_ = *std::move(channel);
  for (const std::string& topic : topics_) {
    ConsumerOptions consumer;
    consumer.topic = topic;
    consumer.group = "ledger";
    consumer.ack_timeout = absl::Seconds(3);
    consumer.reconnect = true;
    // The first subscription is not retried by the library, and the
    // shard's primary may be moving (the controller evens out leads once
    // the copies have spread): tried again while UNAVAILABLE.
    absl::StatusOr<std::unique_ptr<Consumer>> subscribed;
    Eventually(
        [&] {
          subscribed = Consumer::Subscribe(
              channel_, consumer,
              [this](Consumer& c, std::vector<Delivery> deliveries) {
                for (const Delivery& d : deliveries) {
                  ledger_.Delivered(d.id, d.received_at, d.deliver_at);
                  (void)c.Ack(d.id);  // A lost ack only means a redelivery.
                }
              });
          return !absl::IsUnavailable(subscribed.status());
        },
        absl::Seconds(30));
    if (!subscribed.ok()) return subscribed.status();
    consumers_.push_back(*std::move(subscribed));
  }
  for (int i = 0; i < 2; ++i) {
    threads_.emplace_back([this, i] { Publish(i); });
  }
  threads_.emplace_back([this] { CancelSome(); });
  return absl::OkStatus();
}

void ChaosLoad::StopPublishing() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

void ChaosLoad::Close() {
  for (std::unique_ptr<Consumer>& consumer : consumers_) {
    (void)consumer->Close(absl::Now() + absl::Seconds(5));
  }
  consumers_.clear();
}

void ChaosLoad::Publish(int publisher) {
  std::mt19937_64 random(seed_ * 31 + static_cast<uint64_t>(publisher));
  Publisher client(channel_);
  for (int64_t n = 0;; ++n) {
    {
      absl::MutexLock lock(&mu_);
      // About 100 messages a second each: a load to check, not a benchmark.
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_),
                               absl::Milliseconds(10))) {
        return;
      }
    }
    Message m;
    m.topic = topics_[static_cast<size_t>(n + publisher) % topics_.size()];
    m.id = absl::StrCat("p", publisher, "-", n);
    m.payload = m.id;
    m.payload.resize(std::max(m.id.size(), payload_bytes_.load()), '.');
    const bool late = std::uniform_int_distribution<int>(0, 4)(random) == 0;
    m.delay = late ? absl::Milliseconds(
                         std::uniform_int_distribution<int>(2000, 4000)(random))
                   : absl::Milliseconds(
                         std::uniform_int_distribution<int>(0, 1500)(random));
    absl::StatusOr<Receipt> receipt = client.Publish(m);
    if (!receipt.ok()) {
      ledger_.PublishUncertain(m.id);
      continue;
    }
    ledger_.Published(m.id, receipt->deliver_at);
    if (late && std::uniform_int_distribution<int>(0, 1)(random) == 0) {
      absl::MutexLock lock(&mu_);
      to_cancel_.push_back({m.topic, m.id});
    }
  }
}

void ChaosLoad::CancelSome() {
  Publisher client(channel_);
  while (true) {
    ToCancel next;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !to_cancel_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (stopping_) return;
      next = std::move(to_cancel_.front());
      to_cancel_.pop_front();
    }
    const absl::Status status = client.Cancel(next.topic, next.id);
    if (status.ok()) {
      ledger_.Cancelled(next.id);
    } else if (absl::IsNotFound(status)) {
      ledger_.CancelNotFound(next.id, absl::Now());
    } else {
      ledger_.CancelUncertain(next.id);
    }
  }
}

}  // namespace hourglass::testing
