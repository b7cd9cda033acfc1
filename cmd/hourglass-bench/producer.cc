#include "cmd/hourglass-bench/producer.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace hourglass::bench {
namespace {

// A slot whose call failed waits this long before its next one, so that a
// broker that refuses everything is not hammered in a tight loop.
constexpr absl::Duration kErrorBackoff = absl::Milliseconds(10);

}  // namespace

BenchProducer::BenchProducer(std::unique_ptr<cli::Connection> connection,
                             PublishPlan& plan, BenchCounters& counters,
                             BenchControl& control, int slots, Rpc rpc,
                             int attempts)
    : connection_(std::move(connection)),
      plan_(plan),
      counters_(counters),
      control_(control),
      rpc_(rpc) {
  for (int i = 0; i < slots; ++i) slots_.push_back(std::make_unique<Slot>());
  client::PublisherOptions options;
  options.batch_rpc = rpc == Rpc::kPublishStream
                          ? client::PublisherOptions::BatchRpc::kPublishStream
                          : client::PublisherOptions::BatchRpc::kPublish;
  options.retry.max_attempts = attempts;
  publisher_ =
      std::make_unique<client::Publisher>(connection_->channel(), options);
}

BenchProducer::~BenchProducer() = default;

void BenchProducer::Start() {
  {
    absl::MutexLock lock(&mu_);
    running_ = static_cast<int>(slots_.size());
  }
  for (auto& slot : slots_) Next(*slot, absl::InfinitePast());
}

void BenchProducer::CancelWaits() {
  for (auto& slot : slots_) {
    absl::MutexLock lock(&slot->mu);
    slot->cancelled = true;
    // Runs the alarm's callback with ok = false if it is pending.
    if (slot->alarm != nullptr) slot->alarm->Cancel();
  }
}

void BenchProducer::Wait() {
  {
    absl::MutexLock lock(&mu_);
    auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return running_ == 0;
    };
    mu_.Await(absl::Condition(&done));
  }
  // Ends the stream, if any, here on the main thread.
  publisher_.reset();
}

LatencyHistogram BenchProducer::call_latency() {
  absl::MutexLock lock(&mu_);
  return latency_;
}

void BenchProducer::Next(Slot& slot, absl::Time not_before) {
  slot.claim = plan_.Next();
  if (slot.claim.size == 0) {
    SlotDone();
    return;
  }
  const absl::Time send_at = std::max(slot.claim.send_at, not_before);
  if (send_at <= absl::Now()) {
    Send(slot);
    return;
  }
  {
    absl::MutexLock lock(&slot.mu);
    if (!slot.cancelled) {
      slot.alarm = std::make_unique<grpc::Alarm>();
      slot.alarm->Set(absl::ToChronoTime(send_at), [this, &slot](bool fired) {
        if (fired) {
          Send(slot);
        } else {
          SlotDone();
        }
      });
      return;
    }
  }
  // Outside slot.mu: once the last slot is done, the producer may go.
  SlotDone();
}

void BenchProducer::Send(Slot& slot) {
  std::vector<client::Message> messages;
  plan_.Fill(slot.claim, slot.random, messages);
  slot.sent_at = absl::Now();
  counters_.publish_span.Add(slot.sent_at);
  publisher_->PublishBatchAsync(
      std::move(messages),
      [this, &slot](absl::StatusOr<std::vector<client::Receipt>> receipts) {
        OnPublished(slot, receipts.status());
      });
}

void BenchProducer::OnPublished(Slot& slot, const absl::Status& status) {
  const absl::Time now = absl::Now();
  counters_.publish_span.Add(now);
  absl::Time not_before = absl::InfinitePast();
  if (status.ok()) {
    counters_.published.fetch_add(slot.claim.size, std::memory_order_relaxed);
    counters_.publish_calls.fetch_add(1, std::memory_order_relaxed);
    absl::MutexLock lock(&mu_);
    latency_.Record(now - slot.sent_at);
  } else {
    counters_.errors.fetch_add(1, std::memory_order_relaxed);
    counters_.failed_messages.fetch_add(slot.claim.size,
                                        std::memory_order_relaxed);
    counters_.NoteError(absl::StrCat(
        rpc_ == Rpc::kPublishStream ? "PublishStream: " : "Publish: ",
        connection_->Check(status).message()));
    not_before = now + kErrorBackoff;
  }
  Next(slot, not_before);
}

void BenchProducer::SlotDone() {
  // Under mu_, so that Wait cannot return (and the producer go) while this
  // still runs.
  absl::MutexLock lock(&mu_);
  if (--running_ == 0) control_.ProducerDone();
}

}  // namespace hourglass::bench
