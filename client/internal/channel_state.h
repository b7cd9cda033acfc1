#ifndef HOURGLASS_CLIENT_INTERNAL_CHANNEL_STATE_H_
#define HOURGLASS_CLIENT_INTERNAL_CHANNEL_STATE_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "client/channel.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/status.h"
#include "hourglass/v1/admin.grpc.pb.h"
#include "hourglass/v1/broker.grpc.pb.h"

namespace hourglass::client::internal {

// One broker address, with the gRPC channel and the stubs to it.
struct Endpoint {
  std::string address;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<hourglass::v1::Broker::Stub> broker;
  std::unique_ptr<hourglass::v1::Admin::Stub> admin;
};

// What a client::Channel holds. Constant after Channel::Create.
struct ChannelState {
  ChannelOptions options;
  bool tls = false;
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  // The token as call credentials; null without one.
  std::shared_ptr<grpc::CallCredentials> call_credentials;
  // Where every call goes today. Cluster mode will keep one Endpoint per
  // primary address, made as this one is (MakeEndpoint in channel.cc), and
  // pick one per call.
  Endpoint endpoint;
};

// The client library's access to a Channel's insides; not part of the
// public API. Thread-safe, as ChannelState is constant.
class ChannelAccess {
 public:
  static const ChannelState& state(const Channel& channel) {
    return *channel.state_;
  }
  static const Endpoint& endpoint(const Channel& channel) {
    return channel.state_->endpoint;
  }
  static hourglass::v1::Broker::Stub& broker(const Channel& channel) {
    return *channel.state_->endpoint.broker;
  }
  static hourglass::v1::Admin::Stub& admin(const Channel& channel) {
    return *channel.state_->endpoint.admin;
  }

  // Prepares `context` for one call: `deadline` (InfiniteFuture for none)
  // and the token.
  static void Prepare(const Channel& channel, grpc::ClientContext& context,
                      absl::Time deadline);

  // A finished call's status as the library reports it (internal/status.h),
  // naming the channel's address and `timeout` where they explain it.
  static absl::Status ToStatus(const Channel& channel,
                               const grpc::Status& status,
                               absl::Duration timeout);
};

}  // namespace hourglass::client::internal

#endif  // HOURGLASS_CLIENT_INTERNAL_CHANNEL_STATE_H_
