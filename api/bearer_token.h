#ifndef HOURGLASS_API_BEARER_TOKEN_H_
#define HOURGLASS_API_BEARER_TOKEN_H_

#include <memory>
#include <string>
#include <vector>

#include "grpcpp/support/client_interceptor.h"

namespace hourglass::api {

using ClientInterceptors = std::vector<
    std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>;

// Client side of the broker's token auth (api/auth.h): interceptors for
// grpc::experimental::CreateCustomChannelWithInterceptors that add
// "authorization: Bearer <token>" to every call. None for an empty token.
ClientInterceptors BearerTokenInterceptors(const std::string& token);

}  // namespace hourglass::api

#endif  // HOURGLASS_API_BEARER_TOKEN_H_
