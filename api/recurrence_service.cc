#include "api/recurrence_service.h"

#include <cstddef>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "api/proto_time.h"
#include "api/status.h"
#include "api/validation.h"

namespace hourglass::api {
namespace {

namespace v1 = hourglass::v1;

absl::Status Prefixed(const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("rule: ", status.message()));
}

}  // namespace

absl::StatusOr<recurrence::Rule> RuleFromProto(const v1::RecurrenceRule& rule) {
  recurrence::RuleSpec spec;
  switch (rule.schedule_case()) {
    case v1::RecurrenceRule::kCron:
      if (rule.cron().empty()) {
        return absl::InvalidArgumentError("rule: cron expression is empty");
      }
      spec.cron = rule.cron();
      break;
    case v1::RecurrenceRule::kEvery:
      if (absl::Status s = ValidateDuration("rule.every", rule.every());
          !s.ok()) {
        return s;
      }
      spec.every = FromProto(rule.every());
      // Rule::Create takes a zero period for none set.
      if (spec.every <= absl::ZeroDuration()) {
        return absl::InvalidArgumentError(
            absl::StrCat("rule: every ", absl::FormatDuration(spec.every),
                         " is shorter than 1s"));
      }
      break;
    case v1::RecurrenceRule::SCHEDULE_NOT_SET:
      break;  // Rule::Create names what is missing.
  }
  spec.time_zone = rule.time_zone();
  if (!rule.on_gap().empty()) {
    absl::StatusOr<recurrence::GapPolicy> gap =
        recurrence::ParseGapPolicy(rule.on_gap());
    if (!gap.ok()) return Prefixed(gap.status());
    spec.on_gap = *gap;
  }
  if (!rule.on_overlap().empty()) {
    absl::StatusOr<recurrence::OverlapPolicy> overlap =
        recurrence::ParseOverlapPolicy(rule.on_overlap());
    if (!overlap.ok()) return Prefixed(overlap.status());
    spec.on_overlap = *overlap;
  }
  if (rule.has_start_at()) {
    if (absl::Status s = ValidateTimestamp("rule.start_at", rule.start_at());
        !s.ok()) {
      return s;
    }
    spec.start_at = FromProto(rule.start_at());
  }
  if (rule.has_end_at()) {
    if (absl::Status s = ValidateTimestamp("rule.end_at", rule.end_at());
        !s.ok()) {
      return s;
    }
    spec.end_at = FromProto(rule.end_at());
  }
  absl::StatusOr<recurrence::Rule> created = recurrence::Rule::Create(spec);
  if (!created.ok()) return Prefixed(created.status());
  return created;
}

RecurrenceService::RecurrenceService(broker::Clock* clock,
                                     const Authorizer* authorizer)
    : clock_(clock),
      authorizer_(authorizer != nullptr ? authorizer
                                        : &Authorizer::Disabled()) {}

grpc::ServerUnaryReactor* RecurrenceService::PreviewRecurrence(
    grpc::CallbackServerContext* context,
    const v1::PreviewRecurrenceRequest* request,
    v1::PreviewRecurrenceResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const absl::Status status = [&]() -> absl::Status {
    if (absl::StatusOr<Grant> grant = authorizer_->Authenticate(*context);
        !grant.ok()) {
      return grant.status();
    }
    if (request->count() > kMaxPreviewCount) {
      return absl::InvalidArgumentError(absl::StrCat("count ", request->count(),
                                                     " is above the limit of ",
                                                     kMaxPreviewCount));
    }
    absl::StatusOr<recurrence::Rule> rule = RuleFromProto(request->rule());
    if (!rule.ok()) return rule.status();
    absl::Time from = clock_->Now();
    if (request->has_from()) {
      if (absl::Status s = ValidateTimestamp("from", request->from());
          !s.ok()) {
        return s;
      }
      from = FromProto(request->from());
    }
    const size_t count =
        request->count() == 0 ? kDefaultPreviewCount : request->count();
    for (absl::Time fire : rule->Preview(from, count)) {
      ToProto(fire, response->add_fire_times());
    }
    return absl::OkStatus();
  }();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

}  // namespace hourglass::api
