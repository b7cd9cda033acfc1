#ifndef HOURGLASS_CLIENT_INTERNAL_STATUS_H_
#define HOURGLASS_CLIENT_INTERNAL_STATUS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/support/status.h"

namespace hourglass::client::internal {

// A finished call's grpc::Status as an absl::Status of the same code (the
// two enumerations agree) and the broker's message, except where the
// message would not say what happened:
//   DEADLINE_EXCEEDED  `no answer from ADDRESS within TIMEOUT`
//   UNIMPLEMENTED      without a message: `the broker at ADDRESS does not
//                      serve this call (an older hourglassd?)`
absl::Status FromGrpc(const grpc::Status& status, absl::string_view address,
                      absl::Duration timeout);

// The code of `status` as a grpc::StatusCode.
inline grpc::StatusCode ToGrpcCode(absl::StatusCode code) {
  return static_cast<grpc::StatusCode>(code);
}

}  // namespace hourglass::client::internal

#endif  // HOURGLASS_CLIENT_INTERNAL_STATUS_H_
