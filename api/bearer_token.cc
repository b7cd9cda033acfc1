#include "api/bearer_token.h"

namespace hourglass::api {
namespace {

class TokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit TokenInterceptor(const std::string* header) : header_(header) {}

  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::
                PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace("authorization", *header_);
    }
    methods->Proceed();
  }

 private:
  const std::string* const header_;
};

class TokenInterceptorFactory final
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit TokenInterceptorFactory(const std::string& token)
      : header_("Bearer " + token) {}

  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* /*info*/) override {
    return new TokenInterceptor(&header_);
  }

 private:
  // Lives as long as the channel, which owns the factory.
  const std::string header_;
};

}  // namespace

ClientInterceptors BearerTokenInterceptors(const std::string& token) {
  ClientInterceptors interceptors;
  if (!token.empty()) {
    interceptors.push_back(std::make_unique<TokenInterceptorFactory>(token));
  }
  return interceptors;
}

}  // namespace hourglass::api
