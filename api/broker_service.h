#ifndef HOURGLASS_API_BROKER_SERVICE_H_
#define HOURGLASS_API_BROKER_SERVICE_H_

#include "api/validation.h"
#include "broker/clock.h"
#include "broker/engine.h"
#include "hourglass/v1/broker.grpc.pb.h"

namespace hourglass::api {

// hourglass.v1.Broker on the gRPC callback API: validates each request,
// translates it, and hands it to the engine; answers when the engine does.
// Each Subscribe stream is a reactor of its own (api/subscribe_stream.h).
//
// Thread-safe; gRPC calls it from its own threads and no reaction blocks.
class BrokerService final : public hourglass::v1::Broker::CallbackService {
 public:
  // REQUIRES: `engine` and `clock` outlive the service.
  BrokerService(broker::Engine* engine, broker::Clock* clock, Limits limits)
      : engine_(engine), clock_(clock), limits_(limits) {}

  grpc::ServerUnaryReactor* Publish(
      grpc::CallbackServerContext* context,
      const hourglass::v1::PublishRequest* request,
      hourglass::v1::PublishResponse* response) override;

  grpc::ServerUnaryReactor* Cancel(
      grpc::CallbackServerContext* context,
      const hourglass::v1::CancelRequest* request,
      hourglass::v1::CancelResponse* response) override;

  grpc::ServerBidiReactor<hourglass::v1::SubscribeRequest,
                          hourglass::v1::Delivery>*
  Subscribe(grpc::CallbackServerContext* context) override;

 private:
  broker::Engine* const engine_;
  broker::Clock* const clock_;
  const Limits limits_;
};

}  // namespace hourglass::api

#endif  // HOURGLASS_API_BROKER_SERVICE_H_
