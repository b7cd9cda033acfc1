#ifndef HOURGLASS_BROKER_SCHEDULER_H_
#define HOURGLASS_BROKER_SCHEDULER_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "broker/clock.h"
#include "broker/loader.h"
#include "broker/timing_wheel.h"
#include "storage/keys.h"
#include "storage/message_store.h"

namespace hourglass::broker {

// Decides when scheduled messages come due: the timing wheel, fed by the
// loader for messages already on disk and by Publish for new ones, plus the
// cursor that makes restart cheap.
//
// Which messages are in the wheel: those whose due time is before the
// loaded horizon (LoadedUntil()). The loader moves the horizon forward to
// now + horizon + load_ahead in chunks, whenever it falls within horizon
// of now; a publish that becomes durable behind
// the horizon enters the wheel at once (PublishDurable), one ahead of it is
// left for the loader. Entries never carry payloads.
//
// Crash safety of the cursor: SafeCursor() is the least schedule key that
// may still be undispatched or yet be written: the lowest of the wheel's
// next expiry, every publish or cancel between its Begin and its end, every
// held publish floor (HoldCursor), the loader's position, and now. A
// publish that has not yet called HoldCursor gets a floor at or after that
// now, because both read one clock that never goes backward (Now()).
// Every schedule key below it has been handed out by Poll, so persisting it
// with the dispatch of what Poll returned never skips a message on restart.
//
// Thread-safe. Poll and Load are meant for one timer thread; the publish
// and cancel calls come from any thread.
class Scheduler {
 public:
  struct Options {
    // How far ahead of now messages are held in memory. Default: 60 s.
    absl::Duration horizon = absl::Seconds(60);
    // Each load reads this far past the horizon, so that loads run about
    // this often rather than every millisecond. Default: 1 s.
    absl::Duration load_ahead = absl::Seconds(1);
    // Schedule entries read per Load step. Default: 4096.
    size_t load_chunk = 4096;
  };

  // REQUIRES: `store` and `clock` outlive the scheduler.
  Scheduler(storage::MessageStore* store, Clock* clock, Options options);

  // Positions the loader at the persisted cursor. Call once, before
  // anything else.
  absl::Status Recover();

  // Reads one chunk of schedule entries entering the horizon into the
  // wheel. Returns true if the horizon is not yet reached (call again).
  // Holds the scheduler's lock for the bounded scan of one chunk.
  absl::StatusOr<bool> Load();

  // The scheduler's clock, made monotone: never earlier than a time it
  // returned before, whatever the wall clock does.
  int64_t NowMs();

  // Starts a publish: returns its floor, the current NowMs(), and keeps
  // SafeCursor() at or below {floor, 0} until ReleaseCursor(floor). The
  // publish must not make anything due before its floor.
  int64_t HoldCursor();
  void ReleaseCursor(int64_t floor);

  // Registers a publish of `key` about to be written. REQUIRES: `key` is
  // unique, and the write follows.
  void BeginPublish(const storage::DueKey& key);
  // The publish of `key` is durable: the message enters the wheel if it is
  // behind the loaded horizon. Returns whether it did; one that did not is
  // the loader's when the horizon reaches it, with no wake-up needed.
  bool PublishDurable(const storage::DueKey& key, const std::string& topic);
  // The publish of `key` failed; nothing was written.
  void PublishFailed(const storage::DueKey& key);

  // Starts cancelling `key`: takes it out of the wheel and keeps the loader
  // from loading it until EndCancel. Changes nothing unless kAccepted.
  // kAlreadyDue: Poll handed it out, the cancel lost the race.
  // kInProgress: a publish or cancel of it has not ended yet.
  // kAccepted for a key the loader has not reached: after a restart that
  // includes keys dispatched before it, which the caller must check.
  enum class CancelStart { kAccepted, kAlreadyDue, kInProgress };
  CancelStart BeginCancel(const storage::DueKey& key);
  // Ends a cancel that BeginCancel accepted. `deleted`: the message's keys
  // are gone from the store. Otherwise (the write failed) it is scheduled
  // again as before.
  void EndCancel(const storage::DueKey& key, const std::string& topic,
                 bool deleted);

  // Hands out every message due by the clock's now, in due order (ties:
  // sequence). Never early.
  std::vector<ScheduledEntry> Poll();

  // Returns entries that Poll handed out but whose dispatch failed; they
  // come due again at once.
  void PutBack(const std::vector<ScheduledEntry>& entries);

  // When Poll next has work, or when Load should run: the earlier of the
  // wheel's next expiry and the time the horizon needs extending.
  absl::Time NextWake();

  // See the class comment. REQUIRES, for the cursor to be persisted: what
  // earlier Polls returned has been durably dispatched, in order.
  storage::DueKey SafeCursor();

  // The loaded horizon: every schedule entry due before it is in memory.
  int64_t LoadedUntil();
  size_t InWheel();

 private:
  struct Timer {
    TimerHandle handle;
    std::string topic;
  };

  void InsertLocked(const storage::DueKey& key, std::string topic)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  storage::MessageStore* const store_;
  Clock* const clock_;
  const Options options_;

  absl::Mutex mu_;
  TimingWheel wheel_ ABSL_GUARDED_BY(mu_);
  Loader loader_ ABSL_GUARDED_BY(mu_);
  // Wheel entries by sequence (the wheel's value), for Cancel and topics.
  absl::flat_hash_map<uint64_t, Timer> timers_ ABSL_GUARDED_BY(mu_);
  int64_t NowMsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Largest time NowMs() returned.
  int64_t last_now_ms_ ABSL_GUARDED_BY(mu_) = 0;
  // Floors of publishes holding the cursor.
  std::multiset<int64_t> floors_ ABSL_GUARDED_BY(mu_);
  // Keys whose stored state a publish or cancel is changing (begun, not
  // ended). The loader skips them; their writer decides.
  std::map<storage::DueKey, int> in_progress_ ABSL_GUARDED_BY(mu_);

  void EndLocked(const storage::DueKey& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
};

}  // namespace hourglass::broker

#endif  // HOURGLASS_BROKER_SCHEDULER_H_
