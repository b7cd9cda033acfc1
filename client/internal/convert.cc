#include "client/internal/convert.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/time_util.h"

namespace hourglass::client::internal {

using google::protobuf::util::TimeUtil;

google::protobuf::Timestamp ToProto(absl::Time time) {
  return TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(time));
}

google::protobuf::Duration ToProto(absl::Duration duration) {
  return TimeUtil::NanosecondsToDuration(absl::ToInt64Nanoseconds(duration));
}

absl::Time FromProto(const google::protobuf::Timestamp& timestamp) {
  return absl::FromUnixNanos(TimeUtil::TimestampToNanoseconds(timestamp));
}

absl::Duration FromProto(const google::protobuf::Duration& duration) {
  return absl::Nanoseconds(TimeUtil::DurationToNanoseconds(duration));
}

absl::Status ToRequest(std::vector<Message> messages,
                       hourglass::v1::PublishRequest& request) {
  request.Clear();
  request.mutable_messages()->Reserve(static_cast<int>(messages.size()));
  for (size_t i = 0; i < messages.size(); ++i) {
    Message& m = messages[i];
    if (m.delay.has_value() && m.deliver_at.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("message ", i, ": set delay or deliver_at, not both"));
    }
    hourglass::v1::Message* out = request.add_messages();
    out->set_topic(std::move(m.topic));
    out->set_payload(std::move(m.payload));
    for (auto& [key, value] : m.headers) {
      (*out->mutable_headers())[key] = std::move(value);
    }
    if (m.delay.has_value()) *out->mutable_delay() = ToProto(*m.delay);
    if (m.deliver_at.has_value()) {
      *out->mutable_deliver_at() = ToProto(*m.deliver_at);
    }
    out->set_id(std::move(m.id));
    if (m.ttl.has_value()) *out->mutable_ttl() = ToProto(*m.ttl);
    if (m.expire_at.has_value()) {
      *out->mutable_expire_at() = ToProto(*m.expire_at);
    }
    if (m.on_expire == Message::OnExpire::kDeadLetter) {
      out->set_on_expire(hourglass::v1::ON_EXPIRE_DEAD_LETTER);
    }
  }
  return absl::OkStatus();
}

Receipt FromProto(const hourglass::v1::Receipt& receipt) {
  return Receipt{.id = receipt.id(),
                 .deliver_at = FromProto(receipt.deliver_at()),
                 .duplicate = receipt.duplicate()};
}

Delivery FromProto(hourglass::v1::Delivery&& delivery) {
  Delivery out;
  out.id = std::move(*delivery.mutable_id());
  out.topic = std::move(*delivery.mutable_topic());
  out.payload = std::move(*delivery.mutable_payload());
  for (auto& [key, value] : *delivery.mutable_headers()) {
    out.headers.emplace(key, std::move(value));
  }
  out.deliver_at = FromProto(delivery.deliver_at());
  out.published_at = FromProto(delivery.published_at());
  out.attempt = delivery.attempt();
  return out;
}

}  // namespace hourglass::client::internal
