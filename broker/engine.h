#ifndef HOURGLASS_BROKER_ENGINE_H_
#define HOURGLASS_BROKER_ENGINE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
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
#include "broker/activity.h"
#include "broker/broker.h"
#include "broker/clock.h"
#include "broker/dispatcher.h"
#include "broker/due_queue.h"
#include "broker/engine_metrics.h"
#include "broker/inspector.h"
#include "broker/publisher.h"
#include "broker/scheduler.h"
#include "broker/store_health.h"
#include "broker/work_queue.h"
#include "storage/commit_queue.h"
#include "storage/message_store.h"

namespace hourglass::broker {

// The broker's engine: stores published messages, cancels them, moves them
// to the ready state of every group of their topic when they come due, and
// (through its Dispatcher) delivers them to consumers. See
// storage/README.md for the keys of each state.
//
// It owns the parts and their threads: the commit queue (group commit),
// the Scheduler (when messages come due), the Publisher, the Dispatcher
// (groups, consumers, acks) and the timer thread.
//
// It is the Broker (broker.h) that api/ calls. Admin queries run on a
// thread of the engine's own ("hg-admin-reads"), admin tasks that read or
// block on the store on another ("hg-admin-tasks"), so that neither waits
// behind the other and no gRPC thread waits on the store.
//
// Thread-safe. Publish and Cancel may be called from any thread and answer
// through callbacks run on the store's commit thread; Tick is the timer
// thread's step (Start runs it, and the dispatcher's, on threads of the
// engine's own). The accessors of the parts (scheduler(), dispatcher(),
// ...) are for hourglassd's start-up and for tests; clients use Broker.
class Engine final : public Broker {
 public:
  struct Options {
    Scheduler::Options scheduler;
    Dispatcher::Options dispatcher;
    // Due messages moved to ready per store write. Default: 4096.
    size_t dispatch_batch = 4096;
    // Registry for the broker's Prometheus metrics; none by default.
    // REQUIRES: outlives the engine.
    metrics::Registry* metrics = nullptr;
    // Called on the timer thread after due messages became ready, durably,
    // with each chunk (in due order within each topic). Must not block.
    // Default: none.
    std::function<void(const std::vector<ScheduledEntry>&)> on_dispatched;
    // The store-health probe (StoreHealth).
    StoreHealth::Options store_health;
  };

  using PublishCallback = Publisher::Callback;
  using CancelCallback = absl::AnyInvocable<void(absl::Status) &&>;

  // Recovers from `store`: the publish sequence, the loader cursor, the
  // registered groups and the deliveries in flight. Reads nothing
  // proportional to the pending messages.
  // REQUIRES: `store` and `clock` outlive the engine.
  static absl::StatusOr<std::unique_ptr<Engine>> Open(
      storage::MessageStore* store, Clock* clock, Options options);

  // Stops the threads, ends consumer streams (UNAVAILABLE) if Shutdown did
  // not, and writes what is queued.
  ~Engine() override;

  // Stores every message durably, or none. `done` gets one receipt per
  // message in order: an id already pending in the topic (or earlier in
  // this batch) gets the first message's receipt with `duplicate` set, and
  // nothing new is stored for it. Errors: ABORTED if a publish with one of
  // the ids is still in progress (retry); the store's error
  // (RESOURCE_EXHAUSTED when the disk is full, UNAVAILABLE) if the write
  // failed: nothing becomes visible, but if the log sync failed the batch
  // may reappear after a restart (MessageStore::Write), so producers that
  // retry should set ids.
  void Publish(std::vector<NewMessage> messages,
               PublishCallback done) override;

  // Cancels a message that is scheduled and not yet due. NOT_FOUND if there
  // is no such message (unknown id, already due, cancelled or acked);
  // ABORTED if a publish or cancel of it is still being written (retry);
  // otherwise the store's status. A cancel that wins never sees the
  // message dispatched; one that loses the race with its due time changes
  // nothing.
  void Cancel(std::string topic, std::string id,
              CancelCallback done) override;

  // One step of the timer thread: extends the loaded horizon by at most one
  // chunk, takes the messages that came due, and moves one chunk of those
  // waiting (Options::dispatch_batch, shared fairly among topics, in due
  // order within each) to ready, durably. Returns when it wants to run
  // again: now while work is left, else the next due time (earlier if a
  // publish wakes it).
  absl::StatusOr<absl::Time> Tick();

  // Runs Tick on a thread of the engine's own until destruction, sleeping
  // until the time it returns or until new work arrives, and starts the
  // dispatcher's thread.
  void Start();

  // Ends every consumer stream with `status` and refuses new ones; for a
  // graceful stop. Publish and Cancel keep working. Idempotent.
  void Shutdown(absl::Status status) { dispatcher_->Shutdown(status); }

  // Registers a consumer group (durably); due messages of its topic reach
  // it from then on. Idempotent. Blocks for the write.
  absl::Status RegisterGroup(std::string_view topic, std::string_view group) {
    return dispatcher_->RegisterGroup(topic, group);
  }

  // Moves a message that is scheduled and not yet due to `deliver_at`
  // (whole milliseconds; a time in the past means now), atomically: it
  // comes due once, at the new time. NOT_FOUND and ABORTED as Cancel. `done`
  // gets the new receipt; it runs on the commit thread or at once here.
  void Reschedule(std::string topic, std::string id, absl::Time deliver_at,
                  Callback<absl::StatusOr<PublishReceipt>> done) override;

  // ---- Broker: consumers, forwarded to the Dispatcher.
  void Subscribe(SubscribeOptions options, std::shared_ptr<Consumer> consumer,
                 Callback<absl::StatusOr<ConsumerId>> done) override;
  void Unsubscribe(ConsumerId id) override;
  void Ack(ConsumerId id,
           absl::Span<const std::string_view> message_ids) override;
  void Nack(ConsumerId id, std::string_view message_id,
            absl::Duration delay) override;
  void Written(ConsumerId id, size_t deliveries, size_t bytes) override;

  // ---- Broker: admin queries (Inspector) and tasks (engine_admin.cc).
  void Stats(std::optional<std::string> topic,
             Callback<absl::StatusOr<std::vector<TopicStats>>> done) override;
  void ListMessages(ListQuery query,
                    Callback<absl::StatusOr<ListPage>> done) override;
  void GetSchedule(
      ScheduleQuery query,
      Callback<absl::StatusOr<std::vector<ScheduleBucket>>> done) override;
  void GetMessage(std::string topic, std::string id, size_t preview_bytes,
                  Callback<absl::StatusOr<MessageView>> done) override;
  void CreateGroup(std::string topic, std::string group,
                   Callback<absl::StatusOr<absl::Time>> done) override;
  void DeleteGroup(std::string topic, std::string group,
                   Callback<absl::StatusOr<uint64_t>> done) override;
  void Redrive(std::string topic, std::vector<std::string> ids,
               Callback<absl::StatusOr<uint64_t>> done) override;
  void Purge(std::string topic, bool scheduled, bool ready,
             Callback<absl::StatusOr<uint64_t>> done) override;
  void CreateSnapshot(std::string dir,
                      Callback<absl::StatusOr<SnapshotInfo>> done) override;
  BrokerInfo Info() override;

  // Whether the store takes writes; hourglassd watches it for the gRPC
  // health status.
  StoreHealth& store_health() { return *store_health_; }

  // Cancels every scheduled message of `topic`, a chunk (one write) at a
  // time, and returns how many. Messages published meanwhile may or may not
  // be included. Blocks until done: run it on a thread of its own, not a
  // gRPC reaction and not the commit thread.
  absl::StatusOr<uint64_t> PurgeScheduled(const std::string& topic);

  Scheduler& scheduler() { return scheduler_; }
  Inspector& inspector() { return *inspector_; }
  Activity& activity() { return activity_; }
  // Messages that came due and wait to be moved to ready. Timer thread.
  size_t due_backlog() const { return due_.size(); }
  Dispatcher& dispatcher() { return *dispatcher_; }

 private:
  Engine(storage::MessageStore* store, Clock* clock, Options options,
         uint64_t next_sequence);

  absl::Status Dispatch(const std::vector<ScheduledEntry>& chunk);
  // What the metrics gauges show, read at scrape time. Also removes the
  // per-topic totals of topics that are gone (EngineMetrics says when).
  std::optional<EngineMetrics::Snapshot> MetricsSnapshot();
  // Finds the scheduled message (topic, id) and starts changing it
  // (Scheduler::BeginCancel): the accepted change, NOT_FOUND, ABORTED, or
  // the store's error.
  absl::StatusOr<Scheduler::PendingCancel> BeginChange(const std::string& topic,
                                                       const std::string& id);
  void Wake();
  void RunTimer();

  storage::MessageStore* const store_;
  Clock* const clock_;
  const Options options_;
  Scheduler scheduler_;
  Activity activity_;
  EngineMetrics engine_metrics_;
  // Of the store, read once at Open.
  uint32_t format_version_ = 0;
  std::string store_id_;
  // Records the outcome of every write and sync of the commit queue, and
  // probes through it; outlives it. ~Engine stops its probe first.
  std::unique_ptr<StoreHealth> store_health_;
  // Writes of every part go through it. Reset first in the destructor: its
  // destructor runs the callbacks of queued writes, which use the parts.
  std::unique_ptr<storage::CommitQueue> commits_;
  Publisher publisher_;
  std::unique_ptr<Dispatcher> dispatcher_;
  std::unique_ptr<Inspector> inspector_;
  // Only the timer thread (Tick) touches it; metrics read its size here.
  DueQueue due_;
  std::atomic<size_t> due_backlog_{0};

  absl::Mutex mu_;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  std::thread timer_;

  // Admin queries and admin tasks (see the class comment). Last, so that
  // they stop first, while every part their work uses is alive.
  std::unique_ptr<WorkQueue> reads_;
  std::unique_ptr<WorkQueue> tasks_;
};

}  // namespace hourglass::broker

#endif  // HOURGLASS_BROKER_ENGINE_H_
