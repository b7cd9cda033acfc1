#include "recurrence/firing.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/time/time.h"
#include "recurrence/misfire.h"
#include "recurrence/occurrence.h"

namespace hourglass::recurrence {
namespace {

// Just before `t`: fire times strictly after it start at `t`.
absl::Time JustBefore(absl::Time t) { return t - absl::Nanoseconds(1); }

}  // namespace

Occurrence Firing::OccurrenceAt(absl::Time fire_time) const {
  return Occurrence{fire_time,
                    fire_time + Jitter(id_, fire_time, options_.jitter),
                    OccurrenceId(id_, fire_time)};
}

void Firing::ScheduleNext(absl::Time now, Plan& plan) const {
  if (LimitReached(plan.progress)) return;
  if (std::optional<absl::Time> next = rule_.NextAfter(now)) {
    plan.next = OccurrenceAt(*next);
  }
}

Plan Firing::Start(absl::Time now, Progress progress) const {
  Plan plan;
  plan.progress = progress;
  ScheduleNext(now, plan);
  return plan;
}

Plan Firing::CatchUp(absl::Time after, const Occurrence* due, absl::Time now,
                     Progress progress) const {
  Plan plan;
  plan.progress = progress;
  std::vector<absl::Time> fire;
  // Missed: the fire times in (after, cutoff], whose occurrences would be
  // due more than the threshold ago even with the most jitter.
  // MissedFireTimes counts catch_up back from its `now`, here the cutoff:
  // shortened as much, the window still starts catch_up before now.
  const absl::Duration grace =
      kMisfireThreshold + options_.jitter + absl::Nanoseconds(1);
  const absl::Time cutoff = now - grace;
  std::optional<absl::Time> first = rule_.NextAfter(after);
  if (first && *first <= cutoff) {
    const absl::Duration catch_up = options_.catch_up - grace;
    Misfires missed =
        MissedFireTimes(rule_, after, cutoff, options_.misfire, catch_up);
    // With every missed time in the window firing, what is skipped is
    // exactly what is too old.
    const int64_t too_old = options_.misfire == MisfirePolicy::kAll
                                ? missed.skipped
                                : MissedFireTimes(rule_, after, cutoff,
                                                  MisfirePolicy::kAll, catch_up)
                                      .skipped;
    plan.skipped_too_old = static_cast<uint64_t>(too_old);
    plan.skipped_by_policy = static_cast<uint64_t>(missed.skipped - too_old);
    fire = std::move(missed.fire);
  }
  // On time: the fire times in (max(after, cutoff), now].
  for (std::optional<absl::Time> next =
           rule_.NextAfter(std::max(after, cutoff));
       next && *next <= now; next = rule_.NextAfter(*next)) {
    fire.push_back(*next);
  }
  plan.progress.misses += plan.skipped_by_policy + plan.skipped_too_old;

  for (absl::Time f : fire) {
    if (LimitReached(plan.progress)) break;  // Not misses: the rule ended.
    ++plan.progress.occurrences;
    plan.progress.last_fire = std::max(plan.progress.last_fire.value_or(f), f);
    if (due != nullptr && f == due->fire_time) {
      plan.deliver_due = true;
    } else {
      plan.fire_now.push_back(OccurrenceAt(f));
    }
  }
  ScheduleNext(now, plan);
  return plan;
}

Plan Firing::Due(const Occurrence& due, absl::Time now,
                 Progress progress) const {
  return CatchUp(JustBefore(due.fire_time), &due, std::max(now, due.fire_time),
                 progress);
}

Plan Firing::Resume(absl::Time paused_at, absl::Time now,
                    Progress progress) const {
  return CatchUp(paused_at, nullptr, now, progress);
}

Plan Firing::Trigger(absl::Time now, Progress progress) const {
  const absl::Time second = absl::FromUnixSeconds(absl::ToUnixSeconds(now));
  Plan plan;
  plan.progress = progress;
  ++plan.progress.occurrences;
  plan.progress.last_fire =
      std::max(plan.progress.last_fire.value_or(second), second);
  plan.fire_now.push_back(
      Occurrence{second, second, OccurrenceId(id_, second)});
  return plan;
}

}  // namespace hourglass::recurrence
