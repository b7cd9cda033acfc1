#include "api/status.h"

#include <optional>
#include <string>

#include "api/redirect.h"

namespace hourglass::api {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl and gRPC share the canonical code numbering.
  const auto code = static_cast<grpc::StatusCode>(status.code());
  std::string message(status.message());
  // A cluster node's refusal naming the shard's primary: the details carry
  // it to the redirect interceptor (api/redirect.h).
  if (std::optional<Primary> primary = PrimaryOf(status)) {
    return grpc::Status(code, std::move(message), RedirectDetails(*primary));
  }
  return grpc::Status(code, std::move(message));
}

}  // namespace hourglass::api
