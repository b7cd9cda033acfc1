#ifndef HOURGLASS_API_BROKER_SERVICE_H_
#define HOURGLASS_API_BROKER_SERVICE_H_

#include <atomic>
#include <cstddef>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "api/auth.h"
#include "api/publish_stream.h"
#include "api/subscribe_stream.h"
#include "api/validation.h"
#include "broker/broker.h"
#include "broker/clock.h"
#include "hourglass/v1/broker.grpc.pb.h"

namespace hourglass::api {

// hourglass.v1.Broker on the gRPC callback API: validates each request,
// translates it, and hands it to the broker (broker/broker.h); answers
// when the broker does.
// Each Subscribe and SubscribeBatches stream is a reactor of its own
// (api/subscribe_stream.h).
// Calls past limits_ (streams open, bytes of publishes being written) are
// refused with RESOURCE_EXHAUSTED.
//
// Thread-safe; gRPC calls it from its own threads and no reaction blocks.
class BrokerService final : public hourglass::v1::Broker::CallbackService {
 public:
  // Every call is authorised by `authorizer` (api/auth.h): Publish and
  // Cancel need role produce on their topics, Subscribe role consume on its
  // topic. nullptr (the default) means authentication is off.
  //
  // REQUIRES: `broker`, `clock` and `authorizer` outlive the service.
  BrokerService(broker::Broker* broker, broker::Clock* clock, Limits limits,
                const Authorizer* authorizer = nullptr)
      : broker_(broker),
        clock_(clock),
        limits_(limits),
        authorizer_(authorizer != nullptr ? authorizer
                                          : &Authorizer::Disabled()) {}

  grpc::ServerUnaryReactor* Publish(
      grpc::CallbackServerContext* context,
      const hourglass::v1::PublishRequest* request,
      hourglass::v1::PublishResponse* response) override;

  grpc::ServerBidiReactor<hourglass::v1::PublishRequest,
                          hourglass::v1::PublishStreamResponse>*
  PublishStream(grpc::CallbackServerContext* context) override;

  grpc::ServerUnaryReactor* Cancel(
      grpc::CallbackServerContext* context,
      const hourglass::v1::CancelRequest* request,
      hourglass::v1::CancelResponse* response) override;

  grpc::ServerBidiReactor<hourglass::v1::SubscribeRequest,
                          hourglass::v1::Delivery>*
  Subscribe(grpc::CallbackServerContext* context) override;

  grpc::ServerBidiReactor<hourglass::v1::SubscribeRequest,
                          hourglass::v1::DeliveryBatch>*
  SubscribeBatches(grpc::CallbackServerContext* context) override;

  // After the token file was reloaded: checks every open Subscribe and
  // SubscribeBatches stream against the grants now in use, and ends those
  // whose token was removed (UNAUTHENTICATED) or no longer covers their
  // topic with role consume (PERMISSION_DENIED). (PublishStreams check
  // each request as it arrives.) Does not block on the streams.
  void RecheckStreams() ABSL_LOCKS_EXCLUDED(open_mu_);

  // Checks `request` (ValidatePublish, the grant's produce role for each
  // topic, --max_publish_queue_bytes) and publishes it; `done` gets the
  // receipts or the first problem, at once or on a broker's thread. What
  // Publish and PublishStream do after authenticating, and what the
  // console's publish calls (admin_http.h). Any thread.
  void StartPublish(const Grant& grant,
                    const hourglass::v1::PublishRequest& request,
                    PublishDone done);

 private:
  // Authenticates a Subscribe or SubscribeBatches call and checks the
  // stream limit; then `start` makes the stream with the hooks that
  // authorise its topic and count it.
  template <typename Response, typename Start>
  grpc::ServerBidiReactor<hourglass::v1::SubscribeRequest, Response>*
  StartStream(grpc::CallbackServerContext* context, Start start);

  // Counts a new stream against limits_.max_streams: OK, or
  // RESOURCE_EXHAUSTED (and not counted). A counted stream's on_finish
  // hook uncounts it.
  absl::Status AdmitStream();

  broker::Broker* const broker_;
  broker::Clock* const clock_;
  const Limits limits_;
  const Authorizer* const authorizer_;

  // Streams (Subscribe, SubscribeBatches, PublishStream) started and not
  // yet finished (limits_.max_streams).
  std::atomic<size_t> streams_{0};
  // Bytes of Publish requests handed to the broker and not yet answered
  // (limits_.max_publish_queue_bytes).
  std::atomic<size_t> publish_queue_bytes_{0};

  absl::Mutex open_mu_;
  // With authentication on: the Subscribe streams opened, for
  // RecheckStreams; ended ones expire and are dropped as the list grows.
  std::vector<std::weak_ptr<StreamHandle>> open_ ABSL_GUARDED_BY(open_mu_);
  size_t open_high_water_ ABSL_GUARDED_BY(open_mu_) = 64;
};

}  // namespace hourglass::api

#endif  // HOURGLASS_API_BROKER_SERVICE_H_
