#ifndef HOURGLASS_API_REDIRECT_H_
#define HOURGLASS_API_REDIRECT_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/support/server_interceptor.h"

namespace hourglass::api {

// Trailing metadata of an UNAVAILABLE answered by a cluster node that is not
// the primary of the shard a call needs (CLUSTER.md "Clients"): the
// primary's address (host:port) and its epoch, in decimal. Clients retry
// there.
inline constexpr char kPrimaryTrailer[] = "hourglass-primary";
inline constexpr char kEpochTrailer[] = "hourglass-epoch";

// Where a cluster node sends clients: the primary it knows of, if any.
// Thread-safe.
class PrimaryHint {
 public:
  struct Primary {
    std::string address;
    int64_t epoch = 0;
  };
  // nullopt: this node is the primary, or knows none (no redirect).
  void Set(std::optional<Primary> primary);
  std::optional<Primary> Get() const;

 private:
  mutable absl::Mutex mu_;
  std::optional<Primary> primary_ ABSL_GUARDED_BY(mu_);
};

// A server interceptor adding kPrimaryTrailer and kEpochTrailer to every
// call that ends with UNAVAILABLE while `hint` names a primary, whichever
// service answered it. Thread-safe.
class RedirectFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  // REQUIRES: `hint` outlives the factory and the server.
  explicit RedirectFactory(const PrimaryHint* hint) : hint_(hint) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  const PrimaryHint* const hint_;
};

}  // namespace hourglass::api

#endif  // HOURGLASS_API_REDIRECT_H_
