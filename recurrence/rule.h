#ifndef HOURGLASS_RECURRENCE_RULE_H_
#define HOURGLASS_RECURRENCE_RULE_H_

// A recurrence's rule: when it fires (recurrence/README.md). A cron
// expression read in an IANA time zone, or a fixed UTC period; the fire
// times of either, one after another. Pure: no clock; the only I/O is
// loading the time zone (from the system's tzdata) in Rule::Create.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "recurrence/cron.h"

namespace hourglass::recurrence {

// What a cron rule does for a local time that does not exist (the clocks
// skip it: the spring gap of DST), given by the option on_gap.
enum class GapPolicy {
  // "fire" (the default): fire at the first instant after the gap (the
  // transition). Several skipped times fire once there, and so does a
  // skipped time with the local time that follows the gap.
  kFire,
  // "skip": fire nothing for them.
  kSkip,
};

// What a cron rule does for a local time that occurs twice (the clocks go
// back: the autumn overlap), given by the option on_overlap.
enum class OverlapPolicy {
  // "auto" (the default): fire once, at the first occurrence, when the
  // hour field names fixed hours ("0 1 * * *", "30 1-3 * * *"); at both
  // occurrences when it is an interval, i.e. holds a '*' or a step
  // ("*/15 * * * *", "0 */2 * * *"), since the rule then asks for a fire
  // every so often through the night (ISC cron's and Cronos's rule).
  kAuto,
  // "both": fire at both occurrences, whatever the hour field.
  kBoth,
};

// The options' names, as the service and the CLI spell them. Errors:
// INVALID_ARGUMENT naming the value, e.g. `on_gap "later"`: want "fire" or
// "skip"`.
absl::StatusOr<GapPolicy> ParseGapPolicy(std::string_view text);
absl::StatusOr<OverlapPolicy> ParseOverlapPolicy(std::string_view text);

// An `every` duration in absl::ParseDuration's syntax ("90s", "1h30m").
// Errors, INVALID_ARGUMENT: not a duration, shorter than 1 s, infinite, or
// not a whole number of seconds.
absl::StatusOr<absl::Duration> ParseEvery(std::string_view text);

// Loads an IANA time zone from the system's tzdata (/usr/share/zoneinfo).
// "" and "UTC" are UTC. Errors: INVALID_ARGUMENT `unknown time zone
// "Mars/Olympus"` for a zone that is not there, and for names that are no
// IANA name (longer than 64 bytes, a character other than letters, digits,
// '_', '-', '+' and '/', a component that is empty or starts with '.', or
// "localtime", which would read the process's own zone).
absl::StatusOr<absl::TimeZone> LoadZone(std::string_view name);

// What a rule is made from: the recurrence's fields.
struct RuleSpec {
  // Exactly one of `cron` (non-empty, see ParseCron) and `every` (> 0) is
  // set. Default: neither.
  std::string cron;
  // A UTC period: the rule fires at anchor + k * every for k >= 0, where the
  // anchor is start_at if set, else the Unix epoch. Ignores the time zone
  // and DST. REQUIRES (else INVALID_ARGUMENT): at least 1 s, whole seconds.
  absl::Duration every = absl::ZeroDuration();
  // IANA name of the zone a cron rule's fields are read in. Default: "" (UTC).
  std::string time_zone;
  // Default: GapPolicy::kFire.
  GapPolicy on_gap = GapPolicy::kFire;
  // Default: OverlapPolicy::kAuto.
  OverlapPolicy on_overlap = OverlapPolicy::kAuto;
  // The rule fires only at times f with start_at <= f < end_at (each is
  // rounded up to a whole second). Default: unbounded.
  std::optional<absl::Time> start_at;
  std::optional<absl::Time> end_at;
};

// Fire times are whole seconds between the Unix epoch and the end of year
// 9999 UTC; a rule has none outside.
inline constexpr absl::Time kEarliestFireTime = absl::UnixEpoch();
// 9999-12-31T23:59:59Z.
inline constexpr int64_t kLatestFireUnixSeconds = 253402300799;

// A validated rule with its time zone loaded.
//
// Immutable after Create; every method is const and may be called from any
// thread at once. Cheap to copy (absl::TimeZone is a handle).
class Rule {
 public:
  // Validates `spec` and loads its zone. Errors, all INVALID_ARGUMENT:
  // ParseCron's, LoadZone's, an `every` outside ParseEvery's bounds, both
  // or neither of cron and every set, end_at <= start_at.
  static absl::StatusOr<Rule> Create(const RuleSpec& spec);

  // The first fire time strictly after `t`, or nullopt when there is none
  // (before end_at, or ever: "0 0 30 2 *"). Any `t`, InfinitePast and
  // InfiniteFuture included. A cron rule's fire times are the instants of
  // the local times its fields match, in the rule's zone, by these rules:
  //   - a local time that exists once fires at that instant;
  //   - one that does not exist (a DST gap) fires at the transition that
  //     skips it under GapPolicy::kFire, not at all under kSkip;
  //   - one that occurs twice (a DST overlap) fires at its first
  //     occurrence, and at its second too under OverlapPolicy::kBoth, or
  //     kAuto with an interval hour field (CronSchedule::hour_is_interval).
  // Equal instants are one fire time. Cost: a few field walks
  // (cron.h's NextMatch) and time-zone lookups, whatever the gap to the
  // result; a rule that never fires answers at once. One whose every match
  // falls in a gap under kSkip ("30 2 8-14 3 */7" in America/New_York)
  // walks each year to 9999: a few milliseconds.
  std::optional<absl::Time> NextAfter(absl::Time t) const;

  // Up to `n` fire times after `from`, in order: NextAfter(from),
  // NextAfter(of that), ...; fewer when the rule ends.
  std::vector<absl::Time> Preview(absl::Time from, size_t n) const;

  bool is_cron() const { return every_ == absl::ZeroDuration(); }
  // REQUIRES: is_cron().
  const CronSchedule& cron() const { return cron_; }
  // Zero for a cron rule.
  absl::Duration every() const { return every_; }
  const absl::TimeZone& zone() const { return zone_; }
  GapPolicy on_gap() const { return on_gap_; }
  OverlapPolicy on_overlap() const { return on_overlap_; }
  // Rounded up to whole seconds.
  std::optional<absl::Time> start_at() const { return start_at_; }
  std::optional<absl::Time> end_at() const { return end_at_; }

 private:
  Rule() = default;

  // The latest instant the rule may fire at: end_at - 1 s, or the end of
  // 9999.
  absl::Time LastFireTime() const;
  std::optional<absl::Time> NextEvery(absl::Time after) const;
  // REQUIRES: `after` is a whole second.
  std::optional<absl::Time> NextCron(absl::Time after) const;
  // The first fire time >= `u` at the first occurrence of a local time
  // (its only one, or its DST gap's transition): the earliest, since these
  // instants grow with the local time.
  std::optional<absl::Time> NextFirstOccurrence(absl::Time u,
                                                absl::Time last) const;
  // The first fire time >= `u` and <= `bound` at the second occurrence of
  // a repeated local time. Only asked when such occurrences fire.
  std::optional<absl::Time> NextSecondOccurrence(absl::Time u, absl::Time bound,
                                                 bool first_exists) const;

  CronSchedule cron_;
  absl::Duration every_ = absl::ZeroDuration();
  absl::TimeZone zone_;
  GapPolicy on_gap_ = GapPolicy::kFire;
  OverlapPolicy on_overlap_ = OverlapPolicy::kAuto;
  std::optional<absl::Time> start_at_;
  std::optional<absl::Time> end_at_;
};

}  // namespace hourglass::recurrence

#endif  // HOURGLASS_RECURRENCE_RULE_H_
