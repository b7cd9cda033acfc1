#include "client/internal/status.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace hourglass::client::internal {

absl::Status FromGrpc(const grpc::Status& status, absl::string_view address,
                      absl::Duration timeout) {
  if (status.ok()) return absl::OkStatus();
  switch (status.error_code()) {
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return absl::DeadlineExceededError(
          absl::StrCat("no answer from ", address, " within ",
                       absl::FormatDuration(timeout)));
    case grpc::StatusCode::UNIMPLEMENTED:
      if (status.error_message().empty()) {
        return absl::UnimplementedError(
            absl::StrCat("the broker at ", address,
                         " does not serve this call (an older hourglassd?)"));
      }
      break;
    default:
      break;
  }
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

}  // namespace hourglass::client::internal
