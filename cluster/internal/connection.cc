#include "cluster/internal/connection.h"

#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace hourglass::cluster::internal {

Connection::Connection(const std::vector<std::string>& addresses,
                       std::shared_ptr<grpc::ChannelCredentials> credentials,
                       const client::TlsOptions& tls) {
  grpc::ChannelArguments arguments;
  client::SetTlsArguments(tls, arguments);
  // Channels of their own: two clients in one process (two candidates of
  // an election in a test, say) then share no connection and no backoff.
  arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // An etcd that restarts is back within a second or two: reconnect at
  // least every second (gRPC's default backs off to two minutes), so that
  // watches and keep-alives resume soon. Calls reset the backoff anyway
  // (EtcdClient::Call).
  arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // Notice a member that stopped answering (paused, or cut off) while a
  // watch or keep-alive stream waits on it: ping every 10 s, give up after
  // 5 s without an answer. etcd refuses pings more often than every 5 s
  // (its --grpc-keepalive-min-time).
  arguments.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10'000);
  arguments.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5'000);
  arguments.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  endpoints_.reserve(addresses.size());
  for (const std::string& address : addresses) {
    Endpoint endpoint;
    endpoint.address = address;
    endpoint.channel =
        grpc::CreateCustomChannel(address, credentials, arguments);
    endpoint.kv = etcdserverpb::KV::NewStub(endpoint.channel);
    endpoint.lease = etcdserverpb::Lease::NewStub(endpoint.channel);
    endpoint.watch = etcdserverpb::Watch::NewStub(endpoint.channel);
    endpoints_.push_back(std::move(endpoint));
  }
}

size_t Connection::current() const {
  absl::MutexLock lock(&mu_);
  return current_;
}

void Connection::Answered(size_t index) {
  absl::MutexLock lock(&mu_);
  current_ = index;
}

void Connection::Failed(size_t index) {
  absl::MutexLock lock(&mu_);
  if (current_ == index) current_ = (index + 1) % endpoints_.size();
}

absl::Status ToStatus(const grpc::Status& status, std::string_view address,
                      std::string_view what) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat("etcd ", AsAbsl(address), ": ", AsAbsl(what),
                                   ": ", status.error_message()));
}

void PrepareUnary(grpc::ClientContext& context, absl::Time deadline) {
  context.set_deadline(absl::ToChronoTime(deadline));
  context.set_wait_for_ready(false);
}

}  // namespace hourglass::cluster::internal
