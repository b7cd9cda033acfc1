#ifndef HOURGLASS_BROKER_DISPATCHER_H_
#define HOURGLASS_BROKER_DISPATCHER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "broker/activity.h"
#include "broker/clock.h"
#include "broker/lifecycle.h"
#include "broker/loader.h"
#include "broker/publisher.h"
#include "broker/timing_wheel.h"
#include "storage/commit_queue.h"
#include "storage/message_store.h"

namespace hourglass::broker {

class BackgroundWrite;

// One message handed to a consumer.
struct Delivery {
  std::string id;
  std::string topic;
  std::string payload;
  std::map<std::string, std::string> headers;
  absl::Time deliver_at;
  absl::Time published_at;
  // 1 for the first delivery to the group (plus, for a dead letter, the
  // deliveries made in the original topic).
  uint32_t attempt = 0;
};

// The bytes a delivery costs a stream's outbox: its id, topic, payload and
// headers. The dispatcher counts what it hands a stream with it, and the
// stream reports what it wrote with it (Dispatcher::Written), so the two
// counts agree.
size_t DeliveryBytes(const Delivery& delivery);

// A consumer stream as the dispatcher sees it. The API's Subscribe reactor
// implements it; so do tests.
//
// The dispatcher calls Send from its own thread, in delivery order, and End
// or Abort at most once (one of them), never while holding its lock; no
// Send follows either. All may come after Unsubscribe (the stream then
// drops them). None may block.
//
// What the dispatcher sends waits in the stream's outbox until it is
// written to the network. The stream reports what it has written with
// Dispatcher::Written, any number of deliveries per call, soon after the
// writes (how the API's reactor groups its reports: api/subscribe_stream.cc,
// OnWriteDone). The dispatcher bounds each outbox by those reports (in
// deliveries and in bytes) and ends a stream that writes nothing for too
// long; a delivery's ack timeout does not wait for them: it runs from the
// hand-over.
class Consumer {
 public:
  virtual ~Consumer() = default;
  virtual void Send(std::vector<Delivery> deliveries) = 0;
  // The broker ends the stream (it is shutting down): a write in progress
  // may finish first.
  virtual void End(absl::Status status) = 0;
  // The broker ends the stream at once (it wrote nothing for
  // Options::stall_timeout): a write in progress is abandoned, since it
  // may never finish. Default: End.
  virtual void Abort(absl::Status status) { End(std::move(status)); }
};

// Consumer groups and their consumers: moves due messages from each group's
// ready queue to its consumers within their credit, durably marking each
// delivery in flight first; takes acks and nacks; redelivers after ack
// timeouts and nack delays; dead-letters a message after max_attempts.
// See storage/README.md for the keys of each state.
//
// In memory it holds, per group, a window of the ready queue's head (the
// rest stays on disk, see ReadyWindow), and every in-flight delivery with
// its timer; never payloads beyond the step being written. Memory is
// bounded by the windows and the consumers' credit, not by the backlog.
//
// Work happens in steps (Step): one thread reads what the step needs, writes
// its state changes, then sends the deliveries. A step writes two atomic
// batches at once: its acks on a thread of their own (they only delete
// what consumers are done with), the rest (deliveries, nacks, dead
// letters) on the stepping thread; it returns once both are written.
// Acks, nacks, subscriptions and newly ready messages arrive from any
// thread at any time and are taken by the next step.
//
// Thread-safe. Step is for one thread at a time (Start runs it on a thread
// of the dispatcher's own); every other method may be called from any
// thread and does not block on I/O unless it says so.
class Dispatcher {
 public:
  struct Options {
    // Deliveries of a message to one group before it goes to
    // `<topic>.dlq`. Default: 16.
    uint32_t max_attempts = 16;
    // Credit of a stream that asks for 0. Default: 100.
    uint32_t default_max_in_flight = 100;
    // Ack timeout of a stream that asks for none. Default: 30 s.
    absl::Duration default_ack_timeout = absl::Seconds(30);
    // Ready entries per group held in memory. Default: 4096.
    size_t ready_window = 4096;
    // Most deliveries, acks and nacks written by one step. Default: 4096.
    size_t step_limit = 4096;
    // Most bytes (DeliveryBytes) handed to a stream and not yet reported
    // written: a stream at or past it gets nothing more until it writes.
    // A stream below it may get one delivery that takes it past, so that
    // a delivery larger than the limit still goes out. Default: 16 MiB.
    size_t max_unsent_bytes = size_t{16} << 20;
    // Most groups of one topic (each group multiplies every later message
    // of the topic): registering one more is RESOURCE_EXHAUSTED. 0: no
    // limit. Default: 64.
    size_t max_groups_per_topic = 64;
    // A stream holding unsent deliveries that reports nothing written for
    // this long is ended (Consumer::Abort, DEADLINE_EXCEEDED) and its
    // deliveries go back to its group at once. Default: 60 s.
    absl::Duration stall_timeout = absl::Seconds(60);
  };

  // Recovers the registered groups and every in-flight delivery (deliveries
  // that were with a consumer are due again at once: their streams are
  // gone). Reads the group registry and the inflight table, which consumer
  // credit bounds, never the backlog.
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
  // the group existed), RESOURCE_EXHAUSTED if the topic has
  // Options::max_groups_per_topic groups, or the store's error; it runs on
  // the commit queue's thread or at once on this one, and must not block.
  void RegisterGroup(std::string topic, std::string group,
                     absl::AnyInvocable<void(absl::Status) &&> done);
  // The same, but ALREADY_EXISTS if the group exists or is being
  // registered (Admin.CreateGroup).
  void CreateGroup(std::string topic, std::string group,
                   absl::AnyInvocable<void(absl::Status) &&> done);
  // RegisterGroup, waiting for the answer. Blocks: not for the commit thread.
  absl::Status RegisterGroup(std::string_view topic, std::string_view group);

  // ---- Consumers.

  using ConsumerId = uint64_t;
  struct SubscribeOptions {
    std::string topic;
    std::string group;
    // Credit; 0 means Options::default_max_in_flight.
    uint32_t max_in_flight = 0;
    // Zero means Options::default_ack_timeout. REQUIRES: not negative.
    absl::Duration ack_timeout = absl::ZeroDuration();
    // Whether subscribing may register the group if it does not exist.
    bool may_create_group = true;
  };

  // Adds `consumer` to its group, registering the group first if needed
  // and allowed. `done` gets the consumer's id, or UNAVAILABLE after
  // Shutdown, NOT_FOUND for a group that does not exist and may not be
  // created, RESOURCE_EXHAUSTED past Options::max_groups_per_topic, or the
  // store's error; it runs on the commit queue's thread or at once on this
  // one, and must not block.
  void Subscribe(SubscribeOptions options, std::shared_ptr<Consumer> consumer,
                 absl::AnyInvocable<void(absl::StatusOr<ConsumerId>) &&> done);

  // Removes a consumer; its unacknowledged deliveries go back to its group
  // at once, to be delivered again (attempt + 1). Unknown ids are ignored.
  void Unsubscribe(ConsumerId id);

  // Acknowledges deliveries of the consumer by message id. Returns how many
  // ids were not in flight on it; those are ignored.
  size_t Ack(ConsumerId id, absl::Span<const std::string_view> message_ids);

  // The consumer's stream wrote `deliveries` of what it was sent, of
  // `bytes` (DeliveryBytes) in all, to the network: they leave its outbox.
  // (Their ack timeouts ran from the hand-over; a stream that reports
  // nothing for Options::stall_timeout while it holds unsent deliveries is
  // ended.) Unknown ids are ignored.
  void Written(ConsumerId id, size_t deliveries, size_t bytes);

  // Takes a delivery back from the consumer, to be delivered again once
  // `delay` has passed (at once if it is not positive). Returns false, and
  // changes nothing, if the id is not in flight on the consumer.
  bool Nack(ConsumerId id, std::string_view message_id, absl::Duration delay);

  // ---- Admin work. It runs in the dispatcher's steps, a chunk (a store
  // write) at a time, between deliveries; `done` runs on the dispatcher's
  // thread and must not block.

  using CountCallback = absl::AnyInvocable<void(absl::StatusOr<uint64_t>) &&>;

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
  // write. NOT_FOUND, and nothing moves, if an id is not a dead letter of the
  // topic. A letter whose id is pending in `topic` again stays where it is.
  // `done` gets how many moved.
  void Redrive(std::string topic, std::vector<std::string> ids,
               CountCallback done);

  // ---- The scheduler's side: messages coming due.

  // Adds to `batch` the ready entries of `due` (one per group of each
  // message's topic, or one in the topic's waiting area if it has no group)
  // and returns a ticket for EndDispatch. Between the two, the entries are
  // pending: the dispatcher never reads them from the store.
  uint64_t BeginDispatch(const std::vector<ScheduledEntry>& due,
                         Changes& changes);
  // Ends the dispatch of `ticket`; `written`: the batch is durable.
  void EndDispatch(uint64_t ticket, bool written);

  // ---- The dispatcher's own work.

  // Runs one step at the clock's now: redeliveries whose time came, acks,
  // nacks, ready-window refills, and deliveries to consumers with credit,
  // as two store writes (see above). Returns when it wants to run again
  // (earlier if new work arrives), or the store's error: deliveries, nacks
  // and dead letters are undone and retried by the next step; acks, whose
  // consumers are already released from them, are written again by it.
  absl::StatusOr<absl::Time> Step();

  // Runs Step on a thread of the dispatcher's own until Shutdown or
  // destruction, sleeping until the time it returns or until new work.
  // After a failed step (the store's error) it waits kRetryDelay, whatever
  // arrives meanwhile, and tries again.
  void Start();

  // How long the thread waits after a failed step.
  static constexpr absl::Duration kRetryDelay = absl::Milliseconds(100);

  // Stops the thread, ends every consumer's stream with `status`, and
  // refuses new subscriptions with it. Idempotent.
  void Shutdown(absl::Status status);

  // ---- Introspection.

  struct GroupInfo {
    std::string topic;
    std::string group;
    absl::Time created_at;
    size_t in_flight = 0;  // Deliveries not yet acknowledged.
    size_t consumers = 0;  // Connected streams.
    bool owns_waiting_area = false;
  };
  // Every group, by topic and name.
  std::vector<GroupInfo> Groups();
  // What Open found.
  struct Recovery {
    size_t groups = 0;
    size_t due_again = 0;  // In-flight deliveries due again at once.
    size_t waiting = 0;    // In-flight deliveries waiting out a nack.
  };
  const Recovery& recovery() const { return recovery_; }
  // Ack and nack ids that were not in flight on their consumer.
  uint64_t unknown_acks();

 private:
  struct Group;
  struct ConsumerState;
  struct InFlight;
  struct Assignment;
  struct Finished;
  struct StepWork;
  struct PendingDispatch;
  struct Task;
  struct TaskChunk;

  Dispatcher(storage::MessageStore* store, storage::CommitQueue* commits,
             Publisher* publisher, Clock* clock, Activity* activity,
             Options options);

  absl::Status Recover();
  void Register(std::string topic, std::string group, bool must_be_new,
                absl::AnyInvocable<void(absl::Status) &&> done);
  // Decides whether a new group takes its topic's waiting area and queues
  // its registration, both under the lock.
  void SubmitRegistrationLocked(std::string topic, std::string group,
                                absl::AnyInvocable<void(absl::Status) &&> done)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Group* FindGroupLocked(std::string_view topic, std::string_view group)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // RESOURCE_EXHAUSTED if `topic` has Options::max_groups_per_topic
  // groups, counting those being registered; else nullopt.
  std::optional<absl::Status> CheckGroupLimitLocked(const std::string& topic)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Group* AddGroupLocked(const std::string& topic, const std::string& group,
                        absl::Time created_at, bool owns_waiting_area,
                        bool queue_empty) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The group that takes ready entries of `topic`'s waiting area, if any.
  Group* WaitingAreaOwnerLocked(const std::string& topic)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // A step; without `deliver` it only writes acks and nacks.
  absl::StatusOr<absl::Time> StepImpl(bool deliver);
  // Step's parts, in order.
  void ExpireTimersLocked(int64_t now_ms) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RefillLocked(Group& group) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status TakeFinishedLocked(StepWork& work)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status TakeDeliveriesLocked(int64_t now_ms, StepWork& work)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves the step's acks from work.finished to work.acked and adds their
  // deletes to `batch`.
  void BuildAckBatch(StepWork& work, Changes& changes);
  // The rest of the step's changes: nacks, deliveries, dead letters.
  absl::Status BuildBatch(int64_t now_ms, StepWork& work, Changes& changes);
  // Waits for the step's ack write, if one is in progress; its status. A
  // failed batch is kept in unwritten_acks_ for the next step.
  absl::Status FinishAckWrite();
  void CommitStepLocked(StepWork& work) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UndoStepLocked(StepWork& work) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Puts a delivery of the step back where TakeDeliveriesLocked took it
  // from: its window or the redeliverable set, with its attempt as it was.
  void UndoDeliveryLocked(Assignment& a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Whether a group of `group`'s topic other than `group` still holds the
  // message due at `key` (ready, in flight, or with an ack not yet
  // written). Groups being deleted hold nothing. May read the store.
  absl::StatusOr<bool> HeldElsewhereLocked(const Group& group,
                                           const storage::DueKey& key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The same for any topic, not counting `except` nor the ready entries in
  // `removing` ((stored-under name, sequence) pairs).
  absl::StatusOr<bool> HeldLocked(
      const std::string& topic, const storage::DueKey& key, const Group* except,
      const absl::flat_hash_set<std::pair<std::string, uint64_t>>* removing)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Admin tasks (dispatcher_tasks.cc). RunTask does one chunk of the first
  // task: true if it did something.
  absl::StatusOr<bool> RunTask();
  absl::Status BuildChunkLocked(Task& task, TaskChunk& chunk)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status PurgeChunkLocked(Task& task, TaskChunk& chunk)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status DeleteGroupChunkLocked(Task& task, TaskChunk& chunk)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RedriveChunkLocked(Task& task, TaskChunk& chunk)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reads up to `limit` ready keys of (topic, stored_under) from the task's
  // position and removes them: from the store (in the chunk's batch) and
  // from the window holding them. Returns how many were read.
  absl::StatusOr<size_t> RemoveReadyLocked(Task& task, TaskChunk& chunk,
                                           const std::string& stored_under,
                                           Group* holder, size_t limit)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Deletes the message due at `key` of `topic` in the chunk unless a group
  // still holds it or it is gone. True if it was deleted.
  absl::StatusOr<bool> DeleteIfUnheldLocked(const std::string& topic,
                                            const storage::DueKey& key,
                                            const Group* except,
                                            TaskChunk& chunk)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UndoChunkLocked(TaskChunk& chunk) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Timers of in-flight entries (ack timeouts, nack delays).
  void SetTimerLocked(Group& group, InFlight& entry, int64_t due_ms)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ClearTimerLocked(InFlight& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes `entry` from its consumer (if any) and makes it due again at once.
  void MakeRedeliverableLocked(Group& group, InFlight& entry)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseFromOwnerLocked(InFlight& entry)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Logs consumers that hold their whole credit and have not acked for
  // kStuckAfter, once per such episode.
  void ReportStuckConsumersLocked(absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static constexpr absl::Duration kStuckAfter = absl::Seconds(60);

  // Removes a consumer: its deliveries go back to its group at once.
  // Returns its sink.
  std::shared_ptr<Consumer> RemoveConsumerLocked(ConsumerState& consumer)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves the consumer's stall deadline: Options::stall_timeout from `now`
  // while it has unsent deliveries, none otherwise.
  void UpdateStallDeadlineLocked(ConsumerState& consumer, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes the consumers whose stall deadline passed by `now`, logging
  // each; returns their sinks and statuses, to Abort outside the lock.
  std::vector<std::pair<std::shared_ptr<Consumer>, absl::Status>>
  RemoveStalledConsumersLocked(absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void WakeLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { wake_ = true; }
  void Run();

  Recovery recovery_;  // Constant after Open.

  // Constant after construction.
  storage::MessageStore* const store_;
  storage::CommitQueue* const commits_;
  Publisher* const publisher_;
  Clock* const clock_;
  Activity* const activity_;
  const Options options_;

  // Only the stepping thread (Step's caller) touches these. A step writes
  // its acks on ack_writer_'s thread while it reads and writes its
  // deliveries, and waits for both before it returns. An ack batch whose
  // write failed is written again, unchanged, by the next step: its
  // decisions (which ack deletes a message) stand, and later steps rely on
  // them, so the acks are never taken back.
  std::unique_ptr<BackgroundWrite> ack_writer_;
  storage::WriteBatch unwritten_acks_;

  absl::Mutex mu_;
  // Groups by topic, then name.
  std::map<std::string, std::map<std::string, std::unique_ptr<Group>>> topics_
      ABSL_GUARDED_BY(mu_);
  // Registrations being written: (topic, group) -> callers waiting.
  std::map<std::pair<std::string, std::string>,
           std::vector<absl::AnyInvocable<void(absl::Status) &&>>>
      registering_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<ConsumerId, std::unique_ptr<ConsumerState>> consumers_
      ABSL_GUARDED_BY(mu_);
  // Consumers with unsent deliveries, by when they count as stalled
  // (ConsumerState::stall_deadline).
  std::set<std::pair<absl::Time, ConsumerId>> stall_deadlines_
      ABSL_GUARDED_BY(mu_);
  ConsumerId next_consumer_id_ ABSL_GUARDED_BY(mu_) = 1;
  // Admin work, in arrival order; the first runs.
  std::deque<std::unique_ptr<Task>> tasks_ ABSL_GUARDED_BY(mu_);
  // Groups with acks or nacks to write, in arrival order.
  std::vector<Finished> finished_ ABSL_GUARDED_BY(mu_);
  // Timers of in-flight entries; the wheel's value is a token, mapped here
  // to its entry.
  TimingWheel timers_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, std::pair<Group*, uint64_t>> timer_targets_
      ABSL_GUARDED_BY(mu_);
  uint64_t next_token_ ABSL_GUARDED_BY(mu_) = 1;
  // Dispatches between BeginDispatch and EndDispatch, by ticket; and the
  // sequences of their messages, whose ready keys (in every group: a
  // message comes due once) refills and tasks skip.
  absl::flat_hash_map<uint64_t, std::vector<PendingDispatch>> dispatching_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<uint64_t> pending_ready_ ABSL_GUARDED_BY(mu_);
  uint64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t unknown_acks_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_stuck_check_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // Rotates the group served first by each step.
  size_t next_group_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<absl::Status> shutdown_ ABSL_GUARDED_BY(mu_);
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  std::thread thread_;
};

}  // namespace hourglass::broker

#endif  // HOURGLASS_BROKER_DISPATCHER_H_
