#ifndef HOURGLASS_STORAGE_SCHEDULE_COUNTS_H_
#define HOURGLASS_STORAGE_SCHEDULE_COUNTS_H_

// Schedule counts: how many scheduled messages of each topic are due in
// each UTC minute, hour and day (Table::kScheduleCounts; keys in
// storage/keys.h). The broker's lifecycle changes them in the same write
// batch as the schedule keys they count, so they are exact after any crash,
// restart or replication, and a histogram of a range reads a few counters
// (a year by day: 365) instead of the messages. storage/README.md says why
// there are three granularities.
//
// Everything here is thread-compatible; the reads are as thread-safe as the
// store.

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/keys.h"
#include "storage/message_store.h"

namespace hourglass::storage {

// The finest granularity: a histogram's buckets are whole multiples of it.
inline constexpr int64_t kScheduleCountResolutionMs = 60'000;

// The length of a bucket of `granularity`.
constexpr int64_t GranularityMillis(Granularity granularity) {
  switch (granularity) {
    case Granularity::kMinute:
      return 60'000;
    case Granularity::kHour:
      return 3'600'000;
    case Granularity::kDay:
      return 86'400'000;
  }
  return 0;
}

// Changes to the schedule counts, summed per topic and minute, for adding
// to a batch at once: a batch of publishes due in the same minute changes
// three counters (its minute, hour and day), not three per message.
class ScheduleCountDeltas {
 public:
  // `delta` more scheduled messages of `topic` due at `deliver_at_ms`.
  // REQUIRES: deliver_at_ms >= 0.
  void Add(std::string_view topic, int64_t deliver_at_ms, int64_t delta);
  // Adds `other`'s changes to these.
  void Append(const ScheduleCountDeltas& other);
  bool empty() const { return minutes_.empty(); }
  void clear() { minutes_.clear(); }
  // Adds to `batch` a WriteBatch::Add of Table::kScheduleCounts for each
  // minute, hour and day whose change is not 0.
  void AppendTo(WriteBatch& batch) const;

 private:
  // By topic, then minute start: the change.
  std::map<std::string, std::map<int64_t, int64_t>, std::less<>> minutes_;
};

// A histogram to read: `count` buckets of `bucket_ms` each, the first
// starting at `first_ms`.
struct ScheduleCountQuery {
  int64_t first_ms = 0;   // REQUIRES: >= 0, a multiple of the resolution.
  int64_t bucket_ms = 0;  // REQUIRES: > 0, a multiple of the resolution.
  size_t count = 0;
};

// How many counters ReadScheduleCounts reads for `query`: each bucket is
// read as whole days where it covers them, whole hours around those, and
// minutes at its edges. A bucket of whole days (hours) aligned to days
// (hours) costs one counter per day (hour).
uint64_t ScheduleCountReads(const ScheduleCountQuery& query);

// Element i: how many scheduled messages of `topic` are due in
// [first_ms + i * bucket_ms, first_ms + (i + 1) * bucket_ms). Reads
// ScheduleCountReads(query) counters, in one scan per run of adjacent
// counters. A topic that never had a scheduled message reads as all 0.
// Errors: the store's; DATA_LOSS for a malformed key.
absl::StatusOr<std::vector<int64_t>> ReadScheduleCounts(
    MessageStore& store, std::string_view topic,
    const ScheduleCountQuery& query);

// Counts every entry of the schedule table into `counts` (for a store that
// has no schedule counts yet: the upgrade to format 4), calling
// `progress(entries read so far)` after each `progress_every` entries
// (never if 0).
// Errors: the store's; DATA_LOSS for a malformed schedule key.
absl::Status CountSchedule(MessageStore& store, ScheduleCountDeltas& counts,
                           uint64_t progress_every,
                           absl::FunctionRef<void(uint64_t)> progress);

}  // namespace hourglass::storage

#endif  // HOURGLASS_STORAGE_SCHEDULE_COUNTS_H_
