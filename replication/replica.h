#ifndef HOURGLASS_REPLICATION_REPLICA_H_
#define HOURGLASS_REPLICATION_REPLICA_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "replication/log_entry.h"
#include "storage/message_store.h"

namespace hourglass::replication {

// A backup's copy of a shard: the primary's log entries applied to the
// store verbatim (each carries its own position keys), in index order,
// from the primary of the newest epoch accepted only. Nothing else writes
// to the store while it is a backup, and nothing reads it but the Replica's
// own few reads of meta keys: Open makes the store write-only
// (MessageStore::SetWriteOnly), which makes a backup's writes cheaper, until
// whoever uses it next says otherwise (a promotion: ReplicatedStore::Open).
//
// Thread-safe: Accept and Write are serialized by one mutex, so two
// primaries' streams (an old one still open, a new one) cannot interleave;
// Sync holds it only to read and record positions, not across the store's
// sync.
class Replica {
 public:
  // Syncs `store` (what it holds counts as durable from now on), then reads
  // the copy's position and accepted epoch from it; `store` must outlive
  // the Replica. Errors: the store's.
  static absl::StatusOr<std::unique_ptr<Replica>> Open(
      storage::MessageStore* store);

  // A primary at `epoch` starts shipping: the epoch becomes the accepted
  // one, persisted (and synced) before anything of it is applied.
  // FAILED_PRECONDITION if a newer epoch was accepted: that primary has
  // been replaced. Accepting the accepted epoch again does nothing.
  absl::Status Accept(int64_t epoch);

  // Applies `entries`, shipped by the primary of `epoch`, in order, then
  // syncs the store if any of them needs it. Errors:
  //   FAILED_PRECONDITION  `epoch` is not the accepted one (a newer primary
  //                        exists, or Accept was not called), or an entry is
  //                        of a later epoch than `epoch`.
  //   OUT_OF_RANGE         an entry's index does not follow the last one.
  //   the store's.
  // On a bad entry the entries before it stay applied; on the store's error
  // none of `entries` is.
  absl::Status Apply(int64_t epoch, absl::Span<const LogEntry> entries);

  // Apply's halves, for a backup that tells its primary what it applied
  // before it syncs: Write applies (errors as Apply's but for the sync),
  // Sync syncs if anything applied before the call needs it (the store's
  // errors) and then durable() reaches what applied() was at the call.
  //
  // Write applies the entries it accepts as one store write (their
  // operations one after the other, position keys included, in one atomic
  // batch: what a crash keeps is still a prefix of the log, and the store
  // holds what applying them one by one leaves), written from the bytes
  // the entries view, which need only outlive the call. Sync does not hold up
  // Write: a stream may apply its next entries while another thread syncs
  // the earlier ones.
  absl::Status Write(int64_t epoch, absl::Span<const LogEntry> entries);
  absl::Status Sync();

  // The last entry applied (visible) and the last made durable.
  LogPosition applied() const;
  LogPosition durable() const;
  int64_t accepted_epoch() const;

 private:
  Replica(storage::MessageStore* store, LogPosition position, int64_t epoch);

  // Writes `entries` to the store as one write: as the bytes their
  // primary's store wrote when this store takes them (the same format,
  // MessageStore::WriteEncoding), otherwise as operations. Errors: the
  // store's, and INVALID_ARGUMENT for a store write that cannot be decoded.
  absl::Status WriteToStore(absl::Span<const LogEntry> entries);

  storage::MessageStore* const store_;
  // Held across a Sync, so that one sync's positions are recorded only
  // after every sync that began before it: a Sync that finds nothing to
  // sync must not report entries durable that an earlier Sync is still
  // syncing. Taken before mu_.
  absl::Mutex sync_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  LogPosition applied_ ABSL_GUARDED_BY(mu_);
  LogPosition durable_ ABSL_GUARDED_BY(mu_);
  // An entry applied since the last sync began needs sync.
  bool unsynced_ ABSL_GUARDED_BY(mu_) = false;
  int64_t accepted_epoch_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hourglass::replication

#endif  // HOURGLASS_REPLICATION_REPLICA_H_
