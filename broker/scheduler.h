#ifndef HOURGLASS_BROKER_SCHEDULER_H_
#define HOURGLASS_BROKER_SCHEDULER_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
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
// next expiry, every publish or cancel whose token has not ended, every
// held publish floor (CursorHold), the loader's position, and now. A
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

  // Each change of what is scheduled is a token, [[nodiscard]] and
  // move-only, that ends itself when destroyed; ending one explicitly says
  // how it ended. A token must not outlive the scheduler.

  // A publish's floor, held: SafeCursor() stays at or below {floor(), 0}
  // until the hold ends. The publish must not make anything due before its
  // floor.
  class [[nodiscard]] CursorHold {
   public:
    CursorHold() = default;  // Holds nothing.
    CursorHold(CursorHold&& other) noexcept;
    CursorHold& operator=(CursorHold&& other) noexcept;
    ~CursorHold() { std::move(*this).Release(); }

    int64_t floor() const { return floor_; }
    bool held() const { return scheduler_ != nullptr; }
    // Lets the cursor pass the floor. Idempotent.
    void Release() &&;

   private:
    friend class Scheduler;
    CursorHold(Scheduler* scheduler, int64_t floor)
        : scheduler_(scheduler), floor_(floor) {}
    Scheduler* scheduler_ = nullptr;
    int64_t floor_ = 0;
  };

  // Starts a publish: its floor is the current NowMs().
  CursorHold HoldCursor();

  // A publish of a key about to be written. The loader leaves the key
  // alone until the publish ends: Durable once the write succeeded, Failed
  // (or destruction) if nothing was written.
  class [[nodiscard]] PendingPublish {
   public:
    PendingPublish(PendingPublish&& other) noexcept;
    PendingPublish& operator=(PendingPublish&& other) noexcept;
    ~PendingPublish() { std::move(*this).Failed(); }

    const storage::DueKey& key() const { return key_; }
    // The write is durable: the message enters the wheel if it is behind
    // the loaded horizon. Returns whether it did; one that did not is the
    // loader's when the horizon reaches it, with no wake-up needed.
    // REQUIRES: the publish has not ended.
    bool Durable(const std::string& topic) &&;
    // Nothing was written. Idempotent.
    void Failed() &&;

   private:
    friend class Scheduler;
    PendingPublish(Scheduler* scheduler, const storage::DueKey& key)
        : scheduler_(scheduler), key_(key) {}
    Scheduler* scheduler_ = nullptr;
    storage::DueKey key_;
  };

  // Registers a publish of `key`. REQUIRES: `key` is unique, and its write
  // follows.
  PendingPublish BeginPublish(const storage::DueKey& key);

  // A cancel (or other change) of a scheduled key. While it is accepted
  // and not ended, the key is out of the wheel and the loader leaves it.
  // End(true): the message's keys are gone from the store. End(false), or
  // destruction: the write failed or was not made, and the message is
  // scheduled again as before.
  enum class CancelStart { kAccepted, kAlreadyDue, kInProgress };
  class [[nodiscard]] PendingCancel {
   public:
    PendingCancel(PendingCancel&& other) noexcept;
    PendingCancel& operator=(PendingCancel&& other) noexcept;
    ~PendingCancel() { std::move(*this).End(/*deleted=*/false); }

    // kAccepted, or why the cancel did not start (then the token holds
    // nothing): kAlreadyDue, Poll handed the key out and the cancel lost
    // the race; kInProgress, a publish or change of it has not ended yet.
    // kAccepted for a key the loader has not reached: after a restart that
    // includes keys dispatched before it, which the caller must check.
    CancelStart start() const { return start_; }
    const storage::DueKey& key() const { return key_; }
    // Ends an accepted cancel. Idempotent; nothing for one not accepted.
    void End(bool deleted) &&;

   private:
    friend class Scheduler;
    PendingCancel(Scheduler* scheduler, CancelStart start,
                  const storage::DueKey& key, std::string topic)
        : scheduler_(scheduler), start_(start), key_(key),
          topic_(std::move(topic)) {}
    Scheduler* scheduler_ = nullptr;  // Null unless accepted and not ended.
    CancelStart start_ = CancelStart::kInProgress;
    storage::DueKey key_;
    std::string topic_;
  };

  // Starts cancelling `key` of `topic`: takes it out of the wheel and
  // keeps the loader from loading it until the cancel ends. Changes
  // nothing unless the token's start() is kAccepted.
  PendingCancel BeginCancel(const storage::DueKey& key, std::string topic);

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
  // The tokens' ends.
  void ReleaseCursor(int64_t floor);
  bool PublishDurable(const storage::DueKey& key, const std::string& topic);
  void PublishFailed(const storage::DueKey& key);
  void EndCancel(const storage::DueKey& key, const std::string& topic,
                 bool deleted);

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
