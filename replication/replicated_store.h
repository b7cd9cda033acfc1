#ifndef HOURGLASS_REPLICATION_REPLICATED_STORE_H_
#define HOURGLASS_REPLICATION_REPLICATED_STORE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "replication/log_entry.h"
#include "replication/log_history.h"
#include "storage/message_store.h"

namespace hourglass::replication {

struct ReplicatedStoreOptions {
  // This primary's epoch. Required (>= 1).
  int64_t epoch = 0;
  // The backups in the in-sync set when the primary starts (the shard
  // record's ISR without the primary).
  std::vector<std::string> in_sync;
  // Fewest members of the in-sync set, the primary counted, with which
  // writes are accepted (--min_insync). Default: 2.
  int min_insync = 2;
  // Bytes of recent entries kept in memory for backups to catch up from; a
  // backup further behind catches up from the store's log of its writes
  // while that holds the entries it lacks (LogHistory), and is rebuilt from
  // a checkpoint otherwise. Default: 64 MiB.
  size_t retain_bytes = 64 << 20;
  // How long a write waits for the in-sync backups before the primary
  // gives up on the epoch (the write fails with UNAVAILABLE and so does
  // every later one). Default: 10 s; the primary's lag monitor removes a
  // silent backup from the in-sync set well before.
  absl::Duration ack_timeout = absl::Seconds(10);
  // The clock the store stamps entries and answers with (when each entry
  // was written, when a backup was last heard). Default: absl::Now; the
  // simulation gives its own. (Write's waits are on the real clock.)
  std::function<absl::Time()> now = absl::Now;
};

// The primary's side of a replicated shard: a MessageStore over the
// shard's own store (`base`) that numbers every write batch as an entry of
// the shard's log, keeps recent entries for the backups' shippers, answers
// a Write only once every backup of the in-sync set has applied the entry,
// and a SyncLog only once they all made every entry written before it
// durable. As the MessageStore contract has it, a Write is visible and a
// SyncLog makes it durable: so a client's write (which the commit queue
// syncs) is acknowledged only when the in-sync set holds it durably, and a
// delivery's in-flight write returns only once the backups of the current
// epoch took it: after a new epoch they refuse it, the write fails, and
// the delivery is never sent (docs/cluster.md "Writing and acknowledging",
// points 3 and 5). The writer does not wait for the backups' fsyncs, only the
// syncer does, so the next group is written and shipped meanwhile.
//
// Each batch is written to `base` with its position keys (log_entry.h) in
// the same atomic write, and shipped exactly as written.
//
// Thread-safe. Writes are serialized (the log's order is the store's);
// reads go straight to `base`.
class ReplicatedStore final : public storage::MessageStore {
 public:
  // Reads the log's position from `base` (which must outlive the store),
  // persists options.epoch as the copy's accepted epoch, and ends `base`'s
  // being write-only (MessageStore::SetWriteOnly), as a backup's copy is:
  // the primary reads it. Errors:
  // INVALID_ARGUMENT for an epoch below 1 or below the store's last
  // entry's; FAILED_PRECONDITION if the copy accepted this epoch or a newer
  // one before (a primary takes a new epoch each time it starts leading);
  // the store's.
  static absl::StatusOr<std::unique_ptr<ReplicatedStore>> Open(
      storage::MessageStore* base, ReplicatedStoreOptions options);

  // MessageStore. Write's errors, beyond the base store's:
  //   UNAVAILABLE  the in-sync set is smaller than min_insync (nothing is
  //                written); or it became smaller while the write waited
  //                (RemoveInSync), or the in-sync backups did not
  //                acknowledge within ack_timeout, or the store was closed
  //                (a newer epoch exists) while the write waited: the entry
  //                is written here but was not acknowledged, and may or may
  //                not be kept. The first two also close the store: its
  //                writer's memory of what it wrote may be wrong now.
  //
  // An acknowledgement therefore always means: every backup of the in-sync
  // set holds the entry (durably, for SyncLog), and the set, the primary
  // counted, had at least min_insync members when it was answered.
  absl::Status Write(const storage::WriteBatch& batch) override;
  // Errors: the base store's, and as Write's for the wait.
  absl::Status SyncLog() override;
  absl::StatusOr<std::optional<std::string>> Get(
      storage::Table table, std::string_view key) override {
    return base_->Get(table, key);
  }
  absl::StatusOr<std::vector<std::optional<std::string>>> MultiGet(
      storage::Table table, const std::vector<std::string>& keys) override {
    return base_->MultiGet(table, keys);
  }
  absl::Status Scan(storage::Table table, std::string_view from,
                    std::string_view to,
                    absl::FunctionRef<bool(std::string_view, std::string_view)>
                        visit) override {
    return base_->Scan(table, from, to, visit);
  }
  absl::StatusOr<std::optional<std::string>> LastKey(
      storage::Table table) override {
    return base_->LastKey(table);
  }
  std::vector<std::pair<std::string, int64_t>> NonZeroCounters() override {
    return base_->NonZeroCounters();
  }
  storage::StoreStats Stats() override { return base_->Stats(); }
  absl::StatusOr<storage::CheckpointInfo> Checkpoint(
      const std::string& dir) override {
    return base_->Checkpoint(dir);
  }
  std::unique_ptr<WriteLogHold> HoldWriteLog() override {
    return base_->HoldWriteLog();
  }

  // Write in two halves, for callers that must not block (the protocol's
  // simulation): Append writes `batch` as the next entry and returns its
  // position without waiting (errors as Write's, but for the waiting);
  // Acknowledged says whether entry `entry` of this log is acknowledged:
  // the in-sync set has at least min_insync members and every backup in it
  // has applied the entry, and made it durable if `durable`. Write is
  // Append, then a wait until Acknowledged(entry, false).
  absl::StatusOr<LogPosition> Append(const storage::WriteBatch& batch);
  bool Acknowledged(LogPosition entry, bool durable) const;
  // What a Write of `entry` appended at `since` would return by now,
  // without waiting: OK once acknowledged; UNAVAILABLE once the store
  // closed, or (closing it) once the in-sync set fell below min_insync or
  // ack_timeout has passed since `since` (by options.now); nullopt while
  // it would still wait.
  std::optional<absl::Status> Outcome(LogPosition entry, bool durable,
                                      absl::Time since);

  // ---- For the shippers, one per backup.

  // The serialized entries from `index` on (as many as fit in `max_bytes`,
  // at least one), waiting until there is one or `deadline` passes (then
  // none): from memory, or, for entries older than those kept there, from
  // the store's log of its writes (LogHistory). Errors: OUT_OF_RANGE if
  // entry `index` is kept in neither (the backup must be rebuilt);
  // UNAVAILABLE once closed; the store's, reading its log.
  absl::StatusOr<std::vector<std::shared_ptr<const std::string>>> ReadFrom(
      int64_t index, size_t max_bytes, absl::Time deadline);
  // Whether a copy that ends at `copy` diverged from this log.
  absl::StatusOr<bool> Diverged(LogPosition copy);
  // What backup `node` said it applied and made durable. REQUIRES: both
  // are positions on this log: the copy was checked not to have diverged
  // (Diverged) before its first report in a stream, so that a copy holding
  // another primary's entry at an index never counts as holding this log's
  // entry there.
  void ReportProgress(const std::string& node, LogPosition applied,
                      LogPosition durable);
  // Backup `node`'s stream ended: it is not connected until it reports
  // again.
  void Disconnected(const std::string& node);

  // ---- For FetchCheckpoint (replication_service.h).

  // Keeps `hold` (this store's log files: MessageStore::HoldWriteLog) for
  // backup `node`, which was sent a checkpoint and now catches up from the
  // log: until it reports every entry written before this call applied,
  // or a report comes after `expires`, or the store closes (Close) or
  // goes. A hold kept for `node` before is let go.
  void KeepLogFor(const std::string& node,
                  std::unique_ptr<storage::MessageStore::WriteLogHold> hold,
                  absl::Time expires);

  // ---- For the in-sync set's keeper.

  struct BackupState {
    LogPosition applied;
    LogPosition durable;
    // When it last reported, and whether it has since its stream last
    // ended (Disconnected): a backup may come back with another copy (a
    // rebuild, a lost disk), so a position from before counts for nothing
    // new until it reports again.
    absl::Time last_heard = absl::InfinitePast();
    bool connected = false;
    // Since when it has lacked an entry: when the first entry after
    // `applied` was written (InfiniteFuture while it lacks none,
    // InfinitePast if that entry is no longer kept). A backup that lacks an
    // entry written long ago is stuck, silent or answering but applying
    // nothing (its disk is full); one that lacks only entries just written
    // is not, however long it went without news before them.
    absl::Time lacking_since = absl::InfiniteFuture();
    bool in_sync = false;
    // It counts toward min_insync (CountInSync): the shard's record names it
    // in the in-sync set. One only being added is waited for, not counted.
    bool counted = false;
  };
  // Every backup heard from or in the in-sync set, by node id.
  std::map<std::string, BackupState> Backups() const;
  // The last entry written; and the highest entry a SyncLog returned OK
  // for (acknowledged: durable on every in-sync backup), {0, 0} for none.
  LogPosition last() const;
  LogPosition acknowledged() const;
  // Bytes of the kept entries after `index` (what a backup that applied up
  // to `index` lacks, as far as the store keeps it).
  size_t BytesAfter(int64_t index) const;
  int64_t epoch() const { return options_.epoch; }
  // Changes the backups writes wait for. Add a backup before the cluster's
  // record says it is in sync, and remove it after: the set writes wait
  // for must hold every backup the record names, or a write could be
  // acknowledged without a backup that a failover may promote. A backup
  // added counts toward min_insync only once the record names it
  // (CountInSync): while the record's set is too small, nothing may be
  // acknowledged that the eligible copies lack (cluster/placement.h
  // KeepEligible), so a backup on its way in must not make up the number.
  // The backups of options.in_sync count from the start.
  void AddInSync(const std::string& node);
  void CountInSync(const std::string& node);
  void RemoveInSync(const std::string& node);
  // Waits until backup `node` reported every entry up to `index` durable,
  // at most until `deadline` or until the store closes. True if it did.
  bool AwaitDurable(const std::string& node, int64_t index,
                    absl::Time deadline);

  // Fails every waiting and later Write with UNAVAILABLE carrying `reason`
  // (the node lost its lease, a newer epoch exists), and ends ReadFrom.
  void Close(const std::string& reason);
  bool closed() const;
  // Why it closed ("" while open).
  std::string close_reason() const;

 private:
  ReplicatedStore(storage::MessageStore* base, ReplicatedStoreOptions options,
                  LogPosition last);

  struct Kept {
    int64_t index;
    std::shared_ptr<const std::string> bytes;
    absl::Time written;
  };

  // Waits until Acknowledged(entry, durable), at most ack_timeout (then
  // closes the store), or until the in-sync set is smaller than min_insync.
  // OK, or UNAVAILABLE saying which.
  absl::Status AwaitAcknowledged(LogPosition entry, bool durable);
  // The outcome of a write of `entry` that has waited, `timed_out` or not:
  // OK if acknowledged, else UNAVAILABLE (closing the store if it is not
  // yet) when it timed out, the store closed, or the in-sync set is too
  // small; nullopt if it must wait on.
  std::optional<absl::Status> OutcomeLocked(LogPosition entry, bool durable,
                                            bool timed_out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool AckedLocked(LogPosition entry, bool durable) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the in-sync set, the primary counted, is smaller than
  // min_insync; and the refusal that says so.
  bool TooFewInSyncLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status TooFewInSyncErrorLocked(std::string_view what) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CloseLocked(const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  storage::MessageStore* const base_;
  const ReplicatedStoreOptions options_;
  // The entries older than kept_, from base_'s log of its writes.
  LogHistory history_;

  // Held across a Write's store write and append, so that the log's order
  // is the store's. Taken before mu_.
  absl::Mutex write_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  LogPosition last_ ABSL_GUARDED_BY(mu_);
  LogPosition acknowledged_ ABSL_GUARDED_BY(mu_);
  std::deque<Kept> kept_ ABSL_GUARDED_BY(mu_);
  size_t kept_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // The backups writes wait for, and those of them that count toward
  // min_insync.
  std::set<std::string> in_sync_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> counted_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, BackupState> backups_ ABSL_GUARDED_BY(mu_);
  struct LogHold {
    std::unique_ptr<storage::MessageStore::WriteLogHold> hold;
    int64_t until_index;
    absl::Time expires;
  };
  // KeepLogFor's, by backup. Let go without mu_ held: RocksDB may delete
  // files as a hold ends.
  std::map<std::string, LogHold> log_holds_ ABSL_GUARDED_BY(mu_);
  std::string closed_ ABSL_GUARDED_BY(mu_);  // why, once closed
};

}  // namespace hourglass::replication

#endif  // HOURGLASS_REPLICATION_REPLICATED_STORE_H_
