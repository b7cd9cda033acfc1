#ifndef HOURGLASS_API_SUBSCRIBE_STREAM_H_
#define HOURGLASS_API_SUBSCRIBE_STREAM_H_

#include <cstddef>
#include <memory>
#include <string_view>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "api/validation.h"
#include "broker/broker.h"
#include "grpcpp/support/server_callback.h"
#include "hourglass/v1/broker.pb.h"

namespace hourglass::api {

// Starts serving one Broker.Subscribe or Broker.SubscribeBatches stream and
// returns its reactor, which gRPC owns: it deletes itself when the stream is
// done. The two differ only in how responses carry deliveries.
//
// The first request must be `open` (else INVALID_ARGUMENT); it subscribes a
// consumer to the broker, registering its group if needed, and then the
// stream sends its initial metadata: a client that waits for it knows the
// group is registered. Then `ack`s and `nack`s go to the broker
// and deliveries come back, at most the stream's credit unacknowledged.
// The stream ends when the client ends it (OK), on a bad request
// (INVALID_ARGUMENT), when the broker shuts down (UNAVAILABLE), or when it
// writes nothing to the client for the broker's stall timeout while
// deliveries wait (the call is cancelled: the client sees CANCELLED, the
// broker logs why); its unacknowledged deliveries then go back to the
// group at once.
//
// A handle on an open Subscribe or SubscribeBatches stream that may
// outlive it (then it does nothing). Thread-safe.
class StreamHandle {
 public:
  virtual ~StreamHandle() = default;
  // Checks the stream's authorization again (StreamHooks::authorize), and
  // ends the stream with the error if there is one. Does not block.
  virtual void Recheck() = 0;
};

// What a stream asks of its service.
struct StreamHooks {
  // Checks that the client may consume `topic`: once `open` is valid,
  // before each later request, and on StreamHandle::Recheck (so from any
  // thread); an error ends the stream with it. Unset: every topic is
  // allowed.
  absl::AnyInvocable<absl::Status(absl::string_view topic) const> authorize;
  // Called once, as the stream starts, with its handle. Unset: nothing.
  absl::AnyInvocable<void(std::shared_ptr<StreamHandle>) &&> opened;
  // Whether the client may create the group of `topic` it subscribes to
  // if it does not exist yet (else the stream ends with NOT_FOUND). Unset:
  // it may.
  absl::AnyInvocable<bool(absl::string_view topic) const> may_create_group;
  // Runs once, as the stream finishes (before its status reaches the
  // client). Unset: nothing.
  absl::AnyInvocable<void() &&> on_finish;
};

// A Subscribe or SubscribeBatches reactor.
template <typename Response>
using SubscribeReactor =
    grpc::ServerBidiReactor<hourglass::v1::SubscribeRequest, Response>;

// The initial-metadata entry (value "1") with which a stream says its
// consumer is subscribed (broker.proto, Subscribe).
inline constexpr std::string_view kSubscribedMetadata = "hourglass-subscribed";

// Most bytes of deliveries (payloads, headers, ids and topics) that a
// SubscribeBatches stream packs into one DeliveryBatch; a larger delivery
// travels alone.
inline constexpr size_t kMaxBatchBytes = size_t{1} << 20;

// REQUIRES (both): `context` is the call's; `broker` outlives the
// stream.
//
// Subscribe: one Delivery per response.
SubscribeReactor<hourglass::v1::Delivery>* NewSubscribeStream(
    grpc::CallbackServerContext* context, broker::Broker* broker,
    const Limits& limits, StreamHooks hooks = {});
// SubscribeBatches: each response packs the deliveries waiting to be
// written when the previous one went out, up to kMaxBatchBytes.
SubscribeReactor<hourglass::v1::DeliveryBatch>* NewSubscribeBatchesStream(
    grpc::CallbackServerContext* context, broker::Broker* broker,
    const Limits& limits, StreamHooks hooks = {});

}  // namespace hourglass::api

#endif  // HOURGLASS_API_SUBSCRIBE_STREAM_H_
