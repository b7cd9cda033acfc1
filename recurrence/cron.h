#ifndef HOURGLASS_RECURRENCE_CRON_H_
#define HOURGLASS_RECURRENCE_CRON_H_

// Cron expressions (recurrence/README.md): parsing into one bit set per
// field, and matching civil (local) times against them. Pure: no clock, no
// time zone, no I/O.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/civil_time.h"

namespace hourglass::recurrence {

// Longest cron expression ParseCron reads, in bytes.
inline constexpr size_t kMaxCronLength = 256;

// A parsed cron expression. Each field is a bit set: bit v is set when the
// field allows value v. Value types and ranges:
//   seconds        bits 0-59 (a 5-field expression allows second 0 only)
//   minutes        bits 0-59
//   hours          bits 0-23
//   days_of_month  bits 1-31
//   months         bits 1-12
//   days_of_week   bits 0-6, 0 = Sunday (the value 7 in the text is Sunday)
// Every field allows at least one value.
struct CronSchedule {
  uint64_t seconds = 0;
  uint64_t minutes = 0;
  uint32_t hours = 0;
  uint32_t days_of_month = 0;
  uint16_t months = 0;
  uint8_t days_of_week = 0;

  // Whether the day-of-month / day-of-week field's text starts with '*'
  // ("*", "*/2"). Vixie cron's rule: a day matches when both fields match
  // if either starts with '*', and when either matches otherwise.
  bool day_of_month_star = false;
  bool day_of_week_star = false;

  // Whether the hour field is an interval: it holds a '*' or a step
  // ("*", "*/2", "1-23/2", "3/4"), rather than naming fixed hours ("3",
  // "1-5", "9,17"). A local time that occurs twice (a DST overlap) fires at
  // both occurrences under an interval hour field (see rule.h).
  bool hour_is_interval = false;

  // Whether the text had 6 fields (seconds first).
  bool has_seconds = false;

  friend bool operator==(const CronSchedule&, const CronSchedule&) = default;
};

// Parses a cron expression:
//   - 5 fields "minute hour day-of-month month day-of-week", or 6 with a
//     seconds field first, separated by spaces or tabs;
//   - or one of the macros @yearly (= @annually, "0 0 1 1 *"), @monthly
//     ("0 0 1 * *"), @weekly ("0 0 * * 0"), @daily (= @midnight,
//     "0 0 * * *"), @hourly ("0 * * * *").
// A field is a comma-separated list of items; an item is "*", a value "v",
// a range "a-b", each optionally followed by a step "/n" ("*/15",
// "1-30/5"; "a/n" means "a-<field max>/n"). Months may be named JAN-DEC
// and days of week SUN-SAT (3 letters); names and macros are
// case-insensitive. Day of week 7 is Sunday, like 0.
//
// Errors, all INVALID_ARGUMENT, naming the field by its 1-based position
// in the text and its name, e.g.
//   cron field 2 (hour): 24 is out of range 0-23
//   cron field 1 (minute): "x" is not a number
//   cron field 4 (month): "FOO" is not a number or a month name
//   cron field 5 (day of week): range 5-1 has its start after its end
//   cron field 1 (minute): step 0 is out of range 1-59
//   cron field 1 (minute): empty item in "1,,2"
//   cron expression "1 2 3" has 3 fields; want 5, or 6 with seconds first
//   cron expression is 300 bytes long; the limit is 256
//   unknown cron macro "@reboot"
absl::StatusOr<CronSchedule> ParseCron(std::string_view text);

// Whether the day `day` matches the day-of-month and day-of-week fields
// under Vixie cron's rule (above).
bool DayMatches(const CronSchedule& cron, absl::CivilDay day);

// Whether the civil second `t` matches every field of `cron`.
bool Matches(const CronSchedule& cron, absl::CivilSecond t);

// Whether some civil second matches `cron`. False exactly when every day
// the day fields allow is past the end of every month allowed
// ("0 0 30 2 *", "0 0 31 4,6,9,11 *"): any date that exists falls on
// every day of the week in some year.
bool CanMatch(const CronSchedule& cron);

// The first civil second c with from <= c <= last that matches `cron`, or
// nullopt when there is none. Walks the fields from the year down, skipping
// whole months, days, hours and minutes that cannot match: at most a few
// hundred steps per year searched, and none when !CanMatch(cron).
std::optional<absl::CivilSecond> NextMatch(const CronSchedule& cron,
                                           absl::CivilSecond from,
                                           absl::CivilSecond last);

}  // namespace hourglass::recurrence

#endif  // HOURGLASS_RECURRENCE_CRON_H_
