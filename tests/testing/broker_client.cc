#include "tests/testing/broker_client.h"

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "client/internal/convert.h"
#include "client/internal/publish_stream.h"

namespace hourglass::testing {
namespace {

constexpr absl::Duration kCallTimeout = absl::Seconds(30);

void SetDeadline(grpc::ClientContext& context) {
  context.set_deadline(absl::ToChronoTime(absl::Now() + kCallTimeout));
}

}  // namespace

absl::Time ToTime(const google::protobuf::Timestamp& t) {
  return client::internal::FromProto(t);
}

hourglass::v1::Message NewMessage(const std::string& topic,
                                  const std::string& payload,
                                  absl::Duration delay, const std::string& id) {
  hourglass::v1::Message m;
  m.set_topic(topic);
  m.set_payload(payload);
  m.set_id(id);
  *m.mutable_delay() = client::internal::ToProto(delay);
  return m;
}

grpc::Status BrokerClient::Publish(const hourglass::v1::PublishRequest& request,
                                   hourglass::v1::PublishResponse* response) {
  grpc::ClientContext context;
  SetDeadline(context);
  return stub_->Publish(&context, request, response);
}

absl::StatusOr<hourglass::v1::Receipt> BrokerClient::Publish(
    const std::string& topic, const std::string& payload, absl::Duration delay,
    const std::string& id) {
  hourglass::v1::PublishRequest request;
  *request.add_messages() = NewMessage(topic, payload, delay, id);
  hourglass::v1::PublishResponse response;
  const grpc::Status status = Publish(request, &response);
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        status.error_message());
  }
  return response.receipts(0);
}

grpc::Status BrokerClient::PublishStream(
    const std::vector<hourglass::v1::PublishRequest>& requests,
    std::vector<hourglass::v1::PublishAnswer>* answers) {
  client::internal::PublishStream stream(
      *stub_, [](grpc::ClientContext& context) { SetDeadline(context); });
  // Each answer goes to its request's slot: the stream matches answers to
  // requests in order, but callbacks of consecutive responses may run on
  // different gRPC threads at once.
  absl::Mutex mu;
  std::vector<std::optional<hourglass::v1::PublishAnswer>> slots(
      requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    stream.Send(&requests[i], absl::InfiniteFuture(),
                [&mu, &slots, i](const grpc::Status&,
                                 hourglass::v1::PublishAnswer* answer) {
                  if (answer == nullptr) return;  // The stream ended first.
                  absl::MutexLock lock(&mu);
                  slots[i] = std::move(*answer);
                });
  }
  stream.CloseWrites();
  const grpc::Status status = *stream.WaitDone(absl::InfiniteFuture());
  // The answers up to the first request left without one.
  absl::MutexLock lock(&mu);
  for (std::optional<hourglass::v1::PublishAnswer>& slot : slots) {
    if (!slot.has_value()) break;
    answers->push_back(*std::move(slot));
  }
  return status;
}

grpc::Status BrokerClient::PublishStream(
    const hourglass::v1::PublishRequest& request,
    hourglass::v1::PublishAnswer* answer) {
  std::vector<hourglass::v1::PublishAnswer> answers;
  const grpc::Status status = PublishStream({request}, &answers);
  if (!status.ok()) return status;
  if (answers.size() != 1) {
    return grpc::Status(grpc::StatusCode::INTERNAL,
                        "the stream gave " + std::to_string(answers.size()) +
                            " answers to one request");
  }
  *answer = answers[0];
  return grpc::Status(static_cast<grpc::StatusCode>(answer->code()),
                      answer->message());
}

grpc::Status BrokerClient::Cancel(const std::string& topic,
                                  const std::string& id) {
  grpc::ClientContext context;
  SetDeadline(context);
  hourglass::v1::CancelRequest request;
  request.set_topic(topic);
  request.set_id(id);
  hourglass::v1::CancelResponse response;
  return stub_->Cancel(&context, request, &response);
}

std::unique_ptr<Subscription> BrokerClient::Subscribe(
    const std::string& topic, const std::string& group, uint32_t max_in_flight,
    absl::Duration ack_timeout) {
  hourglass::v1::Open open;
  open.set_topic(topic);
  open.set_group(group);
  open.set_max_in_flight(max_in_flight);
  if (ack_timeout > absl::ZeroDuration()) {
    *open.mutable_ack_timeout() = client::internal::ToProto(ack_timeout);
  }
  return Subscribe(open);
}

Subscription::Subscription(hourglass::v1::Broker::Stub* stub,
                           const hourglass::v1::Open& open, SubscribeRpc rpc) {
  client::internal::SubscribeStream::Callbacks callbacks;
  callbacks.on_subscribed = [this](bool) {
    absl::MutexLock lock(&mu_);
    answered_ = true;
  };
  callbacks.on_deliveries =
      [this](absl::Span<hourglass::v1::Delivery* const> deliveries,
             absl::Time at, uint64_t response) {
        absl::MutexLock lock(&mu_);
        for (hourglass::v1::Delivery* d : deliveries) {
          queue_.push_back({std::move(*d), at, response});
        }
      };
  callbacks.on_done = [this](const grpc::Status& status,
                             const client::internal::Redirect& /*redirect*/) {
    absl::MutexLock lock(&mu_);
    status_ = status;
  };
  // Acks go out as the test sends them, never split.
  stream_ = client::internal::SubscribeStream::Start(
      rpc == SubscribeRpc::kSubscribe
          ? client::internal::SubscribeStream::Rpc::kSubscribe
          : client::internal::SubscribeStream::Rpc::kSubscribeBatches,
      *stub, [](grpc::ClientContext&) {}, open, std::move(callbacks), SIZE_MAX);
  // The broker sends initial metadata once the consumer is subscribed (or
  // the status, if it is refused).
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&answered_));
}

Subscription::~Subscription() {
  // Cancels the stream if it still runs and waits for its last callback.
  stream_.reset();
}

std::vector<Received> Subscription::Take(size_t n, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return queue_.size() >= n || status_.has_value();
  };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  std::vector<Received> taken;
  while (!queue_.empty() && taken.size() < n) {
    taken.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  return taken;
}

std::vector<Received> Subscription::TakeQueued() {
  absl::MutexLock lock(&mu_);
  std::vector<Received> taken(std::make_move_iterator(queue_.begin()),
                              std::make_move_iterator(queue_.end()));
  queue_.clear();
  return taken;
}

bool Subscription::Written(uint64_t sequence) {
  return sequence != 0 &&
         stream_->WaitWritten(sequence, absl::InfiniteFuture());
}

bool Subscription::Write(const hourglass::v1::SubscribeRequest& request) {
  return Written(stream_->Write(request));
}

bool Subscription::Ack(const std::vector<std::string>& ids) {
  return Written(stream_->Ack(ids));
}

bool Subscription::Nack(const std::string& id, absl::Duration delay) {
  return Written(stream_->Nack(id, delay));
}

grpc::Status Subscription::Close(absl::Duration timeout) {
  stream_->CloseWrites();
  std::optional<grpc::Status> status = WaitEnd(timeout);
  if (!status.has_value()) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        "the stream did not end");
  }
  return *status;
}

std::optional<grpc::Status> Subscription::WaitEnd(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ended = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return status_.has_value();
  };
  mu_.AwaitWithTimeout(absl::Condition(&ended), timeout);
  return status_;
}

}  // namespace hourglass::testing
