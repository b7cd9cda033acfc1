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
// Any thread submits a batch with a callback and goes on; one writer thread
// takes everything queued and writes it as one MessageStore::Write (so one
// WAL write and, with sync durability, one fsync serve every caller). A
// second thread runs the callbacks, in submission order, with the result,
// while the writer goes on with the next group. Batches of a group succeed
// or fail together; each is still atomic on its own, and a failed group is
// as MessageStore::Write describes: not visible, durability unknown if the
// log sync failed.
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
    absl::Duration latency;  // The Write, log sync included.
    absl::Status status;
  };

  struct Options {
    // A group stops growing once it holds this many bytes of keys and
    // values (a single larger batch still goes alone). Default: 16 MiB.
    size_t max_group_bytes = size_t{16} << 20;
    // Called on the writer thread after each group's write, before its
    // callbacks. Must not block. Default: none.
    std::function<void(const WriteInfo&)> on_write;
  };

  // REQUIRES: `store` outlives the queue.
  explicit CommitQueue(MessageStore* store) : CommitQueue(store, Options()) {}
  CommitQueue(MessageStore* store, Options options);

  CommitQueue(const CommitQueue&) = delete;
  CommitQueue& operator=(const CommitQueue&) = delete;

  // Writes everything already submitted, runs its callbacks, then stops.
  ~CommitQueue();

  // Queues `batch`; `done` runs on the writer thread once it is durable or
  // failed, with MessageStore::Write's status.
  void Submit(WriteBatch batch, Callback done);

  // Submits `batch` and waits for its status.
  absl::Status Commit(WriteBatch batch);

  struct Stats {
    uint64_t groups = 0;   // MessageStore::Write calls.
    uint64_t batches = 0;  // Batches written in them.
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
  void Complete();

  MessageStore* const store_;
  const Options options_;

  mutable absl::Mutex mu_;
  std::deque<Pending> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  Stats stats_ ABSL_GUARDED_BY(mu_);

  absl::Mutex completion_mu_;
  std::deque<Written> written_ ABSL_GUARDED_BY(completion_mu_);
  bool writer_done_ ABSL_GUARDED_BY(completion_mu_) = false;

  // Last: they start after everything above exists.
  std::thread completer_;
  std::thread writer_;
};

}  // namespace hourglass::storage

#endif  // HOURGLASS_STORAGE_COMMIT_QUEUE_H_
