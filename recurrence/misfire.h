#ifndef HOURGLASS_RECURRENCE_MISFIRE_H_
#define HOURGLASS_RECURRENCE_MISFIRE_H_

// What a recurrence fires when it comes back after missing fire times (its
// node was down, its shard moved): recurrence/README.md, "Misfires". Pure.

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "recurrence/rule.h"

namespace hourglass::recurrence {

// The recurrence's misfire option.
enum class MisfirePolicy {
  kSkip,  // "skip": fire none of the missed times.
  kOnce,  // "once": fire one occurrence, stamped with the latest missed time.
  kAll,   // "all": fire each missed time, oldest first.
};

// "skip", "once" or "all". Errors: INVALID_ARGUMENT `misfire "x": want
// "skip", "once" or "all"`.
absl::StatusOr<MisfirePolicy> ParseMisfirePolicy(std::string_view text);

// Counting the missed times that are not fired stops here.
inline constexpr int64_t kMaxCountedMisses = 1'000'000;

// How many fire times of `rule` lie in (after, until]: exact for an `every`
// rule (arithmetic), at most kMaxCountedMisses for a cron rule (counted
// one by one).
int64_t CountFireTimes(const Rule& rule, absl::Time after, absl::Time until);

struct Misfires {
  // The occurrences to fire now, by their fire times, oldest first.
  std::vector<absl::Time> fire;
  // How many missed times are not in `fire`. An `every` rule's count is
  // exact; a cron rule's counts at most kMaxCountedMisses of the times it
  // never looks at otherwise (those older than catch_up, or under kSkip,
  // all of them), one by one.
  int64_t skipped = 0;
};

// The missed fire times of `rule` are its fire times f with
// last_fired < f <= now. Those within `catch_up` of now (f >= now -
// catch_up) may fire; older ones never do. Returns, by `policy`:
//   kSkip  nothing to fire; every missed time skipped.
//   kOnce  the latest missed time within catch_up, if any; every other
//          missed time skipped.
//   kAll   every missed time within catch_up, oldest first; the older ones
//          skipped.
// A negative catch_up is zero; InfiniteDuration() lets every missed time
// fire. Cost: one Rule::NextAfter per missed time within catch_up (the
// caller bounds catch_up, and so the size of `fire`), plus, for a cron
// rule, one per older one up to kMaxCountedMisses.
Misfires MissedFireTimes(const Rule& rule, absl::Time last_fired,
                         absl::Time now, MisfirePolicy policy,
                         absl::Duration catch_up);

}  // namespace hourglass::recurrence

#endif  // HOURGLASS_RECURRENCE_MISFIRE_H_
