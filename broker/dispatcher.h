#ifndef HOURGLASS_BROKER_DISPATCHER_H_
#define HOURGLASS_BROKER_DISPATCHER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "broker/activity.h"
#include "broker/admin_tasks.h"
#include "broker/clock.h"
#include "broker/consumer.h"
#include "broker/delivery_state.h"
#include "broker/delivery_step.h"
#include "broker/group_registry.h"
#include "broker/lifecycle.h"
#include "broker/publisher.h"
#include "broker/step_inbox.h"
#include "storage/commit_queue.h"
#include "storage/message_store.h"

namespace hourglass::broker {

// Consumer groups and their consumers: moves messages that came due into
// every group of their topic, delivers each group's ready messages to its
// consumers within their credit (durably marking each delivery in flight
// first), takes acks and nacks, redelivers after ack timeouts and nack
// delays, and dead-letters a message after max_attempts. See
// storage/README.md for the keys of each state, and ARCHITECTURE.md for
// the threads.
//
// It is made of parts with one job each, which it owns and wires:
//   - GroupRegistry (group_registry.h): which groups exist, durably;
//   - DeliveryState (delivery_state.h): per-group credit and in-flight
//     tracking, ready windows, consumers and their outboxes;
//   - DeliveryStep (delivery_step.h): one step of delivery;
//   - AdminTasks (admin_tasks.h): purge, group deletion, redrive;
//   - StepInbox (step_inbox.h): the door to the step.
// The step's thread owns the DeliveryState; every other thread reaches it
// through the inbox, whose lock is never held during I/O: a gRPC thread's
// Ack, Nack or Written never waits for a store read or write.
//
// In memory it holds, per group, a window of the ready queue's head (the
// rest stays on disk, see ReadyWindow), and every in-flight delivery with
// its timer; never payloads beyond the step being written. Memory is
// bounded by the windows and the consumers' credit and outboxes, not by
// the backlog.
//
// Thread-safe. Step is for one thread at a time (Start runs it on a thread
// of the dispatcher's own); MoveToReady is the timer thread's; every other
// method may be called from any thread and does not block on I/O unless it
// says so.
class Dispatcher {
 public:
  using Options = DispatcherOptions;
  using ConsumerId = broker::ConsumerId;
  using CountCallback = AdminTasks::CountCallback;
  using GroupInfo = GroupRegistry::Info;

  // Recovers the registered groups and every in-flight delivery
  // (deliveries that were with a consumer are due again at once: their
  // streams are gone). Reads the group registry and the inflight table,
  // which consumer credit bounds, never the backlog.
  // REQUIRES: the pointers outlive the dispatcher; `publisher` writes dead
  // letters.
  static absl::StatusOr<std::unique_ptr<Dispatcher>> Open(
      storage::MessageStore* store, storage::CommitQueue* commits,
      Publisher* publisher, Clock* clock, Activity* activity, Options options);

  // Stops the thread if Start ran it.
  ~Dispatcher();

  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  // ---- Groups.

  // Registers `group` on `topic`, durably; from then on every message of
  // the topic that comes due reaches it. The topic's first group also takes
  // the messages that came due while it had none. `done` gets OK (also if
  // the group existed), RESOURCE_EXHAUSTED past
  // Options::max_groups_per_topic, or the store's error; it runs on the
  // commit queue's thread or at once on this one, and must not block.
  void RegisterGroup(std::string topic, std::string group,
                     absl::AnyInvocable<void(absl::Status) &&> done);
  // The same, but ALREADY_EXISTS if the group exists or is being
  // registered (Admin.CreateGroup).
  void CreateGroup(std::string topic, std::string group,
                   absl::AnyInvocable<void(absl::Status) &&> done);
  // RegisterGroup, waiting for the answer. Blocks: not for the commit thread.
  absl::Status RegisterGroup(std::string_view topic, std::string_view group);

  // ---- Consumers.

  using SubscribeOptions = broker::SubscribeOptions;

  // Adds `consumer` to its group, registering the group first if needed
  // and allowed. `done` gets the consumer's id, or UNAVAILABLE after
  // Shutdown, NOT_FOUND for a group that does not exist and may not be
  // created (or is being deleted), RESOURCE_EXHAUSTED past
  // Options::max_groups_per_topic, or the store's error; it runs on the
  // step's thread, the commit queue's, or at once on this one, and must
  // not block.
  void Subscribe(SubscribeOptions options, std::shared_ptr<Consumer> consumer,
                 absl::AnyInvocable<void(absl::StatusOr<ConsumerId>) &&> done);

  // Removes a consumer; its unacknowledged deliveries go back to its group
  // at once, to be delivered again (attempt + 1). Unknown ids are ignored.
  void Unsubscribe(ConsumerId id);

  // Acknowledges deliveries of the consumer by message id. Ids not in
  // flight on it are counted (unknown_acks) and ignored.
  void Ack(ConsumerId id, absl::Span<const std::string_view> message_ids);

  // The consumer's stream wrote `deliveries` of what it was sent, of
  // `bytes` (DeliveryBytes) in all, to the network: they leave its outbox.
  // (Their ack timeouts ran from the hand-over; a stream that reports
  // nothing for Options::stall_timeout while it holds unsent deliveries is
  // ended.) Unknown ids are ignored.
  void Written(ConsumerId id, size_t deliveries, size_t bytes);

  // Takes a delivery back from the consumer, to be delivered again once
  // `delay` has passed (at once if it is not positive). An id not in flight
  // on the consumer is counted (unknown_acks) and changes nothing.
  void Nack(ConsumerId id, std::string_view message_id, absl::Duration delay);

  // ---- Admin work. It runs in the dispatcher's steps, a chunk (a store
  // write) at a time, between deliveries (AdminTasks); `done` runs on the
  // step's thread and must not block.

  // Deletes the ready entries of every group of `topic` and of its waiting
  // area, and the messages that no group holds any more. `done` gets how
  // many messages were deleted.
  void PurgeReady(std::string topic, CountCallback done);

  // Deletes a group: its streams end with NOT_FOUND, its ready and
  // in-flight entries go, and so do messages no other group holds. `done`
  // gets how many ready and in-flight entries were removed; NOT_FOUND if
  // there is no such group.
  void DeleteGroup(std::string topic, std::string group, CountCallback done);

  // Moves dead letters back to `topic`: the messages of `<topic>.dlq` (all,
  // or those with `ids`) are published to `topic` due now, with their ids,
  // payloads and headers, and removed from the dead-letter topic in the same
  // write. A message of `<topic>.dlq` still scheduled for later (published
  // there by a producer) is not a dead letter yet, and stays. NOT_FOUND,
  // and nothing moves, if an id is not a dead letter of the topic. A letter
  // whose id is pending in `topic` again stays where it is.
  // `done` gets how many moved; UNAVAILABLE if letters stayed busy (coming
  // due, or with an ack being written) for many steps, after moving the
  // others. Reads the store to look the ids up: not for a gRPC thread.
  void Redrive(std::string topic, std::vector<std::string> ids,
               CountCallback done);

  // ---- The timer thread: messages coming due.

  // Moves `due` from scheduled to ready in every group of its topic (or in
  // the topic's waiting area if it has none) and the loader's cursor to
  // `cursor`, in one write, and hands the ready entries to the step once
  // it is durable. Returns the write's status: on error nothing changed.
  // Writes without an fsync (a power cut that loses the move brings the
  // messages back scheduled). Blocks on the write.
  absl::Status MoveToReady(const std::vector<ScheduledEntry>& due,
                           const storage::DueKey& cursor);

  // ---- The dispatcher's own work.

  // Runs one step at the clock's now: what the inbox holds, then a
  // delivery step (DeliveryStep::Run) and a chunk of admin work. Returns
  // when it wants to run again (earlier if new work arrives), or the
  // store's error (the step is undone and retried by the next one).
  absl::StatusOr<absl::Time> Step();

  // Runs Step on a thread of the dispatcher's own until Shutdown or
  // destruction, sleeping until the time it returns or until new work.
  // After a failed step (the store's error) it waits kRetryDelay, whatever
  // arrives meanwhile, and tries again.
  void Start();

  // How long the thread waits after a failed step.
  static constexpr absl::Duration kRetryDelay = absl::Milliseconds(100);

  // Stops the thread, writes the acks taken, ends every consumer's stream
  // and every admin task with `status`, and refuses new subscriptions
  // with it. Idempotent.
  void Shutdown(absl::Status status);

  // ---- Introspection.

  // Every group not being deleted, by topic and name.
  std::vector<GroupInfo> Groups() const { return registry_->Groups(); }
  // What Open found.
  struct Recovery {
    size_t groups = 0;
    size_t due_again = 0;  // In-flight deliveries due again at once.
    size_t waiting = 0;    // In-flight deliveries waiting out a nack.
  };
  const Recovery& recovery() const { return recovery_; }
  // Ack and nack ids that were not in flight on their consumer.
  uint64_t unknown_acks() const { return state_->unknown_acks(); }

 private:
  Dispatcher(storage::MessageStore* store, storage::CommitQueue* commits,
             Publisher* publisher, Clock* clock, Activity* activity,
             Options options, std::unique_ptr<GroupRegistry> registry);

  absl::Status Recover();
  // A step; without `deliver` it only writes acks and nacks.
  absl::StatusOr<absl::Time> StepImpl(bool deliver);
  // Runs what the inbox holds on this, the step's, thread.
  void TakeInbox();
  // The shutdown status, if the dispatcher is shut down.
  std::optional<absl::Status> shut_down() const;
  void Run();

  Recovery recovery_;  // Constant after Open.

  // Constant after construction.
  storage::MessageStore* const store_;
  storage::CommitQueue* const commits_;
  Clock* const clock_;
  const Options options_;
  const std::unique_ptr<GroupRegistry> registry_;
  StepInbox inbox_;

  // The step's thread's.
  const std::unique_ptr<DeliveryState> state_;
  const std::unique_ptr<DeliveryStep> step_;
  const std::unique_ptr<AdminTasks> tasks_;

  mutable absl::Mutex mu_;
  std::optional<absl::Status> shutdown_ ABSL_GUARDED_BY(mu_);

  std::thread thread_;
};

}  // namespace hourglass::broker

#endif  // HOURGLASS_BROKER_DISPATCHER_H_
