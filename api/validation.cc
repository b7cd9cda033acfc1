#include "api/validation.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "api/proto_time.h"
#include "google/protobuf/util/time_util.h"
#include "storage/keys.h"
#include "storage/schedule_counts.h"

namespace hourglass::api {
namespace {

// Bounds from google/protobuf/duration.proto and timestamp.proto (+-10,000
// years; 0001-01-01 to 9999-12-31), as protobuf's TimeUtil states them.
constexpr int64_t kMaxDurationSeconds =
    google::protobuf::util::TimeUtil::kDurationMaxSeconds;
constexpr int64_t kMinTimestampSeconds =
    google::protobuf::util::TimeUtil::kTimestampMinSeconds;
constexpr int64_t kMaxTimestampSeconds =
    google::protobuf::util::TimeUtil::kTimestampMaxSeconds;
constexpr int32_t kMaxNanos = 999'999'999;

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

// `name` quoted for an error message, with unprintable bytes escaped and
// long names cut.
std::string Quote(std::string_view name) {
  std::string out = "\"";
  for (size_t i = 0; i < name.size() && i < 64; ++i) {
    const unsigned char c = static_cast<unsigned char>(name[i]);
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      absl::StrAppendFormat(&out, "\\x%02x", c);
    }
  }
  if (name.size() > 64) absl::StrAppend(&out, "...");
  out.push_back('"');
  return out;
}

absl::Time TruncateToMillis(absl::Time t) {
  return absl::FromUnixMillis(absl::ToUnixMillis(t));
}

std::string FormatUtc(absl::Time t) {
  return absl::FormatTime(absl::RFC3339_full, t, absl::UTCTimeZone());
}

absl::Status Invalid(size_t index, absl::string_view problem) {
  return absl::InvalidArgumentError(
      absl::StrCat("message ", index, ": ", problem));
}

// The headers of `m`: how many, their bytes, their keys.
absl::Status ValidateHeaders(const hourglass::v1::Message& m,
                             const Limits& limits) {
  if (static_cast<size_t>(m.headers_size()) > limits.max_headers) {
    return absl::InvalidArgumentError(
        absl::StrCat(m.headers_size(), " headers; the limit is ",
                     limits.max_headers, " (--max_headers)"));
  }
  size_t bytes = 0;
  std::vector<std::string_view> keys;
  keys.reserve(m.headers_size());
  for (const auto& [key, value] : m.headers()) {
    bytes += key.size() + value.size();
    keys.push_back(key);
  }
  if (bytes > limits.max_header_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "headers are ", bytes, " bytes (keys and values); the limit is ",
        limits.max_header_bytes, " (--max_header_bytes)"));
  }
  // A map's order is unspecified: the least bad key is reported.
  std::sort(keys.begin(), keys.end());
  for (std::string_view key : keys) {
    if (absl::Status s = ValidateName("header", key); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateName(std::string_view field, std::string_view name) {
  const std::string f(field);
  if (name.empty())
    return absl::InvalidArgumentError(absl::StrCat(f, " is empty"));
  if (name.size() > kMaxNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(f, " ", Quote(name), " is ", name.size(),
                     " bytes long; the limit is ", kMaxNameBytes));
  }
  for (char c : name) {
    if (IsNameChar(c)) continue;
    if (c == ' ') {
      return absl::InvalidArgumentError(
          absl::StrCat(f, " ", Quote(name), " has a space"));
    }
    const unsigned char u = static_cast<unsigned char>(c);
    const std::string shown = (u >= 0x21 && u < 0x7f)
                                  ? absl::StrCat("'", std::string(1, c), "'")
                                  : absl::StrFormat("byte 0x%02x", u);
    return absl::InvalidArgumentError(
        absl::StrCat(f, " ", Quote(name), " has ", shown,
                     "; names may use only A-Z a-z 0-9 . _ -"));
  }
  return absl::OkStatus();
}

absl::Status ValidateNewTopic(std::string_view field, std::string_view name) {
  if (absl::Status s = ValidateName(field, name); !s.ok()) return s;
  if (name.size() > kMaxTopicBytes && !name.ends_with(".dlq")) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(field), " ", Quote(name), " is ", name.size(),
                     " bytes long; the limit is ", kMaxTopicBytes,
                     " (room for the .dlq of its dead-letter topic)"));
  }
  return absl::OkStatus();
}

absl::Status ValidateId(std::string_view field, std::string_view id,
                        const Limits& limits) {
  if (id.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(field), " is empty"));
  }
  if (id.size() > limits.max_id_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(field), " ", Quote(id), " is ", id.size(),
                     " bytes long; the limit is ", limits.max_id_bytes));
  }
  return absl::OkStatus();
}

absl::Status ValidateDuration(std::string_view field,
                              const google::protobuf::Duration& d) {
  const bool seconds_ok =
      d.seconds() >= -kMaxDurationSeconds && d.seconds() <= kMaxDurationSeconds;
  const bool nanos_ok = d.nanos() >= -kMaxNanos && d.nanos() <= kMaxNanos &&
                        !(d.seconds() > 0 && d.nanos() < 0) &&
                        !(d.seconds() < 0 && d.nanos() > 0);
  if (seconds_ok && nanos_ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(std::string(field), " is not a valid Duration (seconds ",
                   d.seconds(), ", nanos ", d.nanos(), ")"));
}

absl::Status ValidateTimestamp(std::string_view field,
                               const google::protobuf::Timestamp& t) {
  if (t.seconds() >= kMinTimestampSeconds &&
      t.seconds() <= kMaxTimestampSeconds && t.nanos() >= 0 &&
      t.nanos() <= kMaxNanos) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat(std::string(field), " is not a valid Timestamp (seconds ",
                   t.seconds(), ", nanos ", t.nanos(), ")"));
}

absl::Status ValidateDelay(const google::protobuf::Duration& delay_proto,
                           const Limits& limits) {
  if (absl::Status s = ValidateDuration("delay", delay_proto); !s.ok()) {
    return s;
  }
  const absl::Duration delay = FromProto(delay_proto);
  if (delay < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("delay ", absl::FormatDuration(delay), " is negative"));
  }
  if (delay > limits.max_delay) {
    return absl::InvalidArgumentError(absl::StrCat(
        "delay ", absl::FormatDuration(delay), " is over the limit of ",
        absl::FormatDuration(limits.max_delay), " (--max_delay)"));
  }
  return absl::OkStatus();
}

absl::Status ValidateDeliverAt(const google::protobuf::Timestamp& at_proto,
                               const Limits& limits, absl::Time now) {
  if (absl::Status s = ValidateTimestamp("deliver_at", at_proto); !s.ok()) {
    return s;
  }
  const absl::Time at = FromProto(at_proto);
  if (at - now > limits.max_delay) {
    return absl::InvalidArgumentError(absl::StrCat(
        "deliver_at ",
        absl::FormatTime(absl::RFC3339_full, at, absl::UTCTimeZone()),
        " is more than ", absl::FormatDuration(limits.max_delay),
        " ahead (--max_delay)"));
  }
  return absl::OkStatus();
}

absl::Status ValidateDeadline(const hourglass::v1::Message& m,
                              const Limits& limits, absl::Time now) {
  if (!hourglass::v1::OnExpire_IsValid(m.on_expire())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "on_expire ", m.on_expire(),
        " is not a known value (ON_EXPIRE_DROP, ON_EXPIRE_DEAD_LETTER)"));
  }
  if (m.has_expire_at() && m.has_ttl()) {
    return absl::InvalidArgumentError(
        "expire_at and ttl are both set; set at most one");
  }
  const absl::Time due = DeliverAt(m, now);
  if (m.has_ttl()) {
    if (absl::Status s = ValidateDuration("ttl", m.ttl()); !s.ok()) return s;
    const absl::Duration ttl = FromProto(m.ttl());
    if (ttl > limits.max_delay) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ttl ", absl::FormatDuration(ttl), " is over the limit of ",
          absl::FormatDuration(limits.max_delay), " (--max_delay)"));
    }
    if (TruncateToMillis(now + ttl) <= due) {
      return absl::InvalidArgumentError(
          absl::StrCat("ttl ", absl::FormatDuration(ttl),
                       " is not longer than the message's delay ",
                       absl::FormatDuration(due - TruncateToMillis(now)),
                       ": it would expire before it comes due"));
    }
  } else if (m.has_expire_at()) {
    if (absl::Status s = ValidateTimestamp("expire_at", m.expire_at());
        !s.ok()) {
      return s;
    }
    const absl::Time at = FromProto(m.expire_at());
    if (at - now > limits.max_delay) {
      return absl::InvalidArgumentError(absl::StrCat(
          "expire_at ", FormatUtc(at), " is more than ",
          absl::FormatDuration(limits.max_delay), " ahead (--max_delay)"));
    }
    if (TruncateToMillis(at) <= due) {
      return absl::InvalidArgumentError(absl::StrCat(
          "expire_at ", FormatUtc(at), " is not after the message's due time ",
          FormatUtc(due), ": it would expire before it comes due"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidatePublish(const hourglass::v1::PublishRequest& request,
                             const Limits& limits, absl::Time now) {
  if (request.messages_size() == 0) {
    return absl::InvalidArgumentError("the request has no messages");
  }
  if (static_cast<size_t>(request.messages_size()) > limits.max_batch) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the request has ", request.messages_size(), " messages; the limit is ",
        limits.max_batch, " (--max_batch)"));
  }
  for (int i = 0; i < request.messages_size(); ++i) {
    const hourglass::v1::Message& m = request.messages(i);
    const size_t index = static_cast<size_t>(i);
    if (absl::Status s = ValidateNewTopic("topic", m.topic()); !s.ok()) {
      return Invalid(index, s.message());
    }
    if (m.payload().size() > limits.max_payload_bytes) {
      return Invalid(
          index, absl::StrCat("payload is ", m.payload().size(),
                              " bytes; the limit is ", limits.max_payload_bytes,
                              " (--max_payload_bytes)"));
    }
    // An empty id asks the broker for one.
    if (!m.id().empty()) {
      if (absl::Status s = ValidateId("id", m.id(), limits); !s.ok()) {
        return Invalid(index, s.message());
      }
    }
    if (storage::IsAssignedIdForm(m.id())) {
      return Invalid(index, absl::StrCat("id ", Quote(m.id()),
                                         " has the form of the ids the broker "
                                         "assigns (hg- and 16 hex digits)"));
    }
    if (absl::Status s = ValidateHeaders(m, limits); !s.ok()) {
      return Invalid(index, s.message());
    }
    if (m.has_delay()) {
      if (absl::Status s = ValidateDelay(m.delay(), limits); !s.ok()) {
        return Invalid(index, s.message());
      }
    } else if (m.has_deliver_at()) {
      if (absl::Status s = ValidateDeliverAt(m.deliver_at(), limits, now);
          !s.ok()) {
        return Invalid(index, s.message());
      }
    }
    if (absl::Status s = ValidateDeadline(m, limits, now); !s.ok()) {
      return Invalid(index, s.message());
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateOpen(const hourglass::v1::Open& open,
                          const Limits& limits) {
  if (absl::Status s = ValidateNewTopic("open.topic", open.topic()); !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidateName("open.group", open.group()); !s.ok()) {
    return s;
  }
  if (open.max_in_flight() > limits.max_credit) {
    return absl::InvalidArgumentError(absl::StrCat(
        "open.max_in_flight ", open.max_in_flight(), " is over the limit of ",
        limits.max_credit, " (--max_credit)"));
  }
  if (open.has_ack_timeout()) {
    if (absl::Status s =
            ValidateDuration("open.ack_timeout", open.ack_timeout());
        !s.ok()) {
      return s;
    }
    const absl::Duration timeout = FromProto(open.ack_timeout());
    if (timeout < absl::ZeroDuration()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "open.ack_timeout ", absl::FormatDuration(timeout), " is negative"));
    }
    if (timeout > limits.max_ack_timeout) {
      return absl::InvalidArgumentError(
          absl::StrCat("open.ack_timeout ", absl::FormatDuration(timeout),
                       " is over the limit of ",
                       absl::FormatDuration(limits.max_ack_timeout),
                       " (--max_ack_timeout)"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateAck(const hourglass::v1::Ack& ack, const Limits& limits) {
  if (static_cast<size_t>(ack.ids_size()) > limits.max_credit) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ack has ", ack.ids_size(), " ids; the limit is ", limits.max_credit,
        " (--max_credit: a stream never holds more deliveries)"));
  }
  for (int i = 0; i < ack.ids_size(); ++i) {
    if (absl::Status s =
            ValidateId(absl::StrCat("ack.ids[", i, "]"), ack.ids(i), limits);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateNack(const hourglass::v1::Nack& nack,
                          const Limits& limits) {
  if (absl::Status s = ValidateId("nack.id", nack.id(), limits); !s.ok()) {
    return s;
  }
  if (nack.has_delay()) {
    if (absl::Status s = ValidateDuration("nack.delay", nack.delay());
        !s.ok()) {
      return s;
    }
    const absl::Duration delay = FromProto(nack.delay());
    if (delay < absl::ZeroDuration()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "nack.delay ", absl::FormatDuration(delay), " is negative"));
    }
    if (delay > limits.max_delay) {
      return absl::InvalidArgumentError(absl::StrCat(
          "nack.delay ", absl::FormatDuration(delay), " is over the limit of ",
          absl::FormatDuration(limits.max_delay), " (--max_delay)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<broker::ScheduleQuery> ValidateGetSchedule(
    const hourglass::v1::GetScheduleRequest& request) {
  if (absl::Status s = ValidateName("topic", request.topic()); !s.ok()) {
    return s;
  }
  if (!request.has_from()) return absl::InvalidArgumentError("from is not set");
  if (!request.has_to()) return absl::InvalidArgumentError("to is not set");
  if (!request.has_bucket()) {
    return absl::InvalidArgumentError("bucket is not set");
  }
  if (absl::Status s = ValidateTimestamp("from", request.from()); !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidateTimestamp("to", request.to()); !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidateDuration("bucket", request.bucket()); !s.ok()) {
    return s;
  }
  const absl::Time from = FromProto(request.from());
  const absl::Time to = FromProto(request.to());
  const absl::Duration bucket = FromProto(request.bucket());
  auto format = [](absl::Time t) {
    return absl::FormatTime("%Y-%m-%d%ET%H:%M:%E*SZ", t, absl::UTCTimeZone());
  };
  if (from < absl::UnixEpoch()) {
    return absl::InvalidArgumentError(
        absl::StrCat("from ", format(from), " is before 1970-01-01T00:00:00Z"));
  }
  if (to <= from) {
    return absl::InvalidArgumentError(
        absl::StrCat("to ", format(to), " is not after from ", format(from)));
  }
  const absl::Duration resolution =
      absl::Milliseconds(storage::kScheduleCountResolutionMs);
  if (bucket <= absl::ZeroDuration() ||
      bucket % resolution != absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("bucket ", absl::FormatDuration(bucket),
                     " is not a positive whole number of minutes"));
  }
  // The bucket holding `from`, and how many reach the instant before `to`.
  broker::ScheduleQuery query;
  query.topic = request.topic();
  query.bucket = bucket;
  query.first = from - (from - absl::UnixEpoch()) % bucket;
  int64_t count = (to - query.first) / bucket;
  if ((to - query.first) % bucket > absl::ZeroDuration()) ++count;
  const std::string range =
      absl::StrCat("from ", format(from), " to ", format(to), " in buckets of ",
                   absl::FormatDuration(bucket));
  if (count > static_cast<int64_t>(kMaxScheduleBuckets)) {
    return absl::InvalidArgumentError(absl::StrCat(
        range, " is ", count, " buckets; the limit is ", kMaxScheduleBuckets,
        ": choose longer buckets or a shorter range"));
  }
  query.count = static_cast<size_t>(count);
  const uint64_t reads = storage::ScheduleCountReads(
      {absl::ToUnixMillis(query.first), absl::ToInt64Milliseconds(bucket),
       query.count});
  if (reads > kMaxScheduleReads) {
    return absl::InvalidArgumentError(absl::StrCat(
        range, " reads ", reads, " counters; the limit is ", kMaxScheduleReads,
        ": choose buckets of whole hours or days, or a shorter range"));
  }
  return query;
}

absl::Time DeliverAt(const hourglass::v1::Message& message, absl::Time now) {
  if (message.has_delay()) {
    return TruncateToMillis(now + FromProto(message.delay()));
  }
  if (message.has_deliver_at()) {
    return TruncateToMillis(std::max(now, FromProto(message.deliver_at())));
  }
  return TruncateToMillis(now);
}

absl::Time ExpireAt(const hourglass::v1::Message& message, absl::Time now) {
  if (message.has_ttl()) {
    return TruncateToMillis(now + FromProto(message.ttl()));
  }
  if (message.has_expire_at()) {
    return TruncateToMillis(FromProto(message.expire_at()));
  }
  return absl::InfiniteFuture();
}

}  // namespace hourglass::api
