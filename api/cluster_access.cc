#include "api/cluster_access.h"

#include <utility>

#include "grpcpp/channel.h"

namespace hourglass::api {

ClusterAccess::ClusterAccess(MapFn map, ChannelFn channel)
    : map_(std::move(map)), channel_(std::move(channel)) {}

std::shared_ptr<grpc::Channel> ClusterAccess::ChannelTo(
    const std::string& address) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<grpc::Channel>& channel = channels_[address];
  // Making a channel does not connect: cheap enough to do under the lock.
  if (channel == nullptr) channel = channel_(address);
  return channel;
}

}  // namespace hourglass::api
