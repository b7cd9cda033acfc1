// Fuzzes the cron parser (recurrence/cron.h) and the field walk on it.
//
// Input: 7 bytes choosing a civil time to search from, then the
// expression. For any bytes ParseCron either refuses them with
// INVALID_ARGUMENT and a message naming a cron field or the expression, or
// gives a schedule whose every field allows at least one value and no
// value outside its range. For a schedule: the expression written back as
// plain value lists parses to the same bits; NextMatch's answer matches
// (by Matches, which only tests bits) and lies at or after the start, and
// no minute (second, for 6-field expressions) in between matches, checked
// one at a time over a bounded stretch.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/civil_time.h"
#include "recurrence/cron.h"
#include "tests/fuzz/fuzz_check.h"

namespace hourglass::recurrence {
namespace {

// The values of bits lo..hi of `bits` as a list of values and runs
// ("1,5-7,9").
std::string List(uint64_t bits, int lo, int hi) {
  std::string out;
  for (int v = lo; v <= hi; ++v) {
    if (!((bits >> v) & 1)) continue;
    int end = v;
    while (end < hi && ((bits >> (end + 1)) & 1)) ++end;
    if (!out.empty()) out += ',';
    out += std::to_string(v);
    if (end > v) out += "-" + std::to_string(end);
    v = end;
  }
  return out;
}

// Bits outside lo..hi.
bool HasBitsOutside(uint64_t bits, int lo, int hi) {
  for (int v = 0; v < 64; ++v) {
    if (((bits >> v) & 1) && (v < lo || v > hi)) return true;
  }
  return false;
}

void CheckSchedule(const CronSchedule& c) {
  FUZZ_CHECK(c.seconds != 0 && !HasBitsOutside(c.seconds, 0, 59), "seconds");
  FUZZ_CHECK(c.has_seconds || c.seconds == 1, "5 fields allow second 0 only");
  FUZZ_CHECK(c.minutes != 0 && !HasBitsOutside(c.minutes, 0, 59), "minutes");
  FUZZ_CHECK(c.hours != 0 && !HasBitsOutside(c.hours, 0, 23), "hours");
  FUZZ_CHECK(c.days_of_month != 0 && !HasBitsOutside(c.days_of_month, 1, 31),
             "days of month");
  FUZZ_CHECK(c.months != 0 && !HasBitsOutside(c.months, 1, 12), "months");
  FUZZ_CHECK(c.days_of_week != 0 && !HasBitsOutside(c.days_of_week, 0, 6),
             "days of week");

  // Written back as lists: the same bits ('*' flags differ by design), if
  // short enough.
  std::string text = List(c.minutes, 0, 59) + " " + List(c.hours, 0, 23) + " " +
                     List(c.days_of_month, 1, 31) + " " +
                     List(c.months, 1, 12) + " " + List(c.days_of_week, 0, 6);
  if (c.has_seconds) text = List(c.seconds, 0, 59) + " " + text;
  if (text.size() > kMaxCronLength) return;
  const absl::StatusOr<CronSchedule> again = ParseCron(text);
  FUZZ_CHECK(again.ok(), "lists %s refused: %s", text.c_str(),
             std::string(again.status().message()).c_str());
  FUZZ_CHECK(
      again->seconds == c.seconds && again->minutes == c.minutes &&
          again->hours == c.hours && again->days_of_month == c.days_of_month &&
          again->months == c.months && again->days_of_week == c.days_of_week,
      "lists %s parse to other bits", text.c_str());
}

void CheckNextMatch(const CronSchedule& c, absl::CivilSecond from) {
  const absl::CivilSecond last(from.year() + 40, 12, 31, 23, 59, 59);
  const std::optional<absl::CivilSecond> next = NextMatch(c, from, last);
  if (!CanMatch(c)) {
    FUZZ_CHECK(!next.has_value(), "a match of a schedule that cannot match");
    return;
  }
  // Every date that exists recurs within 40 years on each weekday... except
  // February 29 with a weekday required too, which may take longer.
  if (!next.has_value()) return;
  FUZZ_CHECK(*next >= from && *next <= last, "match outside the range");
  FUZZ_CHECK(Matches(c, *next), "NextMatch's answer does not match");
  // Nothing in between, one unit at a time over a bounded stretch.
  const int64_t step = c.has_seconds ? 1 : 60;
  absl::CivilSecond t =
      c.has_seconds ? from : absl::CivilSecond(absl::CivilMinute(from));
  if (t < from) t += 60;
  for (int i = 0; i < 20000 && t < *next; ++i, t += step) {
    FUZZ_CHECK(!Matches(c, t), "NextMatch skipped a match");
  }
}

void TestOneInput(const uint8_t* data, size_t size) {
  if (size < 7) return;
  const absl::CivilSecond from(1970 + (data[0] | data[1] << 8) % 431,
                               1 + data[2] % 12, 1 + data[3] % 31, data[4] % 24,
                               data[5] % 60, data[6] % 60);
  const std::string text(reinterpret_cast<const char*>(data) + 7, size - 7);
  const absl::StatusOr<CronSchedule> cron = ParseCron(text);
  if (!cron.ok()) {
    FUZZ_CHECK(cron.status().code() == absl::StatusCode::kInvalidArgument,
               "not INVALID_ARGUMENT");
    const std::string_view message(cron.status().message().data(),
                                   cron.status().message().size());
    FUZZ_CHECK(message.starts_with("cron field ") ||
                   message.starts_with("cron expression ") ||
                   message.starts_with("unknown cron macro "),
               "message %s", std::string(message).c_str());
    return;
  }
  FUZZ_CHECK(text.size() <= kMaxCronLength, "a longer expression parsed");
  CheckSchedule(*cron);
  CheckNextMatch(*cron, from);
}

}  // namespace
}  // namespace hourglass::recurrence

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hourglass::recurrence::TestOneInput(data, size);
  return 0;
}
