#ifndef HOURGLASS_BROKER_LIFECYCLE_H_
#define HOURGLASS_BROKER_LIFECYCLE_H_

// The message lifecycle: every state a stored message can be in, and every
// transition between them, in one place. storage/README.md ("Which keys
// exist in each state") draws the states; each function below is one
// arrow of that drawing. A transition appends the key operations and the
// counter changes of its state change to a Changes, which the caller
// writes as one atomic batch, alone or with other transitions; the counts
// of storage/keys.h ("counters", and the schedule counts by minute, hour
// and day of storage/schedule_counts.h) then always equal the keys they
// count, which tests/broker/lifecycle_test.cc checks against a model after
// every step.
//
// No other file of the broker names a storage table: the reads of the
// states are in lifecycle_reads.h, this module's other half.
//
// The functions are stateless: thread-safe as long as each Changes is used
// by one thread at a time. None reads the store; what a transition needs to
// know (which groups hold a message, the ids it was stored with) its caller
// passes.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "storage/keys.h"
#include "storage/message_store.h"
#include "storage/records.pb.h"
#include "storage/schedule_counts.h"

namespace hourglass::broker {

// The changes of one atomic write: key operations in the order they were
// added, and counter changes summed per counter (schedule counts per topic
// and minute).
//
// Thread-compatible.
class Changes {
 public:
  Changes() = default;
  Changes(Changes&&) = default;
  Changes& operator=(Changes&&) = default;

  // Whether answering the write's callers waits for an fsync
  // (storage::WriteBatch::needs_sync). Default: true.
  void set_needs_sync(bool needs_sync) { batch_.set_needs_sync(needs_sync); }
  // Room for `operations` more key operations.
  void Reserve(size_t operations) {
    batch_.Reserve(batch_.size() + operations);
  }
  bool empty() const {
    return batch_.empty() && counters_.empty() && schedule_counts_.empty();
  }

  // Adds `other`'s key operations after these, and its counter changes.
  // The sync need joins as in storage::WriteBatch::Append: other's if this
  // holds no key operation yet, else whether either needs it.
  void Append(Changes other);
  // The write: the key operations, then an Add for each counter whose
  // change is not 0, then those of the schedule counts. Leaves this empty
  // (needs_sync as it was).
  storage::WriteBatch Take();

  // For the transitions (lifecycle.cc).
  enum class Counter { kScheduled, kMessages, kReady };
  storage::WriteBatch& batch() { return batch_; }
  // Adds `delta` to the counter of `kind` for `topic` (and `group`, for
  // kReady: "" is the topic's waiting area).
  void Count(Counter kind, std::string_view topic, std::string_view group,
             int64_t delta);
  // Adds `delta` to the scheduled messages of `topic`: its kScheduled
  // counter and its schedule count of the minute of `deliver_at_ms`.
  void CountScheduled(std::string_view topic, int64_t deliver_at_ms,
                      int64_t delta);

 private:
  struct CounterName {
    Counter kind;
    std::string topic;
    std::string group;
  };
  struct CounterView {
    Counter kind;
    std::string_view topic;
    std::string_view group;
  };
  struct CounterHash {
    using is_transparent = void;
    size_t operator()(const CounterView& c) const;
    size_t operator()(const CounterName& c) const {
      return (*this)(CounterView{c.kind, c.topic, c.group});
    }
  };
  struct CounterEq {
    using is_transparent = void;
    static CounterView View(const CounterName& c) {
      return {c.kind, c.topic, c.group};
    }
    static CounterView View(const CounterView& c) { return c; }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      const CounterView x = View(a), y = View(b);
      return x.kind == y.kind && x.topic == y.topic && x.group == y.group;
    }
  };

  storage::WriteBatch batch_;
  absl::flat_hash_map<CounterName, int64_t, CounterHash, CounterEq> counters_;
  storage::ScheduleCountDeltas schedule_counts_;
};

// A schedule entry: when a message comes due, and its topic. Enough for a
// timer; no payload.
struct ScheduledEntry {
  storage::DueKey key;
  std::string topic;

  friend bool operator==(const ScheduledEntry&,
                         const ScheduledEntry&) = default;
};

// The ready entry a delivery takes: where it is stored ("" for its topic's
// waiting area, else its group's name) and its due key.
struct ReadyPlace {
  std::string_view stored_under;
  storage::DueKey key;
};

namespace lifecycle {

// ---- Scheduled.

// Publish: stores a new message, scheduled. `record` holds its topic, id
// (given or assigned), payload, headers and times; `key` is its due time
// and sequence (record.deliver_at_ms() == key.deliver_at_ms). Writes
// messages, ids (where storage::HasIdEntry), schedule and topic_due.
void Publish(Changes& changes, const storage::MessageRecord& record,
             const storage::DueKey& key);

// Cancel (and purging a scheduled message): deletes a message that is
// scheduled, with every key Publish wrote.
void Cancel(Changes& changes, std::string_view topic,
            const storage::DueKey& key, std::string_view id);

// Reschedule: moves a scheduled message from `old_key` to `new_key` (same
// sequence). `record` is the stored record with the new deliver_at_ms.
void Reschedule(Changes& changes, const storage::MessageRecord& record,
                const storage::DueKey& old_key, const storage::DueKey& new_key);

// Come due: the scheduled message `key` of `topic` becomes ready in each of
// `groups`, or, if there is none, in the topic's waiting area, for the
// first group that registers.
void ComeDue(Changes& changes, std::string_view topic,
             const storage::DueKey& key,
             absl::Span<const std::string_view> groups);

// Where the loader resumes after a restart (loader.h): every schedule key
// before `cursor` has come due, in a write no later than this one.
void MoveLoaderCursor(Changes& changes, const storage::DueKey& cursor);

// Publish sequences below `until` may be used from now on (Publisher).
void ReserveSequences(Changes& changes, uint64_t until);

// A write that changes nothing a client sees, to learn whether the store
// takes writes again (StoreHealth's probe).
void ProbeWrite(Changes& changes, absl::Time now);

// ---- Ready, in flight, gone.

// Deliver: the ready entry `from` of `group` goes to a consumer, in flight
// as `record` (attempt, due time, redeliver_at = the ack timeout).
void Deliver(Changes& changes, std::string_view topic, std::string_view group,
             const ReadyPlace& from, const storage::InFlightRecord& record);

// Redeliver (after an ack timeout, a nack's delay, or a restart): an in-flight
// entry of `group` goes to a consumer again, as `record` (attempt + 1).
void Redeliver(Changes& changes, std::string_view topic, std::string_view group,
               uint64_t sequence, const storage::InFlightRecord& record);

// A delivery found its message gone (purged, or acked by the last other
// group meanwhile): the entry it took leaves the group, and nothing is
// sent. `from` is the ready entry it took, if it came from one.
void DeliveryOfGone(Changes& changes, std::string_view topic,
                    std::string_view group, uint64_t sequence,
                    const ReadyPlace* from);

// Ack: `group` is done with the message `key` of `topic`, stored with `id`.
// If no other group holds it (`last_holder`), the message is deleted.
void Ack(Changes& changes, std::string_view topic, std::string_view group,
         const storage::DueKey& key, std::string_view id, bool last_holder);

// Nack with a delay: the delivery waits out the delay, no consumer holding
// it (record.waiting(), redeliver_at_ms the delay's end). A nack without a
// delay, an ack timeout and a consumer's disconnect change nothing stored:
// the entry is redelivered (Redeliver) from memory.
void Nack(Changes& changes, std::string_view topic, std::string_view group,
          uint64_t sequence, const storage::InFlightRecord& record);

// Dead letter: after --max_attempts the in-flight entry leaves `group`; the
// caller publishes the letter to `<topic>.dlq` (Publish) in the same
// write. If no other group holds the message (`last_holder`), it is
// deleted.
void DeadLetter(Changes& changes, std::string_view topic,
                std::string_view group, const storage::DueKey& key,
                std::string_view id, bool last_holder);

// Expire: a delivery found its message past its deadline
// (MessageRecord.expire_at_ms), so the entry it took leaves `group` without
// a delivery: its ready entry `from` if it came from one, else its
// in-flight entry. If no other group holds the message (`last_holder`), it
// is deleted. With dead_letter_on_expire the caller publishes the letter to
// `<topic>.dlq` (Publish) in the same write.
void Expire(Changes& changes, std::string_view topic, std::string_view group,
            const storage::DueKey& key, std::string_view id,
            const ReadyPlace* from, bool last_holder);

// Purge of a ready message, one queue at a time: the ready entry of `topic`
// stored under `stored_under` leaves it.
void PurgeReady(Changes& changes, std::string_view topic,
                const ReadyPlace& entry);

// Deleting a group: its in-flight entry `sequence` goes.
void DropInFlight(Changes& changes, std::string_view topic,
                  std::string_view group, uint64_t sequence);

// A message that no group holds any more after a purge or a group's
// deletion (the caller checked) is deleted, with the keys Publish wrote
// but schedule.
void DeleteUnheld(Changes& changes, std::string_view topic,
                  const storage::DueKey& key, std::string_view id);

// Redrive: the dead letter `key` of `dead_topic` (stored with `id`) leaves
// it: its ready entries under `ready_under` (those the caller found
// present), its in-flight entries in `groups`, and the message. The caller
// publishes it to the original topic (Publish) in the same write.
void Redrive(Changes& changes, std::string_view dead_topic,
             const storage::DueKey& key, std::string_view id,
             absl::Span<const std::string_view> ready_under,
             absl::Span<const std::string_view> groups);

// ---- Groups.

// Registers `group` on `topic` (durable; see storage::GroupRecord).
void RegisterGroup(Changes& changes, std::string_view topic,
                   std::string_view group, const storage::GroupRecord& record);

// Unregisters a group once its ready and in-flight entries are gone.
void UnregisterGroup(Changes& changes, std::string_view topic,
                     std::string_view group);

}  // namespace lifecycle
}  // namespace hourglass::broker

#endif  // HOURGLASS_BROKER_LIFECYCLE_H_
