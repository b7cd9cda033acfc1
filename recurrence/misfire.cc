#include "recurrence/misfire.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "recurrence/rule.h"

namespace hourglass::recurrence {
namespace {

// Debian's abseil has a string_view of its own.
absl::string_view AbslView(std::string_view s) { return {s.data(), s.size()}; }

constexpr absl::Duration kSecond = absl::Seconds(1);

}  // namespace

int64_t CountFireTimes(const Rule& rule, absl::Time after, absl::Time until) {
  if (until <= after) return 0;
  std::optional<absl::Time> next = rule.NextAfter(after);
  if (!next || *next > until) return 0;
  if (!rule.is_cron()) {
    // Fire times from *next on are `every` apart, up to the end (exclusive)
    // and the last fire time there is.
    until = std::min(until, absl::FromUnixSeconds(kLatestFireUnixSeconds));
    if (rule.end_at()) until = std::min(until, *rule.end_at() - kSecond);
    return (absl::ToUnixSeconds(until) - absl::ToUnixSeconds(*next)) /
               absl::ToInt64Seconds(rule.every()) +
           1;
  }
  int64_t count = 0;
  while (next && *next <= until && count < kMaxCountedMisses) {
    ++count;
    next = rule.NextAfter(*next);
  }
  return count;
}

absl::StatusOr<MisfirePolicy> ParseMisfirePolicy(std::string_view text) {
  if (text == "skip") return MisfirePolicy::kSkip;
  if (text == "once") return MisfirePolicy::kOnce;
  if (text == "all") return MisfirePolicy::kAll;
  return absl::InvalidArgumentError(
      absl::StrCat("misfire \"", absl::CHexEscape(AbslView(text)),
                   "\": want \"skip\", \"once\" or \"all\""));
}

Misfires MissedFireTimes(const Rule& rule, absl::Time last_fired,
                         absl::Time now, MisfirePolicy policy,
                         absl::Duration catch_up) {
  Misfires result;
  if (now <= last_fired) return result;
  catch_up = std::max(catch_up, absl::ZeroDuration());
  // Fire times are whole seconds, so f >= now - catch_up exactly when
  // f > `recent_after`.
  absl::Time recent_after = last_fired;
  if (const absl::Time oldest = now - catch_up; oldest > last_fired) {
    const absl::Time floor = absl::FromUnixSeconds(absl::ToUnixSeconds(oldest));
    recent_after =
        std::max(last_fired, floor == oldest ? floor - kSecond : floor);
  }
  if (policy == MisfirePolicy::kSkip) {
    result.skipped = CountFireTimes(rule, last_fired, now);
    return result;
  }
  result.skipped = CountFireTimes(rule, last_fired, recent_after);
  std::vector<absl::Time> recent;
  for (std::optional<absl::Time> next = rule.NextAfter(recent_after);
       next && *next <= now; next = rule.NextAfter(*next)) {
    recent.push_back(*next);
  }
  if (policy == MisfirePolicy::kAll || recent.empty()) {
    result.fire = std::move(recent);
    return result;
  }
  // kOnce.
  result.skipped += static_cast<int64_t>(recent.size()) - 1;
  result.fire.push_back(recent.back());
  return result;
}

}  // namespace hourglass::recurrence
