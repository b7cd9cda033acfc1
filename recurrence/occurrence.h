#ifndef HOURGLASS_RECURRENCE_OCCURRENCE_H_
#define HOURGLASS_RECURRENCE_OCCURRENCE_H_

// Names and delays of a recurrence's occurrences (one fire of it): the
// same on every node and in every run for the same inputs, so that nodes
// agree on them without talking (recurrence/README.md). Pure.

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/time/time.h"

namespace hourglass::recurrence {

// A 64-bit hash of (recurrence_id, fire_time) that never changes between
// processes, machines or releases (FNV-1a over the id's bytes and the fire
// time's Unix seconds and nanoseconds, little-endian, then splitmix64's
// finalizer). Unlike absl::Hash and std::hash, which may differ per
// process.
uint64_t StableHash(std::string_view recurrence_id, absl::Time fire_time);

// A pseudo-random delay for the occurrence, in whole milliseconds, uniform
// in [0, max_jitter] (max_jitter rounded down to a millisecond), drawn from
// StableHash(recurrence_id, fire_time): every node computes the same delay.
// Zero when max_jitter < 1 ms.
absl::Duration Jitter(std::string_view recurrence_id, absl::Time fire_time,
                      absl::Duration max_jitter);

// The occurrence's id: "<recurrence_id>@<fire time, RFC 3339 in UTC>",
// e.g. "daily@2027-03-14T07:00:00Z"; a fire time with a fraction of a
// second has it ("daily@2027-03-14T07:00:00.5Z"). Equal inputs, equal ids,
// so publishing an occurrence twice is idempotent.
std::string OccurrenceId(std::string_view recurrence_id, absl::Time fire_time);

}  // namespace hourglass::recurrence

#endif  // HOURGLASS_RECURRENCE_OCCURRENCE_H_
