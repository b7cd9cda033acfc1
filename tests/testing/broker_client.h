#ifndef HOURGLASS_TESTS_TESTING_BROKER_CLIENT_H_
#define HOURGLASS_TESTS_TESTING_BROKER_CLIENT_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/internal/subscribe_stream.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "hourglass/v1/broker.grpc.pb.h"

namespace hourglass::testing {

// One delivery and when the client read it.
struct Received {
  hourglass::v1::Delivery delivery;
  absl::Time at;
  // Which response of the stream carried it, counted from 0: the
  // deliveries of one SubscribeBatches response share it.
  size_t response = 0;
};

// The two RPCs that consume a topic.
enum class SubscribeRpc {
  kSubscribe,         // A response per delivery.
  kSubscribeBatches,  // Responses of many.
};

// A Subscribe or SubscribeBatches stream driven synchronously, for tests of
// the protocol: the client library's stream (client/internal/
// subscribe_stream.h) reads deliveries into a queue that the test takes
// from with deadlines, and writes each request before the call that sends
// it returns, bad ones too.
//
// Thread-safe.
class Subscription {
 public:
  // Opens the stream, sends `open` and waits until the broker answers:
  // subscribed (the group is registered), or the stream's end.
  Subscription(hourglass::v1::Broker::Stub* stub,
               const hourglass::v1::Open& open,
               SubscribeRpc rpc = SubscribeRpc::kSubscribe);
  // Cancels the stream if it is still open (a disconnect).
  ~Subscription();

  // Waits up to `timeout` for `n` deliveries (counting those already
  // queued) and takes up to `n`; fewer if the time ran out or the stream
  // ended.
  std::vector<Received> Take(size_t n, absl::Duration timeout);
  // Takes whatever is queued now.
  std::vector<Received> TakeQueued();

  // Each writes its request and returns once it is written: false if the
  // stream can no longer write.
  bool Ack(const std::vector<std::string>& ids);
  bool Nack(const std::string& id, absl::Duration delay);
  // Sends any request (for tests of bad ones).
  bool Write(const hourglass::v1::SubscribeRequest& request);

  // Ends the client's side and waits for the stream's status.
  grpc::Status Close(absl::Duration timeout = absl::Seconds(30));
  // Drops the connection without a goodbye.
  void Cancel() { stream_->Cancel(); }
  // The stream's status once the server ended it, or nullopt after
  // `timeout`.
  std::optional<grpc::Status> WaitEnd(absl::Duration timeout);

 private:
  // Waits until write `sequence` (0: refused) is out.
  bool Written(uint64_t sequence);

  absl::Mutex mu_;
  std::deque<Received> queue_ ABSL_GUARDED_BY(mu_);
  bool answered_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> status_ ABSL_GUARDED_BY(mu_);
  // Last: destroyed first, it waits for the stream's callbacks, which use
  // the members above.
  std::unique_ptr<client::internal::SubscribeStream> stream_;
};

// A synchronous client of hourglass.v1.Broker for tests.
class BrokerClient {
 public:
  explicit BrokerClient(std::shared_ptr<grpc::Channel> channel)
      : stub_(hourglass::v1::Broker::NewStub(std::move(channel))) {}

  grpc::Status Publish(const hourglass::v1::PublishRequest& request,
                       hourglass::v1::PublishResponse* response);
  // Publishes one message due after `delay`; returns its receipt.
  absl::StatusOr<hourglass::v1::Receipt> Publish(const std::string& topic,
                                                 const std::string& payload,
                                                 absl::Duration delay,
                                                 const std::string& id = "");
  // Sends `requests` on one PublishStream (the client library's, client/
  // internal/publish_stream.h), ends the client's side and reads every
  // answer into `answers`, in order; the stream's status.
  grpc::Status PublishStream(
      const std::vector<hourglass::v1::PublishRequest>& requests,
      std::vector<hourglass::v1::PublishAnswer>* answers);
  // The status a PublishStream gave `request` sent alone: the stream's if it
  // ended with an error, else its answer's.
  grpc::Status PublishStream(const hourglass::v1::PublishRequest& request,
                             hourglass::v1::PublishAnswer* answer);
  grpc::Status Cancel(const std::string& topic, const std::string& id);

  std::unique_ptr<Subscription> Subscribe(
      const std::string& topic, const std::string& group,
      uint32_t max_in_flight = 0,
      absl::Duration ack_timeout = absl::ZeroDuration());
  std::unique_ptr<Subscription> Subscribe(
      const hourglass::v1::Open& open,
      SubscribeRpc rpc = SubscribeRpc::kSubscribe) {
    return std::make_unique<Subscription>(stub_.get(), open, rpc);
  }

  hourglass::v1::Broker::Stub* stub() { return stub_.get(); }

 private:
  std::unique_ptr<hourglass::v1::Broker::Stub> stub_;
};

// A Message for PublishRequest: `topic`, `payload`, due after `delay`.
hourglass::v1::Message NewMessage(const std::string& topic,
                                  const std::string& payload,
                                  absl::Duration delay,
                                  const std::string& id = "");

absl::Time ToTime(const google::protobuf::Timestamp& t);

}  // namespace hourglass::testing

#endif  // HOURGLASS_TESTS_TESTING_BROKER_CLIENT_H_
