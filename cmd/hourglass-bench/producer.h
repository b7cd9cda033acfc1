#ifndef HOURGLASS_CMD_HOURGLASS_BENCH_PRODUCER_H_
#define HOURGLASS_CMD_HOURGLASS_BENCH_PRODUCER_H_

#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/publisher.h"
#include "cmd/common/connection.h"
#include "cmd/hourglass-bench/histogram.h"
#include "cmd/hourglass-bench/stats.h"
#include "cmd/hourglass-bench/workload.h"
#include "grpcpp/alarm.h"

namespace hourglass::bench {

// One producer of hourglass-bench: a connection of its own, a
// client::Publisher on it (by default one attempt per request: failures are
// counted, not hidden by retries; --retries for a run through failovers),
// and a number of slots, each a chain of publishes
// on the Publisher's callbacks, so that `slots` requests are in flight at
// once without a thread each: a Publish call each, or requests on the
// Publisher's PublishStream. A slot claims its next batch from the
// PublishPlan when its request is answered; when the plan paces to --rate, a
// grpc::Alarm waits for the batch's send time. No thread of the bench is
// needed while it runs.
//
// Start and Wait are called from the bench's main thread; the slots run on
// gRPC's threads. Thread-safe.
class BenchProducer {
 public:
  // How requests travel.
  enum class Rpc {
    kPublish,        // A unary call each.
    kPublishStream,  // All on one stream, answered in order.
  };

  // Tells `control` when its last request is answered. Each request is
  // tried up to `attempts` times (client::RetryPolicy; the plan must give
  // messages ids when that is more than 1). REQUIRES: `plan`, `counters` and
  // `control` outlive this object; slots >= 1; attempts >= 1.
  BenchProducer(std::unique_ptr<cli::Connection> connection, PublishPlan& plan,
                BenchCounters& counters, BenchControl& control, int slots,
                Rpc rpc = Rpc::kPublish, int attempts = 1);
  // REQUIRES: Wait has returned (no call or alarm is pending).
  ~BenchProducer();

  BenchProducer(const BenchProducer&) = delete;
  BenchProducer& operator=(const BenchProducer&) = delete;

  // Starts every slot's first call.
  void Start();

  // Ends waits for send times at once, after plan.Stop(), so that Wait
  // returns as soon as the calls in flight are answered.
  void CancelWaits();

  // Waits until every slot is done: the plan has no more batches, and the
  // last requests are answered; then ends the stream, if any.
  void Wait();

  // The latency of the requests that succeeded, from sending to the
  // answer. REQUIRES: Wait returned.
  LatencyHistogram call_latency();

 private:
  struct Slot {
    PublishPlan::Claim claim;
    absl::Time sent_at;
    // Used by the slot's chain only: one step runs at a time.
    absl::BitGen random;

    absl::Mutex mu;
    // Waits for the send time of the next batch. A new one each time: an
    // alarm's callback may still be returning when the next wait starts.
    std::unique_ptr<grpc::Alarm> alarm ABSL_GUARDED_BY(mu);
    bool cancelled ABSL_GUARDED_BY(mu) = false;
  };

  // Claims the slot's next batch and sends it at its time, but not before
  // `not_before`; or ends the slot when the plan has no more.
  void Next(Slot& slot, absl::Time not_before);
  void Send(Slot& slot);
  // The slot's request was answered: OK, or failed with `status`.
  void OnPublished(Slot& slot, const absl::Status& status);
  void SlotDone();

  // Constant after construction.
  const std::unique_ptr<cli::Connection> connection_;
  PublishPlan& plan_;
  BenchCounters& counters_;
  BenchControl& control_;
  const Rpc rpc_;
  std::vector<std::unique_ptr<Slot>> slots_;
  // Until Wait returns: it waits for the calls in flight and ends the
  // stream, on the main thread.
  std::unique_ptr<client::Publisher> publisher_;

  absl::Mutex mu_;
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  LatencyHistogram latency_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hourglass::bench

#endif  // HOURGLASS_CMD_HOURGLASS_BENCH_PRODUCER_H_
