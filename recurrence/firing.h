#ifndef HOURGLASS_RECURRENCE_FIRING_H_
#define HOURGLASS_RECURRENCE_FIRING_H_

// Which occurrences a recurrence publishes, and when: the decisions the
// broker takes for a stored recurrence when it is created, when its
// pending occurrence comes due, when it is resumed and when it is
// triggered (recurrence/README.md, "Firing"). Pure: the caller passes the
// clock's reading and writes what the plan says, with the recurrence's new
// progress, in one batch.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "recurrence/misfire.h"
#include "recurrence/rule.h"

namespace hourglass::recurrence {

// A fire time is missed (its broker or shard was down, or its recurrence
// paused) when its occurrence comes due more than this after the latest it
// could be due (the fire time plus the most jitter): it and the fire times
// after it follow the misfire option. Sooner, it is on time, however late
// the step that found it.
inline constexpr absl::Duration kMisfireThreshold = absl::Minutes(1);

// The options of a recurrence that decide which fire times of its rule
// become occurrences.
struct FiringOptions {
  // Most occurrences; 0 means no limit. Default: 0.
  uint64_t limit = 0;
  // Each occurrence is due up to this much after its fire time (Jitter).
  // Default: none.
  absl::Duration jitter = absl::ZeroDuration();
  // Default: MisfirePolicy::kOnce.
  MisfirePolicy misfire = MisfirePolicy::kOnce;
  // Only fire times this recent may fire after a miss. Default: 1 h.
  absl::Duration catch_up = absl::Hours(1);
};

// One occurrence: one message of the recurrence's topic.
struct Occurrence {
  // The fire time it stands for: a whole second.
  absl::Time fire_time;
  // fire_time plus its Jitter: when it is due (a time in the past means
  // now).
  absl::Time due;
  // OccurrenceId(recurrence id, fire_time).
  std::string id;

  friend bool operator==(const Occurrence&, const Occurrence&) = default;
};

// What a recurrence has done, stored with it.
struct Progress {
  // Occurrences that came due (fired), triggered ones included.
  uint64_t occurrences = 0;
  // Fire times that got no occurrence: skipped by the misfire option or
  // older than catch_up.
  uint64_t misses = 0;
  // The latest fire time that fired; none before the first.
  std::optional<absl::Time> last_fire;

  friend bool operator==(const Progress&, const Progress&) = default;
};

// What to write for one decision.
struct Plan {
  // Occurrences to publish at once, due now (missed fire times that fire
  // late, fire times that came due with the one being decided, a
  // trigger), oldest first. They fire now: Progress counts them.
  std::vector<Occurrence> fire_now;
  // For Due: whether the occurrence that came due is delivered (moved to
  // ready). False when it was missed and the misfire option drops it (it
  // is then deleted).
  bool deliver_due = false;
  // The occurrence to schedule next; none when the rule ends or the limit
  // is reached.
  std::optional<Occurrence> next;
  // The recurrence's progress after the plan is written.
  Progress progress;
  // Fire times this plan skips, by reason: by the misfire option ("skip",
  // or "once" covering older ones), and for being older than catch_up.
  // Their sum is what the plan adds to Progress::misses.
  uint64_t skipped_by_policy = 0;
  uint64_t skipped_too_old = 0;
};

// The firing decisions of one recurrence: its id, rule and options.
//
// Immutable; every method is const and may be called from any thread.
class Firing {
 public:
  Firing(std::string id, Rule rule, FiringOptions options)
      : id_(std::move(id)), rule_(std::move(rule)), options_(options) {}

  // The occurrence of `fire_time`: its id and jittered due time.
  Occurrence OccurrenceAt(absl::Time fire_time) const;

  // Created or replaced at `now`, with the progress it had (none for a new
  // one): schedules the first fire time strictly after `now` (and after
  // its last fire). Nothing before `now` fires or counts as missed.
  Plan Start(absl::Time now, Progress progress) const;

  // Its pending occurrence `due` came due at `now` (the broker's step that
  // moves it to ready; REQUIRES: now >= due.due, and an earlier `now` is
  // taken as due.due). On time (see kMisfireThreshold) it is delivered, and
  // fire times after it that are already due fire now too. Missed, it and the
  // missed fire times after it follow `misfire`: "skip" fires none, "once"
  // the latest, "all" each, of those at or after now - catch_up; older
  // ones are counted as too old. The on-time ones after them fire. The
  // occurrence that came due is delivered if its fire time fires, else
  // dropped. Then schedules the first fire time after `now`. The limit
  // counts every occurrence that fires. Cost: a NextAfter per fire time
  // that fires or falls in the catch_up window under "once" or "all"
  // (the caller bounds catch_up), plus CountFireTimes' for the others.
  Plan Due(const Occurrence& due, absl::Time now, Progress progress) const;

  // Resumed at `now` after a pause that cancelled its pending occurrence,
  // whose fire time was `cancelled` (none if it had none: its rule or
  // limit had ended it): that fire time and those after it up to now are
  // missed or on time, as in Due (the cancelled one is published again if
  // it fires); then schedules the first fire time after `now`.
  Plan Resume(std::optional<absl::Time> cancelled, absl::Time now,
              Progress progress) const;

  // One extra occurrence at `now`, rounded down to a whole second, due at
  // once, in fire_now; next stays none (the pending one is kept). Its id is
  // that of a fire time at the same second: a trigger in the second of the
  // pending occurrence (`pending`, its fire time) or of the last one that
  // fired is that occurrence, and publishes nothing more. Past the limit it
  // publishes nothing either. Counts as an occurrence.
  Plan Trigger(absl::Time now, std::optional<absl::Time> pending,
               Progress progress) const;

  const std::string& id() const { return id_; }
  const Rule& rule() const { return rule_; }
  const FiringOptions& options() const { return options_; }

 private:
  // Fires the fire times in (after, now] by the misfire option, the
  // on-time ones always; `due` (if any) among them is delivered rather
  // than published again. Then schedules the next.
  Plan CatchUp(absl::Time after, const Occurrence* due, absl::Time now,
               Progress progress) const;
  // Sets plan.next to the first fire time after `now` and after the last
  // one that fired (a clock behind never fires one twice), unless the
  // limit is reached.
  void ScheduleNext(absl::Time now, Plan& plan) const;
  bool LimitReached(const Progress& progress) const {
    return options_.limit != 0 && progress.occurrences >= options_.limit;
  }

  std::string id_;
  Rule rule_;
  FiringOptions options_;
};

}  // namespace hourglass::recurrence

#endif  // HOURGLASS_RECURRENCE_FIRING_H_
