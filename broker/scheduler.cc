#include "broker/scheduler.h"

#include <algorithm>
#include <cassert>
#include <utility>

#include "broker/lifecycle_reads.h"

namespace hourglass::broker {
namespace {

int64_t ToMillis(absl::Time t) { return absl::ToUnixMillis(t); }

}  // namespace

Scheduler::Scheduler(storage::MessageStore* store, Clock* clock,
                     Options options)
    : store_(store),
      clock_(clock),
      options_(options),
      wheel_(ToMillis(clock->Now())),
      loader_(store, storage::DueKey{}) {}

absl::Status Scheduler::Recover() {
  absl::StatusOr<storage::DueKey> cursor = lifecycle::ReadLoaderCursor(*store_);
  if (!cursor.ok()) return cursor.status();
  absl::MutexLock lock(&mu_);
  loader_ = Loader(store_, *cursor);
  // The cursor was at most the clock of the run that wrote it; never run
  // the clock behind it, or a publish after a wall-clock step back could
  // write a key below a cursor that a crash would restart from.
  last_now_ms_ = std::max(last_now_ms_, cursor->deliver_at_ms);
  return absl::OkStatus();
}

// The scan runs under mu_ so that the loader's position and the publishers'
// decisions (PublishDurable) are one serial history: each message enters
// the wheel exactly once, either from the loader or from its publisher. A
// scan is bounded by options_.load_chunk.
absl::StatusOr<bool> Scheduler::Load() {
  const int64_t until =
      ToMillis(clock_->Now() + options_.horizon + options_.load_ahead);
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::vector<ScheduledEntry>> entries =
      loader_.LoadUntil(until, options_.load_chunk);
  if (!entries.ok()) return entries.status();
  for (ScheduledEntry& entry : *entries) {
    // A publish or cancel in progress decides for itself.
    if (in_progress_.contains(entry.key)) continue;
    InsertLocked(entry.key, std::move(entry.topic));
  }
  return entries->size() == options_.load_chunk;
}

int64_t Scheduler::NowMs() {
  absl::MutexLock lock(&mu_);
  return NowMsLocked();
}

int64_t Scheduler::NowMsLocked() {
  last_now_ms_ = std::max(last_now_ms_, ToMillis(clock_->Now()));
  return last_now_ms_;
}

Scheduler::CursorHold::CursorHold(CursorHold&& other) noexcept
    : scheduler_(std::exchange(other.scheduler_, nullptr)),
      floor_(other.floor_) {}

Scheduler::CursorHold& Scheduler::CursorHold::operator=(
    CursorHold&& other) noexcept {
  if (this != &other) {
    std::move(*this).Release();
    scheduler_ = std::exchange(other.scheduler_, nullptr);
    floor_ = other.floor_;
  }
  return *this;
}

void Scheduler::CursorHold::Release() && {
  if (Scheduler* s = std::exchange(scheduler_, nullptr)) {
    s->ReleaseCursor(floor_);
  }
}

Scheduler::PendingPublish::PendingPublish(PendingPublish&& other) noexcept
    : scheduler_(std::exchange(other.scheduler_, nullptr)), key_(other.key_) {}

Scheduler::PendingPublish& Scheduler::PendingPublish::operator=(
    PendingPublish&& other) noexcept {
  if (this != &other) {
    std::move(*this).Failed();
    scheduler_ = std::exchange(other.scheduler_, nullptr);
    key_ = other.key_;
  }
  return *this;
}

bool Scheduler::PendingPublish::Durable(const std::string& topic) && {
  return std::exchange(scheduler_, nullptr)->PublishDurable(key_, topic);
}

void Scheduler::PendingPublish::Failed() && {
  if (Scheduler* s = std::exchange(scheduler_, nullptr)) {
    s->PublishFailed(key_);
  }
}

Scheduler::PendingCancel::PendingCancel(PendingCancel&& other) noexcept
    : scheduler_(std::exchange(other.scheduler_, nullptr)),
      start_(other.start_),
      key_(other.key_),
      topic_(std::move(other.topic_)) {}

Scheduler::PendingCancel& Scheduler::PendingCancel::operator=(
    PendingCancel&& other) noexcept {
  if (this != &other) {
    std::move(*this).End(/*deleted=*/false);
    scheduler_ = std::exchange(other.scheduler_, nullptr);
    start_ = other.start_;
    key_ = other.key_;
    topic_ = std::move(other.topic_);
  }
  return *this;
}

void Scheduler::PendingCancel::End(bool deleted) && {
  if (Scheduler* s = std::exchange(scheduler_, nullptr)) {
    s->EndCancel(key_, topic_, deleted);
  }
}

Scheduler::CursorHold Scheduler::HoldCursor() {
  absl::MutexLock lock(&mu_);
  const int64_t floor = NowMsLocked();
  floors_.insert(floor);
  return CursorHold(this, floor);
}

void Scheduler::ReleaseCursor(int64_t floor) {
  absl::MutexLock lock(&mu_);
  if (auto it = floors_.find(floor); it != floors_.end()) floors_.erase(it);
}

Scheduler::PendingPublish Scheduler::BeginPublish(const storage::DueKey& key) {
  absl::MutexLock lock(&mu_);
  ++in_progress_[key];
  return PendingPublish(this, key);
}

bool Scheduler::PublishDurable(const storage::DueKey& key,
                               const std::string& topic) {
  absl::MutexLock lock(&mu_);
  EndLocked(key);
  // Behind the loader: the loader will not read it again, so it is ours.
  // Ahead of it: the loader will read it from the store.
  if (!(key < loader_.position())) return false;
  InsertLocked(key, topic);
  return true;
}

void Scheduler::PublishFailed(const storage::DueKey& key) {
  absl::MutexLock lock(&mu_);
  EndLocked(key);
}

Scheduler::PendingCancel Scheduler::BeginCancel(const storage::DueKey& key,
                                                std::string topic) {
  absl::MutexLock lock(&mu_);
  if (in_progress_.contains(key)) {
    return PendingCancel(nullptr, CancelStart::kInProgress, key,
                         std::move(topic));
  }
  auto it = timers_.find(key.sequence);
  if (it != timers_.end()) {
    wheel_.Cancel(it->second.handle);
    timers_.erase(it);
  } else if (key < loader_.position()) {
    // Loaded, yet not in the wheel: Poll handed it out.
    return PendingCancel(nullptr, CancelStart::kAlreadyDue, key,
                         std::move(topic));
  }
  ++in_progress_[key];
  return PendingCancel(this, CancelStart::kAccepted, key, std::move(topic));
}

void Scheduler::EndCancel(const storage::DueKey& key, const std::string& topic,
                          bool deleted) {
  absl::MutexLock lock(&mu_);
  EndLocked(key);
  if (!deleted && key < loader_.position()) InsertLocked(key, topic);
}

void Scheduler::EndLocked(const storage::DueKey& key) {
  if (auto it = in_progress_.find(key); it != in_progress_.end()) {
    if (--it->second == 0) in_progress_.erase(it);
  }
}

std::vector<ScheduledEntry> Scheduler::Poll() {
  const int64_t now = ToMillis(clock_->Now());
  std::vector<ScheduledEntry> due;
  absl::MutexLock lock(&mu_);
  wheel_.ExpireUntil(now, [&](const TimerEntry& entry)
                              ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = timers_.find(entry.value);
    assert(it != timers_.end());
    due.push_back({storage::DueKey{entry.due_ms, entry.value},
                   std::move(it->second.topic)});
    timers_.erase(it);
  });
  return due;
}

void Scheduler::PutBack(const std::vector<ScheduledEntry>& entries) {
  absl::MutexLock lock(&mu_);
  for (const ScheduledEntry& entry : entries)
    InsertLocked(entry.key, entry.topic);
}

absl::Time Scheduler::NextWake() {
  absl::MutexLock lock(&mu_);
  // Extend the horizon once the loaded range ahead of now falls below it.
  int64_t wake = loader_.position().deliver_at_ms -
                 absl::ToInt64Milliseconds(options_.horizon);
  if (std::optional<int64_t> next = wheel_.NextExpiry()) {
    wake = std::min(wake, *next);
  }
  return absl::FromUnixMillis(wake);
}

storage::DueKey Scheduler::SafeCursor() {
  absl::MutexLock lock(&mu_);
  storage::DueKey cursor =
      std::min(loader_.position(), storage::DueKey{NowMsLocked(), 0});
  if (!floors_.empty()) {
    cursor = std::min(cursor, storage::DueKey{*floors_.begin(), 0});
  }
  if (std::optional<int64_t> next = wheel_.NextExpiry()) {
    cursor = std::min(cursor, storage::DueKey{std::max<int64_t>(*next, 0), 0});
  }
  if (!in_progress_.empty())
    cursor = std::min(cursor, in_progress_.begin()->first);
  return cursor;
}

int64_t Scheduler::LoadedUntil() {
  absl::MutexLock lock(&mu_);
  return loader_.position().deliver_at_ms;
}

size_t Scheduler::InWheel() {
  absl::MutexLock lock(&mu_);
  return timers_.size();
}

void Scheduler::InsertLocked(const storage::DueKey& key, std::string topic) {
  if (timers_.contains(key.sequence)) return;
  const TimerHandle handle = wheel_.Schedule(key.deliver_at_ms, key.sequence);
  timers_.emplace(key.sequence, Timer{handle, std::move(topic)});
}

}  // namespace hourglass::broker
