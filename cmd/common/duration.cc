#include "cmd/common/duration.h"

#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace hourglass::cli {
namespace {

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

// The unit a part of a duration ends with; units are tried longest first so
// that "ms" is not read as "m".
constexpr std::pair<absl::string_view, absl::Duration> kUnits[] = {
    {"ns", absl::Nanoseconds(1)},  {"us", absl::Microseconds(1)},
    {"ms", absl::Milliseconds(1)}, {"s", absl::Seconds(1)},
    {"m", absl::Minutes(1)},       {"h", absl::Hours(1)},
    {"d", absl::Hours(24)},
};

}  // namespace

absl::StatusOr<absl::Duration> ParseDuration(absl::string_view text) {
  if (text == "0") return absl::ZeroDuration();
  if (text.empty()) return NotADuration(text);
  absl::Duration total = absl::ZeroDuration();
  absl::string_view rest = text;
  while (!rest.empty()) {
    // <digits>[.<digits>]
    size_t n = 0;
    while (n < rest.size() && absl::ascii_isdigit(rest[n])) ++n;
    const absl::string_view whole = rest.substr(0, n);
    absl::string_view fraction;
    if (n < rest.size() && rest[n] == '.') {
      const size_t start = ++n;
      while (n < rest.size() && absl::ascii_isdigit(rest[n])) ++n;
      fraction = rest.substr(start, n - start);
      if (fraction.empty()) return NotADuration(text);
    }
    if (whole.empty() && fraction.empty()) return NotADuration(text);
    rest.remove_prefix(n);

    absl::Duration unit = absl::ZeroDuration();
    for (const auto& [name, value] : kUnits) {
      if (rest.substr(0, name.size()) == name) {
        unit = value;
        rest.remove_prefix(name.size());
        break;
      }
    }
    if (unit == absl::ZeroDuration()) return NotADuration(text);

    int64_t count = 0;
    if (!whole.empty() && !absl::SimpleAtoi(whole, &count)) {
      return NotADuration(text);
    }
    total += count * unit;
    // At most 9 fractional digits matter at nanosecond resolution.
    absl::Duration scale = unit;
    for (size_t i = 0; i < fraction.size() && i < 9; ++i) {
      scale /= 10;
      total += (fraction[i] - '0') * scale;
    }
    if (total == absl::InfiniteDuration()) return NotADuration(text);
  }
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
  const int64_t nanos = absl::ToInt64Nanoseconds(duration);
  google::protobuf::Duration out;
  out.set_seconds(nanos / 1'000'000'000);
  out.set_nanos(static_cast<int32_t>(nanos % 1'000'000'000));
  return out;
}

google::protobuf::Timestamp ToProto(absl::Time time) {
  const int64_t seconds = absl::ToUnixSeconds(time);
  google::protobuf::Timestamp out;
  out.set_seconds(seconds);
  out.set_nanos(static_cast<int32_t>(
      absl::ToInt64Nanoseconds(time - absl::FromUnixSeconds(seconds))));
  return out;
}

absl::Duration FromProto(const google::protobuf::Duration& duration) {
  return absl::Seconds(duration.seconds()) +
         absl::Nanoseconds(duration.nanos());
}

absl::Time FromProto(const google::protobuf::Timestamp& timestamp) {
  return absl::FromUnixSeconds(timestamp.seconds()) +
         absl::Nanoseconds(timestamp.nanos());
}

}  // namespace hourglass::cli
