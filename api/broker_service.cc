#include "api/broker_service.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "api/proto_time.h"
#include "api/status.h"
#include "api/subscribe_stream.h"

namespace hourglass::api {
grpc::ServerUnaryReactor* BrokerService::Publish(
    grpc::CallbackServerContext* context,
    const hourglass::v1::PublishRequest* request,
    hourglass::v1::PublishResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const absl::Time now = clock_->Now();
  if (absl::Status s = ValidatePublish(*request, limits_, now); !s.ok()) {
    reactor->Finish(ToGrpcStatus(s));
    return reactor;
  }
  std::vector<broker::NewMessage> messages;
  messages.reserve(request->messages_size());
  for (const hourglass::v1::Message& m : request->messages()) {
    messages.push_back(
        broker::NewMessage{m.topic(), m.id(), m.payload(),
                           std::map<std::string, std::string>(
                               m.headers().begin(), m.headers().end()),
                           DeliverAt(m, now)});
  }
  engine_->Publish(
      std::move(messages),
      [reactor,
       response](absl::StatusOr<std::vector<broker::PublishReceipt>> receipts) {
        if (!receipts.ok()) {
          reactor->Finish(ToGrpcStatus(receipts.status()));
          return;
        }
        for (const broker::PublishReceipt& r : *receipts) {
          hourglass::v1::Receipt* out = response->add_receipts();
          out->set_id(r.id);
          ToProto(r.deliver_at, out->mutable_deliver_at());
          out->set_duplicate(r.duplicate);
        }
        reactor->Finish(grpc::Status::OK);
      });
  return reactor;
}

grpc::ServerUnaryReactor* BrokerService::Cancel(
    grpc::CallbackServerContext* context,
    const hourglass::v1::CancelRequest* request,
    hourglass::v1::CancelResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::Status valid = ValidateName("topic", request->topic());
  if (valid.ok() && request->id().empty()) {
    valid = absl::InvalidArgumentError("id is empty");
  }
  if (!valid.ok()) {
    reactor->Finish(ToGrpcStatus(valid));
    return reactor;
  }
  engine_->Cancel(request->topic(), request->id(),
                  [reactor](absl::Status status) {
                    reactor->Finish(ToGrpcStatus(status));
                  });
  return reactor;
}

grpc::ServerBidiReactor<hourglass::v1::SubscribeRequest,
                        hourglass::v1::Delivery>*
BrokerService::Subscribe(grpc::CallbackServerContext* context) {
  return NewSubscribeStream(&engine_->dispatcher(), limits_);
}

}  // namespace hourglass::api
