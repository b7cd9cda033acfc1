#include "recurrence/cron.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/civil_time.h"

namespace hourglass::recurrence {
namespace {

// Debian's abseil has a string_view of its own.
absl::string_view AbslView(std::string_view s) { return {s.data(), s.size()}; }

enum class Names { kNone, kMonths, kWeekdays };

// One field of the text: its name in messages, the values it accepts, and
// the last value "*" and "a/n" run to (6 for days of week, whose 7 is an
// alias of Sunday).
struct FieldSpec {
  absl::string_view name;
  int min;
  int max;
  int star_max;
  Names names;
};

constexpr FieldSpec kSecond{"second", 0, 59, 59, Names::kNone};
constexpr FieldSpec kMinute{"minute", 0, 59, 59, Names::kNone};
constexpr FieldSpec kHour{"hour", 0, 23, 23, Names::kNone};
constexpr FieldSpec kDayOfMonth{"day of month", 1, 31, 31, Names::kNone};
constexpr FieldSpec kMonth{"month", 1, 12, 12, Names::kMonths};
constexpr FieldSpec kDayOfWeek{"day of week", 0, 7, 6, Names::kWeekdays};

constexpr std::array<absl::string_view, 12> kMonthNames = {
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN",
    "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
constexpr std::array<absl::string_view, 7> kWeekdayNames = {
    "SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"};

struct Macro {
  absl::string_view name;
  absl::string_view expansion;
};
constexpr std::array<Macro, 7> kMacros = {{
    {"@yearly", "0 0 1 1 *"},
    {"@annually", "0 0 1 1 *"},
    {"@monthly", "0 0 1 * *"},
    {"@weekly", "0 0 * * 0"},
    {"@daily", "0 0 * * *"},
    {"@midnight", "0 0 * * *"},
    {"@hourly", "0 * * * *"},
}};

// Text from the expression, quoted and escaped for a message.
std::string Quote(absl::string_view text) {
  return absl::StrCat("\"", absl::CHexEscape(text), "\"");
}

// A field being parsed, for its error messages.
class FieldParser {
 public:
  FieldParser(int position, const FieldSpec& spec)
      : position_(position), spec_(spec) {}

  // The bit set of the values `text` allows.
  absl::StatusOr<uint64_t> Parse(absl::string_view text) const {
    uint64_t bits = 0;
    for (absl::string_view item : absl::StrSplit(text, ',')) {
      if (item.empty()) {
        return Error(absl::StrCat("empty item in ", Quote(text)));
      }
      absl::StatusOr<uint64_t> item_bits = ParseItem(item);
      if (!item_bits.ok()) return item_bits.status();
      bits |= *item_bits;
    }
    return bits;
  }

 private:
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("cron field ", position_, " (", spec_.name, "): ", what));
  }

  // "*", "v", "a-b", each with an optional "/n".
  absl::StatusOr<uint64_t> ParseItem(absl::string_view item) const {
    absl::string_view base = item;
    std::optional<int> step;
    if (const size_t slash = item.find('/'); slash != absl::string_view::npos) {
      base = item.substr(0, slash);
      absl::StatusOr<int> n = ParseStep(item.substr(slash + 1));
      if (!n.ok()) return n.status();
      step = *n;
    }
    int lo = 0;
    int hi = 0;
    if (base == "*") {
      lo = spec_.min;
      hi = spec_.star_max;
    } else if (const size_t dash = base.find('-');
               dash != absl::string_view::npos) {
      absl::StatusOr<int> a = ParseValue(base.substr(0, dash));
      if (!a.ok()) return a.status();
      absl::StatusOr<int> b = ParseValue(base.substr(dash + 1));
      if (!b.ok()) return b.status();
      if (*a > *b) {
        return Error(absl::StrCat("range ", absl::CHexEscape(base),
                                  " has its start after its end"));
      }
      lo = *a;
      hi = *b;
    } else {
      absl::StatusOr<int> a = ParseValue(base);
      if (!a.ok()) return a.status();
      lo = *a;
      hi = step.has_value() ? std::max(lo, spec_.star_max) : lo;
    }
    uint64_t bits = 0;
    for (int v = lo; v <= hi; v += step.value_or(1)) {
      // Day of week 7 is Sunday, bit 0.
      bits |= uint64_t{1} << (spec_.names == Names::kWeekdays ? v % 7 : v);
    }
    return bits;
  }

  absl::StatusOr<int> ParseStep(absl::string_view text) const {
    const std::optional<int> n = ParseDigits(text);
    if (!n.has_value()) {
      return Error(absl::StrCat("step ", Quote(text), " is not a number"));
    }
    if (*n < 1 || *n > spec_.max) {
      return Error(
          absl::StrCat("step ", text, " is out of range 1-", spec_.max));
    }
    return *n;
  }

  absl::StatusOr<int> ParseValue(absl::string_view text) const {
    if (const std::optional<int> n = ParseDigits(text); n.has_value()) {
      if (*n < spec_.min || *n > spec_.max) {
        return Error(
            absl::StrCat(text, " is out of range ", spec_.min, "-", spec_.max));
      }
      return *n;
    }
    const std::string upper = absl::AsciiStrToUpper(text);
    if (spec_.names == Names::kMonths) {
      for (size_t i = 0; i < kMonthNames.size(); ++i) {
        if (upper == kMonthNames[i]) return static_cast<int>(i) + 1;
      }
      return Error(
          absl::StrCat(Quote(text), " is not a number or a month name"));
    }
    if (spec_.names == Names::kWeekdays) {
      for (size_t i = 0; i < kWeekdayNames.size(); ++i) {
        if (upper == kWeekdayNames[i]) return static_cast<int>(i);
      }
      return Error(absl::StrCat(Quote(text), " is not a number or a day name"));
    }
    return Error(absl::StrCat(Quote(text), " is not a number"));
  }

  // The value of a string of decimal digits, saturating at 1e9 (outside
  // every field's range), or nullopt.
  static std::optional<int> ParseDigits(absl::string_view text) {
    if (text.empty()) return std::nullopt;
    int64_t n = 0;
    for (char c : text) {
      if (c < '0' || c > '9') return std::nullopt;
      n = std::min<int64_t>(n * 10 + (c - '0'), 1'000'000'000);
    }
    return static_cast<int>(n);
  }

  const int position_;
  const FieldSpec& spec_;
};

bool IsSpace(char c) { return c == ' ' || c == '\t'; }

// The smallest v with from <= v <= max whose bit is set in `bits`, or -1.
int NextBit(uint64_t bits, int from, int max) {
  if (from > max) return -1;
  const uint64_t rest = bits >> from;
  if (rest == 0) return -1;
  const int v = from + std::countr_zero(rest);
  return v <= max ? v : -1;
}

int DaysInMonth(int64_t year, int month) {
  static constexpr std::array<int, 13> kDays = {0,  31, 28, 31, 30, 31, 30,
                                                31, 31, 30, 31, 30, 31};
  if (month != 2) return kDays[month];
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  return leap ? 29 : 28;
}

// Cron's weekday number of `day`: 0 = Sunday.
int CronWeekday(absl::CivilDay day) {
  // absl::Weekday counts from Monday = 0.
  return (static_cast<int>(absl::GetWeekday(day)) + 1) % 7;
}

bool DayBitsMatch(const CronSchedule& cron, int day_of_month, int weekday) {
  const bool dom = (cron.days_of_month >> day_of_month) & 1;
  const bool dow = (cron.days_of_week >> weekday) & 1;
  if (cron.day_of_month_star || cron.day_of_week_star) return dom && dow;
  return dom || dow;
}

}  // namespace

absl::StatusOr<CronSchedule> ParseCron(std::string_view expression) {
  absl::string_view text = AbslView(expression);
  if (text.size() > kMaxCronLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("cron expression is ", text.size(),
                     " bytes long; the limit is ", kMaxCronLength));
  }
  while (!text.empty() && IsSpace(text.front())) text.remove_prefix(1);
  while (!text.empty() && IsSpace(text.back())) text.remove_suffix(1);
  if (text.empty()) {
    return absl::InvalidArgumentError("cron expression is empty");
  }
  if (text.front() == '@') {
    const std::string lower = absl::AsciiStrToLower(text);
    for (const Macro& macro : kMacros) {
      if (lower == macro.name) {
        return ParseCron(
            std::string_view(macro.expansion.data(), macro.expansion.size()));
      }
    }
    return absl::InvalidArgumentError(
        absl::StrCat("unknown cron macro ", Quote(text)));
  }
  const std::vector<absl::string_view> fields =
      absl::StrSplit(text, absl::ByAnyChar(" \t"), absl::SkipEmpty());
  if (fields.size() != 5 && fields.size() != 6) {
    return absl::InvalidArgumentError(
        absl::StrCat("cron expression ", Quote(text), " has ", fields.size(),
                     " fields; want 5, or 6 with seconds first"));
  }
  CronSchedule cron;
  cron.has_seconds = fields.size() == 6;
  const size_t first = cron.has_seconds ? 1 : 0;
  const std::array<const FieldSpec*, 6> specs = {
      &kSecond, &kMinute, &kHour, &kDayOfMonth, &kMonth, &kDayOfWeek};
  std::array<uint64_t, 6> bits = {1, 0, 0, 0, 0, 0};  // Second 0 by default.
  for (size_t i = 0; i < fields.size(); ++i) {
    const size_t field = i + 1 - first;
    absl::StatusOr<uint64_t> parsed =
        FieldParser(static_cast<int>(i) + 1, *specs[field]).Parse(fields[i]);
    if (!parsed.ok()) return parsed.status();
    bits[field] = *parsed;
  }
  cron.seconds = bits[0];
  cron.minutes = bits[1];
  cron.hours = static_cast<uint32_t>(bits[2]);
  cron.days_of_month = static_cast<uint32_t>(bits[3]);
  cron.months = static_cast<uint16_t>(bits[4]);
  cron.days_of_week = static_cast<uint8_t>(bits[5]);
  const absl::string_view hour = fields[first + 1];
  cron.hour_is_interval = hour.find_first_of("*/") != absl::string_view::npos;
  cron.day_of_month_star = fields[first + 2].front() == '*';
  cron.day_of_week_star = fields[first + 4].front() == '*';
  return cron;
}

bool DayMatches(const CronSchedule& cron, absl::CivilDay day) {
  return DayBitsMatch(cron, day.day(), CronWeekday(day));
}

bool Matches(const CronSchedule& cron, absl::CivilSecond t) {
  return ((cron.seconds >> t.second()) & 1) &&
         ((cron.minutes >> t.minute()) & 1) && ((cron.hours >> t.hour()) & 1) &&
         ((cron.months >> t.month()) & 1) &&
         DayMatches(cron, absl::CivilDay(t));
}

bool CanMatch(const CronSchedule& cron) {
  // Both restricted: either matching fires, and every week has each day.
  if (!cron.day_of_month_star && !cron.day_of_week_star) {
    return cron.days_of_week != 0 || cron.days_of_month != 0;
  }
  for (int month = 1; month <= 12; ++month) {
    if (!((cron.months >> month) & 1)) continue;
    // February 29 exists in leap years.
    const int max_day = month == 2 ? 29 : DaysInMonth(2001, month);
    if (NextBit(cron.days_of_month, 1, max_day) >= 0) return true;
  }
  return false;
}

std::optional<absl::CivilSecond> NextMatch(const CronSchedule& cron,
                                           absl::CivilSecond from,
                                           absl::CivilSecond last) {
  if (from > last || !CanMatch(cron)) return std::nullopt;
  int64_t year = from.year();
  int month = from.month();
  int day = from.day();
  int hour = from.hour();
  int minute = from.minute();
  int second = from.second();
  // Each step either returns or moves to a later candidate, resetting the
  // fields below the one it moved.
  while (year <= last.year()) {
    const int next_month = NextBit(cron.months, month, 12);
    if (next_month < 0) {
      ++year;
      month = 1;
      day = 1;
      hour = minute = second = 0;
      continue;
    }
    if (next_month != month) {
      month = next_month;
      day = 1;
      hour = minute = second = 0;
    }
    const int days = DaysInMonth(year, month);
    int next_day = -1;
    if (day <= days) {
      int weekday = CronWeekday(absl::CivilDay(year, month, day));
      for (int d = day; d <= days; ++d, weekday = (weekday + 1) % 7) {
        if (DayBitsMatch(cron, d, weekday)) {
          next_day = d;
          break;
        }
      }
    }
    if (next_day < 0) {
      if (++month > 12) {
        month = 1;
        ++year;
      }
      day = 1;
      hour = minute = second = 0;
      continue;
    }
    if (next_day != day) {
      day = next_day;
      hour = minute = second = 0;
    }
    const int next_hour = NextBit(cron.hours, hour, 23);
    if (next_hour < 0) {
      ++day;
      hour = minute = second = 0;
      continue;
    }
    if (next_hour != hour) {
      hour = next_hour;
      minute = second = 0;
    }
    const int next_minute = NextBit(cron.minutes, minute, 59);
    if (next_minute < 0) {
      ++hour;
      minute = second = 0;
      continue;
    }
    if (next_minute != minute) {
      minute = next_minute;
      second = 0;
    }
    const int next_second = NextBit(cron.seconds, second, 59);
    if (next_second < 0) {
      ++minute;
      second = 0;
      continue;
    }
    const absl::CivilSecond found(year, month, day, hour, minute, next_second);
    if (found > last) return std::nullopt;
    return found;
  }
  return std::nullopt;
}

}  // namespace hourglass::recurrence
