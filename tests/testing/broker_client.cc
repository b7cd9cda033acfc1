#include "tests/testing/broker_client.h"

#include <utility>

#include "absl/status/status.h"

namespace hourglass::testing {
namespace {

constexpr absl::Duration kCallTimeout = absl::Seconds(30);

void SetDeadline(grpc::ClientContext& context) {
  context.set_deadline(absl::ToChronoTime(absl::Now() + kCallTimeout));
}

}  // namespace

absl::Time ToTime(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

hourglass::v1::Message NewMessage(const std::string& topic,
                                  const std::string& payload,
                                  absl::Duration delay, const std::string& id) {
  hourglass::v1::Message m;
  m.set_topic(topic);
  m.set_payload(payload);
  m.set_id(id);
  const int64_t nanos = absl::ToInt64Nanoseconds(delay);
  m.mutable_delay()->set_seconds(nanos / 1'000'000'000);
  m.mutable_delay()->set_nanos(static_cast<int32_t>(nanos % 1'000'000'000));
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
  grpc::ClientContext context;
  SetDeadline(context);
  auto stream = stub_->PublishStream(&context);
  for (const hourglass::v1::PublishRequest& request : requests) {
    if (!stream->Write(request)) break;
  }
  stream->WritesDone();
  hourglass::v1::PublishStreamResponse response;
  while (stream->Read(&response)) {
    for (hourglass::v1::PublishAnswer& answer : *response.mutable_answers()) {
      answers->push_back(std::move(answer));
    }
  }
  return stream->Finish();
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
    const int64_t nanos = absl::ToInt64Nanoseconds(ack_timeout);
    open.mutable_ack_timeout()->set_seconds(nanos / 1'000'000'000);
    open.mutable_ack_timeout()->set_nanos(
        static_cast<int32_t>(nanos % 1'000'000'000));
  }
  return Subscribe(open);
}

template <typename F>
auto Subscription::WithStream(F f) {
  return single_ != nullptr ? f(*single_) : f(*batches_);
}

Subscription::Subscription(hourglass::v1::Broker::Stub* stub,
                           const hourglass::v1::Open& open, SubscribeRpc rpc) {
  if (rpc == SubscribeRpc::kSubscribe) {
    single_ = stub->Subscribe(&context_);
  } else {
    batches_ = stub->SubscribeBatches(&context_);
  }
  hourglass::v1::SubscribeRequest request;
  *request.mutable_open() = open;
  Write(request);
  // The broker sends initial metadata once the consumer is subscribed (or
  // with the status, if it is refused).
  WithStream([](auto& stream) { stream.WaitForInitialMetadata(); });
  reader_ = std::thread([this] { ReadAll(); });
}

Subscription::~Subscription() {
  context_.TryCancel();
  reader_.join();
}

void Subscription::ReadAll() {
  size_t response = 0;
  if (single_ != nullptr) {
    hourglass::v1::Delivery delivery;
    while (single_->Read(&delivery)) {
      absl::MutexLock lock(&mu_);
      queue_.push_back({std::move(delivery), absl::Now(), response++});
      delivery = hourglass::v1::Delivery();
    }
  } else {
    hourglass::v1::DeliveryBatch batch;
    while (batches_->Read(&batch)) {
      const absl::Time at = absl::Now();
      absl::MutexLock lock(&mu_);
      for (hourglass::v1::Delivery& delivery : *batch.mutable_deliveries()) {
        queue_.push_back({std::move(delivery), at, response});
      }
      ++response;
      batch.Clear();
    }
  }
  grpc::Status status =
      WithStream([](auto& stream) { return stream.Finish(); });
  absl::MutexLock lock(&mu_);
  status_ = std::move(status);
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

bool Subscription::Write(const hourglass::v1::SubscribeRequest& request) {
  absl::MutexLock lock(&write_mu_);
  return WithStream([&](auto& stream) { return stream.Write(request); });
}

bool Subscription::Ack(const std::vector<std::string>& ids) {
  hourglass::v1::SubscribeRequest request;
  for (const std::string& id : ids) request.mutable_ack()->add_ids(id);
  return Write(request);
}

bool Subscription::Nack(const std::string& id, absl::Duration delay) {
  hourglass::v1::SubscribeRequest request;
  request.mutable_nack()->set_id(id);
  const int64_t nanos = absl::ToInt64Nanoseconds(delay);
  request.mutable_nack()->mutable_delay()->set_seconds(nanos / 1'000'000'000);
  request.mutable_nack()->mutable_delay()->set_nanos(
      static_cast<int32_t>(nanos % 1'000'000'000));
  return Write(request);
}

grpc::Status Subscription::Close(absl::Duration timeout) {
  {
    absl::MutexLock lock(&write_mu_);
    WithStream([](auto& stream) { return stream.WritesDone(); });
  }
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
