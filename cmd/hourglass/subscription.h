#ifndef HOURGLASS_CMD_HOURGLASS_SUBSCRIPTION_H_
#define HOURGLASS_CMD_HOURGLASS_SUBSCRIPTION_H_

#include <cstddef>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"
#include "hourglass/v1/broker.grpc.pb.h"

namespace hourglass::cli {

// One Broker.Subscribe stream on gRPC's callback API, for a command that
// prints deliveries as they come.
//
// gRPC's threads read deliveries into a queue and write acks, one write at a
// time; acks that arrive during a write go out together in the next one.
// The command's thread takes deliveries with Take and ends the stream with
// Finish. Ack and Interrupt may be called from any thread.
//
// Thread-safe. A hold keeps gRPC from finishing the call until Finish, so
// the reactor methods stay valid until then. OnDone is gRPC's last use of
// the object and Finish returns only after it, so the caller's pointers own
// the object and it is destroyed on the caller's thread (see
// BenchConsumer::Start for why that matters).
class Subscription final
    : public grpc::ClientBidiReactor<hourglass::v1::SubscribeRequest,
                                     hourglass::v1::Delivery> {
 public:
  // Starts the stream on `stub` and sends `open` as its first request.
  // REQUIRES: Finish is called before the result is dropped.
  static std::shared_ptr<Subscription> Start(hourglass::v1::Broker::Stub& stub,
                                             const hourglass::v1::Open& open);

  // Waits until the broker answers `open`, at most until `deadline`. True
  // once subscribed; false if the stream ended instead (Finish says why),
  // Interrupt was called, or the deadline passed.
  bool WaitSubscribed(absl::Time deadline);

  // Waits for deliveries and takes up to `max` of those queued, oldest
  // first; the rest stay queued (and go back to the group if the stream
  // ends). Returns none once the stream's reads ended (Finish says why) or
  // Interrupt was called. REQUIRES: max > 0.
  std::vector<hourglass::v1::Delivery> Take(size_t max);

  // Acknowledges delivery `id`, now or right after the write in progress.
  void Ack(const std::string& id);

  // Waits until every delivery Take returned has been acked (an ack that
  // came before its delivery was taken does not count), the stream's reads
  // ended, or Interrupt was called.
  void WaitAcked();

  // Wakes Take, WaitSubscribed and WaitAcked, now and for good.
  void Interrupt();
  // Whether Interrupt was called.
  bool interrupted();

  // Ends the stream: sends the acks still queued, ends the client's side and
  // waits until `deadline` for the broker to end the stream, then cancels
  // it. Returns the stream's status: OK when the broker ended it because
  // the client's side ended. Call once, from the command's thread.
  grpc::Status Finish(absl::Time deadline);

 private:
  // What to start after releasing mu_ (Start* may run reactions inline).
  enum class NextWrite { kNone, kWrite, kWritesDone };

  Subscription() = default;

  void OnReadInitialMetadataDone(bool ok) override;
  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnWritesDoneDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

  // Claims the writer for the queued acks, or for ending the client's side
  // once Finish asked for it; fills write_ for kWrite.
  NextWrite ClaimWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartNext(NextWrite next);

  grpc::ClientContext context_;
  // Touched by the read chain only: StartRead and the OnReadDone it causes.
  hourglass::v1::Delivery read_;

  absl::Mutex mu_;
  // The request being written; owned by the writer while writing_.
  hourglass::v1::SubscribeRequest write_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool write_failed_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::string> acks_ ABSL_GUARDED_BY(mu_);
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool writes_done_ ABSL_GUARDED_BY(mu_) = false;

  std::optional<bool> subscribed_ ABSL_GUARDED_BY(mu_);
  std::deque<hourglass::v1::Delivery> queue_ ABSL_GUARDED_BY(mu_);
  // Taken and not yet acked.
  absl::flat_hash_set<std::string> unacked_ ABSL_GUARDED_BY(mu_);
  bool reads_ended_ ABSL_GUARDED_BY(mu_) = false;
  bool interrupted_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hourglass::cli

#endif  // HOURGLASS_CMD_HOURGLASS_SUBSCRIPTION_H_
