#ifndef HOURGLASS_API_CALL_METRICS_H_
#define HOURGLASS_API_CALL_METRICS_H_

#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "broker/metrics.h"
#include "grpcpp/support/server_interceptor.h"
#include "grpcpp/support/status.h"

namespace hourglass::api {

// Counts every gRPC call the server answers, by method and status code
// (hourglass_grpc_calls_total{method,code}), and times it from the call's
// start to its status (hourglass_grpc_call_seconds{method}; a stream's
// whole life). A server interceptor: it sees the status a call ends with
// when gRPC sends it (PRE_SEND_STATUS), whichever service and reactor
// answered. `method` is gRPC's full name without the leading slash
// ("hourglass.v1.Broker/Publish"); `code` is the status code's name ("OK",
// "INVALID_ARGUMENT"). So the series are bounded by the methods served
// times the 17 codes. Refused calls also count by reason
// (hourglass_calls_refused_total{reason}, RefusalReason).
//
// Thread-safe: gRPC creates an interceptor per call, on any thread.
// Why a call that ended with `status` was refused, as the reason label of
// hourglass_calls_refused_total says it, or empty if it was not refused
// (OK, or the caller's mistake: INVALID_ARGUMENT, NOT_FOUND, ...):
//   disk_full          RESOURCE_EXHAUSTED from the store ("disk full", as
//                      storage::MessageStore::Write words it)
//   limit              any other RESOURCE_EXHAUSTED (a configured limit)
//   unavailable        UNAVAILABLE (the store failed; shutting down)
//   busy               ABORTED (a change of the same message in progress)
//   unauthenticated, permission_denied
std::string_view RefusalReason(const grpc::Status& status);

class CallMetricsFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  // REQUIRES: `registry` outlives the factory and the server.
  explicit CallMetricsFactory(metrics::Registry* registry);

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

  // The children of one method, created on first use and never removed,
  // so that a call finds them without a lookup in a family.
  class Method {
   public:
    Method(CallMetricsFactory* factory, std::string name);
    // Counts a call that ended with `status` after `seconds`.
    void Finished(const grpc::Status& status, double seconds);

   private:
    CallMetricsFactory* const factory_;
    const std::string name_;
    prometheus::Histogram& seconds_;
    // By code; null until a call ends with it.
    std::array<std::atomic<prometheus::Counter*>, 17> calls_{};
  };

 private:
  metrics::CounterFamily calls_;
  metrics::HistogramFamily seconds_;
  // By RefusalReason; every reason's series exists from the start, at 0.
  // Constant after construction.
  absl::flat_hash_map<std::string, prometheus::Counter*> refused_;
  absl::Mutex mu_;
  // By full method name; node_hash_map, so that Method pointers are stable.
  absl::node_hash_map<std::string, Method> methods_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hourglass::api

#endif  // HOURGLASS_API_CALL_METRICS_H_
