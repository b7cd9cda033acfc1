#include "client/channel.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/internal/channel_state.h"
#include "client/internal/reachability.h"
#include "client/internal/status.h"
#include "client/tls.h"
#include "cluster/shard_hash.h"
#include "grpc/grpc.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/support/channel_arguments.h"

namespace hourglass::client {
namespace {

// Marks Connect's errors with their ConnectFailure: a status payload, so
// that the code stays UNAVAILABLE.
constexpr absl::string_view kConnectFailurePayload =
    "hourglass.client/connect_failure";

absl::Status ConnectError(ConnectFailure failure, absl::string_view address,
                          absl::string_view why) {
  absl::Status status =
      absl::UnavailableError(absl::StrCat("cannot reach ", address, ": ", why));
  status.SetPayload(kConnectFailurePayload,
                    absl::Cord(absl::StrCat(static_cast<int>(failure))));
  return status;
}

// Sends the token as "authorization: Bearer <token>" on every call.
class BearerToken final : public grpc::MetadataCredentialsPlugin {
 public:
  explicit BearerToken(const std::string& token) : header_("Bearer " + token) {}

  // Runs inline on the calling thread: there is nothing to wait for.
  bool IsBlocking() const override { return false; }
  const char* GetType() const override { return "hourglass-bearer-token"; }

  grpc::Status GetMetadata(
      grpc::string_ref /*service_url*/, grpc::string_ref /*method_name*/,
      const grpc::AuthContext& /*channel_auth_context*/,
      std::multimap<grpc::string, grpc::string>* metadata) override {
    metadata->emplace("authorization", header_);
    return grpc::Status::OK;
  }

 private:
  const std::string header_;
};

// A gRPC channel to `address` with the state's credentials and options. The
// one place channels are made, for the primaries of cluster mode too.
std::unique_ptr<internal::Endpoint> MakeEndpoint(
    const internal::ChannelState& state, const std::string& address) {
  grpc::ChannelArguments arguments;
  // Deliveries and pages are as large as the broker allows; it enforces it.
  arguments.SetMaxReceiveMessageSize(-1);
  // A broker that restarts is back within seconds: retry connecting at
  // least every 5 s (gRPC's default backs off to 2 minutes), so that
  // reconnecting consumers and retried publishes find it soon.
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 5000);
  if (state.options.own_connection) {
    arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  }
  SetTlsArguments(state.options.tls, arguments);
  auto endpoint = std::make_unique<internal::Endpoint>();
  endpoint->address = address;
  endpoint->channel =
      grpc::CreateCustomChannel(address, state.credentials, arguments);
  endpoint->broker = hourglass::v1::Broker::NewStub(endpoint->channel);
  endpoint->admin = hourglass::v1::Admin::NewStub(endpoint->channel);
  endpoint->cluster = hourglass::v1::Cluster::NewStub(endpoint->channel);
  endpoint->recurrences =
      hourglass::v1::Recurrences::NewStub(endpoint->channel);
  return endpoint;
}

}  // namespace

ConnectFailure ConnectFailureOf(const absl::Status& status) {
  const auto payload = status.GetPayload(kConnectFailurePayload);
  int value = 0;
  if (!payload.has_value() ||
      !absl::SimpleAtoi(std::string(*payload), &value)) {
    return ConnectFailure::kNone;
  }
  return static_cast<ConnectFailure>(value);
}

absl::StatusOr<std::shared_ptr<Channel>> Channel::Create(
    ChannelOptions options) {
  if (options.call_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("call_timeout must be more than 0");
  }
  for (const char c : options.token) {
    if (c <= ' ' || c > '~') {
      return absl::InvalidArgumentError(
          "token has a space or a character other than printable ASCII");
    }
  }
  auto state = std::make_unique<internal::ChannelState>();
  state->tls = UsesTls(options.tls);
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      TlsCredentials(options.tls);
  if (!credentials.ok()) return credentials.status();
  state->credentials = *std::move(credentials);
  if (!options.token.empty()) {
    // Without a minimum security level: hourglassd may check tokens on a
    // plaintext loopback listener.
    state->call_credentials = grpc::experimental::MetadataCredentialsFromPlugin(
        std::make_unique<BearerToken>(options.token), GRPC_SECURITY_NONE);
  }
  state->options = std::move(options);
  {
    // "a,b,c": calls start at a; b and c are asked for the cluster map.
    std::vector<std::string> addresses =
        absl::StrSplit(state->options.address, ',', absl::SkipWhitespace());
    if (addresses.empty()) {
      return absl::InvalidArgumentError("address is empty");
    }
    absl::MutexLock lock(&state->mu);
    std::unique_ptr<internal::Endpoint> seed =
        MakeEndpoint(*state, addresses.front());
    state->current = seed.get();
    state->endpoints[addresses.front()] = std::move(seed);
    state->known = std::move(addresses);
  }
  return std::shared_ptr<Channel>(new Channel(std::move(state)));
}

Channel::Channel(std::unique_ptr<internal::ChannelState> state)
    : state_(std::move(state)) {}

Channel::~Channel() = default;

const ChannelOptions& Channel::options() const { return state_->options; }

bool Channel::tls() const { return state_->tls; }

absl::Status Channel::Connect(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  const absl::Status first =
      ConnectTo(internal::ChannelAccess::endpoint(*this), deadline, timeout);
  if (first.ok()) return first;
  // Several nodes (a cluster): the first of the others that answers.
  std::vector<std::string> others;
  {
    absl::MutexLock lock(&state_->mu);
    for (const std::string& address : state_->known) {
      if (address != state_->current->address) others.push_back(address);
    }
  }
  for (const std::string& address : others) {
    if (absl::Now() >= deadline) break;
    const internal::Endpoint* endpoint;
    {
      absl::MutexLock lock(&state_->mu);
      std::unique_ptr<internal::Endpoint>& made = state_->endpoints[address];
      if (made == nullptr) made = MakeEndpoint(*state_, address);
      endpoint = made.get();
    }
    if (ConnectTo(*endpoint, deadline, timeout).ok()) {
      absl::MutexLock lock(&state_->mu);
      state_->current = state_->endpoints[address].get();
      return absl::OkStatus();
    }
  }
  return first;
}

absl::Status Channel::ConnectTo(const internal::Endpoint& endpoint,
                                absl::Time deadline, absl::Duration timeout) {
  const std::string& address = endpoint.address;
  grpc::Channel& channel = *endpoint.channel;
  grpc_connectivity_state state = channel.GetState(/*try_to_connect=*/true);
  while (state != GRPC_CHANNEL_READY &&
         state != GRPC_CHANNEL_TRANSIENT_FAILURE &&
         state != GRPC_CHANNEL_SHUTDOWN) {
    if (!channel.WaitForStateChange(state, absl::ToChronoTime(deadline))) {
      return ConnectError(ConnectFailure::kNoAnswer, address,
                          absl::StrCat("no answer within ",
                                       absl::FormatDuration(absl::Trunc(
                                           timeout, absl::Milliseconds(1)))));
    }
    state = channel.GetState(/*try_to_connect=*/true);
  }
  if (state == GRPC_CHANNEL_READY) return absl::OkStatus();
  const absl::Duration left =
      std::max(deadline - absl::Now(), absl::Seconds(1));
  const std::string why = internal::WhyUnreachable(address, left);
  if (!why.empty()) {
    return ConnectError(ConnectFailure::kUnreachable, address, why);
  }
  return ConnectError(
      ConnectFailure::kNotGrpc, address,
      state_->tls ? "it accepts connections but the TLS handshake failed "
                    "(check the CA, the client certificate and key, and the "
                    "name in its certificate) or it is not a gRPC server"
                  : "it accepts connections but not as a plaintext gRPC "
                    "server (does it use TLS?)");
}

void AwaitGrpcShutdown(absl::Duration limit) {
  const absl::Time deadline = absl::Now() + limit;
  absl::Duration step = absl::Microseconds(100);
  while (grpc_is_initialized() && absl::Now() < deadline) {
    absl::SleepFor(step);
    step = std::min(2 * step, absl::Milliseconds(10));
  }
}

namespace internal {

void ChannelAccess::Prepare(const Channel& channel,
                            grpc::ClientContext& context, absl::Time deadline) {
  if (deadline != absl::InfiniteFuture()) {
    context.set_deadline(absl::ToChronoTime(deadline));
  }
  if (channel.state_->call_credentials != nullptr) {
    context.set_credentials(channel.state_->call_credentials);
  }
}

absl::Status ChannelAccess::ToStatus(const Channel& channel,
                                     const grpc::Status& status,
                                     absl::Duration timeout) {
  return FromGrpc(status, endpoint(channel).address, timeout);
}

namespace {

// The slot holding where calls about `topic` go: its shard's (cluster mode,
// once the shard count is known) or the current endpoint's.
Endpoint*& RouteOf(ChannelState& state, std::string_view topic)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(state.mu) {
  if (state.shard_count > 0 && !topic.empty()) {
    return state.shard_endpoints[static_cast<size_t>(
        cluster::ShardOf(topic, state.shard_count))];
  }
  return state.current;
}

// Where calls about `topic` go now.
Endpoint* Effective(ChannelState& state, std::string_view topic)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(state.mu) {
  Endpoint* route = RouteOf(state, topic);
  return route != nullptr ? route : state.current;
}

// The endpoint to `address`, made if new.
Endpoint* EndpointTo(ChannelState& state, const std::string& address)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(state.mu) {
  std::unique_ptr<Endpoint>& endpoint = state.endpoints[address];
  if (endpoint == nullptr) endpoint = MakeEndpoint(state, address);
  return endpoint.get();
}

// Sends the calls of `route` (a RouteOf slot) to `address`. Whether that
// changed where they go.
bool SwitchTo(ChannelState& state, Endpoint*& route, const std::string& address)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(state.mu) {
  const Endpoint* before = route != nullptr ? route : state.current;
  route = EndpointTo(state, address);
  return route != before;
}

// Notes the cluster's shard count; a new count forgets the shards' routes.
// A count no cluster has (a faulty or hostile server's) is ignored: the
// routes are a table of that size.
void LearnShardCount(ChannelState& state, int shard_count)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(state.mu) {
  if (shard_count <= 0 || shard_count > cluster::kMaxShardCount ||
      shard_count == state.shard_count) {
    return;
  }
  state.shard_count = shard_count;
  state.shard_endpoints.assign(static_cast<size_t>(shard_count), nullptr);
}

}  // namespace

const Endpoint& ChannelAccess::endpoint(const Channel& channel,
                                        std::string_view topic) {
  ChannelState& state = *channel.state_;
  absl::MutexLock lock(&state.mu);
  return *Effective(state, topic);
}

int ChannelAccess::ShardCount(const Channel& channel) {
  absl::MutexLock lock(&channel.state_->mu);
  return channel.state_->shard_count;
}

bool ChannelAccess::WaitForReady(const Channel& channel) {
  absl::MutexLock lock(&channel.state_->mu);
  return channel.state_->known.size() <= 1;
}

bool ChannelAccess::FollowRedirect(const Channel& channel,
                                   const grpc::ClientContext& context,
                                   const grpc::Status& status,
                                   std::string_view topic) {
  if (status.ok()) return false;
  return Follow(channel, RedirectOf(context, status), topic);
}

bool ChannelAccess::Follow(const Channel& channel, const Redirect& redirect,
                           std::string_view topic) {
  ChannelState& state = *channel.state_;
  absl::MutexLock lock(&state.mu);
  LearnShardCount(state, redirect.shard_count);
  if (redirect.primary.empty()) return false;
  return SwitchTo(state, RouteOf(state, topic), redirect.primary);
}

bool ChannelAccess::Rediscover(const Channel& channel, absl::Duration timeout,
                               std::string_view topic) {
  ChannelState& state = *channel.state_;
  std::vector<std::string> addresses;
  {
    absl::MutexLock lock(&state.mu);
    addresses.push_back(Effective(state, topic)->address);
    for (const std::string& a : state.known) {
      if (a != addresses.front()) addresses.push_back(a);
    }
  }
  for (const std::string& address : addresses) {
    hourglass::v1::Cluster::Stub* stub;
    {
      absl::MutexLock lock(&state.mu);
      stub = EndpointTo(state, address)->cluster.get();
    }
    grpc::ClientContext context;
    Prepare(channel, context, absl::Now() + timeout);
    hourglass::v1::ClusterMap map;
    const grpc::Status status = stub->GetClusterMap(
        &context, hourglass::v1::GetClusterMapRequest(), &map);
    if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) return false;
    if (!status.ok()) continue;
    std::map<std::string, std::string> nodes;
    std::vector<std::string> known;
    for (const hourglass::v1::ClusterNode& node : map.nodes()) {
      nodes[node.id()] = node.address();
      known.push_back(node.address());
    }
    absl::MutexLock lock(&state.mu);
    if (!known.empty()) state.known = std::move(known);
    LearnShardCount(state, static_cast<int>(map.shard_count()));
    const Endpoint* before = Effective(state, topic);
    for (const hourglass::v1::ShardInfo& shard : map.shards()) {
      auto primary = nodes.find(shard.primary());
      // No live primary: a failover is in progress.
      if (primary == nodes.end()) continue;
      if (shard.shard() == 0) SwitchTo(state, state.current, primary->second);
      if (shard.shard() < state.shard_endpoints.size()) {
        SwitchTo(state, state.shard_endpoints[shard.shard()], primary->second);
      }
    }
    return Effective(state, topic) != before;
  }
  return false;
}

}  // namespace internal
}  // namespace hourglass::client
