#include "api/call_metrics.h"

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace hourglass::api {
namespace {

using grpc::experimental::InterceptionHookPoints;

// One call's interceptor: notes the start, and counts the call when its
// status is sent.
class CallInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit CallInterceptor(CallMetricsFactory::Method* method)
      : method_(method), start_(absl::Now()) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* batch) override {
    if (batch->QueryInterceptionHookPoint(
            InterceptionHookPoints::PRE_SEND_STATUS)) {
      method_->Finished(batch->GetSendStatus(),
                        absl::ToDoubleSeconds(absl::Now() - start_));
    }
    batch->Proceed();
  }

 private:
  CallMetricsFactory::Method* const method_;
  const absl::Time start_;
};

}  // namespace

std::string_view RefusalReason(const grpc::Status& status) {
  switch (status.error_code()) {
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return absl::StrContains(status.error_message(), "disk full")
                 ? "disk_full"
                 : "limit";
    case grpc::StatusCode::UNAVAILABLE:
      return "unavailable";
    case grpc::StatusCode::ABORTED:
      return "busy";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "unauthenticated";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "permission_denied";
    default:
      return "";
  }
}

CallMetricsFactory::CallMetricsFactory(metrics::Registry* registry)
    : calls_(registry->Counters(metrics::Metric::kGrpcCallsTotal)),
      seconds_(registry->Histograms(metrics::Metric::kGrpcCallSeconds)) {
  metrics::CounterFamily refused =
      registry->Counters(metrics::Metric::kCallsRefusedTotal);
  for (const char* reason : {"disk_full", "limit", "unavailable", "busy",
                             "unauthenticated", "permission_denied"}) {
    refused_[reason] = &refused.Add({reason});
  }
}

grpc::experimental::Interceptor* CallMetricsFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  // absl's own string_view: Debian's abseil does not alias std's.
  absl::string_view name = info->method() != nullptr ? info->method() : "";
  if (!name.empty() && name.front() == '/') name.remove_prefix(1);
  Method* method;
  {
    absl::MutexLock lock(&mu_);
    auto it = methods_.find(name);
    if (it == methods_.end()) {
      it = methods_.try_emplace(std::string(name), this, std::string(name))
               .first;
    }
    method = &it->second;
  }
  return new CallInterceptor(method);
}

CallMetricsFactory::Method::Method(CallMetricsFactory* factory,
                                   std::string name)
    : factory_(factory),
      name_(std::move(name)),
      seconds_(factory->seconds_.Add({name_})) {}

void CallMetricsFactory::Method::Finished(const grpc::Status& status,
                                          double seconds) {
  seconds_.Observe(seconds);
  const grpc::StatusCode code = status.error_code();
  if (const std::string_view reason = RefusalReason(status); !reason.empty()) {
    factory_->refused_.at(std::string(reason))->Increment();
  }
  const size_t index = static_cast<size_t>(code);
  if (index >= calls_.size()) return;  // Not a code gRPC defines.
  prometheus::Counter* counter = calls_[index].load(std::memory_order_acquire);
  if (counter == nullptr) {
    // Family::Add returns the same child to racing callers.
    const std::string code_name =
        absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
    counter = &factory_->calls_.Add({name_, code_name});
    calls_[index].store(counter, std::memory_order_release);
  }
  counter->Increment();
}

}  // namespace hourglass::api
