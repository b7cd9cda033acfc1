#ifndef HOURGLASS_BROKER_DELIVERY_STEP_H_
#define HOURGLASS_BROKER_DELIVERY_STEP_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "broker/activity.h"
#include "broker/background_write.h"
#include "broker/delivery_state.h"
#include "broker/lifecycle.h"
#include "broker/publisher.h"
#include "google/protobuf/arena.h"
#include "storage/commit_queue.h"
#include "storage/message_store.h"
#include "storage/records.pb.h"

namespace hourglass::broker {

// The delivery step: what the dispatcher's thread does each time it runs.
// One step takes the acks and nacks the state holds and, within every
// consumer's credit and outbox, the deliveries due now (redeliveries and
// the heads of the ready windows, groups taking turns), reads the records
// they need, and writes its changes as two atomic batches at once: its
// acks on a thread of their own (they only delete what consumers are done
// with), the rest (deliveries, nacks, dead letters) on the step's thread.
// Once both are written it hands the deliveries to their streams. A failed
// write undoes the step's deliveries, nacks and dead letters, which the
// next step tries again; a failed ack batch is kept and written again,
// unchanged, by the next step: its decisions (which ack deletes a message)
// stand, and later steps rely on them, so the acks are never taken back.
//
// Deadlines: a delivery or redelivery whose record is past its deadline
// (MessageRecord.expire_at_ms <= the step's now) is not made; the entry
// leaves the group as an ack would end it there (the message goes when no
// other group holds it), with a letter to `<topic>.dlq` if the record asks
// for one, and is counted (Activity::Expired). So is an entry due for
// dead-lettering after max_attempts that is past its deadline. Other groups
// of the message are not affected: each expires it when its own turn to
// deliver it comes. The check needs the record, which a delivery reads
// anyway: no timer per deadline, no scan.
//
// Thread-compatible: the step's thread, with the DeliveryState.
class DeliveryStep {
 public:
  // REQUIRES: the pointers outlive the step; `publisher` writes dead
  // letters.
  DeliveryStep(DeliveryState* state, storage::MessageStore* store,
               storage::CommitQueue* commits, Publisher* publisher,
               Activity* activity);
  ~DeliveryStep();

  DeliveryStep(const DeliveryStep&) = delete;
  DeliveryStep& operator=(const DeliveryStep&) = delete;

  // Runs one step at the clock's now: expires timers, ends stalled
  // streams, writes the acks and nacks taken and, with `deliver`, delivers.
  // Returns whether it had anything to do (then more may be waiting), or
  // the store's error (see the class comment). Returns once every write it
  // started has ended.
  absl::StatusOr<bool> Run(bool deliver);

 private:
  struct Assignment;
  struct Work;

  // The step's parts, in order.
  absl::Status TakeFinished(Work& work);
  absl::Status TakeDeliveries(Work& work);
  // Moves the step's acks from work.finished to work.acked and adds their
  // transitions to `changes`.
  void BuildAckBatch(Work& work, Changes& changes);
  // The rest of the step's changes: nacks, deliveries, dead letters, and
  // deliveries whose message is past its deadline (Expire).
  absl::Status BuildBatch(int64_t now_ms, Work& work, Changes& changes);
  // A delivery of `record` found it past its deadline at `now_ms`: the
  // entry leaves its group (lifecycle::Expire; `from` is the ready entry
  // it took, if any) and, if the record asks for it, a letter goes to
  // `<topic>.dlq` (once per message and step). Sets a.expired. Returns the
  // store's or the publisher's error; Undo then puts the entry back.
  absl::Status Expire(int64_t now_ms, Assignment& a, const ReadyPlace* from,
                      storage::MessageRecord& record, Work& work,
                      Changes& changes);
  // After the write: the deliveries become the consumers' (their ack
  // timeouts run from now), those the outboxes had no room for go back.
  void Commit(Work& work);
  // Puts a delivery of the step back where TakeDeliveries took it from:
  // its window or the redeliverable set, with its attempt as it was.
  void UndoDelivery(Assignment& a);
  void Undo(Work& work);
  // Waits for the step's ack write, if one is in progress; its status. A
  // failed batch is kept in unwritten_acks_ for the next step.
  absl::Status FinishAckWrite();
  // Activity for stats and metrics: acks, dead letters, deliveries, and
  // how late first deliveries were.
  void RecordActivity(const Work& work, absl::Time now);

  // Constant after construction.
  DeliveryState* const state_;
  storage::MessageStore* const store_;
  storage::CommitQueue* const commits_;
  Publisher* const publisher_;
  Activity* const activity_;

  std::unique_ptr<BackgroundWrite> ack_writer_;
  storage::WriteBatch unwritten_acks_;
  // Rotates the group served first by each step.
  size_t next_group_ = 0;
};

}  // namespace hourglass::broker

#endif  // HOURGLASS_BROKER_DELIVERY_STEP_H_
