#ifndef HOURGLASS_BROKER_LOADER_H_
#define HOURGLASS_BROKER_LOADER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "broker/lifecycle.h"
#include "storage/keys.h"
#include "storage/message_store.h"

namespace hourglass::broker {

// Reads the schedule table in due order, from a position forward, in
// bounded chunks, so that the timer thread can put entries entering the
// horizon into its wheel. It never reads message bodies.
//
// The position splits responsibility for putting a message in the wheel:
// the loader hands out every schedule entry before position() that existed
// when it read that range; entries written later with keys before
// position() belong to whoever wrote them (Publish inserts them directly).
//
// Thread-compatible: owned by the timer thread.
class Loader {
 public:
  // Starts reading at `from`, normally the persisted cursor
  // (ReadLoaderCursor). REQUIRES: `store` outlives the loader.
  Loader(storage::MessageStore* store, storage::DueKey from)
      : store_(store), position_(from) {}

  // Reads up to `max_entries` schedule entries with deliver_at < until_ms,
  // in due order (ties: sequence), starting at position(), and advances
  // position() past them. When it returns fewer than `max_entries`, every
  // entry before until_ms has been read and position() is {until_ms, 0}.
  // position() never moves backward: an `until_ms` at or before it reads
  // nothing. On error the position is unchanged.
  absl::StatusOr<std::vector<ScheduledEntry>> LoadUntil(int64_t until_ms,
                                                        size_t max_entries);

  // Every schedule entry with a smaller key has been read.
  storage::DueKey position() const { return position_; }

 private:
  storage::MessageStore* store_;  // Not owned. Assignable, for Recover.
  storage::DueKey position_;
};

}  // namespace hourglass::broker

#endif  // HOURGLASS_BROKER_LOADER_H_
