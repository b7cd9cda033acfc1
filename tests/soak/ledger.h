#ifndef HOURGLASS_TESTS_SOAK_LEDGER_H_
#define HOURGLASS_TESTS_SOAK_LEDGER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/message.h"

namespace hourglass::soak {

// The soak's record of every message it tried to publish, cancel, receive
// and acknowledge, and the judge of the broker's promises:
//   - a message whose Publish succeeded is acknowledged by every group,
//     unless a Cancel of it succeeded (or may have: unknown outcome);
//   - a message whose every Publish attempt failed with a code that
//     guarantees nothing was stored, or whose batch held a bad message, is
//     never delivered;
//   - a message whose Cancel succeeded is never delivered, before or after;
//   - every delivery has a known id, arrives no earlier than its
//     deliver_at, which is no earlier than the publish asked for and equals
//     the receipt's (of an id published in one attempt), carries the
//     payload and headers published, and has an attempt number in
//     [1, max_attempts] not seen before for its copy in its group;
//   - a Cancel answered NOT_FOUND before the message's deliver_at is a lost
//     message.
// An id sent again after an attempt with an unknown outcome may be stored
// twice, if its first copy was consumed (and so deleted) before the retry;
// the copies differ in deliver_at (the first was due before the retry was
// sent), which is how the checks above tell them apart.
// Violations found as events arrive are kept; Verify adds those only the
// end can show.
//
// Thread-safe: producers, the canceller and consumers call it from their
// own threads.
class Ledger {
 public:
  // `groups` consumer groups (indexes 0 .. groups-1) consume `topic`.
  Ledger(std::string topic, int groups, uint32_t max_attempts);

  // ---- Producers. Each attempt of a message is bracketed: PublishStarted,
  // then exactly one of PublishSucceeded, PublishRefused, PublishUnknown.

  // The first attempt of `id` (payload of `payload_size` bytes, see
  // Payload) is about to be sent; the broker may give it no deliver_at
  // earlier than `earliest`. `refusable` marks a message of a batch that
  // holds a bad message: the broker must refuse the whole batch.
  void NewMessage(const std::string& id, size_t payload_size,
                  absl::Time earliest, bool refusable);
  // Another attempt of `id` is about to be sent.
  void PublishStarted(const std::string& id);
  // The attempt succeeded with `receipt`.
  void PublishSucceeded(const std::string& id, const client::Receipt& receipt);
  // The attempt failed with a code that guarantees it stored nothing.
  void PublishRefused(const std::string& id);
  // The attempt's outcome is unknown (UNAVAILABLE, deadline, cancelled).
  void PublishUnknown(const std::string& id);

  // ---- The canceller.

  // OK, answered at `answered_at`.
  void CancelSucceeded(const std::string& id, absl::Time answered_at);
  // NOT_FOUND, answered at `answered_at`.
  void CancelNotFound(const std::string& id, absl::Time answered_at);
  void CancelUnknown(const std::string& id);

  // ---- Consumers.

  // A consumer of `group` read `delivery` at `arrived`.
  void Delivered(int group, const client::Delivery& delivery,
                 absl::Time arrived);
  // A consumer of `group` sent an ack of `id`.
  void Acked(int group, const std::string& id);

  // A violation seen outside the ledger (e.g. a batch with a bad message
  // accepted).
  void AddViolation(std::string text);

  // ---- The end.

  // Waits until no (message, group) pair is owed an ack, or `deadline`.
  // Returns whether none is owed.
  bool AwaitSettled(absl::Time deadline);

  struct Counts {
    uint64_t messages = 0;      // ids tried
    uint64_t published = 0;     // ids with a successful Publish
    uint64_t refused = 0;       // ids never stored, by the broker's word
    uint64_t unknown_only = 0;  // ids whose attempts all had unknown outcomes
    uint64_t retried = 0;       // ids published in more than one attempt
    uint64_t duplicates = 0;    // receipts with duplicate set
    uint64_t cancelled = 0;     // Cancel OK
    // Cancel OK of a retried id's second copy, its first one delivered.
    uint64_t cancelled_second_copies = 0;
    uint64_t cancel_not_found = 0;
    uint64_t cancel_unknown = 0;
    uint64_t deliveries = 0;    // all groups
    uint64_t redeliveries = 0;  // deliveries with attempt > 1
    uint64_t after_ack = 0;     // deliveries of a message its group acked
    uint64_t acks = 0;          // acks sent (first or not)
    uint64_t owed = 0;          // (message, group) pairs still unacked
    uint64_t violations = 0;
  };
  Counts counts() const;

  // Runs the end-of-run checks (every owed ack, deliveries of messages
  // never stored) and returns every violation, found now or earlier.
  // REQUIRES: every producer, canceller and consumer has stopped.
  std::vector<std::string> Verify();

  // The payload of message `id` with `size` bytes: derived from the id, so
  // the ledger checks it without storing it.
  static std::string Payload(const std::string& id, size_t size);

 private:
  enum class Cancel { kNone, kSucceeded, kNotFound, kUnknown };

  // One delivery to a group.
  struct Seen {
    absl::Time deliver_at;  // Tells the copies of a retried id apart.
    uint32_t attempt;
    absl::Time arrived;
  };
  struct GroupState {
    bool acked = false;
    std::vector<Seen> seen;
  };

  struct Message {
    absl::Time earliest;
    // From the last successful attempt's receipt: the copy the broker holds
    // (see the class comment); InfinitePast until then.
    absl::Time receipt_deliver_at = absl::InfinitePast();
    // The deliver_at of the copy a successful Cancel removed.
    absl::Time cancelled_deliver_at = absl::InfinitePast();
    uint32_t payload_size = 0;
    uint16_t attempts = 0;
    uint16_t in_progress = 0;
    bool refusable = false;
    bool succeeded = false;
    bool unknown = false;
    Cancel cancel = Cancel::kNone;
    std::vector<GroupState> groups;
  };

  // (message, group) pairs `m` owes acks to: the groups that have not
  // acked a message that must be delivered.
  uint64_t OwedBy(const Message& m) const;
  // Applies `change` to `m`, keeping owed_ in step.
  template <typename F>
  void Change(Message& m, F change) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Violation(std::string text) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Checks one delivery of a known message.
  void CheckDelivery(const std::string& group_name, const Message& m,
                     const client::Delivery& d, absl::Time arrived)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const std::string topic_;
  const int groups_;
  const uint32_t max_attempts_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Message> messages_ ABSL_GUARDED_BY(mu_);
  uint64_t owed_ ABSL_GUARDED_BY(mu_) = 0;
  Counts counts_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> violations_ ABSL_GUARDED_BY(mu_);
};

// "g1" for group index 0, "g2" for 1, ...
std::string GroupName(int group);

}  // namespace hourglass::soak

#endif  // HOURGLASS_TESTS_SOAK_LEDGER_H_
