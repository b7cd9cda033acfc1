#ifndef HOURGLASS_TESTS_TESTING_FAULTY_STORE_H_
#define HOURGLASS_TESTS_TESTING_FAULTY_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "storage/memory_store.h"
#include "storage/message_store.h"
#include "tests/testing/forwarding_store.h"

namespace hourglass::testing {

// A MessageStore in memory whose writes fail, and whose log syncs fail or
// stall, on demand, the way RocksDB's do (storage/rocksdb_store.cc):
//
//  - A failed write (FailWrites) applies nothing, and the store takes
//    writes again once the fault is cleared: a full disk
//    (RESOURCE_EXHAUSTED; RocksDB resumes once space returns) or another
//    I/O error (UNAVAILABLE).
//  - A failed log sync (FailSyncs) fails a SyncLog: what was written
//    stays visible, and a restart of the process (Restart) finds what
//    reached the log, or not. From then on every write and sync fails, as
//    RocksDB refuses writes after a failed WAL sync until the process
//    restarts.
//  - A slow sync (SetSyncLatency, HoldSyncs) delays SyncLog, and with it
//    whoever waits for durability (the commit queue's syncer thread, so
//    publishes); writes go on meanwhile, as next to a slow fsync.
//
// Thread-safe.
class FaultyStore final : public ForwardingStore {
 public:
  // Which writes a FailWrites fault hits, by the batch written (for a
  // group commit, the group's merged batch).
  using Filter = std::function<bool(const storage::WriteBatch&)>;
  // The writes that need no sync (dispatch, deliveries, acks, nacks, dead
  // letters), as opposed to publishes, cancels, group registrations and
  // admin changes. A group commit needs a sync if any batch in it does.
  static bool Unsynced(const storage::WriteBatch& b) { return !b.needs_sync(); }

  // Every Write from now on returns `status` (OK clears the fault). With
  // `after`, the next `after` writes still succeed first.
  void FailWrites(absl::Status status, int after = 0) {
    FailWritesIf(nullptr, std::move(status), after);
  }
  // The same for the writes that `which` selects (null: all); the others
  // succeed. Writes not selected do not count against `after`.
  void FailWritesIf(Filter which, absl::Status status, int after = 0) {
    absl::MutexLock lock(&mu_);
    failure_ = std::move(status);
    which_ = std::move(which);
    successes_before_failure_ = after;
  }

  // The next SyncLog fails with `status` (UNAVAILABLE, as an fsync's I/O
  // error); every later write and sync fails with it too, until Restart.
  // `in_log`: a restart finds what was written from now until the failed
  // sync (the log was written, only its sync failed); otherwise a restart
  // finds the store as it is now, as if the log had been lost from here.
  void FailSyncs(absl::Status status, bool in_log = true) {
    std::unique_ptr<storage::MessageStore> durable =
        in_log ? nullptr : Copy(inner());
    absl::MutexLock lock(&mu_);
    sync_failure_ = std::move(status);
    sync_failed_ = false;
    durable_ = std::move(durable);
  }

  // What a restart of the process finds (see FailSyncs); the sync fault
  // ends (FailWrites faults and slow syncs stay). REQUIRES: nothing uses
  // the store during the call (the engine on it is gone).
  void Restart() {
    std::unique_ptr<storage::MessageStore> durable;
    {
      absl::MutexLock lock(&mu_);
      durable = std::move(durable_);
      sync_failure_ = absl::OkStatus();
      sync_failed_ = false;
    }
    if (durable != nullptr) ReplaceInner(std::move(durable));
  }

  // Each SyncLog takes `latency` longer (zero: none).
  void SetSyncLatency(absl::Duration latency) {
    absl::MutexLock lock(&mu_);
    sync_latency_ = latency;
  }

  // SyncLog calls wait from now on until ReleaseSyncs: a stalled fsync,
  // released when the test says.
  void HoldSyncs() {
    absl::MutexLock lock(&mu_);
    holding_ = true;
  }
  void ReleaseSyncs() {
    absl::MutexLock lock(&mu_);
    holding_ = false;
  }
  // Waits until `n` SyncLog calls wait at HoldSyncs; false if `timeout`
  // passes first.
  bool AwaitHeldSyncs(int n, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto held = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return held_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&held), timeout);
  }

  // Writes that `which` selects wait from now on, before they reach the
  // store, until ReleaseWrites: a write in progress, held where the test
  // wants it.
  void HoldWritesIf(Filter which) {
    absl::MutexLock lock(&mu_);
    hold_which_ = std::move(which);
  }
  void ReleaseWrites() {
    absl::MutexLock lock(&mu_);
    hold_which_ = nullptr;
  }
  // Waits until `n` writes wait at HoldWritesIf; false if `timeout` passes
  // first.
  bool AwaitHeldWrites(int n, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto held = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return held_writes_ >= n;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&held), timeout);
  }

  struct Counts {
    uint64_t writes = 0;         // Write calls, failed or not.
    uint64_t synced_writes = 0;  // Those of groups that needed a sync.
    uint64_t failed_writes = 0;  // Those that failed.
    uint64_t syncs = 0;          // SyncLog calls, failed or not.
  };
  Counts counts() {
    absl::MutexLock lock(&mu_);
    return counts_;
  }
  absl::Status Write(const storage::WriteBatch& batch) override {
    {
      absl::MutexLock lock(&mu_);
      if (hold_which_ != nullptr && hold_which_(batch)) {
        ++held_writes_;
        auto released = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return hold_which_ == nullptr;
        };
        mu_.Await(absl::Condition(&released));
        --held_writes_;
      }
      ++counts_.writes;
      if (batch.needs_sync()) ++counts_.synced_writes;
      if (absl::Status s = WriteFaultLocked(batch); !s.ok()) {
        return FailedLocked(std::move(s));
      }
    }
    return ForwardingStore::Write(batch);
  }

  absl::Status SyncLog() override {
    absl::Duration latency;
    {
      absl::MutexLock lock(&mu_);
      ++counts_.syncs;
      ++held_;
      auto released = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !holding_;
      };
      mu_.Await(absl::Condition(&released));
      --held_;
      latency = sync_latency_;
    }
    // The sync, slow or not: outside the lock, so that writes go on and
    // tests may change faults meanwhile.
    if (latency > absl::ZeroDuration()) absl::SleepFor(latency);
    absl::MutexLock lock(&mu_);
    if (!sync_failure_.ok()) {
      sync_failed_ = true;
      return sync_failure_;
    }
    return absl::OkStatus();
  }

 private:
  // The status of a write that fails before reaching the log, or OK.
  absl::Status WriteFaultLocked(const storage::WriteBatch& batch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    // After a failed sync, nothing is written until the restart.
    if (sync_failed_) return sync_failure_;
    if (failure_.ok() || (which_ != nullptr && !which_(batch))) {
      return absl::OkStatus();
    }
    if (successes_before_failure_ > 0) {
      --successes_before_failure_;
      return absl::OkStatus();
    }
    return failure_;
  }

  absl::Status FailedLocked(absl::Status status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ++counts_.failed_writes;
    return status;
  }

  absl::Mutex mu_;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  Filter which_ ABSL_GUARDED_BY(mu_);
  int successes_before_failure_ ABSL_GUARDED_BY(mu_) = 0;

  // A copy of the store: what the log held when the sync fault came.
  static std::unique_ptr<storage::MessageStore> Copy(
      storage::MessageStore& from) {
    std::unique_ptr<storage::MessageStore> copy = storage::MemoryStore::Open();
    storage::WriteBatch batch;
    for (int t = 0; t < storage::kNumTables; ++t) {
      const auto table = static_cast<storage::Table>(t);
      (void)from.Scan(table, "", "",
                      [&](std::string_view key, std::string_view value) {
                        batch.Put(table, std::string(key), std::string(value));
                        return true;
                      });
    }
    (void)copy->Write(batch);  // The memory store cannot fail.
    return copy;
  }

  absl::Status sync_failure_ ABSL_GUARDED_BY(mu_);
  bool sync_failed_ ABSL_GUARDED_BY(mu_) = false;
  // What a restart finds when the log is lost from the sync fault on;
  // null: the store as it is.
  std::unique_ptr<storage::MessageStore> durable_ ABSL_GUARDED_BY(mu_);

  absl::Duration sync_latency_ ABSL_GUARDED_BY(mu_);
  bool holding_ ABSL_GUARDED_BY(mu_) = false;
  int held_ ABSL_GUARDED_BY(mu_) = 0;
  Filter hold_which_ ABSL_GUARDED_BY(mu_);
  int held_writes_ ABSL_GUARDED_BY(mu_) = 0;

  Counts counts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hourglass::testing

#endif  // HOURGLASS_TESTS_TESTING_FAULTY_STORE_H_
