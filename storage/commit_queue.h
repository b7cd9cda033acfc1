#ifndef HOURGLASS_STORAGE_COMMIT_QUEUE_H_
#define HOURGLASS_STORAGE_COMMIT_QUEUE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "storage/message_store.h"

namespace hourglass::storage {

// Group commit in front of a MessageStore.
//
// Any thread submits a batch with a callback and goes on. Three threads
// serve the queue, as a pipeline:
//  - the writer takes everything queued and writes it as one
//    MessageStore::Write (one log write serves every caller, and the
//    group's Adds to one counter become one: WriteBatch::CombineAdds),
//    which does not sync;
//  - the syncer, for groups holding a batch that needs_sync(), syncs the
//    log with MessageStore::SyncLog: one sync serves every group written
//    before it, and the writer goes on writing meanwhile, so batches that
//    need no sync (dispatches, deliveries, acks) never wait for an fsync;
//  - the completer runs the callbacks with each batch's result.
// Groups reach the store in submission order, so whatever a crash keeps is
// a prefix of what was submitted. Callbacks of batches that need a sync run
// in submission order, and so do those of batches that do not; a batch
// that needs no sync completes once written, even before an earlier batch
// (of its own group or not) that waits for its sync. Batches of a group succeed
// or fail together; each is still atomic on its own, and a failed group is as
// MessageStore::Write and SyncLog describe: after a failed write not visible,
// after a failed sync visible but of unknown durability.
//
// Thread-safe. Callbacks run on the completion thread, one at a time, and
// must not wait on the queue (for example by calling Commit).
class CommitQueue {
 public:
  using Callback = absl::AnyInvocable<void(absl::Status) &&>;

  // One MessageStore::Write of a group, for metrics.
  struct WriteInfo {
    size_t batches = 0;
    size_t bytes = 0;
    absl::Duration latency;  // The Write, without a log sync.
    absl::Status status;
  };
  // One MessageStore::SyncLog, for metrics.
  struct SyncInfo {
    size_t batches = 0;  // Batches that waited for it.
    absl::Duration latency;
    absl::Status status;
  };

  struct Options {
    // A group stops growing once it holds this many bytes of keys and
    // values (a single larger batch still goes alone). Default: 16 MiB.
    size_t max_group_bytes = size_t{16} << 20;
    // Called on the writer thread after each group's write (and on the
    // caller's after a WriteDirect), and on the syncer thread after each
    // log sync, before their callbacks. Must be thread-safe and must not
    // block. Default: none.
    std::function<void(const WriteInfo&)> on_write;
    std::function<void(const SyncInfo&)> on_sync;
  };

  // REQUIRES: `store` outlives the queue.
  explicit CommitQueue(MessageStore* store) : CommitQueue(store, Options()) {}
  CommitQueue(MessageStore* store, Options options);

  CommitQueue(const CommitQueue&) = delete;
  CommitQueue& operator=(const CommitQueue&) = delete;

  // Writes everything already submitted, runs its callbacks, then stops.
  ~CommitQueue();

  // Queues `batch`; `done` runs on the completion thread once it is
  // written (and, if it needs_sync(), the log synced) or failed, with the
  // status of the MessageStore::Write or SyncLog that failed.
  void Submit(WriteBatch batch, Callback done);

  // Runs `done` as Submit does once everything submitted before is written
  // and the log synced (an empty batch that needs a sync), with that
  // outcome. For an answer read from the store rather than written: what
  // it read may be visible before it is durable (or, in a cluster,
  // acknowledged by the backups), and the answer must not promise what a
  // crash or a failover could take back.
  void SubmitBarrier(Callback done) { Submit(WriteBatch(), std::move(done)); }

  // Submits `batch` and waits for its status.
  absl::Status Commit(WriteBatch batch);

  // Writes `batch`, which needs no sync, on the caller's thread instead of
  // through the queue, and returns the MessageStore::Write's status. For a
  // caller that would wait for the write anyway: it skips the hand-offs to
  // the writer and completion threads and the wait behind queued groups,
  // and the store may write it beside the writer's group. It lands after
  // every batch whose callback ran before the call, and before every batch
  // submitted after it returns; batches still queued meanwhile may land on
  // either side, so it must not depend on them. Counts as a group in
  // stats(), and calls Options::on_write (from the caller's thread). A
  // batch that needs a sync is refused with INTERNAL and not written.
  absl::Status WriteDirect(const WriteBatch& batch);

  struct Stats {
    uint64_t groups = 0;   // MessageStore::Write calls.
    uint64_t batches = 0;  // Batches written in them.
    uint64_t syncs = 0;    // MessageStore::SyncLog calls.
  };
  Stats stats() const;

 private:
  struct Pending {
    WriteBatch batch;
    Callback done;
  };

  // A written group's callbacks and its status.
  struct Written {
    absl::Status status;
    std::vector<Callback> callbacks;
  };

  void Run();
  void Sync();
  void Complete();
  void ToCompleter(Written written);

  MessageStore* const store_;
  const Options options_;

  mutable absl::Mutex mu_;
  std::deque<Pending> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  Stats stats_ ABSL_GUARDED_BY(mu_);

  absl::Mutex sync_mu_;
  std::deque<Written> awaiting_sync_ ABSL_GUARDED_BY(sync_mu_);
  bool writer_done_ ABSL_GUARDED_BY(sync_mu_) = false;

  absl::Mutex completion_mu_;
  std::deque<Written> written_ ABSL_GUARDED_BY(completion_mu_);
  bool syncer_done_ ABSL_GUARDED_BY(completion_mu_) = false;

  // Last: they start after everything above exists.
  std::thread completer_;
  std::thread syncer_;
  std::thread writer_;
};

}  // namespace hourglass::storage

#endif  // HOURGLASS_STORAGE_COMMIT_QUEUE_H_
