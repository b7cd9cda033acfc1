#ifndef HOURGLASS_BROKER_STEP_INBOX_H_
#define HOURGLASS_BROKER_STEP_INBOX_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "broker/consumer.h"
#include "broker/group_registry.h"
#include "storage/keys.h"

namespace hourglass::broker {

// The dispatcher step's only door: what other threads hand the step, which
// owns the delivery state (delivery_state.h) and lets no other thread
// touch it. gRPC threads queue consumers' acks, nacks, write reports and
// ends; the timer thread queues the messages it moves to ready; the
// registry, the dispatcher's callers and the commit queue queue calls to
// run on the step's thread (a new group, a new consumer, an admin task).
// The step takes everything queued at the start of each step.
//
// Thread-safe. Its lock is held only to queue or take work, never during
// I/O; lock order: the group registry's, then this one's.
class StepInbox {
 public:
  using ConsumerId = broker::ConsumerId;
  using GroupId = GroupRegistry::GroupId;

  // Consumers' events, in the order each stream sent them.
  struct Ack {
    ConsumerId consumer = 0;
    // The ids, end to end; ends[i] is where the i-th ends.
    std::string ids;
    std::vector<uint32_t> ends;

    size_t size() const { return ends.size(); }
    std::string_view id(size_t i) const {
      const uint32_t begin = i == 0 ? 0 : ends[i - 1];
      return std::string_view(ids).substr(begin, ends[i] - begin);
    }
  };
  struct Nack {
    ConsumerId consumer = 0;
    std::string id;
    absl::Duration delay;
    absl::Time at;  // When the consumer nacked: the delay runs from it.
  };
  struct Written {
    ConsumerId consumer = 0;
    size_t deliveries = 0;
    size_t bytes = 0;
  };
  struct Detach {
    ConsumerId consumer = 0;
  };
  using ConsumerEvent = std::variant<Ack, Nack, Written, Detach>;

  // A message that came due, for a ready window: of a group, or of its
  // topic's waiting area.
  struct ReadyEntry {
    GroupId group = 0;  // 0: the waiting area of `topic`.
    std::string topic;  // The waiting area's topic; empty for a group.
    storage::DueKey key;
  };
  // A move to ready of the timer thread: `entries` are durable if
  // `written`, else nothing of them was written.
  struct ReadyMoved {
    std::vector<ReadyEntry> entries;
    bool written = false;
  };

  // Everything queued, taken at once. Calls run first, in the order
  // queued (a group's addition before anything naming it), then the
  // moves to ready, then the consumers' events in the order queued.
  struct Work {
    std::vector<absl::AnyInvocable<void() &&>> calls;
    std::vector<ReadyMoved> ready;
    std::vector<ConsumerEvent> events;

    bool empty() const {
      return calls.empty() && ready.empty() && events.empty();
    }
  };

  StepInbox() = default;
  StepInbox(const StepInbox&) = delete;
  StepInbox& operator=(const StepInbox&) = delete;

  // ---- Queuing. Each wakes the step.

  void Post(ConsumerEvent event);
  // `call` runs on the step's thread, with the delivery state; it must
  // not block.
  void Call(absl::AnyInvocable<void() &&> call);

  // A move of due messages to ready being written by the timer thread.
  // Until the step takes it (Take, after End), its messages are pending:
  // the step reads none of their ready keys from the store (IsPending),
  // and a group it names is not done (NamesGroup). Ending it queues it
  // for the step; a move dropped without End ends unwritten.
  class [[nodiscard]] ReadyMove {
   public:
    ReadyMove(ReadyMove&& other) noexcept
        : inbox_(std::exchange(other.inbox_, nullptr)),
          ticket_(other.ticket_) {}
    ReadyMove& operator=(ReadyMove&&) = delete;
    ~ReadyMove() {
      if (inbox_ != nullptr) std::move(*this).End(false);
    }
    // `written`: the move is durable.
    void End(bool written) &&;

   private:
    friend class StepInbox;
    ReadyMove(StepInbox* inbox, uint64_t ticket)
        : inbox_(inbox), ticket_(ticket) {}
    StepInbox* inbox_;
    uint64_t ticket_;
  };
  ReadyMove BeginReady(std::vector<ReadyEntry> entries);

  // ---- The step.

  // Takes everything queued; the moves taken are pending no more.
  Work Take();
  // Whether the message with `sequence` is in a move to ready not yet
  // taken.
  bool IsPending(uint64_t sequence) const;
  // Removes from `items` those whose sequence `sequence_of` says is
  // pending, under one lock.
  template <typename T>
  void DropPending(std::vector<T>& items,
                   const std::function<uint64_t(const T&)>& sequence_of) const;
  // Whether a move to ready not yet taken names group `id`.
  bool NamesGroup(GroupId id) const;

  // Wakes the step's wait.
  void Wake();
  // Waits until work is queued or Wake (unless not `wake_on_work`), Stop,
  // or `timeout` has passed. Returns false once stopped.
  bool Wait(absl::Duration timeout, bool wake_on_work = true);
  void Stop();

 private:
  struct Move {
    std::vector<ReadyEntry> entries;
    bool ended = false;
    bool written = false;
  };
  void EndReady(uint64_t ticket, bool written);

  mutable absl::Mutex mu_;
  Work work_ ABSL_GUARDED_BY(mu_);
  // Moves begun and not yet taken, by ticket; with the count of each
  // sequence and group they hold.
  absl::flat_hash_map<uint64_t, Move> moves_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, int> pending_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<GroupId, int> pending_groups_ ABSL_GUARDED_BY(mu_);
  uint64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 1;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  bool wake_on_work_ ABSL_GUARDED_BY(mu_) = true;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

template <typename T>
void StepInbox::DropPending(
    std::vector<T>& items,
    const std::function<uint64_t(const T&)>& sequence_of) const {
  absl::MutexLock lock(&mu_);
  if (pending_.empty()) return;
  std::erase_if(items, [&](const T& item) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return pending_.contains(sequence_of(item));
  });
}

}  // namespace hourglass::broker

#endif  // HOURGLASS_BROKER_STEP_INBOX_H_
