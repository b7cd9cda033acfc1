#ifndef HOURGLASS_BROKER_ENGINE_H_
#define HOURGLASS_BROKER_ENGINE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "broker/clock.h"
#include "broker/scheduler.h"
#include "storage/commit_queue.h"
#include "storage/message_store.h"

namespace hourglass::broker {

// A message to publish, already validated (api/validation.h).
struct NewMessage {
  std::string topic;
  std::string id;  // Idempotency key; empty: the engine assigns one.
  std::string payload;
  std::map<std::string, std::string> headers;
  // Whole milliseconds. The engine moves a time in the past (by its clock)
  // to now, and the receipt says when the message is due.
  absl::Time deliver_at;
};

struct PublishReceipt {
  std::string id;
  absl::Time deliver_at;
  bool duplicate = false;

  friend bool operator==(const PublishReceipt&,
                         const PublishReceipt&) = default;
};

// The broker's engine: stores published messages, cancels them, and moves
// them to the ready state of every group of their topic when they come due.
// See storage/README.md for the keys of each state.
//
// Thread-safe. Publish and Cancel may be called from any thread and answer
// through callbacks run on the store's commit thread; Tick is the timer
// thread's step (Start runs it on a thread of the engine's own).
class Engine {
 public:
  struct Options {
    Scheduler::Options scheduler;
    // Due messages moved to ready per store write. Default: 4096.
    size_t dispatch_batch = 4096;
    // Called on the timer thread after due messages became ready, durably,
    // with them in due order; for handing them to consumers. Must not
    // block. Default: none.
    std::function<void(const std::vector<ScheduledEntry>&)> on_dispatched;
  };

  using PublishCallback =
      absl::AnyInvocable<void(absl::StatusOr<std::vector<PublishReceipt>>) &&>;
  using CancelCallback = absl::AnyInvocable<void(absl::Status) &&>;

  // Recovers from `store`: the publish sequence, the registered groups and
  // the loader cursor. Reads nothing proportional to the pending messages.
  // REQUIRES: `store` and `clock` outlive the engine.
  static absl::StatusOr<std::unique_ptr<Engine>> Open(
      storage::MessageStore* store, Clock* clock, Options options);

  // Stops the timer thread, if started, and writes what is queued.
  ~Engine();

  // Stores every message durably, or none. `done` gets one receipt per
  // message in order: an id already pending in the topic (or earlier in
  // this batch) gets the first message's receipt with `duplicate` set, and
  // nothing new is stored for it. Errors: ABORTED if a publish with one of
  // the ids is still in progress (retry); the store's error
  // (RESOURCE_EXHAUSTED when the disk is full, UNAVAILABLE) if the write
  // failed: nothing becomes visible, but if the log sync failed the batch
  // may reappear after a restart (MessageStore::Write), so producers that
  // retry should set ids.
  void Publish(std::vector<NewMessage> messages, PublishCallback done);

  // Cancels a message that is scheduled and not yet due. NOT_FOUND if there
  // is no such message (unknown id, already due, cancelled or acked);
  // ABORTED if a publish or cancel of it is still being written (retry);
  // otherwise the store's status. A cancel that wins never sees the
  // message dispatched; one that loses the race with its due time changes
  // nothing.
  void Cancel(std::string topic, std::string id, CancelCallback done);

  // One step of the timer thread: extends the loaded horizon by at most one
  // chunk and moves every due message to ready, durably, in due order.
  // Returns when it wants to run again (earlier if Wake is called).
  absl::StatusOr<absl::Time> Tick();

  // Runs Tick on a thread of the engine's own until destruction, sleeping
  // until the time it returns or until new work arrives.
  void Start();

  // Registers a consumer group (durably); due messages of its topic reach
  // it from then on. Idempotent.
  absl::Status RegisterGroup(std::string_view topic, std::string_view group);

  Scheduler& scheduler() { return scheduler_; }

 private:
  Engine(storage::MessageStore* store, Clock* clock, Options options,
         uint64_t next_sequence,
         std::map<std::string, std::set<std::string>> groups);

  absl::Status Dispatch(const std::vector<ScheduledEntry>& due);
  // Takes `count` publish sequences. Each run reserves them durably in
  // blocks (meta/sequence_reserved), so that a sequence, and the id
  // assigned from it, is never used twice, even after its message is gone.
  absl::StatusOr<uint64_t> TakeSequences(uint64_t count);
  void Wake();
  void RunTimer();

  storage::MessageStore* const store_;
  Clock* const clock_;
  const Options options_;
  Scheduler scheduler_;
  absl::Mutex sequence_mu_;
  uint64_t next_sequence_ ABSL_GUARDED_BY(sequence_mu_);
  uint64_t reserved_until_ ABSL_GUARDED_BY(sequence_mu_);

  absl::Mutex mu_;
  // (topic, id) of producer-keyed publishes in progress.
  absl::flat_hash_set<std::pair<std::string, std::string>> publishing_ids_
      ABSL_GUARDED_BY(mu_);
  // Registered groups by topic.
  std::map<std::string, std::set<std::string>> groups_ ABSL_GUARDED_BY(mu_);
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  // Destroyed before the state above: its destructor runs the callbacks of
  // queued writes, which use the scheduler and mu_.
  storage::CommitQueue commits_;
  std::thread timer_;
};

}  // namespace hourglass::broker

#endif  // HOURGLASS_BROKER_ENGINE_H_
