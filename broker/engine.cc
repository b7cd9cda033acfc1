#include "broker/engine.h"

#include <pthread.h>

#include <algorithm>
#include <optional>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "broker/lifecycle.h"
#include "broker/lifecycle_reads.h"
#include "broker/metric_catalog.h"
#include "broker/metrics.h"
#include "prometheus/gauge.h"
#include "storage/keys.h"
#include "storage/records.pb.h"

namespace hourglass::broker {
namespace {

using storage::DueKey;

// Answers `done` with `answer`, read from the store rather than written,
// once what was read is durable (CommitQueue::SubmitBarrier); with the
// barrier's error if it is not.
template <typename Answer, typename Done>
void AnswerOnceDurable(storage::CommitQueue& commits, Answer answer,
                       Done done) {
  commits.SubmitBarrier([answer = std::move(answer),
                         done = std::move(done)](absl::Status status) mutable {
    if (status.ok()) {
      std::move(done)(std::move(answer));
    } else {
      std::move(done)(std::move(status));
    }
  });
}

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> Engine::Open(
    storage::MessageStore* store, Clock* clock, Options options) {
  absl::StatusOr<uint64_t> next_sequence = lifecycle::ReadNextSequence(*store);
  if (!next_sequence.ok()) return next_sequence.status();

  absl::StatusOr<lifecycle::StoreIdentity> identity =
      lifecycle::ReadStoreIdentity(*store);
  if (!identity.ok()) return identity.status();

  std::unique_ptr<Engine> engine(
      new Engine(store, clock, options, *next_sequence));
  engine->format_version_ = identity->format_version;
  engine->store_id_ = identity->store_id;
  // Here rather than at the first publish, on a gRPC thread.
  if (absl::Status s = engine->publisher_.ReserveFirstBlock(); !s.ok()) {
    return s;
  }
  if (absl::Status s = engine->scheduler_.Recover(); !s.ok()) return s;
  options.dispatcher.store_errors = &engine->engine_metrics_.store_errors();
  absl::StatusOr<std::unique_ptr<Dispatcher>> dispatcher =
      Dispatcher::Open(store, engine->commits_.get(), &engine->publisher_,
                       clock, &engine->activity_, options.dispatcher);
  if (!dispatcher.ok()) return dispatcher.status();
  engine->dispatcher_ = *std::move(dispatcher);
  engine->inspector_ = std::make_unique<Inspector>(
      store, engine->dispatcher_.get(), &engine->activity_);
  Engine* e = engine.get();
  engine->engine_metrics_.Collect([e] { return e->MetricsSnapshot(); });
  if (options.metrics != nullptr) {
    prometheus::Gauge& serving =
        options.metrics->Gauges(metrics::Metric::kServing).Add({});
    engine->store_health_->Watch(
        [&serving](const absl::Status& s) { serving.Set(s.ok() ? 1 : 0); });
  }
  return engine;
}

Engine::Engine(storage::MessageStore* store, Clock* clock, Options options,
               uint64_t next_sequence)
    : store_(store),
      clock_(clock),
      options_(options),
      scheduler_(store, clock, options.scheduler),
      activity_(clock, options.metrics),
      engine_metrics_(options.metrics),
      store_health_(std::make_unique<StoreHealth>(
          [this] {
            Changes probe;
            lifecycle::ProbeWrite(probe, clock_->Now());
            return commits_->Commit(probe.Take());
          },
          options.store_health)),
      commits_(std::make_unique<storage::CommitQueue>(
          store, storage::CommitQueue::Options{
                     .on_write =
                         [this](const storage::CommitQueue::WriteInfo& info) {
                           engine_metrics_.StoreWrite(info);
                           store_health_->Record(info.status);
                         },
                     .on_sync =
                         [this](const storage::CommitQueue::SyncInfo& info) {
                           engine_metrics_.StoreSync(info);
                           store_health_->Record(info.status);
                         }})),
      publisher_(store, commits_.get(), &scheduler_, clock, &activity_,
                 next_sequence, [this] { Wake(); }),
      reads_(std::make_unique<WorkQueue>("hg-admin-reads")),
      tasks_(std::make_unique<WorkQueue>("hg-admin-tasks")) {}

Engine::~Engine() {
  store_health_->Stop();  // Its probe writes through the commit queue.
  // Queued admin work runs to its end while every part is alive.
  reads_.reset();
  tasks_.reset();
  engine_metrics_.StopCollecting();  // Scrapes read the parts below.
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
  const absl::Time start = absl::Now();
  publisher_.Publish(
      std::move(messages),
      [this, start, done = std::move(done)](
          absl::StatusOr<std::vector<PublishReceipt>> receipts) mutable {
        engine_metrics_.PublishLatency(absl::Now() - start);
        std::move(done)(std::move(receipts));
      });
}

std::optional<EngineMetrics::Snapshot> Engine::MetricsSnapshot() {
  // Taken first: a topic with events from here on keeps its totals, even if
  // the stats below were read before its first message was.
  const uint64_t mark = activity_.EventMark();
  absl::StatusOr<std::vector<Inspector::TopicStats>> stats =
      inspector_->Stats(std::nullopt);
  if (!stats.ok()) return std::nullopt;
  EngineMetrics::Snapshot s;
  absl::flat_hash_set<std::string> live;
  live.reserve(stats->size());
  for (const Inspector::TopicStats& t : *stats) {
    live.insert(t.topic);
    s.scheduled.emplace_back(t.topic, t.scheduled);
    uint64_t in_groups = 0;
    for (const Inspector::GroupStats& g : t.groups) {
      s.groups.push_back({t.topic, g.group, g.ready, g.in_flight, g.consumers});
      in_groups += g.ready;
    }
    if (t.ready > in_groups) {  // The waiting area of a topic.
      s.groups.push_back({t.topic, "", t.ready - in_groups, 0, 0});
    }
  }
  s.due_backlog = due_backlog_.load(std::memory_order_relaxed);
  // A store that never had a loader cursor starts its loader at the epoch:
  // until the loader's first pass (the first tick), that is no lag of half
  // a century, since nothing came due before the store existed.
  const int64_t loaded_until_ms = scheduler_.LoadedUntil();
  s.loader_lag = loaded_until_ms == 0
                     ? absl::ZeroDuration()
                     : std::max(absl::ZeroDuration(),
                                clock_->Now() + options_.scheduler.horizon -
                                    absl::FromUnixMillis(loaded_until_ms));
  const storage::StoreStats store = store_->Stats();
  s.live_data_bytes = store.live_data_bytes;
  s.pending_compaction_bytes = store.pending_compaction_bytes;
  s.disk_bytes = store.disk_bytes;
  // The gauges show only what `stats` lists; the totals of topics that are
  // gone (no pending message, no group) go too.
  activity_.ForgetTopicsExcept(live, mark);
  return s;
}

absl::StatusOr<Scheduler::PendingCancel> Engine::BeginChange(
    const std::string& topic, const std::string& id) {
  absl::StatusOr<std::optional<DueKey>> found =
      lifecycle::FindId(*store_, topic, id);
  if (!found.ok()) return found.status();
  const std::optional<DueKey>& key = *found;
  const absl::Status not_found = absl::NotFoundError(
      absl::StrCat("no scheduled message with id ", Quoted(id), " in topic ",
                   Quoted(topic), " (unknown, already due, or cancelled)"));
  if (!key.has_value()) return not_found;
  Scheduler::PendingCancel change = scheduler_.BeginCancel(*key, topic);
  switch (change.start()) {
    case Scheduler::CancelStart::kAccepted:
      break;
    case Scheduler::CancelStart::kAlreadyDue:
      return not_found;
    case Scheduler::CancelStart::kInProgress:
      return absl::AbortedError(
          absl::StrCat("a publish or change of id ", Quoted(id), " in topic ",
                       Quoted(topic), " is in progress; retry"));
  }
  // The scheduler cannot tell a message not yet loaded from one dispatched
  // before a restart (the loader has not reached it again); the schedule
  // key can: dispatch deletes it.
  absl::StatusOr<bool> scheduled = lifecycle::IsScheduled(*store_, *key);
  if (!scheduled.ok() || !*scheduled) {
    std::move(change).End(/*deleted=*/true);
    return scheduled.ok() ? not_found : scheduled.status();
  }
  return change;
}

void Engine::Cancel(std::string topic, std::string id, CancelCallback done) {
  absl::StatusOr<Scheduler::PendingCancel> change = BeginChange(topic, id);
  if (absl::IsNotFound(change.status())) {
    AnswerOnceDurable(*commits_, change.status(), std::move(done));
    return;
  }
  if (!change.ok()) {
    std::move(done)(change.status());
    return;
  }
  Changes changes;
  lifecycle::Cancel(changes, topic, change->key(), id);
  commits_->Submit(changes.Take(),
                   [this, change = *std::move(change), topic = std::move(topic),
                    done = std::move(done)](absl::Status status) mutable {
                     std::move(change).End(/*deleted=*/status.ok());
                     if (status.ok()) activity_.Cancelled(topic, 1);
                     std::move(done)(std::move(status));
                   });
}

void Engine::Reschedule(
    std::string topic, std::string id, absl::Time deliver_at,
    absl::AnyInvocable<void(absl::StatusOr<PublishReceipt>) &&> done) {
  // Every path below ends `change` and the tokens taken after it, by name
  // or, on the early returns, by their destructors (the message then stays
  // scheduled as before).
  absl::StatusOr<Scheduler::PendingCancel> change = BeginChange(topic, id);
  if (absl::IsNotFound(change.status())) {
    AnswerOnceDurable(*commits_, change.status(), std::move(done));
    return;
  }
  if (!change.ok()) {
    std::move(done)(change.status());
    return;
  }
  const DueKey old_key = change->key();
  absl::StatusOr<std::optional<storage::MessageRecord>> stored =
      lifecycle::ReadMessage(*store_, old_key.sequence);
  if (!stored.ok() || !stored->has_value()) {
    std::move(*change).End(/*deleted=*/false);
    std::move(done)(!stored.ok()
                        ? stored.status()
                        : absl::DataLossError(absl::StrCat(
                              "message ", old_key.sequence, " is missing")));
    return;
  }
  storage::MessageRecord& record = **stored;
  // As for a publish: nothing comes due before the floor, and the cursor
  // stays at or below it until the write ends.
  Scheduler::CursorHold hold = scheduler_.HoldCursor();
  const DueKey new_key{std::max(absl::ToUnixMillis(deliver_at), hold.floor()),
                       old_key.sequence};
  const PublishReceipt receipt{id, absl::FromUnixMillis(new_key.deliver_at_ms),
                               false};
  if (record.expire_at_ms() > 0 &&
      new_key.deliver_at_ms >= record.expire_at_ms()) {
    // A deadline at or before the due time is refused, as at publish.
    std::move(*change).End(/*deleted=*/false);
    std::move(hold).Release();
    std::move(done)(absl::InvalidArgumentError(absl::StrCat(
        "message \"", id, "\" expires at ",
        absl::FormatTime(absl::RFC3339_full,
                         absl::FromUnixMillis(record.expire_at_ms()),
                         absl::UTCTimeZone()),
        ": it cannot be due at or after that")));
    return;
  }
  if (new_key == old_key) {
    // Nothing to write.
    std::move(*change).End(/*deleted=*/false);
    std::move(hold).Release();
    AnswerOnceDurable(*commits_, receipt, std::move(done));
    return;
  }
  Scheduler::PendingPublish publish = scheduler_.BeginPublish(new_key);
  record.set_deliver_at_ms(new_key.deliver_at_ms);
  Changes changes;
  lifecycle::Reschedule(changes, record, old_key, new_key);
  commits_->Submit(
      changes.Take(),
      [this, change = *std::move(change), hold = std::move(hold),
       publish = std::move(publish), topic = std::move(topic), receipt,
       done = std::move(done)](absl::Status status) mutable {
        std::move(change).End(/*deleted=*/status.ok());
        bool in_wheel = false;
        if (status.ok()) {
          in_wheel = std::move(publish).Durable(topic);
        } else {
          std::move(publish).Failed();
        }
        std::move(hold).Release();
        if (!status.ok()) {
          std::move(done)(std::move(status));
          return;
        }
        // A new time beyond the horizon is the loader's to bring in; the
        // timer thread wakes for it by itself.
        if (in_wheel) Wake();
        std::move(done)(receipt);
      });
}

absl::StatusOr<uint64_t> Engine::PurgeScheduled(const std::string& topic) {
  constexpr size_t kChunk = 1024;
  // Every message due before the persisted cursor has been dispatched.
  absl::StatusOr<DueKey> cursor = lifecycle::ReadLoaderCursor(*store_);
  if (!cursor.ok()) return cursor.status();
  DueKey position{cursor->deliver_at_ms, 0};
  uint64_t purged = 0;
  while (true) {
    std::vector<std::pair<DueKey, std::string>> entries;
    absl::Status scanned = lifecycle::ScanTopic(
        *store_, topic, position, [&](const DueKey& key, std::string_view id) {
          entries.emplace_back(key, std::string(id));
          return entries.size() < kChunk;
        });
    if (!scanned.ok()) return scanned;
    if (entries.empty()) return purged;
    const DueKey& last = entries.back().first;
    position = {last.deliver_at_ms, last.sequence + 1};

    // Each message still scheduled is cancelled, as by Cancel; those that
    // came due or are being changed are left.
    // The cancels not ended by name (on an error return) end by their
    // destructors, leaving those messages scheduled.
    Changes changes;
    std::vector<Scheduler::PendingCancel> cancelling;
    for (const auto& [key, id] : entries) {
      Scheduler::PendingCancel change = scheduler_.BeginCancel(key, topic);
      if (change.start() != Scheduler::CancelStart::kAccepted) continue;
      // As in BeginChange: a key whose state cannot be read is not put
      // back in the wheel.
      absl::StatusOr<bool> scheduled = lifecycle::IsScheduled(*store_, key);
      if (!scheduled.ok() || !*scheduled) {
        std::move(change).End(/*deleted=*/true);
        if (!scheduled.ok()) return scheduled.status();
        continue;
      }
      lifecycle::Cancel(changes, topic, key, id);
      cancelling.push_back(std::move(change));
    }
    if (cancelling.empty()) continue;
    const absl::Status written = commits_->Commit(changes.Take());
    for (Scheduler::PendingCancel& change : cancelling) {
      std::move(change).End(/*deleted=*/written.ok());
    }
    if (!written.ok()) return written;
    activity_.Cancelled(topic, cancelling.size());
    purged += cancelling.size();
  }
}

absl::StatusOr<absl::Time> Engine::Tick() {
  const absl::Time now = clock_->Now();
  bool more_to_load = false;
  if (now + options_.scheduler.horizon >=
      absl::FromUnixMillis(scheduler_.LoadedUntil())) {
    absl::StatusOr<bool> more = scheduler_.Load();
    if (!more.ok()) {
      engine_metrics_.store_errors().Count("load", more.status());
      return more.status();
    }
    more_to_load = *more;
  }
  due_.Add(scheduler_.Poll());
  if (!due_.empty()) {
    std::vector<ScheduledEntry> chunk = due_.Take(options_.dispatch_batch);
    if (absl::Status s = Dispatch(chunk); !s.ok()) {
      engine_metrics_.store_errors().Count("dispatch", s);
      due_.PutBack(std::move(chunk));
      due_backlog_.store(due_.size(), std::memory_order_relaxed);
      return s;
    }
  }
  due_backlog_.store(due_.size(), std::memory_order_relaxed);
  engine_metrics_.DueBacklog(due_.size(), now);
  return more_to_load || !due_.empty() ? now : scheduler_.NextWake();
}

// Moves `chunk` from scheduled to ready in every group of its topic, or in
// the topic's waiting area if it has none, in one batch. The batch also
// persists the loader cursor: the safe cursor, but never past a message
// that came due and is still waiting in due_.
absl::Status Engine::Dispatch(const std::vector<ScheduledEntry>& chunk) {
  DueKey cursor = scheduler_.SafeCursor();
  if (std::optional<DueKey> waiting = due_.Least()) {
    cursor = std::min(cursor, *waiting);
  }
  const absl::Status s = dispatcher_->MoveToReady(chunk, cursor);
  if (s.ok() && options_.on_dispatched) options_.on_dispatched(chunk);
  return s;
}

void Engine::Start() {
  timer_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "hg-timer");
    RunTimer();
  });
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
