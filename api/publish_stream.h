#ifndef HOURGLASS_API_PUBLISH_STREAM_H_
#define HOURGLASS_API_PUBLISH_STREAM_H_

#include <cstddef>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "broker/broker.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "grpcpp/support/server_callback.h"
#include "hourglass/v1/broker.pb.h"

namespace hourglass::api {

// What a request's publish ends with: its receipts, or why it failed.
using PublishDone = absl::AnyInvocable<
    void(absl::StatusOr<std::vector<broker::PublishReceipt>>) &&>;

// Publishes one request as Broker.Publish would (checks, limits, the
// broker) and calls `done` once, on any thread, possibly before it returns;
// it does not keep the request. Or, when the stream may publish nothing
// more (its token was revoked or lost the produce role), returns why
// without calling `done`: the stream then reads no more, and ends with that
// status once the answers before are sent.
using PublishCall = absl::AnyInvocable<absl::Status(
    const hourglass::v1::PublishRequest& request, PublishDone done)>;

// Requests a PublishStream reads ahead of the answers it has sent.
inline constexpr size_t kMaxPendingPublishes = 1024;
// Bytes of answers a PublishStream holds for the client (each counted at an
// estimate from its request until it is known): past it, it reads nothing
// more until answers have been sent.
inline constexpr size_t kMaxPendingAnswerBytes = size_t{4} << 20;
// A PublishStreamResponse holds the answers ready together up to about this
// many bytes (one answer larger than this goes alone).
inline constexpr size_t kMaxResponseBytes = size_t{1} << 20;

struct PublishStreamOptions {
  // Most requests read and not yet answered to the client. REQUIRES: >= 1.
  // Default: kMaxPendingPublishes.
  size_t max_pending = kMaxPendingPublishes;
  // Most bytes of those requests' answers (see kMaxPendingAnswerBytes);
  // one request is read whatever its answer's size. Default:
  // kMaxPendingAnswerBytes.
  size_t max_pending_bytes = kMaxPendingAnswerBytes;
  // Runs once, as the stream finishes (before its status reaches the
  // client). Default: nothing.
  absl::AnyInvocable<void() &&> on_finish;
};

// Starts serving one Broker.PublishStream and returns its reactor, which
// gRPC owns: it deletes itself when the stream is done.
//
// Each request read goes to `publish`; the answers go back in request
// order, each as soon as it and those before it are known, and those known
// while a response is being written together in the next. The stream reads
// ahead of the answers it has sent at most options.max_pending requests,
// whose answers are at most about options.max_pending_bytes; then it stops
// reading until answers have been sent, so a client that does not read its
// answers is held back by gRPC's flow control, and its stream's memory is
// bounded. The stream finishes OK once the client ended its side and every
// answer is written, with the status `publish` refused a request with, or
// CANCELLED when the client goes away; always only after every `publish`
// has called its `done`, so no answer outlives the stream.
grpc::ServerBidiReactor<hourglass::v1::PublishRequest,
                        hourglass::v1::PublishStreamResponse>*
NewPublishStream(PublishCall publish, PublishStreamOptions options = {});

// Appends `receipts` to `out` in their order, as Publish answers them.
void AddReceipts(
    const std::vector<broker::PublishReceipt>& receipts,
    google::protobuf::RepeatedPtrField<hourglass::v1::Receipt>* out);

}  // namespace hourglass::api

#endif  // HOURGLASS_API_PUBLISH_STREAM_H_
