#ifndef HOURGLASS_CLIENT_INTERNAL_SUBSCRIBE_STREAM_H_
#define HOURGLASS_CLIENT_INTERNAL_SUBSCRIBE_STREAM_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client/internal/redirect.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"
#include "hourglass/v1/broker.grpc.pb.h"

namespace hourglass::client::internal {

// One Broker.Subscribe or Broker.SubscribeBatches call on gRPC's callback
// API: sends `open`, reads deliveries and hands each response's to a
// callback as it arrives, and writes acks, nacks (or any request) one at a
// time, in order. Acks queued while a write is in progress go out together
// in the next one. No reconnecting: that is client::Consumer's.
//
// Thread-safe. Requests may be queued from any thread, the callbacks too;
// callbacks run on gRPC's threads without the stream's lock held. Destroy it
// from any thread but inside its own callbacks; the destructor cancels the
// call if it still runs and waits for its end (finished() says whether that
// is immediate).
class SubscribeStream {
 public:
  enum class Rpc {
    kSubscribe,         // A response per delivery.
    kSubscribeBatches,  // Responses of what was waiting.
  };

  struct Callbacks {
    // Once: true when the broker accepted `open` (it sends the initial
    // metadata then), false when the stream ended first. May be empty.
    absl::AnyInvocable<void(bool subscribed)> on_subscribed;
    // The deliveries of each response, in order; the callee may move out of
    // them. `received_at` is when the read completed; `response` counts the
    // responses from 0. The next read starts when this returns.
    absl::AnyInvocable<void(absl::Span<hourglass::v1::Delivery* const>,
                            absl::Time received_at, uint64_t response)>
        on_deliveries;
    // Last, once: the stream's status, and what a cluster node that
    // refused it said about where to subscribe (its trailers). May be
    // empty.
    absl::AnyInvocable<void(const grpc::Status&, const Redirect& redirect)>
        on_done;
  };

  // Makes a stream for `rpc`, not yet started. Merged acks carry at most
  // `max_ack_ids` ids (the broker's limit is the stream's credit). Making
  // and starting are two steps so that the owner can store the stream,
  // where its callbacks' acks find it, before the first callback runs.
  static std::unique_ptr<SubscribeStream> Create(Rpc rpc, Callbacks callbacks,
                                                 size_t max_ack_ids);
  // Starts the call on `stub` and sends `open` first; `prepare` gives the
  // call's context what every call needs (credentials). Callbacks may run
  // before it returns. REQUIRES: called once.
  virtual void Begin(hourglass::v1::Broker::Stub& stub,
                     const std::function<void(grpc::ClientContext&)>& prepare,
                     const hourglass::v1::Open& open) = 0;
  // Create, then Begin.
  static std::unique_ptr<SubscribeStream> Start(
      Rpc rpc, hourglass::v1::Broker::Stub& stub,
      const std::function<void(grpc::ClientContext&)>& prepare,
      const hourglass::v1::Open& open, Callbacks callbacks, size_t max_ack_ids);

  virtual ~SubscribeStream() = default;
  SubscribeStream(const SubscribeStream&) = delete;
  SubscribeStream& operator=(const SubscribeStream&) = delete;

  // Queue a request; each returns the sequence number of the write that
  // carries it (the open is 1), or 0 if the stream no longer writes: it
  // ended, a write failed, or CloseWrites was called.
  uint64_t Ack(absl::Span<const std::string> ids);
  uint64_t Nack(const std::string& id, absl::Duration delay);
  uint64_t Write(hourglass::v1::SubscribeRequest request);

  // Waits until write `sequence` has gone out, at most until `deadline`.
  // False if it never will (the stream stopped writing) or the deadline
  // passed.
  bool WaitWritten(uint64_t sequence, absl::Time deadline);

  // Ends the client's side once the queued writes are out; the broker then
  // ends the stream (its unacknowledged deliveries go back to the group).
  void CloseWrites();
  // Cancels the call: a disconnect without goodbye.
  void Cancel() { context_.TryCancel(); }

  // Whether the call ended and its last callback returned.
  bool finished();
  // Waits until the call has ended, at most until `deadline`; its status,
  // or nullopt if the deadline passed first.
  std::optional<grpc::Status> WaitDone(absl::Time deadline);

 protected:
  SubscribeStream(Callbacks callbacks, size_t max_ack_ids);

  // What the reactor does for the base (it owns the gRPC calls).
  virtual void StartWriteOf(const hourglass::v1::SubscribeRequest* request) = 0;
  virtual void StartWritesDoneOf() = 0;
  virtual void RemoveHoldOf() = 0;

  // The reactor's reactions, forwarded.
  void HandleInitialMetadata(bool ok);
  void HandleDeliveries(absl::Span<hourglass::v1::Delivery* const> deliveries,
                        absl::Time received_at);
  void HandleReadsEnded();
  void HandleWriteDone(bool ok);
  void HandleWritesDoneDone();
  void HandleDone(const grpc::Status& status);

  // Queues the open; called by Start before the call starts.
  void QueueOpen(const hourglass::v1::Open& open);
  // Starts writing what is queued, if nothing is being written.
  void Kick();
  // Cancels the call if it runs and waits until it has ended: the reactor's
  // destructor calls it first.
  void Shutdown();

  grpc::ClientContext context_;

 private:
  struct Queued {
    hourglass::v1::SubscribeRequest request;
    uint64_t sequence;
  };
  // What to start once mu_ is released (Start* may run reactions inline).
  enum class Next { kNone, kWrite, kWritesDone };

  uint64_t Queue(hourglass::v1::SubscribeRequest request, bool merge_acks);
  Next ClaimLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DoStart(Next next);

  const size_t max_ack_ids_;
  // Run without mu_; on_deliveries only by the read chain.
  Callbacks callbacks_;
  uint64_t responses_ = 0;  // The read chain's.

  absl::Mutex mu_;
  std::deque<Queued> queue_ ABSL_GUARDED_BY(mu_);
  // The request being written; the writer's until its OnWriteDone.
  Queued writing_request_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t last_sequence_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t written_sequence_ ABSL_GUARDED_BY(mu_) = 0;
  // Nothing more is written: a write failed, the reads ended, or the
  // client's side was ended.
  bool writes_stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool writes_done_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_ended_ ABSL_GUARDED_BY(mu_) = false;
  bool subscribed_reported_ ABSL_GUARDED_BY(mu_) = false;
  // Start* calls claimed and not yet returned; the hold that keeps OnDone
  // away stays until the reads ended and this is 0.
  int starting_ ABSL_GUARDED_BY(mu_) = 0;
  bool hold_released_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> status_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace hourglass::client::internal

#endif  // HOURGLASS_CLIENT_INTERNAL_SUBSCRIBE_STREAM_H_
