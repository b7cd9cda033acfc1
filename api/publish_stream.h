#ifndef HOURGLASS_API_PUBLISH_STREAM_H_
#define HOURGLASS_API_PUBLISH_STREAM_H_

#include <cstddef>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "broker/publisher.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "grpcpp/support/server_callback.h"
#include "hourglass/v1/broker.pb.h"

namespace hourglass::api {

// What a request's publish ends with: its receipts, or why it failed.
using PublishDone = absl::AnyInvocable<
    void(absl::StatusOr<std::vector<broker::PublishReceipt>>) &&>;

// Publishes one request as Broker.Publish would (checks, limits, the
// engine) and calls `done` once, on any thread, possibly before it returns.
// It does not keep the request.
using PublishCall = absl::AnyInvocable<void(
    const hourglass::v1::PublishRequest& request, PublishDone done)>;

// Requests a PublishStream reads ahead of the answers it has sent.
inline constexpr size_t kMaxPendingPublishes = 1024;
// A PublishStreamResponse holds the answers ready together up to about this
// many bytes (one answer larger than this goes alone).
inline constexpr size_t kMaxResponseBytes = size_t{1} << 20;

// Starts serving one Broker.PublishStream and returns its reactor, which
// gRPC owns: it deletes itself when the stream is done.
//
// Each request read goes to `publish`; the answers go back in request
// order, each as soon as it and those before it are known, and those known
// while a response is being written together in the next. At most
// `max_pending` requests are read and not yet answered to the client;
// then the stream stops reading until answers have been sent, so a client
// that does not read its answers is held back by gRPC's flow control. The
// stream finishes OK once the client ended its side and every answer is
// written, or CANCELLED when the client goes away; either way only after
// every `publish` has called its `done`, so no answer outlives the stream.
//
// REQUIRES: max_pending >= 1.
grpc::ServerBidiReactor<hourglass::v1::PublishRequest,
                        hourglass::v1::PublishStreamResponse>*
NewPublishStream(PublishCall publish,
                 size_t max_pending = kMaxPendingPublishes);

// Appends `receipts` to `out` in their order, as Publish answers them.
void AddReceipts(
    const std::vector<broker::PublishReceipt>& receipts,
    google::protobuf::RepeatedPtrField<hourglass::v1::Receipt>* out);

}  // namespace hourglass::api

#endif  // HOURGLASS_API_PUBLISH_STREAM_H_
