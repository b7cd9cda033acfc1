#ifndef HOURGLASS_CLIENT_INTERNAL_CHANNEL_STATE_H_
#define HOURGLASS_CLIENT_INTERNAL_CHANNEL_STATE_H_

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/channel.h"
#include "client/internal/redirect.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/status.h"
#include "hourglass/v1/admin.grpc.pb.h"
#include "hourglass/v1/broker.grpc.pb.h"
#include "hourglass/v1/cluster.grpc.pb.h"
#include "hourglass/v1/recurrences.grpc.pb.h"

namespace hourglass::client::internal {

// One broker address, with the gRPC channel and the stubs to it.
struct Endpoint {
  std::string address;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<hourglass::v1::Broker::Stub> broker;
  std::unique_ptr<hourglass::v1::Admin::Stub> admin;
  std::unique_ptr<hourglass::v1::Cluster::Stub> cluster;
  std::unique_ptr<hourglass::v1::Recurrences::Stub> recurrences;
};

// What a client::Channel holds. The options and credentials are constant
// after Channel::Create; which endpoint calls go to changes in cluster
// mode, when a node says (or the cluster map shows) that another is the
// primary.
struct ChannelState {
  ChannelOptions options;
  bool tls = false;
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  // The token as call credentials; null without one.
  std::shared_ptr<grpc::CallCredentials> call_credentials;

  mutable absl::Mutex mu;
  // Every endpoint made, by address: kept while the channel lives, so that
  // a stub a call took stays valid. Few: the nodes of one cluster.
  std::map<std::string, std::unique_ptr<Endpoint>> endpoints
      ABSL_GUARDED_BY(mu);
  // Where calls go now: options.address until a redirect.
  Endpoint* current ABSL_GUARDED_BY(mu) = nullptr;
  // The nodes' addresses from the last cluster map read, to ask for the
  // primary when the current one does not answer.
  std::vector<std::string> known ABSL_GUARDED_BY(mu);
  // Cluster mode, once a node has said how many shards the cluster has
  // (its hourglass-shards trailer, or the cluster map): that count, and
  // where the calls about each shard's topics go, by shard (null: to
  // `current`). Calls about no topic go to `current`.
  int shard_count ABSL_GUARDED_BY(mu) = 0;
  std::vector<Endpoint*> shard_endpoints ABSL_GUARDED_BY(mu);
};

// Cluster mode: attempts of a call that nodes redirect. A redirect is
// followed at once; a chain of them is a cluster changing primaries, which
// the callers' retries with backoff wait out.
inline constexpr int kMaxRedirects = 3;
// How long each node may take to answer ChannelAccess::Rediscover.
inline constexpr absl::Duration kRediscoverTimeout = absl::Seconds(2);

// The client library's access to a Channel's insides; not part of the
// public API. Thread-safe.
class ChannelAccess {
 public:
  static const ChannelState& state(const Channel& channel) {
    return *channel.state_;
  }
  // The endpoint calls about `topic` go to now: in cluster mode, the
  // primary of the topic's shard once known; otherwise, and for calls about
  // no topic (empty), the channel's current endpoint. Valid as long as the
  // channel.
  static const Endpoint& endpoint(const Channel& channel,
                                  std::string_view topic = {});
  static hourglass::v1::Broker::Stub& broker(const Channel& channel,
                                             std::string_view topic = {}) {
    return *endpoint(channel, topic).broker;
  }
  static hourglass::v1::Admin::Stub& admin(const Channel& channel,
                                           std::string_view topic = {}) {
    return *endpoint(channel, topic).admin;
  }

  // Cluster mode: the cluster's shard count once a node has said it; 0
  // before, and for a broker that is not a cluster.
  static int ShardCount(const Channel& channel);

  // Whether a retried call should wait for the current node to be
  // reachable (gRPC's wait_for_ready): yes for one broker, which comes back
  // where it was; no once the channel knows other nodes of a cluster, which
  // it asks instead (Rediscover) after a quick UNAVAILABLE.
  static bool WaitForReady(const Channel& channel);

  // Cluster mode. After a call about `topic` on `context` ended with
  // `status`: notes the shard count a node gave (any status), and if a
  // node refused the call for not being the primary of the topic's shard
  // and named the primary, later calls about the shard's topics go there.
  // Whether they will (the caller retries at once).
  static bool FollowRedirect(const Channel& channel,
                             const grpc::ClientContext& context,
                             const grpc::Status& status,
                             std::string_view topic = {});
  // The same for a redirect read otherwise (a PublishStream's answer, a
  // subscription's end).
  static bool Follow(const Channel& channel, const Redirect& redirect,
                     std::string_view topic = {});
  // Cluster mode. Asks the nodes the channel knows, the current one first,
  // for the cluster map (at most `timeout` each), and sends later calls
  // about each shard to the primary it names (calls about no topic, to
  // shard 0's). Whether calls about `topic` go elsewhere now. False, at
  // once after one call, for a broker that is not in cluster mode. Blocks.
  static bool Rediscover(const Channel& channel, absl::Duration timeout,
                         std::string_view topic = {});

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
