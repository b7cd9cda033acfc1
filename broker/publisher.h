#ifndef HOURGLASS_BROKER_PUBLISHER_H_
#define HOURGLASS_BROKER_PUBLISHER_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "broker/activity.h"
#include "broker/broker.h"
#include "broker/clock.h"
#include "broker/lifecycle.h"
#include "broker/loader.h"
#include "broker/scheduler.h"
#include "storage/commit_queue.h"
#include "storage/message_store.h"

namespace hourglass::broker {

// A publish whose writes are built but not yet applied: the product of
// Publisher::Prepare, to be written (alone or inside a larger batch) and
// then handed to Publisher::Finish exactly once. Move-only.
struct PreparedPublish {
  PreparedPublish() = default;
  PreparedPublish(PreparedPublish&&) = default;
  PreparedPublish& operator=(PreparedPublish&&) = default;

  // The writes (lifecycle::Publish of each new message). Empty when every
  // message was a duplicate.
  Changes changes;

  // Private to Publisher.
  std::vector<PublishReceipt> receipts;
  std::vector<ScheduledEntry> keys;
  std::vector<std::pair<std::string, std::string>> claimed_ids;
  // The scheduler's tokens: dropped unfinished, the publishes end as failed
  // and then the floor is released (members go in reverse order).
  Scheduler::CursorHold floor;
  std::vector<Scheduler::PendingPublish> pending;  // One per `keys`.
};

// Stores new messages: assigns publish sequences and ids, enforces
// idempotency keys, builds the one atomic write of each publish, and hands
// the new schedule keys to the scheduler once they are durable.
//
// Thread-safe. Prepare blocks on store reads (idempotency keys), and on a
// small write through the commit queue only if a block of sequences runs
// out before the next one's reservation (started without waiting, half a
// block ahead) is written; so it must not run on the commit queue's thread.
// Prepare runs on gRPC's threads: a write there waits for a cluster's
// in-sync backups, and while gRPC's few callback threads wait, nothing of
// the process's gRPC moves (etcd keep-alives included).
class Publisher {
 public:
  using Callback =
      absl::AnyInvocable<void(absl::StatusOr<std::vector<PublishReceipt>>) &&>;

  // `next_sequence` is the first sequence this run may use (see
  // Engine::Open). `on_durable` runs after new messages entered the
  // scheduler's wheel, for waking the timer thread; it must not block.
  // REQUIRES: the pointers outlive the publisher.
  Publisher(storage::MessageStore* store, storage::CommitQueue* commits,
            Scheduler* scheduler, Clock* clock, Activity* activity,
            uint64_t next_sequence, absl::AnyInvocable<void()> on_durable);

  // Builds the writes of `messages`. An id already pending in its topic (or
  // earlier in this batch) gets the first message's receipt with
  // `duplicate` set and nothing new is written for it. Errors (nothing to
  // finish then): ABORTED if a publish of one of the ids is still being
  // written (retry); the store's status if a read or the sequence
  // reservation failed.
  absl::StatusOr<PreparedPublish> Prepare(std::vector<NewMessage> messages);

  // Reserves the run's first block of sequences durably, waiting for the
  // write: Engine::Open calls it, before any publish.
  absl::Status ReserveFirstBlock();

  // Ends a prepared publish whose batch was written with `status`. On OK
  // the new messages enter the scheduler and the receipts come back, in
  // request order; otherwise `status`. If the write's outcome is unknown
  // (MessageStore::Write), so is the publish's.
  absl::StatusOr<std::vector<PublishReceipt>> Finish(PreparedPublish prepared,
                                                     absl::Status status);

  // Prepare, write through the commit queue, Finish. `done` runs on the
  // commit queue's thread, or at once on this one if Prepare failed or
  // the request held no message.
  //
  // A publish of duplicates only still goes through the commit queue, as
  // an empty batch that needs a sync: the first message's write may be in
  // the store yet not durable (its sync failed) or, in a cluster, not
  // acknowledged by the in-sync backups (its primary lost them), and its
  // receipt must not be answered before it is.
  void Publish(std::vector<NewMessage> messages, Callback done);

 private:
  // Takes `count` publish sequences. Each run reserves them durably in
  // blocks (meta/sequence_reserved), so that a sequence, and the id
  // assigned from it, is never used twice, even after its message is gone.
  absl::StatusOr<uint64_t> TakeSequences(uint64_t count);
  // Writes the reservation of sequences up to `until` and waits for it.
  absl::Status ReserveLocked(uint64_t until)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(sequence_mu_);
  void Release(PreparedPublish& prepared);

  storage::MessageStore* const store_;
  storage::CommitQueue* const commits_;
  Scheduler* const scheduler_;
  Clock* const clock_;
  Activity* const activity_;
  absl::AnyInvocable<void()> on_durable_;

  absl::Mutex sequence_mu_;
  uint64_t next_sequence_ ABSL_GUARDED_BY(sequence_mu_);
  uint64_t reserved_until_ ABSL_GUARDED_BY(sequence_mu_);
  // A reservation of the next block is being written.
  bool reserving_ ABSL_GUARDED_BY(sequence_mu_) = false;

  absl::Mutex ids_mu_;
  // (topic, id) of producer-keyed publishes between Prepare and Finish.
  absl::flat_hash_set<std::pair<std::string, std::string>> publishing_ids_
      ABSL_GUARDED_BY(ids_mu_);
};

// A name quoted for error messages.
std::string Quoted(std::string_view s);

}  // namespace hourglass::broker

#endif  // HOURGLASS_BROKER_PUBLISHER_H_
