#ifndef HOURGLASS_CMD_HOURGLASS_BENCH_CONSUMER_H_
#define HOURGLASS_CMD_HOURGLASS_BENCH_CONSUMER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/consumer.h"
#include "cmd/common/connection.h"
#include "cmd/hourglass-bench/histogram.h"
#include "cmd/hourglass-bench/lateness_log.h"
#include "cmd/hourglass-bench/stats.h"

namespace hourglass::bench {

// One consumer of hourglass-bench: a client::Consumer on a connection of
// its own (reconnecting if its options say so), whose handler acks each
// response's
// deliveries and counts them as gRPC hands them over, using the time the
// library read them off the stream. Nothing queues between the read and the
// ack, so the figures are the broker's and not a queue's.
//
// Finish and the accessors are for the bench's main thread; the handler runs
// on gRPC's threads, one response at a time.
class BenchConsumer {
 public:
  // Subscribes `options` (topic, group, credit, RPC, reconnect) on
  // `connection`. The consumer's first end with an error counts as a stream
  // error, with its text. Each message's first delivery goes to
  // `lateness_log` too, unless it is null. REQUIRES: `connection`,
  // `counters`, `seen`, `control` and `lateness_log` outlive the result.
  static absl::StatusOr<std::unique_ptr<BenchConsumer>> Subscribe(
      cli::Connection& connection, client::ConsumerOptions options,
      BenchCounters& counters, SeenSet& seen, BenchControl& control,
      LatenessLog* lateness_log = nullptr);

  // Counts the stream's failure if it has failed since the last call.
  void Poll();

  // Ends the stream cleanly (the queued acks go first), at most until
  // `deadline`, then counts its failure if any. Once.
  void Finish(absl::Time deadline);

  // Arrival minus deliver_at of each message's first delivery, and when the
  // first and the last of those arrived. REQUIRES: Finish returned.
  const LatencyHistogram& lateness() const { return lateness_; }
  absl::Time first_arrival() const { return first_arrival_; }
  absl::Time last_arrival() const { return last_arrival_; }

 private:
  BenchConsumer(cli::Connection& connection, BenchCounters& counters,
                SeenSet& seen, BenchControl& control, LatenessLog* lateness_log)
      : connection_(connection),
        counters_(counters),
        seen_(seen),
        control_(control),
        lateness_log_(lateness_log) {}

  // The handler: acks `deliveries`, then counts them.
  void Handle(client::Consumer& consumer,
              std::vector<client::Delivery> deliveries);
  // Counts a delivery.
  void Count(const client::Delivery& delivery);
  // Counts the consumer's failure `status`, once.
  void CountEnd(const absl::Status& status);

  // Constant after construction.
  cli::Connection& connection_;
  BenchCounters& counters_;
  SeenSet& seen_;
  BenchControl& control_;
  LatenessLog* const lateness_log_;
  std::unique_ptr<client::Consumer> consumer_;

  // Touched by the handler only, and read once Finish returned.
  LatencyHistogram lateness_;
  absl::Time first_arrival_ = absl::InfiniteFuture();
  absl::Time last_arrival_ = absl::InfinitePast();

  absl::Mutex mu_;
  bool end_counted_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace hourglass::bench

#endif  // HOURGLASS_CMD_HOURGLASS_BENCH_CONSUMER_H_
