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
  const absl::Time after = std::max(now, plan.progress.last_fire.value_or(now));
  if (std::optional<absl::Time> next = rule_.NextAfter(after)) {
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
  // due more than the threshold ago even with the most jitter. Of those,
  // the ones before `window` (now - catch_up) are too old to fire.
  const absl::Time cutoff =
      now - kMisfireThreshold - options_.jitter - absl::Nanoseconds(1);
  std::optional<absl::Time> first = rule_.NextAfter(after);
  if (first && *first <= cutoff) {
    const absl::Time window =
        now - std::max(options_.catch_up, absl::ZeroDuration());
    // Fire times are whole seconds: f < window exactly when f <= old_until.
    const absl::Time old_until = std::min(cutoff, JustBefore(window));
    plan.skipped_too_old =
        static_cast<uint64_t>(CountFireTimes(rule_, after, old_until));
    const absl::Time recent_after = std::max(after, old_until);
    if (options_.misfire == MisfirePolicy::kSkip) {
      plan.skipped_by_policy =
          static_cast<uint64_t>(CountFireTimes(rule_, recent_after, cutoff));
    } else {
      for (std::optional<absl::Time> f = rule_.NextAfter(recent_after);
           f && *f <= cutoff; f = rule_.NextAfter(*f)) {
        fire.push_back(*f);
      }
      if (options_.misfire == MisfirePolicy::kOnce && fire.size() > 1) {
        plan.skipped_by_policy = fire.size() - 1;
        fire.erase(fire.begin(), fire.end() - 1);
      }
    }
  }
  // On time: the fire times in (max(after, cutoff), now].
  for (std::optional<absl::Time> f = rule_.NextAfter(std::max(after, cutoff));
       f && *f <= now; f = rule_.NextAfter(*f)) {
    fire.push_back(*f);
  }
  plan.progress.misses += plan.skipped_by_policy + plan.skipped_too_old;

  for (absl::Time f : fire) {
    if (LimitReached(plan.progress)) break;  // Not misses: the rule ended.
    ++plan.progress.occurrences;
    plan.progress.last_fire = std::max(plan.progress.last_fire.value_or(f), f);
    if (due != nullptr && f == due->fire_time) {
      plan.deliver_due = true;
    } else {
      // Due now: it fires now, and the recurrence keeps track of one
      // occurrence ahead only.
      plan.fire_now.push_back(Occurrence{f, now, OccurrenceId(id_, f)});
    }
  }
  ScheduleNext(now, plan);
  return plan;
}

Plan Firing::Due(const Occurrence& due, absl::Time now,
                 Progress progress) const {
  return CatchUp(JustBefore(due.fire_time), &due, std::max(now, due.due),
                 progress);
}

Plan Firing::Resume(std::optional<absl::Time> cancelled, absl::Time now,
                    Progress progress) const {
  return CatchUp(cancelled ? JustBefore(*cancelled) : now, nullptr, now,
                 progress);
}

Plan Firing::Trigger(absl::Time now, std::optional<absl::Time> pending,
                     Progress progress) const {
  const absl::Time second = absl::FromUnixSeconds(absl::ToUnixSeconds(now));
  Plan plan;
  plan.progress = progress;
  if (LimitReached(progress) || pending == second ||
      progress.last_fire == second) {
    return plan;
  }
  ++plan.progress.occurrences;
  plan.progress.last_fire =
      std::max(plan.progress.last_fire.value_or(second), second);
  plan.fire_now.push_back(
      Occurrence{second, second, OccurrenceId(id_, second)});
  return plan;
}

}  // namespace hourglass::recurrence
