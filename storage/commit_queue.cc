#include "storage/commit_queue.h"

#include <pthread.h>

#include <utility>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"

namespace hourglass::storage {

CommitQueue::CommitQueue(MessageStore* store, Options options)
    : store_(store),
      options_(options),
      completer_([this] {
        // Thread names show in top -H, perf and gdb (at most 15 chars).
        pthread_setname_np(pthread_self(), "hg-commit-done");
        Complete();
      }),
      syncer_([this] {
        pthread_setname_np(pthread_self(), "hg-commit-sync");
        Sync();
      }),
      writer_([this] {
        pthread_setname_np(pthread_self(), "hg-commit-write");
        Run();
      }) {}

CommitQueue::~CommitQueue() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  writer_.join();  // Everything submitted is written...
  {
    absl::MutexLock lock(&sync_mu_);
    writer_done_ = true;
  }
  syncer_.join();  // ...synced where it needs to be...
  {
    absl::MutexLock lock(&completion_mu_);
    syncer_done_ = true;
  }
  completer_.join();  // ...and every callback has run.
}

void CommitQueue::Submit(WriteBatch batch, Callback done) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(Pending{std::move(batch), std::move(done)});
}

absl::Status CommitQueue::Commit(WriteBatch batch) {
  absl::Notification written;
  absl::Status result;
  Submit(std::move(batch), [&](absl::Status status) {
    result = std::move(status);
    written.Notify();
  });
  written.WaitForNotification();
  return result;
}

absl::Status CommitQueue::WriteDirect(const WriteBatch& batch) {
  if (batch.needs_sync()) {
    return absl::InternalError(
        "CommitQueue::WriteDirect of a batch that needs a sync; Submit it");
  }
  const absl::Time start = absl::Now();
  const absl::Status status = store_->Write(batch);
  if (options_.on_write) {
    options_.on_write({1, batch.ByteSize(), absl::Now() - start, status});
  }
  absl::MutexLock lock(&mu_);
  ++stats_.groups;
  ++stats_.batches;
  return status;
}

CommitQueue::Stats CommitQueue::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void CommitQueue::Run() {
  while (true) {
    WriteBatch group;
    // The callbacks of the group's batches that need a sync, and of those
    // that do not: only the first wait for the syncer.
    Written synced, unsynced;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](CommitQueue* q) ABSL_EXCLUSIVE_LOCKS_REQUIRED(q->mu_) {
            return q->stopping_ || !q->queue_.empty();
          },
          this));
      if (queue_.empty()) return;  // Stopping, and everything is written.
      do {
        Pending& next = queue_.front();
        (next.batch.needs_sync() ? synced : unsynced)
            .callbacks.push_back(std::move(next.done));
        group.Append(std::move(next.batch));
        queue_.pop_front();
      } while (!queue_.empty() &&
               group.ByteSize() + queue_.front().batch.ByteSize() <=
                   options_.max_group_bytes);
      ++stats_.groups;
      stats_.batches += synced.callbacks.size() + unsynced.callbacks.size();
    }
    // Batches that each count a message change each counter once.
    if (synced.callbacks.size() + unsynced.callbacks.size() > 1) {
      group.CombineAdds();
    }
    const absl::Time start = absl::Now();
    const absl::Status status = store_->Write(group);
    if (options_.on_write) {
      options_.on_write({synced.callbacks.size() + unsynced.callbacks.size(),
                         group.ByteSize(), absl::Now() - start, status});
    }
    synced.status = unsynced.status = status;
    if (!unsynced.callbacks.empty()) ToCompleter(std::move(unsynced));
    if (synced.callbacks.empty()) continue;
    if (!status.ok()) {
      ToCompleter(std::move(synced));
      continue;
    }
    // The sync is the syncer's: the next group's write need not wait for
    // it.
    absl::MutexLock lock(&sync_mu_);
    awaiting_sync_.push_back(std::move(synced));
  }
}

void CommitQueue::Sync() {
  while (true) {
    std::deque<Written> groups;
    {
      absl::MutexLock lock(&sync_mu_);
      sync_mu_.Await(absl::Condition(
          +[](CommitQueue* q) ABSL_EXCLUSIVE_LOCKS_REQUIRED(q->sync_mu_) {
            return q->writer_done_ || !q->awaiting_sync_.empty();
          },
          this));
      if (awaiting_sync_.empty()) return;  // The writer stopped; all synced.
      groups.swap(awaiting_sync_);
    }
    // One sync covers every group written so far.
    const absl::Time start = absl::Now();
    const absl::Status status = store_->SyncLog();
    size_t batches = 0;
    for (const Written& group : groups) batches += group.callbacks.size();
    if (options_.on_sync) {
      options_.on_sync({batches, absl::Now() - start, status});
    }
    {
      absl::MutexLock lock(&mu_);
      ++stats_.syncs;
    }
    for (Written& group : groups) {
      group.status = status;
      ToCompleter(std::move(group));
    }
  }
}

void CommitQueue::ToCompleter(Written written) {
  absl::MutexLock lock(&completion_mu_);
  written_.push_back(std::move(written));
}

void CommitQueue::Complete() {
  while (true) {
    Written next;
    {
      absl::MutexLock lock(&completion_mu_);
      completion_mu_.Await(absl::Condition(
          +[](CommitQueue* q) ABSL_EXCLUSIVE_LOCKS_REQUIRED(q->completion_mu_) {
            return q->syncer_done_ || !q->written_.empty();
          },
          this));
      if (written_.empty()) return;  // The syncer stopped; all ran.
      next = std::move(written_.front());
      written_.pop_front();
    }
    for (Callback& done : next.callbacks) std::move(done)(next.status);
  }
}

}  // namespace hourglass::storage
