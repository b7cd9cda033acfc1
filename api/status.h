#ifndef HOURGLASS_API_STATUS_H_
#define HOURGLASS_API_STATUS_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace hourglass::api {

// The one place where an absl::Status becomes a grpc::Status: same code,
// same message; a primary the status names (api::WithPrimary) goes into
// the error details, for the redirect interceptor (api/redirect.h).
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace hourglass::api

#endif  // HOURGLASS_API_STATUS_H_
