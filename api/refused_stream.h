#ifndef HOURGLASS_API_REFUSED_STREAM_H_
#define HOURGLASS_API_REFUSED_STREAM_H_

#include "grpcpp/support/server_callback.h"
#include "grpcpp/support/status.h"

namespace hourglass::api {

// A bidirectional stream that ends at once with `status` (not OK), reading
// nothing: for streams refused before they start (no token, too many
// streams). gRPC owns the reactor; it deletes itself when done.
template <typename Request, typename Response>
grpc::ServerBidiReactor<Request, Response>* NewRefusedStream(
    const grpc::Status& status) {
  class Refused final : public grpc::ServerBidiReactor<Request, Response> {
   public:
    // gRPC holds the Finish until the reactor is bound to the call.
    explicit Refused(const grpc::Status& status) { this->Finish(status); }
    void OnDone() override { delete this; }
  };
  return new Refused(status);
}

}  // namespace hourglass::api

#endif  // HOURGLASS_API_REFUSED_STREAM_H_
