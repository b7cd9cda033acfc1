#include "api/broker_service.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "api/proto_time.h"
#include "api/publish_stream.h"
#include "api/refused_stream.h"
#include "api/status.h"
#include "api/subscribe_stream.h"

namespace hourglass::api {
void BrokerService::StartPublish(const Grant& grant,
                                 const hourglass::v1::PublishRequest& request,
                                 PublishDone done) {
  const absl::Time now = clock_->Now();
  if (absl::Status s = ValidatePublish(request, limits_, now); !s.ok()) {
    std::move(done)(std::move(s));
    return;
  }
  for (int i = 0; i < request.messages_size(); ++i) {
    const std::string& topic = request.messages(i).topic();
    absl::Status s = grant.Check(Role::kProduce, topic);
    // Dead letters are the broker's: a producer that planted some would
    // have a redrive move them.
    if (s.ok() && absl::EndsWith(topic, ".dlq") &&
        !grant.Check(Role::kAdmin, topic).ok()) {
      s = absl::PermissionDeniedError(
          absl::StrCat("topic \"", topic,
                       "\" is a dead-letter topic: publishing there needs "
                       "role admin"));
    }
    if (!s.ok()) {
      std::move(done)(absl::Status(
          s.code(), absl::StrCat("message ", i, ": ", s.message())));
      return;
    }
  }
  // Admitted only while the bytes being written stay within the limit, so
  // that a disk slower than the clients cannot grow memory without bound.
  // A refused request never counts, not even for a moment: a concurrent
  // one that fits is admitted, and `queued` is what is being written.
  const size_t bytes = request.ByteSizeLong();
  size_t queued = publish_queue_bytes_.load();
  do {
    if (limits_.max_publish_queue_bytes > 0 &&
        queued + bytes > limits_.max_publish_queue_bytes) {
      std::move(done)(absl::ResourceExhaustedError(absl::StrCat(
          "publish queue full: ", queued,
          " bytes of publishes are being written and this one has ", bytes,
          "; the limit is ", limits_.max_publish_queue_bytes,
          " (--max_publish_queue_bytes); retry later")));
      return;
    }
  } while (!publish_queue_bytes_.compare_exchange_weak(queued, queued + bytes));
  std::vector<broker::NewMessage> messages;
  messages.reserve(request.messages_size());
  for (const hourglass::v1::Message& m : request.messages()) {
    broker::NewMessage& message = messages.emplace_back(
        broker::NewMessage{m.topic(), m.id(), m.payload(),
                           std::map<std::string, std::string>(
                               m.headers().begin(), m.headers().end()),
                           DeliverAt(m, now)});
    message.expire_at = ExpireAt(m, now);
    message.dead_letter_on_expire =
        m.on_expire() == hourglass::v1::ON_EXPIRE_DEAD_LETTER;
  }
  broker_->Publish(std::move(messages),
                   [this, bytes, done = std::move(done)](
                       absl::StatusOr<std::vector<broker::PublishReceipt>>
                           receipts) mutable {
                     publish_queue_bytes_.fetch_sub(bytes);
                     std::move(done)(std::move(receipts));
                   });
}

grpc::ServerUnaryReactor* BrokerService::Publish(
    grpc::CallbackServerContext* context,
    const hourglass::v1::PublishRequest* request,
    hourglass::v1::PublishResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<Grant> grant = authorizer_->Authenticate(*context);
  if (!grant.ok()) {
    reactor->Finish(ToGrpcStatus(grant.status()));
    return reactor;
  }
  StartPublish(
      *grant, *request,
      [reactor,
       response](absl::StatusOr<std::vector<broker::PublishReceipt>> receipts) {
        if (!receipts.ok()) {
          reactor->Finish(ToGrpcStatus(receipts.status()));
          return;
        }
        AddReceipts(*receipts, response->mutable_receipts());
        reactor->Finish(grpc::Status::OK);
      });
  return reactor;
}

grpc::ServerBidiReactor<hourglass::v1::PublishRequest,
                        hourglass::v1::PublishStreamResponse>*
BrokerService::PublishStream(grpc::CallbackServerContext* context) {
  absl::StatusOr<Grant> grant = authorizer_->Authenticate(*context);
  if (!grant.ok()) {
    return NewRefusedStream<hourglass::v1::PublishRequest,
                            hourglass::v1::PublishStreamResponse>(
        ToGrpcStatus(grant.status()));
  }
  if (absl::Status admitted = AdmitStream(); !admitted.ok()) {
    return NewRefusedStream<hourglass::v1::PublishRequest,
                            hourglass::v1::PublishStreamResponse>(
        ToGrpcStatus(admitted));
  }
  PublishStreamOptions options;
  options.on_finish = [this] { streams_.fetch_sub(1); };
  // Each request is judged by the tokens in use when it arrives. A stream
  // whose token was removed, or lost role produce, ends; one whose token
  // never had it gets an answer per request, as Publish does.
  auto call = std::make_shared<CallGrant>(*authorizer_, *context, *grant);
  const bool may_produce = grant->Has(Role::kProduce);
  return NewPublishStream(
      [this, call, may_produce](const hourglass::v1::PublishRequest& request,
                                PublishDone done) -> absl::Status {
        absl::StatusOr<Grant> current = call->Current();
        if (!current.ok()) return current.status();
        if (may_produce && !current->Has(Role::kProduce)) {
          return absl::PermissionDeniedError(
              absl::StrCat(current->holder(), " lacks role produce"));
        }
        StartPublish(*current, request, std::move(done));
        return absl::OkStatus();
      },
      std::move(options));
}

void BrokerService::RecheckStreams() {
  std::vector<std::shared_ptr<StreamHandle>> open;
  {
    absl::MutexLock lock(&open_mu_);
    std::erase_if(open_, [](const std::weak_ptr<StreamHandle>& handle) {
      return handle.expired();
    });
    for (const std::weak_ptr<StreamHandle>& handle : open_) {
      if (std::shared_ptr<StreamHandle> stream = handle.lock()) {
        open.push_back(std::move(stream));
      }
    }
  }
  for (const std::shared_ptr<StreamHandle>& stream : open) stream->Recheck();
}

absl::Status BrokerService::AdmitStream() {
  const size_t open = streams_.fetch_add(1) + 1;
  if (limits_.max_streams > 0 && open > limits_.max_streams) {
    streams_.fetch_sub(1);
    return absl::ResourceExhaustedError(absl::StrCat(
        "too many streams (limit ", limits_.max_streams, ", --max_streams)"));
  }
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* BrokerService::Cancel(
    grpc::CallbackServerContext* context,
    const hourglass::v1::CancelRequest* request,
    hourglass::v1::CancelResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<Grant> grant = authorizer_->Authenticate(*context);
  if (!grant.ok()) {
    reactor->Finish(ToGrpcStatus(grant.status()));
    return reactor;
  }
  absl::Status valid = ValidateName("topic", request->topic());
  if (valid.ok()) valid = ValidateId("id", request->id(), limits_);
  if (valid.ok()) valid = grant->Check(Role::kProduce, request->topic());
  if (!valid.ok()) {
    reactor->Finish(ToGrpcStatus(valid));
    return reactor;
  }
  broker_->Cancel(request->topic(), request->id(),
                  [reactor](absl::Status status) {
                    reactor->Finish(ToGrpcStatus(status));
                  });
  return reactor;
}

template <typename Response, typename Start>
grpc::ServerBidiReactor<hourglass::v1::SubscribeRequest, Response>*
BrokerService::StartStream(grpc::CallbackServerContext* context, Start start) {
  absl::StatusOr<Grant> grant = authorizer_->Authenticate(*context);
  if (!grant.ok()) {
    return NewRefusedStream<hourglass::v1::SubscribeRequest, Response>(
        ToGrpcStatus(grant.status()));
  }
  if (absl::Status admitted = AdmitStream(); !admitted.ok()) {
    return NewRefusedStream<hourglass::v1::SubscribeRequest, Response>(
        ToGrpcStatus(admitted));
  }
  StreamHooks hooks;
  // Judged by the tokens in use: at open, at each request, and when
  // RecheckStreams runs after a reload.
  auto call = std::make_shared<CallGrant>(*authorizer_, *context, *grant);
  hooks.authorize = [call](absl::string_view topic) {
    return call->Check(Role::kConsume, topic);
  };
  // Each group multiplies every later message of its topic: with tokens
  // on, only an admin creates one.
  hooks.may_create_group = [call](absl::string_view topic) {
    return call->Check(Role::kAdmin, topic).ok();
  };
  if (authorizer_->enabled()) {
    hooks.opened = [this](std::shared_ptr<StreamHandle> stream) {
      absl::MutexLock lock(&open_mu_);
      // Forget the streams that ended now and then, so that the list
      // stays within about twice those open.
      if (open_.size() >= 2 * open_high_water_) {
        std::erase_if(open_, [](const std::weak_ptr<StreamHandle>& handle) {
          return handle.expired();
        });
        open_high_water_ = std::max<size_t>(open_.size(), 64);
      }
      open_.push_back(stream);
    };
  }
  hooks.on_finish = [this] { streams_.fetch_sub(1); };
  return start(context, broker_, limits_, std::move(hooks));
}

grpc::ServerBidiReactor<hourglass::v1::SubscribeRequest,
                        hourglass::v1::Delivery>*
BrokerService::Subscribe(grpc::CallbackServerContext* context) {
  return StartStream<hourglass::v1::Delivery>(context, NewSubscribeStream);
}

grpc::ServerBidiReactor<hourglass::v1::SubscribeRequest,
                        hourglass::v1::DeliveryBatch>*
BrokerService::SubscribeBatches(grpc::CallbackServerContext* context) {
  return StartStream<hourglass::v1::DeliveryBatch>(context,
                                                   NewSubscribeBatchesStream);
}

}  // namespace hourglass::api
