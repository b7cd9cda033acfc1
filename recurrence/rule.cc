#include "recurrence/rule.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "recurrence/cron.h"

namespace hourglass::recurrence {
namespace {

// Debian's abseil has a string_view of its own.
absl::string_view AbslView(std::string_view s) { return {s.data(), s.size()}; }

constexpr absl::Duration kSecond = absl::Seconds(1);

// Longer than any UTC offset change (the largest, Samoa's in 2011, is a
// day): a local time is never this far from the UTC time it names.
constexpr int64_t kOffsetMarginSeconds = 2 * 86400;

absl::Time LatestFireTime() {
  return absl::FromUnixSeconds(kLatestFireUnixSeconds);
}

// `t` rounded down to a whole second. REQUIRES: t is finite.
absl::Time FloorSecond(absl::Time t) {
  return absl::FromUnixSeconds(absl::ToUnixSeconds(t));
}

// `t` rounded up to a whole second, within the fire times' range.
absl::Time CeilSecond(absl::Time t) {
  t = std::clamp(t, kEarliestFireTime, LatestFireTime());
  const absl::Time floor = FloorSecond(t);
  return floor == t ? t : floor + kSecond;
}

std::string FormatUtc(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E*SZ", t, absl::UTCTimeZone());
}

// An `every` period's bounds; `text` names it in messages.
absl::Status CheckEvery(absl::Duration every, absl::string_view text) {
  if (every < kSecond) {
    return absl::InvalidArgumentError(
        absl::StrCat("every ", text, " is shorter than 1s"));
  }
  if (every == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("every ", text, " is not finite"));
  }
  if (every != absl::Trunc(every, kSecond)) {
    return absl::InvalidArgumentError(
        absl::StrCat("every ", text, " is not a whole number of seconds"));
  }
  return absl::OkStatus();
}

bool IsZoneNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '+' || c == '/';
}

bool IsZoneName(std::string_view name) {
  if (name.size() > 64 || name == "localtime") return false;
  if (!std::all_of(name.begin(), name.end(), IsZoneNameChar)) return false;
  for (absl::string_view part : absl::StrSplit(AbslView(name), '/')) {
    if (part.empty() || part.front() == '.') return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<GapPolicy> ParseGapPolicy(std::string_view text) {
  if (text == "fire") return GapPolicy::kFire;
  if (text == "skip") return GapPolicy::kSkip;
  return absl::InvalidArgumentError(
      absl::StrCat("on_gap \"", absl::CHexEscape(AbslView(text)),
                   "\": want \"fire\" or \"skip\""));
}

absl::StatusOr<OverlapPolicy> ParseOverlapPolicy(std::string_view text) {
  if (text == "auto") return OverlapPolicy::kAuto;
  if (text == "both") return OverlapPolicy::kBoth;
  return absl::InvalidArgumentError(
      absl::StrCat("on_overlap \"", absl::CHexEscape(AbslView(text)),
                   "\": want \"auto\" or \"both\""));
}

absl::StatusOr<absl::Duration> ParseEvery(std::string_view text) {
  absl::Duration every;
  if (!absl::ParseDuration(AbslView(text), &every)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "every \"", absl::CHexEscape(AbslView(text)), "\" is not a duration"));
  }
  if (absl::Status status = CheckEvery(every, AbslView(text)); !status.ok()) {
    return status;
  }
  return every;
}

absl::StatusOr<absl::TimeZone> LoadZone(std::string_view name) {
  if (name.empty() || name == "UTC") return absl::UTCTimeZone();
  absl::TimeZone zone;
  if (!IsZoneName(name) || !absl::LoadTimeZone(std::string(name), &zone)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown time zone \"", absl::CHexEscape(AbslView(name)), "\""));
  }
  return zone;
}

absl::StatusOr<Rule> Rule::Create(const RuleSpec& spec) {
  const bool has_every = spec.every != absl::ZeroDuration();
  if (spec.cron.empty() == !has_every) {
    return absl::InvalidArgumentError(
        "a rule needs exactly one of cron and every");
  }
  Rule rule;
  if (has_every) {
    if (absl::Status status =
            CheckEvery(spec.every, absl::FormatDuration(spec.every));
        !status.ok()) {
      return status;
    }
    rule.every_ = spec.every;
  } else {
    absl::StatusOr<CronSchedule> cron = ParseCron(spec.cron);
    if (!cron.ok()) return cron.status();
    rule.cron_ = *cron;
  }
  absl::StatusOr<absl::TimeZone> zone = LoadZone(spec.time_zone);
  if (!zone.ok()) return zone.status();
  rule.zone_ = *zone;
  rule.on_gap_ = spec.on_gap;
  rule.on_overlap_ = spec.on_overlap;
  if (spec.start_at) rule.start_at_ = CeilSecond(*spec.start_at);
  if (spec.end_at) rule.end_at_ = CeilSecond(*spec.end_at);
  if (spec.start_at && spec.end_at && *spec.end_at <= *spec.start_at) {
    return absl::InvalidArgumentError(
        absl::StrCat("end_at ", FormatUtc(*spec.end_at),
                     " is not after start_at ", FormatUtc(*spec.start_at)));
  }
  return rule;
}

absl::Time Rule::LastFireTime() const {
  return end_at_ ? std::min(*end_at_ - kSecond, LatestFireTime())
                 : LatestFireTime();
}

std::optional<absl::Time> Rule::NextAfter(absl::Time t) const {
  // The first whole second a fire time may take: after t, at or after the
  // start, within the range of fire times.
  const absl::Time last = LastFireTime();
  if (t >= last) return std::nullopt;
  absl::Time first =
      t < kEarliestFireTime ? kEarliestFireTime : FloorSecond(t) + kSecond;
  if (start_at_) first = std::max(first, *start_at_);
  if (first > last) return std::nullopt;
  const std::optional<absl::Time> next =
      is_cron() ? NextCron(first) : NextEvery(first);
  if (!next || *next > last) return std::nullopt;
  return next;
}

std::vector<absl::Time> Rule::Preview(absl::Time from, size_t n) const {
  std::vector<absl::Time> times;
  std::optional<absl::Time> next = from;
  while (times.size() < n && (next = NextAfter(*next))) {
    times.push_back(*next);
  }
  return times;
}

std::optional<absl::Time> Rule::NextEvery(absl::Time first) const {
  const int64_t anchor =
      absl::ToUnixSeconds(start_at_.value_or(kEarliestFireTime));
  const int64_t period = absl::ToInt64Seconds(every_);
  const int64_t from = absl::ToUnixSeconds(first);
  if (from <= anchor) return absl::FromUnixSeconds(anchor);
  // The least k with anchor + k * period >= from. Both times are within
  // the fire times' range, so nothing overflows, however long the period.
  const int64_t distance = from - anchor;
  const int64_t k = distance / period + (distance % period != 0 ? 1 : 0);
  if (k > (kLatestFireUnixSeconds - anchor) / period) return std::nullopt;
  return absl::FromUnixSeconds(anchor + k * period);
}

std::optional<absl::Time> Rule::NextCron(absl::Time u) const {
  const absl::Time last = LastFireTime();
  const std::optional<absl::Time> first = NextFirstOccurrence(u, last);
  if (on_overlap_ != OverlapPolicy::kBoth && !cron_.hour_is_interval) {
    return first;
  }
  const std::optional<absl::Time> second = NextSecondOccurrence(
      u, first ? std::min(*first, last) : last, first.has_value());
  if (second && (!first || *second < *first)) return second;
  return first;
}

std::optional<absl::Time> Rule::NextFirstOccurrence(absl::Time u,
                                                    absl::Time last) const {
  // Every local time up to the one at u - 1 s fires (at its first
  // occurrence) before u, so the search starts just after that one.
  absl::CivilSecond from = absl::ToCivilSecond(u - kSecond, zone_) + 1;
  const absl::CivilSecond last_civil =
      absl::ToCivilSecond(last, zone_) + kOffsetMarginSeconds;
  while (const std::optional<absl::CivilSecond> match =
             NextMatch(cron_, from, last_civil)) {
    const absl::TimeZone::TimeInfo info = zone_.At(*match);
    absl::Time when;
    absl::CivilSecond resume = *match + 1;
    if (info.kind == absl::TimeZone::TimeInfo::SKIPPED) {
      if (on_gap_ == GapPolicy::kSkip) {
        // The gap's local times all fire nothing: resume after it.
        from = std::max(resume, absl::ToCivilSecond(info.trans, zone_));
        continue;
      }
      when = info.trans;
    } else {
      when = info.pre;
    }
    if (when >= u) return when;
    // Only a repeated time's first occurrence lies before u (u is then in
    // the overlap's second pass): none of the overlap's first occurrences
    // counts, so resume after the overlap.
    if (info.kind == absl::TimeZone::TimeInfo::REPEATED) {
      resume = std::max(resume,
                        absl::ToCivilSecond(info.trans - kSecond, zone_) + 1);
    }
    from = resume;
  }
  return std::nullopt;
}

std::optional<absl::Time> Rule::NextSecondOccurrence(absl::Time u,
                                                     absl::Time bound,
                                                     bool first_exists) const {
  // Second occurrences happen only within [transition, transition + shift)
  // after a transition that turns the clocks back by `shift`, and grow with
  // the local time within each. Walk the transitions from just before u;
  // the first overlap with a match at or after u holds the answer.
  absl::Time probe = u - absl::Seconds(kOffsetMarginSeconds);
  absl::TimeZone::CivilTransition transition;
  while (zone_.NextTransition(probe, &transition)) {
    if (transition.to >= transition.from) {  // Clocks forward: a gap.
      const absl::Time when = zone_.At(transition.from).trans;
      if (when > bound) return std::nullopt;
      probe = std::max(when, probe + kSecond);
      continue;
    }
    const absl::Time when = zone_.At(transition.to).trans;
    if (when > bound) return std::nullopt;
    probe = std::max(when, probe + kSecond);
    const int64_t shift = transition.from - transition.to;
    if (when + absl::Seconds(shift) <= u) continue;  // Over before u.
    const int64_t skip =
        u > when ? absl::ToInt64Seconds(absl::Ceil(u - when, kSecond)) : 0;
    const std::optional<absl::CivilSecond> match =
        NextMatch(cron_, transition.to + skip, transition.from - 1);
    if (match) {
      const absl::Time second = when + absl::Seconds(*match - transition.to);
      return second <= bound ? std::optional<absl::Time>(second) : std::nullopt;
    }
    // With no first occurrence at or after u, no later overlap has a match
    // (its first occurrence would be one): only this one could.
    if (!first_exists) return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace hourglass::recurrence
