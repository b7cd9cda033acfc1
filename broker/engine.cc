#include "broker/engine.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "storage/keys.h"

namespace hourglass::broker {
namespace {

using storage::DueKey;
using storage::Table;

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> Engine::Open(
    storage::MessageStore* store, Clock* clock, Options options) {
  absl::StatusOr<std::optional<std::string>> last =
      store->LastKey(Table::kMessages);
  if (!last.ok()) return last.status();
  uint64_t next_sequence = 1;
  if (last->has_value()) {
    const std::optional<uint64_t> sequence = storage::DecodeMessageKey(**last);
    if (!sequence.has_value()) {
      return absl::DataLossError("messages table holds a malformed key");
    }
    next_sequence = *sequence + 1;
  }
  absl::StatusOr<std::optional<std::string>> reserved =
      store->Get(Table::kMeta, storage::kSequenceReservedKey);
  if (!reserved.ok()) return reserved.status();
  if (reserved->has_value()) {
    if ((*reserved)->size() != 8) {
      return absl::DataLossError("meta/sequence_reserved is not 8 bytes");
    }
    next_sequence = std::max(next_sequence, storage::ReadU64(**reserved));
  }

  std::unique_ptr<Engine> engine(
      new Engine(store, clock, options, next_sequence));
  if (absl::Status s = engine->scheduler_.Recover(); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<Dispatcher>> dispatcher =
      Dispatcher::Open(store, engine->commits_.get(), &engine->publisher_,
                       clock, options.dispatcher);
  if (!dispatcher.ok()) return dispatcher.status();
  engine->dispatcher_ = *std::move(dispatcher);
  return engine;
}

Engine::Engine(storage::MessageStore* store, Clock* clock, Options options,
               uint64_t next_sequence)
    : store_(store),
      clock_(clock),
      options_(options),
      scheduler_(store, clock, options.scheduler),
      commits_(std::make_unique<storage::CommitQueue>(store)),
      publisher_(store, commits_.get(), &scheduler_, clock, next_sequence,
                 [this] { Wake(); }) {}

Engine::~Engine() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (timer_.joinable()) timer_.join();
  if (dispatcher_ != nullptr) {
    dispatcher_->Shutdown(absl::UnavailableError("the broker is stopping"));
  }
  commits_.reset();
}

void Engine::Publish(std::vector<NewMessage> messages, PublishCallback done) {
  publisher_.Publish(std::move(messages), std::move(done));
}

void Engine::Cancel(std::string topic, std::string id, CancelCallback done) {
  absl::StatusOr<std::optional<std::string>> value =
      store_->Get(Table::kIds, storage::IdKey(topic, id));
  if (!value.ok()) {
    std::move(done)(value.status());
    return;
  }
  const std::optional<DueKey> key =
      value->has_value() ? DecodeIdValue(**value) : std::nullopt;
  const absl::Status not_found = absl::NotFoundError(
      absl::StrCat("no scheduled message with id ", Quoted(id), " in topic ",
                   Quoted(topic), " (unknown, already due, or cancelled)"));
  if (!key.has_value()) {
    std::move(done)(not_found);
    return;
  }
  switch (scheduler_.BeginCancel(*key)) {
    case Scheduler::CancelStart::kAccepted:
      break;
    case Scheduler::CancelStart::kAlreadyDue:
      std::move(done)(not_found);
      return;
    case Scheduler::CancelStart::kInProgress:
      std::move(done)(absl::AbortedError(
          absl::StrCat("a publish or cancel of id ", Quoted(id), " in topic ",
                       Quoted(topic), " is in progress; retry")));
      return;
  }
  // The scheduler cannot tell a message not yet loaded from one dispatched
  // before a restart (the loader has not reached it again); the schedule
  // key can: dispatch deletes it.
  absl::StatusOr<std::optional<std::string>> scheduled =
      store_->Get(Table::kSchedule, storage::ScheduleKey(*key));
  if (!scheduled.ok() || !scheduled->has_value()) {
    scheduler_.EndCancel(*key, topic, /*deleted=*/true);
    std::move(done)(scheduled.ok() ? not_found : scheduled.status());
    return;
  }
  storage::WriteBatch batch;
  batch.Delete(Table::kMessages, storage::MessageKey(key->sequence));
  batch.Delete(Table::kIds, storage::IdKey(topic, id));
  batch.Delete(Table::kSchedule, storage::ScheduleKey(*key));
  batch.Delete(Table::kTopicDue, storage::TopicDueKey(topic, *key));
  batch.Add(storage::ScheduledCounter(topic), -1);
  batch.Add(storage::MessagesCounter(topic), -1);
  commits_->Submit(std::move(batch),
                   [this, key = *key, topic = std::move(topic),
                    done = std::move(done)](absl::Status status) mutable {
                     scheduler_.EndCancel(key, topic, status.ok());
                     std::move(done)(std::move(status));
                   });
}

absl::StatusOr<absl::Time> Engine::Tick() {
  const absl::Time now = clock_->Now();
  bool more_to_load = false;
  if (now + options_.scheduler.horizon >=
      absl::FromUnixMillis(scheduler_.LoadedUntil())) {
    absl::StatusOr<bool> more = scheduler_.Load();
    if (!more.ok()) return more.status();
    more_to_load = *more;
  }
  due_.Add(scheduler_.Poll());
  if (!due_.empty()) {
    std::vector<ScheduledEntry> chunk = due_.Take(options_.dispatch_batch);
    if (absl::Status s = Dispatch(chunk); !s.ok()) {
      due_.PutBack(std::move(chunk));
      return s;
    }
  }
  return more_to_load || !due_.empty() ? now : scheduler_.NextWake();
}

// Moves `chunk` from scheduled to ready in every group of its topic, or in
// the topic's waiting area if it has none, in one batch. The batch also
// persists the loader cursor: the safe cursor, but never past a message
// that came due and is still waiting in due_.
absl::Status Engine::Dispatch(const std::vector<ScheduledEntry>& chunk) {
  storage::WriteBatch batch;
  const uint64_t ticket = dispatcher_->BeginDispatch(chunk, batch);
  storage::CounterDeltas counts;
  for (const ScheduledEntry& entry : chunk) {
    batch.Delete(Table::kSchedule, storage::ScheduleKey(entry.key));
    counts.Add(storage::ScheduledCounter(entry.topic), -1);
  }
  counts.AppendTo(batch);
  DueKey cursor = scheduler_.SafeCursor();
  if (std::optional<DueKey> waiting = due_.Least()) {
    cursor = std::min(cursor, *waiting);
  }
  PutLoaderCursor(batch, cursor);
  const absl::Status s = commits_->Commit(std::move(batch));
  dispatcher_->EndDispatch(ticket, s.ok());
  if (s.ok() && options_.on_dispatched) options_.on_dispatched(chunk);
  return s;
}

void Engine::Start() {
  timer_ = std::thread([this] { RunTimer(); });
  dispatcher_->Start();
}

void Engine::Wake() {
  absl::MutexLock lock(&mu_);
  wake_ = true;
}

void Engine::RunTimer() {
  while (true) {
    const absl::StatusOr<absl::Time> next = Tick();
    // After a failed step (store error), retry shortly rather than spin.
    const absl::Time wake_at =
        next.ok() ? *next : clock_->Now() + absl::Milliseconds(100);
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(
                             +[](Engine* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                                  e->mu_) { return e->wake_ || e->stopping_; },
                             this),
                         wake_at - clock_->Now());
    if (stopping_) return;
    wake_ = false;
  }
}

}  // namespace hourglass::broker
