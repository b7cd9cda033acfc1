#ifndef HOURGLASS_CLIENT_PUBLISHER_H_
#define HOURGLASS_CLIENT_PUBLISHER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/channel.h"
#include "client/message.h"
#include "client/retry.h"

namespace hourglass::client {

namespace internal {
struct PublisherState;
}  // namespace internal

struct PublisherOptions {
  // How PublishBatch travels:
  enum class BatchRpc {
    kPublish,        // A Publish call each.
    kPublishStream,  // A request each on the Publisher's PublishStream.
  };
  // Default: kPublish.
  BatchRpc batch_rpc = BatchRpc::kPublish;
  // The deadline of each publish and cancel, its retries included. Default:
  // 0, the channel's call_timeout.
  absl::Duration timeout = absl::ZeroDuration();
  // A publish is tried again after UNAVAILABLE or ABORTED only when every
  // message in it has an id, so that a retry cannot store a message twice
  // (the broker answers a pending id with its first receipt, `duplicate`
  // set); a cancel only after ABORTED, which changed nothing. Default: 5
  // attempts, 50 ms to 2 s apart.
  RetryPolicy retry;
};

// Publishes messages and cancels them.
//
// Publish sends one message as a request on a PublishStream the Publisher
// keeps open (opened on first use, again after it breaks): many publishes
// from many threads are in flight together on it, as pipelined requests,
// without a call each. PublishBatch sends a batch, all-or-nothing, as a
// Publish call (or on the stream, as options say). Every operation has a
// deadline and retries as PublisherOptions say.
//
// Thread-safe. The *Async forms call `done` once, on a gRPC thread, or on
// the calling thread when they fail at once; `done` must not block, and may
// publish again. The destructor waits for every operation in flight; do not
// destroy the Publisher inside a callback.
class Publisher {
 public:
  using ReceiptCallback = absl::AnyInvocable<void(absl::StatusOr<Receipt>)>;
  using BatchCallback =
      absl::AnyInvocable<void(absl::StatusOr<std::vector<Receipt>>)>;

  explicit Publisher(std::shared_ptr<Channel> channel,
                     PublisherOptions options = {});
  // Waits for the operations in flight, then ends the stream (at most the
  // timeout for its last answers).
  ~Publisher();

  Publisher(const Publisher&) = delete;
  Publisher& operator=(const Publisher&) = delete;

  // Publishes `message` on the stream; its receipt once it is durable.
  //
  // Errors: the broker's (INVALID_ARGUMENT naming the field,
  // RESOURCE_EXHAUSTED, PERMISSION_DENIED, ...); after the retries,
  // UNAVAILABLE (the outcome is unknown unless the message has an id) or
  // DEADLINE_EXCEEDED `no answer from ADDRESS within TIMEOUT`.
  absl::StatusOr<Receipt> Publish(Message message);
  void PublishAsync(Message message, ReceiptCallback done);

  // Publishes `messages` all-or-nothing; their receipts in order. Errors:
  // as Publish; a bad message's error names its index ("message 3: ...").
  //
  // Cluster mode with many shards: a batch whose topics fall in several
  // shards goes as one request per shard, each to its shard's primary, and
  // is all-or-nothing within each shard only. If a part fails, the error
  // (the first failed part's code) names the failed parts' messages and
  // those stored; with ids on every message, publishing the batch again is
  // safe (client/README.md, "Cluster mode").
  absl::StatusOr<std::vector<Receipt>> PublishBatch(
      std::vector<Message> messages);
  void PublishBatchAsync(std::vector<Message> messages, BatchCallback done);

  // Cancels the scheduled message `id` of `topic`. Errors: NOT_FOUND when no
  // such message is scheduled and not yet due; as Publish.
  absl::Status Cancel(absl::string_view topic, absl::string_view id);

 private:
  const std::unique_ptr<internal::PublisherState> state_;
};

}  // namespace hourglass::client

#endif  // HOURGLASS_CLIENT_PUBLISHER_H_
