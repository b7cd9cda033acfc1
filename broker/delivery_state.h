#ifndef HOURGLASS_BROKER_DELIVERY_STATE_H_
#define HOURGLASS_BROKER_DELIVERY_STATE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "broker/activity.h"
#include "broker/clock.h"
#include "broker/consumer.h"
#include "broker/group_registry.h"
#include "broker/ready_window.h"
#include "broker/step_inbox.h"
#include "broker/timing_wheel.h"
#include "storage/keys.h"
#include "storage/message_store.h"

namespace hourglass::broker {

class StoreErrors;

// How the dispatcher delivers (Dispatcher::Options).
struct DispatcherOptions {
  // Deliveries of a message to one group before it goes to `<topic>.dlq`.
  // Default: 16.
  uint32_t max_attempts = 16;
  // Credit of a stream that asks for 0. Default: 100.
  uint32_t default_max_in_flight = 100;
  // Ack timeout of a stream that asks for none. Default: 30 s.
  absl::Duration default_ack_timeout = absl::Seconds(30);
  // Ready entries per group held in memory. Default: 4096.
  size_t ready_window = 4096;
  // Most deliveries, acks and nacks written by one step. Default: 4096.
  size_t step_limit = 4096;
  // Most groups of one topic; 0: no limit. Default: 64.
  size_t max_groups_per_topic = 64;
  // Most bytes (DeliveryBytes) handed to a stream and not yet reported
  // written: a stream at or past it gets nothing more until it writes.
  // A stream below it may get one delivery that takes it past, so that
  // a delivery larger than the limit still goes out. Default: 16 MiB.
  size_t max_unsent_bytes = size_t{16} << 20;
  // A stream holding unsent deliveries that reports nothing written for
  // this long is ended (Consumer::Abort, DEADLINE_EXCEEDED) and its
  // deliveries go back to its group at once. Default: 60 s.
  absl::Duration stall_timeout = absl::Seconds(60);
  // Where a failed step (a store error; the step is undone and retried)
  // is counted and logged, as op "deliver". Default: none, only retried.
  // REQUIRES: outlives the dispatcher.
  StoreErrors* store_errors = nullptr;
};

struct ConsumerState;

// A message of a group that has left the ready queue: with a consumer, or
// due again (redeliverable), or waiting out a nack's delay.
struct InFlight {
  storage::DueKey key;
  std::string id;        // The message id, once a delivery read it.
  uint32_t attempt = 0;  // Deliveries made to the group so far.
  ConsumerState* owner = nullptr;
  uint64_t token = 0;  // Names the current assignment.
  std::optional<TimerHandle> timer;
  uint64_t timer_token = 0;  // The timer's key in the timer targets.
  bool waiting = false;      // Waiting out a nack's delay.
};

// A group's delivery state.
struct GroupState {
  GroupState(const GroupRegistry::Group& g, size_t window_capacity,
             bool queue_empty)
      : id(g.id),
        topic(g.topic),
        name(g.name),
        owns_waiting_area(g.owns_waiting_area),
        window(window_capacity, queue_empty) {}

  const GroupRegistry::GroupId id;
  const std::string topic;
  const std::string name;
  const bool owns_waiting_area;
  ReadyWindow window;
  absl::flat_hash_map<uint64_t, InFlight> in_flight;
  // Keys of in_flight entries due again now, in due order.
  absl::btree_set<storage::DueKey> redeliverable;
  // Sequences with acks taken but not yet written, and how many.
  absl::flat_hash_map<uint64_t, int> finishing;
  std::vector<ConsumerState*> consumers;
  size_t next_consumer = 0;  // Round robin among consumers.
  // Being deleted (DeleteGroup): no consumers, no longer a holder of any
  // message; still receives what a move to ready names until its task
  // removes it.
  bool deleting = false;
  // The in-flight and consumer counts last given to the registry.
  std::pair<size_t, size_t> published_counts = {0, 0};
};

// A connected consumer stream.
struct ConsumerState {
  ConsumerId id = 0;
  GroupState* group = nullptr;
  uint32_t max_in_flight = 0;
  absl::Duration ack_timeout;
  std::shared_ptr<Consumer> sink;
  // Sequences of the deliveries assigned to it (its credit in use).
  absl::flat_hash_set<uint64_t> owned;
  // The handed-over ones, by message id, for acks and nacks.
  absl::flat_hash_map<std::string, uint64_t> by_id;
  // When it last acked or nacked (or subscribed); and whether it has been
  // reported stuck at zero credit since.
  absl::Time last_progress;
  bool reported_stuck = false;
  // Its outbox: deliveries sent to the stream and not yet reported
  // written, and their DeliveryBytes.
  size_t unsent = 0;
  size_t unsent_bytes = 0;
  // While unsent > 0: when it counts as stalled unless it reports a write.
  std::optional<absl::Time> stall_deadline;
};

// An ack or nack taken from a consumer, to be written.
struct Finished {
  enum class Kind { kAck, kNack };
  Kind kind;
  GroupState* group;
  InFlight entry;               // A copy for nacks; the entry for acks.
  int64_t redeliver_at_ms = 0;  // Nacks.
  bool delete_message = false;  // Acks: no other group holds it.
};

// Per-group credit and in-flight tracking: every group's ready window,
// in-flight entries and their timers, and the consumers with their credit
// and outboxes. The dispatcher's step (delivery_step.h) and admin tasks
// (admin_tasks.h) change it; other threads reach it only through the step
// inbox (step_inbox.h), whose events Apply takes.
//
// Thread-compatible: only the step's thread touches it (the dispatcher's
// own, or the caller of Dispatcher::Step). It reads the store (refills,
// the held check) but holds no lock any other thread takes.
class DeliveryState {
 public:
  // REQUIRES: the pointers outlive the state.
  DeliveryState(storage::MessageStore* store, Clock* clock, Activity* activity,
                GroupRegistry* registry, StepInbox* inbox,
                const DispatcherOptions& options);

  DeliveryState(const DeliveryState&) = delete;
  DeliveryState& operator=(const DeliveryState&) = delete;

  const DispatcherOptions& options() const { return options_; }
  Clock* clock() const { return clock_; }

  // ---- Groups.

  // The group's state: a new group's ready queue is known empty unless it
  // takes a waiting area (or was recovered).
  GroupState& AddGroup(const GroupRegistry::Group& group, bool queue_empty);
  GroupState* FindGroup(GroupRegistry::GroupId id);
  GroupState* FindGroup(std::string_view topic, std::string_view name);
  // The group that takes ready entries of `topic`'s waiting area, if any.
  GroupState* WaitingAreaOwner(std::string_view topic);
  // The groups of `topic` (by name), or nullptr.
  std::map<std::string, std::unique_ptr<GroupState>>* GroupsOf(
      std::string_view topic);
  // Every topic's groups, by topic and name.
  std::map<std::string, std::map<std::string, std::unique_ptr<GroupState>>,
           std::less<>>&
  topics() {
    return topics_;
  }
  // Forgets a group whose deletion is done.
  void RemoveGroup(GroupState& group);

  // ---- Consumers.

  // Adds a consumer to its group: its id, or NOT_FOUND if the group is
  // gone or being deleted.
  absl::StatusOr<ConsumerId> Attach(std::string_view topic,
                                    std::string_view group,
                                    uint32_t max_in_flight,
                                    absl::Duration ack_timeout,
                                    std::shared_ptr<Consumer> sink);
  ConsumerState* FindConsumer(ConsumerId id);
  // Removes a consumer: its deliveries go back to its group at once.
  // Returns its sink.
  std::shared_ptr<Consumer> RemoveConsumer(ConsumerState& consumer);
  // Every consumer's sink.
  std::vector<std::shared_ptr<Consumer>> Sinks() const;

  // ---- Inbox events.

  // A move to ready: its entries join their windows (if written).
  void AddReady(const StepInbox::ReadyMoved& moved);
  // An ack, nack, write report or end of a consumer. Acks and nacks of ids
  // not in flight on the consumer are counted (unknown_acks) and ignored.
  void Apply(StepInbox::ConsumerEvent event);
  // Acks and nacks taken, to be written by the next step, in arrival order.
  std::vector<Finished>& finished() { return finished_; }
  // Readable from any thread.
  uint64_t unknown_acks() const {
    return unknown_acks_.load(std::memory_order_relaxed);
  }

  // ---- Timers (ack timeouts, nack delays) and ownership.

  void SetTimer(GroupState& group, InFlight& entry, int64_t due_ms);
  void ClearTimer(InFlight& entry);
  // Makes the entries whose timers expired by `now_ms` due again.
  void ExpireTimers(int64_t now_ms);
  std::optional<int64_t> NextTimer() const { return timers_.NextExpiry(); }
  // Takes `entry` from its consumer (if any) and makes it due again at once.
  void MakeRedeliverable(GroupState& group, InFlight& entry);
  void ReleaseFromOwner(InFlight& entry);
  // A new assignment's token.
  uint64_t NextToken() { return next_token_++; }

  // ---- Outboxes and stalls.

  // The consumer's stall deadline: options().stall_timeout from `now`
  // while it has unsent deliveries, none otherwise.
  void UpdateStallDeadline(ConsumerState& consumer, absl::Time now);
  // Removes the consumers whose stall deadline passed by `now`, logging
  // each; returns their sinks and statuses, to Abort.
  std::vector<std::pair<std::shared_ptr<Consumer>, absl::Status>>
  RemoveStalledConsumers(absl::Time now);
  std::optional<absl::Time> NextStall() const;
  // Logs consumers that hold their whole credit and have not acked for
  // kStuckAfter, once per such episode.
  void ReportStuckConsumers(absl::Time now);
  static constexpr absl::Duration kStuckAfter = absl::Seconds(60);

  // ---- Store reads.

  // Reads the ready queue past the window's frontier into the window,
  // skipping messages being moved to ready and in-flight ones.
  absl::Status Refill(GroupState& group);
  // Whether a group of `group`'s topic other than `group` still holds the
  // message due at `key` (ready, in flight, or with an ack not yet
  // written). Groups being deleted hold nothing. May read the store.
  absl::StatusOr<bool> HeldElsewhere(const GroupState& group,
                                     const storage::DueKey& key);
  // The same for any topic, not counting `except` nor the ready entries in
  // `removing` ((stored-under name, sequence) pairs).
  absl::StatusOr<bool> Held(
      std::string_view topic, const storage::DueKey& key,
      const GroupState* except,
      const absl::flat_hash_set<std::pair<std::string, uint64_t>>* removing);

  // ---- Introspection.

  // Gives the registry the in-flight and consumer counts of the groups
  // whose counts changed since.
  void PublishCounts();

 private:
  // Constant after construction.
  storage::MessageStore* const store_;
  Clock* const clock_;
  Activity* const activity_;
  GroupRegistry* const registry_;
  StepInbox* const inbox_;
  const DispatcherOptions options_;

  std::map<std::string, std::map<std::string, std::unique_ptr<GroupState>>,
           std::less<>>
      topics_;
  absl::flat_hash_map<GroupRegistry::GroupId, GroupState*> by_id_;
  absl::flat_hash_map<ConsumerId, std::unique_ptr<ConsumerState>> consumers_;
  ConsumerId next_consumer_id_ = 1;
  // Consumers with unsent deliveries, by when they count as stalled.
  std::set<std::pair<absl::Time, ConsumerId>> stall_deadlines_;
  std::vector<Finished> finished_;
  // Timers of in-flight entries; the wheel's value is a token, mapped here
  // to its entry.
  TimingWheel timers_;
  absl::flat_hash_map<uint64_t, std::pair<GroupState*, uint64_t>>
      timer_targets_;
  uint64_t next_token_ = 1;
  std::atomic<uint64_t> unknown_acks_{0};
  absl::Time last_stuck_check_ = absl::InfinitePast();
};

}  // namespace hourglass::broker

#endif  // HOURGLASS_BROKER_DELIVERY_STATE_H_
