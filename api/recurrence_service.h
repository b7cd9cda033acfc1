#ifndef HOURGLASS_API_RECURRENCE_SERVICE_H_
#define HOURGLASS_API_RECURRENCE_SERVICE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "api/auth.h"
#include "broker/clock.h"
#include "hourglass/v1/recurrences.grpc.pb.h"
#include "recurrence/rule.h"

namespace hourglass::api {

// The most fire times one PreviewRecurrence returns, and how many it
// returns when the request does not say.
inline constexpr uint32_t kMaxPreviewCount = 1000;
inline constexpr uint32_t kDefaultPreviewCount = 10;

// A rule as the API gives it, validated and with its time zone loaded.
// Errors, INVALID_ARGUMENT prefixed "rule: ": recurrence::Rule::Create's
// (`rule: cron field 2 (hour): 24 is out of range 0-23`, `rule: unknown
// time zone "Mars/Olympus"`), and a start_at, end_at or every that is no
// valid Timestamp or Duration.
absl::StatusOr<recurrence::Rule> RuleFromProto(
    const hourglass::v1::RecurrenceRule& rule);

// hourglass.v1.Recurrences on the gRPC callback API. Serves
// PreviewRecurrence of an inline rule, computed on the calling gRPC thread
// (pure and bounded: at most kMaxPreviewCount Rule::NextAfter calls); the
// other calls are not served yet and answer UNIMPLEMENTED.
//
// Thread-safe; gRPC calls it from its own threads.
class RecurrenceService final
    : public hourglass::v1::Recurrences::CallbackService {
 public:
  // `clock` gives PreviewRecurrence's default `from`. Every call needs a
  // valid credential of `authorizer` (any role); null means no
  // authentication. REQUIRES: the pointers outlive the service.
  explicit RecurrenceService(broker::Clock* clock,
                             const Authorizer* authorizer = nullptr);

  grpc::ServerUnaryReactor* PreviewRecurrence(
      grpc::CallbackServerContext* context,
      const hourglass::v1::PreviewRecurrenceRequest* request,
      hourglass::v1::PreviewRecurrenceResponse* response) override;

 private:
  broker::Clock* const clock_;
  const Authorizer* const authorizer_;
};

}  // namespace hourglass::api

#endif  // HOURGLASS_API_RECURRENCE_SERVICE_H_
