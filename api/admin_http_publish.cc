// POST /api/v1/topics/{topic}/publish of the console's JSON API
// (admin_http.h): one message, published as Broker.Publish publishes it.

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "api/admin_http_internal.h"
#include "api/broker_service.h"
#include "api/publish_stream.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "hourglass/v1/broker.grpc.pb.h"

namespace hourglass::api::admin_http_internal {
namespace {

namespace v1 = hourglass::v1;
namespace pb = google::protobuf;

constexpr char kFields[] = "payload, delay, deliverAt, id, headers";

// What a JSON value is, as an error message says it: "a number".
std::string KindOf(const pb::Value& value) {
  switch (value.kind_case()) {
    case pb::Value::kNullValue:
      return "null";
    case pb::Value::kNumberValue:
      return "a number";
    case pb::Value::kStringValue:
      return "a string";
    case pb::Value::kBoolValue:
      return "true or false";
    case pb::Value::kStructValue:
      return "an object";
    case pb::Value::kListValue:
      return "an array";
    default:
      return "nothing";
  }
}

absl::Status WrongKind(absl::string_view field, absl::string_view wanted,
                       const pb::Value& value) {
  return absl::InvalidArgumentError(
      absl::StrCat(field, " must be ", wanted, ", not ", KindOf(value)));
}

// `duration` as a google.protobuf.Duration (ValidatePublish judges its
// sign and size).
void SetDuration(absl::Duration duration, pb::Duration& out) {
  const int64_t seconds =
      absl::IDivDuration(duration, absl::Seconds(1), &duration);
  out.set_seconds(seconds);
  out.set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(duration)));
}

// The message the JSON body describes, published to `topic`.
// INVALID_ARGUMENT naming the field that is wrong.
absl::StatusOr<v1::PublishRequest> ParseBody(const HttpRequest& http,
                                             const std::string& topic) {
  if (!http.query.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "query parameter \"", http.query.front().first,
        "\": a POST takes its fields as a JSON body, not in the query"));
  }
  pb::Value body;
  if (pb::util::Status s = pb::util::JsonStringToMessage(
          http.body.empty() ? "{}" : http.body, &body);
      !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad JSON body: ", s.message().ToString()));
  }
  if (body.kind_case() != pb::Value::kStructValue) {
    return WrongKind("the JSON body", "an object", body);
  }
  v1::PublishRequest request;
  v1::Message& message = *request.add_messages();
  message.set_topic(topic);
  const pb::Value* delay = nullptr;
  const pb::Value* deliver_at = nullptr;
  for (const auto& [name, value] : body.struct_value().fields()) {
    if (name == "payload") {
      if (value.kind_case() != pb::Value::kStringValue) {
        return WrongKind("payload", "a string (the payload as text)", value);
      }
      message.set_payload(value.string_value());
    } else if (name == "id") {
      if (value.kind_case() != pb::Value::kStringValue) {
        return WrongKind("id", "a string", value);
      }
      message.set_id(value.string_value());
    } else if (name == "headers") {
      if (value.kind_case() != pb::Value::kStructValue) {
        return WrongKind("headers", "an object of strings", value);
      }
      for (const auto& [key, header] : value.struct_value().fields()) {
        if (header.kind_case() != pb::Value::kStringValue) {
          return WrongKind(absl::StrCat("header \"", key, "\""), "a string",
                           header);
        }
        (*message.mutable_headers())[key] = header.string_value();
      }
    } else if (name == "delay") {
      delay = &value;
    } else if (name == "deliverAt") {
      deliver_at = &value;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown field ", JsonString(name),
                       " in the JSON body; a publish "
                       "takes ",
                       kFields));
    }
  }
  if (delay != nullptr && deliver_at != nullptr) {
    return absl::InvalidArgumentError(
        "give delay or deliverAt, not both: one says when the message is due");
  }
  if (delay != nullptr) {
    absl::Duration duration;
    if (delay->kind_case() == pb::Value::kNumberValue) {
      const double millis = delay->number_value();
      if (!std::isfinite(millis) || std::abs(millis) > 1e15) {
        return absl::InvalidArgumentError(
            absl::StrCat("delay ", millis, " is not a number of milliseconds"));
      }
      duration = absl::Milliseconds(millis);
    } else if (delay->kind_case() == pb::Value::kStringValue) {
      if (!absl::ParseDuration(delay->string_value(), &duration) ||
          duration == absl::InfiniteDuration() ||
          duration == -absl::InfiniteDuration()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "delay ", JsonString(delay->string_value()),
            " is not a duration such as \"250ms\", \"10s\" or \"1h30m\""));
      }
    } else {
      return WrongKind(
          "delay", "a duration (\"10s\") or a number of milliseconds", *delay);
    }
    SetDuration(duration, *message.mutable_delay());
  }
  if (deliver_at != nullptr) {
    absl::Time when;
    std::string error;
    if (deliver_at->kind_case() != pb::Value::kStringValue) {
      return WrongKind("deliverAt", "an RFC 3339 time (a string)", *deliver_at);
    }
    if (!absl::ParseTime(absl::RFC3339_full, deliver_at->string_value(), &when,
                         &error) ||
        when == absl::InfiniteFuture() || when == absl::InfinitePast()) {
      return absl::InvalidArgumentError(
          absl::StrCat("deliverAt ", JsonString(deliver_at->string_value()),
                       " is not an RFC 3339 time such as "
                       "\"2030-01-01T00:00:00Z\""));
    }
    const absl::Duration since = when - absl::UnixEpoch();
    pb::Timestamp& out = *message.mutable_deliver_at();
    absl::Duration rest;
    out.set_seconds(absl::IDivDuration(since, absl::Seconds(1), &rest));
    if (rest < absl::ZeroDuration()) {  // Nanos are never negative.
      out.set_seconds(out.seconds() - 1);
      rest += absl::Seconds(1);
    }
    out.set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(rest)));
  }
  return request;
}

// Publishes `request` through `publisher` and waits until `deadline`.
absl::StatusOr<v1::Receipt> PublishHere(BrokerService& publisher,
                                        const Grant& grant,
                                        const v1::PublishRequest& request,
                                        absl::Time deadline,
                                        absl::Duration timeout) {
  // Shared with the callback, which may run after the deadline.
  struct Pending {
    absl::StatusOr<std::vector<broker::PublishReceipt>> receipts;
    absl::Notification done;
  };
  auto pending = std::make_shared<Pending>();
  publisher.StartPublish(
      grant, request,
      [pending](absl::StatusOr<std::vector<broker::PublishReceipt>> receipts) {
        pending->receipts = std::move(receipts);
        pending->done.Notify();
      });
  if (!pending->done.WaitForNotificationWithDeadline(deadline)) {
    return absl::DeadlineExceededError(absl::StrCat(
        "the broker did not answer within ", absl::FormatDuration(timeout),
        "; the message may have been published: look it up"));
  }
  if (!pending->receipts.ok()) return pending->receipts.status();
  v1::PublishResponse response;
  AddReceipts(*pending->receipts, response.mutable_receipts());
  if (response.receipts_size() != 1) {
    return absl::InternalError(absl::StrCat("the broker gave ",
                                            response.receipts_size(),
                                            " receipts for 1 message"));
  }
  return response.receipts(0);
}

}  // namespace

absl::StatusOr<std::string> ServePublish(const Grant& grant,
                                         const HttpRequest& http,
                                         const std::string& topic,
                                         const AdminHttp::Options& options,
                                         absl::Time deadline) {
  // The console's API is the admin's; publishing also needs role produce
  // (StartPublish checks it, as the primary does for a forwarded one).
  if (absl::Status s = grant.Check(Role::kAdmin, topic); !s.ok()) return s;
  if (options.publisher == nullptr) {
    return absl::UnimplementedError("this console does not publish");
  }
  absl::StatusOr<v1::PublishRequest> request = ParseBody(http, topic);
  if (!request.ok()) return request.status();
  absl::StatusOr<v1::Receipt> receipt = PublishHere(
      *options.publisher, grant, *request, deadline, options.timeout);
  if (std::optional<std::string> primary =
          ForwardTarget(receipt.status(), options.cluster)) {
    v1::PublishResponse response;
    if (absl::Status s =
            Forward(*options.cluster, *primary, &v1::Broker::Stub::Publish,
                    *request, &response, http, deadline);
        !s.ok()) {
      return s;
    }
    if (response.receipts_size() != 1) {
      return absl::InternalError(
          absl::StrCat("the primary at ", *primary, " gave ",
                       response.receipts_size(), " receipts for 1 message"));
    }
    receipt = response.receipts(0);
  }
  if (!receipt.ok()) return receipt.status();
  return PrintJson(*receipt);
}

}  // namespace hourglass::api::admin_http_internal
