#ifndef HOURGLASS_CMD_HOURGLASS_BENCH_CONSUMER_H_
#define HOURGLASS_CMD_HOURGLASS_BENCH_CONSUMER_H_

#include <memory>

#include "absl/time/time.h"
#include "cmd/common/connection.h"
#include "cmd/hourglass-bench/histogram.h"
#include "cmd/hourglass-bench/stats.h"
#include "grpcpp/support/status.h"
#include "hourglass/v1/broker.pb.h"

namespace hourglass::bench {

// One consumer of hourglass-bench: a Subscribe or SubscribeBatches stream
// on a connection of its own that time-stamps each delivery as gRPC hands it
// over, counts it and acks it from the same reaction. Unlike
// cmd/hourglass/subscription.h, which queues deliveries for a command's
// thread, nothing waits between the read and the ack, so the figures are the
// broker's and not a queue's here. Acks that arrive during a write go out
// together in the next one; a batch's acks go out together.
//
// All methods are for the bench's main thread; the stream's reactions run on
// gRPC's threads. A hold keeps the call open until Finish. gRPC's last use
// of the object comes before Finish returns, so the caller's pointer owns
// the object.
class BenchConsumer {
 public:
  virtual ~BenchConsumer() = default;

  // How the consumer takes deliveries.
  enum class Rpc {
    kSubscribe,         // One gRPC message per delivery.
    kSubscribeBatches,  // What is waiting, in one message.
  };

  // Opens the stream with `open` on `connection`. REQUIRES: `connection`,
  // `counters`, `seen` and `control` outlive this object; Finish is called
  // before the result is dropped, on the caller's thread. Together these
  // keep the last reference to a channel (the ClientContext holds one) from
  // being dropped on a gRPC callback thread: gRPC 1.51 would then shut the
  // callback queue down from that queue's own thread (a double free), or
  // shut itself down on a detached thread that races with the exit.
  static std::shared_ptr<BenchConsumer> Start(
      Rpc rpc, cli::Connection& connection, const hourglass::v1::Open& open,
      BenchCounters& counters, SeenSet& seen, BenchControl& control);

  // Waits until the broker accepts the open, at most until `deadline`. True
  // once subscribed; false if the stream ended instead (Finish says why) or
  // the deadline passed.
  virtual bool WaitSubscribed(absl::Time deadline) = 0;

  // Sends the acks still queued, ends the client's side, waits until
  // `deadline` for the broker to end the stream, then cancels it. Returns
  // the stream's status (OK after a clean end). Call once.
  virtual grpc::Status Finish(absl::Time deadline) = 0;

  // The connection the stream runs on, for its Check.
  virtual const cli::Connection& connection() const = 0;

  // Arrival minus deliver_at of each message's first delivery, and when the
  // first and the last of those arrived. REQUIRES: Finish returned.
  virtual const LatencyHistogram& lateness() const = 0;
  virtual absl::Time first_arrival() const = 0;
  virtual absl::Time last_arrival() const = 0;
};

}  // namespace hourglass::bench

#endif  // HOURGLASS_CMD_HOURGLASS_BENCH_CONSUMER_H_
