#ifndef HOURGLASS_CLUSTER_INTERNAL_CONNECTION_H_
#define HOURGLASS_CLUSTER_INTERNAL_CONNECTION_H_

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/tls.h"
#include "cluster/internal/strings.h"
#include "etcdserverpb/rpc.grpc.pb.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/status.h"

namespace hourglass::cluster::internal {

// One etcd member the client may call: its channel and the stubs of the
// three services on it.
struct Endpoint {
  std::string address;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<etcdserverpb::KV::Stub> kv;
  std::unique_ptr<etcdserverpb::Lease::Stub> lease;
  std::unique_ptr<etcdserverpb::Watch::Stub> watch;
};

// The client's channels to etcd, one per endpoint, and which endpoint calls
// go to first: the last one that answered. What EtcdClient, LeaseKeeper and
// Watch share; not part of the module's interface.
//
// Thread-safe.
class Connection {
 public:
  // Channels to `addresses` (host:port each, at least one) with
  // `credentials` (client::TlsCredentials(tls)) and the channel arguments
  // `tls` asks for. Does not connect: a channel connects on its first call.
  Connection(const std::vector<std::string>& addresses,
             std::shared_ptr<grpc::ChannelCredentials> credentials,
             const client::TlsOptions& tls);

  size_t size() const { return endpoints_.size(); }
  Endpoint& endpoint(size_t index) { return endpoints_[index]; }

  // The endpoint calls try first.
  size_t current() const;
  // Calls go to `index` first from now on: it answered.
  void Answered(size_t index);
  // `index` failed with UNAVAILABLE: if it is still the one calls try
  // first, the next endpoint becomes it.
  void Failed(size_t index);

 private:
  std::vector<Endpoint> endpoints_;  // Constant after construction.
  mutable absl::Mutex mu_;
  size_t current_ ABSL_GUARDED_BY(mu_) = 0;
};

// A gRPC status of a call to etcd at `address` as an absl::Status: the same
// code (etcd's own errors already carry the code that fits them: NOT_FOUND
// for an unknown lease, OUT_OF_RANGE for a compacted revision,
// INVALID_ARGUMENT for a malformed request, UNAVAILABLE when it has no
// leader, RESOURCE_EXHAUSTED when its space quota is used up), and a
// message that names the endpoint and what was asked.
absl::Status ToStatus(const grpc::Status& status, std::string_view address,
                      std::string_view what);

// Sets the context of a unary call: its deadline, and fail-fast (a call to
// an endpoint that is not connected fails at once with UNAVAILABLE, so that
// the next endpoint can be tried).
void PrepareUnary(grpc::ClientContext& context, absl::Time deadline);

}  // namespace hourglass::cluster::internal

#endif  // HOURGLASS_CLUSTER_INTERNAL_CONNECTION_H_
