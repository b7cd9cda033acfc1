#ifndef HOURGLASS_CMD_HOURGLASS_BENCH_CONSUMER_H_
#define HOURGLASS_CMD_HOURGLASS_BENCH_CONSUMER_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cmd/hourglass/bench_histogram.h"
#include "cmd/hourglass/bench_stats.h"
#include "cmd/hourglass/connection.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"
#include "hourglass/v1/broker.grpc.pb.h"

namespace hourglass::cli {

// One consumer of `hourglass bench`: a Subscribe stream on a connection of
// its own that time-stamps each delivery as gRPC hands it over, counts it
// and acks it from the same reaction. Unlike cmd/hourglass/subscription.h,
// which queues deliveries for a command's thread, nothing waits between the
// read and the ack, so the figures are the broker's and not a queue's here.
// Acks that arrive during a write go out together in the next one.
//
// Start, WaitSubscribed, Finish and lateness are for the bench's main
// thread; the reactions run on gRPC's threads. A hold keeps the call open
// until Finish. OnDone is gRPC's last use of the object and Finish returns
// only after it, so the caller's pointer owns the object.
class BenchConsumer final
    : public grpc::ClientBidiReactor<hourglass::v1::SubscribeRequest,
                                     hourglass::v1::Delivery> {
 public:
  // Opens the stream with `open` on `connection`. REQUIRES: `connection`,
  // `counters`, `seen` and `control` outlive this object; Finish is called
  // before the result is dropped, on the caller's thread. Together these
  // keep the last reference to a channel (the ClientContext holds one) from
  // being dropped on a gRPC callback thread: gRPC 1.51 would then shut the
  // callback queue down from that queue's own thread (a double free), or
  // shut itself down on a detached thread that races with the exit.
  static std::shared_ptr<BenchConsumer> Start(Connection& connection,
                                              const hourglass::v1::Open& open,
                                              BenchCounters& counters,
                                              SeenSet& seen,
                                              BenchControl& control);

  // Waits until the broker accepts the open, at most until `deadline`. True
  // once subscribed; false if the stream ended instead (Finish says why) or
  // the deadline passed.
  bool WaitSubscribed(absl::Time deadline);

  // Sends the acks still queued, ends the client's side, waits until
  // `deadline` for the broker to end the stream, then cancels it. Returns
  // the stream's status (OK after a clean end). Call once.
  grpc::Status Finish(absl::Time deadline);

  // The connection the stream runs on, for its Check.
  const Connection& connection() const { return connection_; }

  // Arrival minus deliver_at of each message's first delivery, and when the
  // first and the last of those arrived. REQUIRES: Finish returned.
  const LatencyHistogram& lateness() const { return lateness_; }
  absl::Time first_arrival() const { return first_arrival_; }
  absl::Time last_arrival() const { return last_arrival_; }

 private:
  enum class NextWrite { kNone, kWrite, kWritesDone };

  BenchConsumer(Connection& connection, BenchCounters& counters, SeenSet& seen,
                BenchControl& control)
      : connection_(connection),
        counters_(counters),
        seen_(seen),
        control_(control) {}

  void OnReadInitialMetadataDone(bool ok) override;
  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnWritesDoneDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

  // Counts the delivery in read_ that arrived at `now`.
  void Count(absl::Time now);
  // Claims the writer for the queued acks, or for ending the client's side
  // once Finish asked for it; fills write_ for kWrite.
  NextWrite ClaimWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartNext(NextWrite next);

  // Constant after construction.
  Connection& connection_;
  BenchCounters& counters_;
  SeenSet& seen_;
  BenchControl& control_;

  grpc::ClientContext context_;

  // Touched by the read chain only (StartRead and the OnReadDone it
  // causes), and read by Finish's caller once the chain has ended.
  hourglass::v1::Delivery read_;
  LatencyHistogram lateness_;
  absl::Time first_arrival_ = absl::InfiniteFuture();
  absl::Time last_arrival_ = absl::InfinitePast();

  absl::Mutex mu_;
  // The request being written; owned by the writer while writing_.
  hourglass::v1::SubscribeRequest write_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool write_failed_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::string> acks_ ABSL_GUARDED_BY(mu_);
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool writes_done_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<bool> subscribed_ ABSL_GUARDED_BY(mu_);
  bool reads_ended_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hourglass::cli

#endif  // HOURGLASS_CMD_HOURGLASS_BENCH_CONSUMER_H_
