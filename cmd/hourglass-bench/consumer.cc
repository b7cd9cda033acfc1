#include "cmd/hourglass-bench/consumer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "cmd/hourglass-bench/workload.h"

namespace hourglass::bench {

absl::StatusOr<std::unique_ptr<BenchConsumer>> BenchConsumer::Subscribe(
    cli::Connection& connection, client::ConsumerOptions options,
    BenchCounters& counters, SeenSet& seen, BenchControl& control,
    LatenessLog* lateness_log) {
  std::unique_ptr<BenchConsumer> bench(
      new BenchConsumer(connection, counters, seen, control, lateness_log));
  BenchConsumer* self = bench.get();
  absl::StatusOr<std::unique_ptr<client::Consumer>> consumer =
      client::Consumer::Subscribe(
          connection.channel(), std::move(options),
          [self](client::Consumer& consumer,
                 std::vector<client::Delivery> deliveries) {
            self->Handle(consumer, std::move(deliveries));
          });
  if (!consumer.ok()) return consumer.status();
  bench->consumer_ = *std::move(consumer);
  return bench;
}

void BenchConsumer::Handle(client::Consumer& consumer,
                           std::vector<client::Delivery> deliveries) {
  // Acked before the deliveries are counted: once the last one is counted,
  // Finish may end the stream, and its ack must go before that, or the
  // broker hands the delivery to another consumer (a duplicate).
  std::vector<std::string> ids;
  ids.reserve(deliveries.size());
  for (const client::Delivery& d : deliveries) ids.push_back(d.id);
  // A failed ack means an ended stream, which Poll and Finish count.
  consumer.Ack(ids).IgnoreError();
  for (const client::Delivery& d : deliveries) Count(d);
}

void BenchConsumer::Count(const client::Delivery& delivery) {
  counters_.deliveries.fetch_add(1, std::memory_order_relaxed);
  const absl::Time now = delivery.received_at;
  if (now < delivery.deliver_at) {
    counters_.early.fetch_add(1, std::memory_order_relaxed);
  }
  uint64_t sequence;
  if (!ReadSequence(delivery.payload, sequence)) {
    counters_.foreign.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (!seen_.Insert(sequence)) {
    counters_.duplicates.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  lateness_.Record(now - delivery.deliver_at);
  if (lateness_log_ != nullptr) lateness_log_->Record(delivery.deliver_at, now);
  if (now < first_arrival_) first_arrival_ = now;
  if (now > last_arrival_) last_arrival_ = now;
  control_.Delivered(
      counters_.delivered.fetch_add(1, std::memory_order_acq_rel) + 1);
}

void BenchConsumer::Poll() {
  if (std::optional<absl::Status> ended = consumer_->ended();
      ended.has_value()) {
    CountEnd(*ended);
  }
}

void BenchConsumer::Finish(absl::Time deadline) {
  CountEnd(consumer_->Close(deadline));
}

void BenchConsumer::CountEnd(const absl::Status& status) {
  // CANCELLED: cut by this side (Finish's deadline passed) or by the
  // broker's stall timeout; neither is the broker failing.
  if (status.ok() || status.code() == absl::StatusCode::kCancelled) return;
  {
    absl::MutexLock lock(&mu_);
    if (end_counted_) return;
    end_counted_ = true;
  }
  counters_.stream_errors.fetch_add(1, std::memory_order_relaxed);
  counters_.NoteError(
      absl::StrCat("Subscribe: ", connection_.Check(status).message()));
}

}  // namespace hourglass::bench
