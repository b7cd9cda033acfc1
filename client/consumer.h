#ifndef HOURGLASS_CLIENT_CONSUMER_H_
#define HOURGLASS_CLIENT_CONSUMER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client/channel.h"
#include "client/message.h"
#include "client/retry.h"

namespace hourglass::client {

namespace internal {
struct ConsumerState;
}  // namespace internal

struct ConsumerOptions {
  // Required: what to consume, as which group. The first consumer of a
  // group registers it (with tokens, only an admin token may).
  std::string topic;
  std::string group;
  // Credit: the most unacknowledged deliveries the stream holds. Default:
  // 0, the broker's default (100); at most its --max_credit (10000).
  uint32_t max_in_flight = 0;
  // A delivery not acknowledged within this is delivered again. Default: 0,
  // the broker's --ack_timeout (30 s).
  absl::Duration ack_timeout = absl::ZeroDuration();
  enum class Rpc {
    kSubscribe,         // A gRPC message per delivery.
    kSubscribeBatches,  // What is waiting, in one message: cheaper in bulk.
  };
  // Default: kSubscribeBatches.
  Rpc rpc = Rpc::kSubscribeBatches;
  // After the stream breaks (UNAVAILABLE: the broker restarted; CANCELLED
  // or RESOURCE_EXHAUSTED from the broker), subscribe again after a
  // backoff, until it works or Close. Other ends (NOT_FOUND: the group was
  // deleted, PERMISSION_DENIED, ...) end the consumer. Default: true.
  bool reconnect = true;
  BackoffPolicy backoff{.initial = absl::Milliseconds(50),
                        .max = absl::Seconds(5)};
};

// Consumes one topic as a member of one group: a Subscribe (or
// SubscribeBatches) stream, its credit, acks and nacks, reconnecting with
// backoff, and a clean shutdown.
//
// Deliveries either queue for Receive, or, with a handler, go to the handler
// as they arrive. An ack or nack goes out on the stream as soon as the
// writer is free; those that come while it writes go out together. A
// delivery not acknowledged when its stream ends goes back to the group at
// once, and comes again; an ack that arrives after a reconnect is ignored
// by the broker (at-least-once).
//
// Thread-safe: Receive, Ack, Nack, AwaitAcked, Interrupt, Close and Cancel
// may be called from any thread, Ack and Nack from the handler too. The
// handler runs on gRPC's threads, one response at a time; it must not
// block. The destructor closes the consumer if Close was not called; do
// not destroy it inside the handler.
class Consumer {
 public:
  // The deliveries of one response of the stream, and the consumer they
  // came to (to ack them; it may not have been returned yet by Subscribe).
  using Handler = absl::AnyInvocable<void(Consumer& consumer,
                                          std::vector<Delivery> deliveries)>;

  // Opens the stream and waits, at most the channel's call_timeout, until
  // the broker accepts it (the group exists from then on). With a
  // `handler`, deliveries go to it; otherwise they queue for Receive.
  //
  // Errors: the broker's (INVALID_ARGUMENT for a bad option,
  // NOT_FOUND for a group a consume-only token may not create,
  // PERMISSION_DENIED, RESOURCE_EXHAUSTED past --max_streams, UNAVAILABLE
  // `cannot reach ...`-like refusals), DEADLINE_EXCEEDED `no answer from
  // ADDRESS within TIMEOUT`. The first subscription is not retried.
  static absl::StatusOr<std::unique_ptr<Consumer>> Subscribe(
      std::shared_ptr<Channel> channel, ConsumerOptions options,
      Handler handler = nullptr);

  ~Consumer();
  Consumer(const Consumer&) = delete;
  Consumer& operator=(const Consumer&) = delete;

  // Waits until a delivery is queued, at most until `deadline`, and takes
  // up to `max` of those queued, oldest first. Returns none if the deadline
  // passed, the consumer ended (ended() says why) with nothing queued, or
  // Interrupt was called. REQUIRES: no handler; max > 0.
  std::vector<Delivery> Receive(size_t max,
                                absl::Time deadline = absl::InfiniteFuture());

  // Acknowledges deliveries: they are done. Errors: UNAVAILABLE while no
  // stream is open (reconnecting; the deliveries will come again), or the
  // consumer's end status once it ended.
  absl::Status Ack(const std::string& id);
  absl::Status Ack(absl::Span<const std::string> ids);
  // Asks for delivery `id` again after `delay` (0: at once). Errors: as Ack.
  absl::Status Nack(const std::string& id,
                    absl::Duration delay = absl::ZeroDuration());

  // Waits until every delivery Receive returned has been acked or nacked,
  // at most until `deadline`; returns early if the consumer ended or
  // Interrupt was called. True if none is left.
  bool AwaitAcked(absl::Time deadline = absl::InfiniteFuture());

  // Wakes Receive and AwaitAcked, now and for good (a signal handler's way
  // to stop a loop); acks, nacks and Close still work.
  void Interrupt();

  // Ends cleanly: sends the acks and nacks queued, ends the client's side,
  // and waits until `deadline` for the broker to end the stream (what is
  // not acknowledged goes back to the group at once); then cancels it.
  // Returns OK after a clean end, CANCELLED if it had to cancel, or the
  // status the consumer had ended with. Later calls return the same.
  absl::Status Close(absl::Time deadline);
  // Ends at once, without a goodbye (like a process that dies): the broker
  // hands the deliveries not acknowledged back to the group.
  void Cancel();

  // The status the consumer ended with: nullopt while it runs (or waits to
  // reconnect). Waits until it ends, at most until `deadline`.
  std::optional<absl::Status> ended(absl::Time deadline = absl::InfinitePast());

  // How many times the stream was opened again after breaking.
  uint64_t reconnects() const;

 private:
  explicit Consumer(std::unique_ptr<internal::ConsumerState> state);
  // One subscription attempt at the channel's current endpoint.
  static absl::StatusOr<std::unique_ptr<Consumer>> SubscribeOnce(
      std::shared_ptr<Channel> channel, ConsumerOptions options,
      Handler handler);

  const std::unique_ptr<internal::ConsumerState> state_;
};

}  // namespace hourglass::client

#endif  // HOURGLASS_CLIENT_CONSUMER_H_
