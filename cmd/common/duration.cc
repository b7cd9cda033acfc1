#include "cmd/common/duration.h"

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/time_util.h"

namespace hourglass::cli {
namespace {

using google::protobuf::util::TimeUtil;

absl::Status NotADuration(absl::string_view text) {
  return absl::InvalidArgumentError(absl::StrCat(
      "\"", text, "\" is not a duration (use e.g. 500ms, 30s, 15m, 2h, 3d)"));
}

absl::Status NotATime(absl::string_view text) {
  return absl::InvalidArgumentError(
      absl::StrCat("\"", text,
                   "\" is not a time (use RFC 3339, e.g. 2026-01-02T15:04:05Z, "
                   "or now, +30m, -2h)"));
}

}  // namespace

absl::StatusOr<absl::Duration> ParseDuration(absl::string_view text) {
  // absl::ParseDuration reads <number><unit> parts with units up to hours.
  // What it takes beyond this syntax is refused first: a sign, "inf", a
  // decimal point without a digit after it ("1.h"). Days are ours: each
  // "<number>d" part is read as that many 24-hour days.
  if (text.empty() || text[0] == '+' || text[0] == '-' ||
      absl::StrContains(text, "inf")) {
    return NotADuration(text);
  }
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '.' &&
        (i + 1 == text.size() || !absl::ascii_isdigit(text[i + 1]))) {
      return NotADuration(text);
    }
  }
  std::string rest(text);
  absl::Duration total = absl::ZeroDuration();
  for (size_t d = rest.find('d'); d != std::string::npos; d = rest.find('d')) {
    size_t start = d;
    while (start > 0 &&
           (absl::ascii_isdigit(rest[start - 1]) || rest[start - 1] == '.')) {
      --start;
    }
    absl::Duration hours;
    if (start == d ||
        !absl::ParseDuration(absl::StrCat(rest.substr(start, d - start), "h"),
                             &hours)) {
      return NotADuration(text);
    }
    total += 24 * hours;
    rest.erase(start, d - start + 1);
  }
  if (!rest.empty()) {
    absl::Duration parsed;
    if (!absl::ParseDuration(rest, &parsed)) return NotADuration(text);
    total += parsed;
  }
  if (total == absl::InfiniteDuration()) return NotADuration(text);
  return total;
}

absl::StatusOr<absl::Time> ParseTime(absl::string_view text, absl::Time now) {
  if (text == "now") return now;
  if (!text.empty() && (text[0] == '+' || text[0] == '-')) {
    absl::StatusOr<absl::Duration> offset = ParseDuration(text.substr(1));
    if (!offset.ok()) return NotATime(text);
    return text[0] == '+' ? now + *offset : now - *offset;
  }
  absl::Time time;
  std::string error;
  if (!absl::ParseTime(absl::RFC3339_full, std::string(text), &time, &error)) {
    return NotATime(text);
  }
  return time;
}

std::string Rfc3339(absl::Time time) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", time, absl::UTCTimeZone());
}

std::string HumanDuration(absl::Duration duration) {
  if (duration == absl::ZeroDuration()) return "0";
  if (duration < absl::ZeroDuration()) {
    return absl::StrCat("-", HumanDuration(-duration));
  }
  if (duration < absl::Milliseconds(1)) return absl::FormatDuration(duration);
  if (duration < absl::Seconds(1)) {
    return absl::FormatDuration(absl::Trunc(duration, absl::Microseconds(1)));
  }
  duration = absl::Trunc(duration, absl::Milliseconds(1));
  const int64_t days = duration / absl::Hours(24);
  const absl::Duration rest = duration - days * absl::Hours(24);
  if (days == 0) return absl::FormatDuration(rest);
  if (rest == absl::ZeroDuration()) return absl::StrCat(days, "d");
  return absl::StrCat(days, "d", absl::FormatDuration(rest));
}

google::protobuf::Duration ToProto(absl::Duration duration) {
  return TimeUtil::NanosecondsToDuration(absl::ToInt64Nanoseconds(duration));
}

google::protobuf::Timestamp ToProto(absl::Time time) {
  // Seconds and nanos, for any year a Timestamp holds (the broker computes
  // recurrences' fire times up to 9999).
  const int64_t seconds = absl::ToUnixSeconds(time);  // Floors.
  google::protobuf::Timestamp out;
  out.set_seconds(seconds);
  out.set_nanos(static_cast<int32_t>(
      absl::ToInt64Nanoseconds(time - absl::FromUnixSeconds(seconds))));
  return out;
}

absl::Duration FromProto(const google::protobuf::Duration& duration) {
  return absl::Nanoseconds(TimeUtil::DurationToNanoseconds(duration));
}

absl::Time FromProto(const google::protobuf::Timestamp& timestamp) {
  return absl::FromUnixSeconds(timestamp.seconds()) +
         absl::Nanoseconds(timestamp.nanos());
}

}  // namespace hourglass::cli
