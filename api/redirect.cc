#include "api/redirect.h"

#include <string>
#include <utility>

namespace hourglass::api {
namespace {

using grpc::experimental::InterceptionHookPoints;
using grpc::experimental::InterceptorBatchMethods;

class RedirectInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit RedirectInterceptor(const PrimaryHint* hint) : hint_(hint) {}

  void Intercept(InterceptorBatchMethods* batch) override {
    if (batch->QueryInterceptionHookPoint(
            InterceptionHookPoints::PRE_SEND_STATUS) &&
        batch->GetSendStatus().error_code() == grpc::StatusCode::UNAVAILABLE) {
      if (std::optional<PrimaryHint::Primary> primary = hint_->Get()) {
        std::multimap<std::string, std::string>* trailers =
            batch->GetSendTrailingMetadata();
        trailers->emplace(kPrimaryTrailer, primary->address);
        trailers->emplace(kEpochTrailer, std::to_string(primary->epoch));
      }
    }
    batch->Proceed();
  }

 private:
  const PrimaryHint* const hint_;
};

}  // namespace

void PrimaryHint::Set(std::optional<Primary> primary) {
  absl::MutexLock lock(&mu_);
  primary_ = std::move(primary);
}

std::optional<PrimaryHint::Primary> PrimaryHint::Get() const {
  absl::MutexLock lock(&mu_);
  return primary_;
}

grpc::experimental::Interceptor* RedirectFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* /*info*/) {
  return new RedirectInterceptor(hint_);
}

}  // namespace hourglass::api
