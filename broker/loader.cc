#include "broker/loader.h"

#include "broker/lifecycle_reads.h"

namespace hourglass::broker {

absl::StatusOr<std::vector<ScheduledEntry>> Loader::LoadUntil(
    int64_t until_ms, size_t max_entries) {
  const storage::DueKey end{until_ms, 0};
  absl::StatusOr<std::vector<ScheduledEntry>> entries =
      lifecycle::ReadSchedule(*store_, position_, end, max_entries);
  if (!entries.ok() || end <= position_ || max_entries == 0) return entries;
  if (entries->size() < max_entries) {
    position_ = end;
  } else {
    const storage::DueKey& last = entries->back().key;
    position_ = {last.deliver_at_ms, last.sequence + 1};
  }
  return entries;
}

}  // namespace hourglass::broker
