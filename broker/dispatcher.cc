#include "broker/dispatcher.h"

#include <pthread.h>

#include <algorithm>
#include <map>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "broker/lifecycle_reads.h"
#include "broker/store_errors.h"

namespace hourglass::broker {

using storage::DueKey;

// ---- Construction and recovery.

Dispatcher::Dispatcher(storage::MessageStore* store,
                       storage::CommitQueue* commits, Publisher* publisher,
                       Clock* clock, Activity* activity, Options options,
                       std::unique_ptr<GroupRegistry> registry)
    : store_(store),
      commits_(commits),
      clock_(clock),
      options_(options),
      registry_(std::move(registry)),
      state_(std::make_unique<DeliveryState>(
          store, clock, activity, registry_.get(), &inbox_, options)),
      step_(std::make_unique<DeliveryStep>(state_.get(), store, commits,
                                           publisher, activity)),
      tasks_(std::make_unique<AdminTasks>(
          state_.get(), store, commits, publisher, registry_.get(), &inbox_)) {}

absl::StatusOr<std::unique_ptr<Dispatcher>> Dispatcher::Open(
    storage::MessageStore* store, storage::CommitQueue* commits,
    Publisher* publisher, Clock* clock, Activity* activity, Options options) {
  absl::StatusOr<std::unique_ptr<GroupRegistry>> registry = GroupRegistry::Open(
      store, commits, clock,
      {.max_groups_per_topic = options.max_groups_per_topic});
  if (!registry.ok()) return registry.status();
  std::unique_ptr<Dispatcher> dispatcher(
      new Dispatcher(store, commits, publisher, clock, activity, options,
                     *std::move(registry)));
  if (absl::Status s = dispatcher->Recover(); !s.ok()) return s;
  return dispatcher;
}

absl::Status Dispatcher::Recover() {
  for (const GroupRegistry::Group& group : registry_->All()) {
    state_->AddGroup(group, /*queue_empty=*/false);
    ++recovery_.groups;
  }
  // Each group registered from now on reaches the step before anything
  // naming it can: the registry calls this under its lock.
  registry_->SetOnAdded([this](const GroupRegistry::Group& group) {
    inbox_.Call([this, group] {
      // A group that takes a waiting area may find entries there.
      state_->AddGroup(group, /*queue_empty=*/!group.owns_waiting_area);
    });
  });

  // Deliveries in flight when the last run stopped: their streams are gone,
  // so they are due again at once, unless a nack's delay still runs.
  const int64_t now_ms = absl::ToUnixMillis(clock_->Now());
  return lifecycle::ScanInFlight(
      *store_, [&](lifecycle::StoredInFlight&& stored) {
        GroupState* group = state_->FindGroup(stored.topic, stored.group);
        if (group == nullptr) return true;  // Its group is gone.
        const storage::InFlightRecord& record = stored.record;
        InFlight entry;
        entry.key = DueKey{record.deliver_at_ms(), stored.sequence};
        entry.attempt = record.attempt();
        entry.token = state_->NextToken();
        InFlight& in_flight =
            group->in_flight.insert_or_assign(stored.sequence, entry)
                .first->second;
        if (record.waiting() && record.redeliver_at_ms() > now_ms) {
          in_flight.waiting = true;
          state_->SetTimer(*group, in_flight, record.redeliver_at_ms());
          ++recovery_.waiting;
        } else {
          group->redeliverable.insert(entry.key);
          ++recovery_.due_again;
        }
        return true;
      });
}

Dispatcher::~Dispatcher() {
  inbox_.Stop();
  if (thread_.joinable()) thread_.join();
}

// ---- Groups.

void Dispatcher::RegisterGroup(std::string topic, std::string group,
                               absl::AnyInvocable<void(absl::Status) &&> done) {
  registry_->Register(std::move(topic), std::move(group),
                      /*must_be_new=*/false, std::move(done));
}

void Dispatcher::CreateGroup(std::string topic, std::string group,
                             absl::AnyInvocable<void(absl::Status) &&> done) {
  registry_->Register(std::move(topic), std::move(group),
                      /*must_be_new=*/true, std::move(done));
}

absl::Status Dispatcher::RegisterGroup(std::string_view topic,
                                       std::string_view group) {
  absl::Notification done;
  absl::Status result;
  RegisterGroup(std::string(topic), std::string(group),
                [&](absl::Status status) {
                  result = std::move(status);
                  done.Notify();
                });
  done.WaitForNotification();
  return result;
}

// ---- Consumers.

std::optional<absl::Status> Dispatcher::shut_down() const {
  absl::MutexLock lock(&mu_);
  return shutdown_;
}

void Dispatcher::Subscribe(
    SubscribeOptions options, std::shared_ptr<Consumer> consumer,
    absl::AnyInvocable<void(absl::StatusOr<ConsumerId>) &&> done) {
  if (std::optional<absl::Status> refused = shut_down()) {
    std::move(done)(*std::move(refused));
    return;
  }
  if (options.max_in_flight == 0) {
    options.max_in_flight = options_.default_max_in_flight;
  }
  if (options.ack_timeout <= absl::ZeroDuration()) {
    options.ack_timeout = options_.default_ack_timeout;
  }
  // What attaching the consumer to its (registered) group needs.
  struct Attach {
    SubscribeOptions options;
    std::shared_ptr<Consumer> consumer;
    absl::AnyInvocable<void(absl::StatusOr<ConsumerId>) &&> done;
  };
  auto attach = std::make_shared<Attach>(
      Attach{std::move(options), std::move(consumer), std::move(done)});
  auto post_attach = [this, attach] {
    inbox_.Call([this, attach] {
      if (std::optional<absl::Status> refused = shut_down()) {
        std::move(attach->done)(*std::move(refused));
        return;
      }
      const SubscribeOptions& o = attach->options;
      std::move(attach->done)(state_->Attach(o.topic, o.group, o.max_in_flight,
                                             o.ack_timeout,
                                             std::move(attach->consumer)));
    });
  };
  const SubscribeOptions& o = attach->options;
  if (registry_->Exists(o.topic, o.group)) {
    post_attach();
    return;
  }
  if (!o.may_create_group) {
    std::move(attach->done)(absl::NotFoundError(absl::StrCat(
        "group ", Quoted(o.group), " of topic ", Quoted(o.topic),
        " does not exist, and this token may not create it: an admin creates "
        "it (hourglass groups create --topic=",
        o.topic, " --group=", o.group, ")")));
    return;
  }
  registry_->Register(o.topic, o.group, /*must_be_new=*/false,
                      [attach, post_attach](absl::Status status) {
                        if (!status.ok()) {
                          std::move(attach->done)(std::move(status));
                          return;
                        }
                        post_attach();
                      });
}

void Dispatcher::Unsubscribe(ConsumerId id) {
  inbox_.Post(StepInbox::Detach{id});
}

void Dispatcher::Ack(ConsumerId id,
                     absl::Span<const std::string_view> message_ids) {
  StepInbox::Ack ack;
  ack.consumer = id;
  size_t bytes = 0;
  for (std::string_view message_id : message_ids) bytes += message_id.size();
  ack.ids.reserve(bytes);
  ack.ends.reserve(message_ids.size());
  for (std::string_view message_id : message_ids) {
    ack.ids.append(message_id);
    ack.ends.push_back(static_cast<uint32_t>(ack.ids.size()));
  }
  inbox_.Post(std::move(ack));
}

void Dispatcher::Written(ConsumerId id, size_t deliveries, size_t bytes) {
  inbox_.Post(StepInbox::Written{id, deliveries, bytes});
}

void Dispatcher::Nack(ConsumerId id, std::string_view message_id,
                      absl::Duration delay) {
  inbox_.Post(
      StepInbox::Nack{id, std::string(message_id), delay, clock_->Now()});
}

// ---- Admin work.

void Dispatcher::PurgeReady(std::string topic, CountCallback done) {
  if (std::optional<absl::Status> refused = shut_down()) {
    std::move(done)(*std::move(refused));
    return;
  }
  auto call = std::make_shared<CountCallback>(std::move(done));
  inbox_.Call([this, topic = std::move(topic), call]() mutable {
    tasks_->PurgeReady(std::move(topic), std::move(*call));
  });
}

void Dispatcher::DeleteGroup(std::string topic, std::string group,
                             CountCallback done) {
  if (std::optional<absl::Status> refused = shut_down()) {
    std::move(done)(*std::move(refused));
    return;
  }
  absl::StatusOr<GroupRegistry::GroupId> id =
      registry_->BeginDelete(topic, group);
  if (!id.ok()) {
    std::move(done)(id.status());
    return;
  }
  auto call = std::make_shared<CountCallback>(std::move(done));
  inbox_.Call([this, id = *id, call]() mutable {
    tasks_->DeleteGroup(id, std::move(*call));
  });
}

void Dispatcher::Redrive(std::string topic, std::vector<std::string> ids,
                         CountCallback done) {
  if (std::optional<absl::Status> refused = shut_down()) {
    std::move(done)(*std::move(refused));
    return;
  }
  // The letters named must all exist before anything moves.
  const std::string dead_topic = absl::StrCat(topic, ".dlq");
  const int64_t now_ms = absl::ToUnixMillis(clock_->Now());
  std::vector<std::pair<DueKey, std::string>> chosen;
  absl::flat_hash_set<std::string> named;
  for (std::string& id : ids) {
    // A letter named twice moves once: a second publish of its id in one
    // chunk would be refused as still in progress, at every retry.
    if (!named.insert(id).second) continue;
    absl::StatusOr<std::optional<DueKey>> key =
        lifecycle::FindId(*store_, dead_topic, id);
    if (!key.ok()) {
      std::move(done)(key.status());
      return;
    }
    // A message a producer published to the dead-letter topic for later is
    // no dead letter until it is due.
    absl::StatusOr<bool> later = false;
    if (key->has_value() && (*key)->deliver_at_ms > now_ms) {
      later = lifecycle::IsScheduled(*store_, **key);
    }
    if (!later.ok()) {
      std::move(done)(later.status());
      return;
    }
    if (!key->has_value() || *later) {
      std::move(done)(absl::NotFoundError(
          absl::StrCat("no dead letter with id ", Quoted(id), " of topic ",
                       Quoted(topic), " (in ", Quoted(dead_topic), ")",
                       *later ? ": it is scheduled there, not yet due" : "")));
      return;
    }
    chosen.emplace_back(**key, std::move(id));
  }
  auto call = std::make_shared<CountCallback>(std::move(done));
  inbox_.Call([this, topic = std::move(topic), chosen = std::move(chosen),
               call]() mutable {
    tasks_->Redrive(std::move(topic), std::move(chosen), std::move(*call));
  });
}

// ---- Coming due.

absl::Status Dispatcher::MoveToReady(const std::vector<ScheduledEntry>& due,
                                     const DueKey& cursor) {
  // The topics of `due` (mostly one), and each entry's place among them.
  std::vector<std::string_view> topics;
  std::vector<size_t> topic_of;
  topic_of.reserve(due.size());
  {
    absl::flat_hash_map<std::string_view, size_t> index;
    for (const ScheduledEntry& entry : due) {
      auto [it, added] = index.try_emplace(entry.topic, topics.size());
      if (added) topics.push_back(entry.topic);
      topic_of.push_back(it->second);
    }
  }
  // Each topic's takers, and the move itself, decided under the registry's
  // lock: no group they name can begin being deleted before the move is
  // pending, and so none is forgotten before the step takes the move.
  std::vector<std::vector<GroupRegistry::Taker>> takers(topics.size());
  std::vector<StepInbox::ReadyEntry> entries;
  entries.reserve(due.size());
  std::optional<StepInbox::ReadyMove> move;
  registry_->VisitTakers(
      topics,
      [&](size_t i, absl::Span<const GroupRegistry::Taker> found) {
        takers[i].assign(found.begin(), found.end());
      },
      [&] {
        for (size_t i = 0; i < due.size(); ++i) {
          const std::vector<GroupRegistry::Taker>& t = takers[topic_of[i]];
          if (t.empty()) {
            entries.push_back({0, due[i].topic, due[i].key});
            continue;
          }
          for (const GroupRegistry::Taker& taker : t) {
            entries.push_back({taker.id, std::string(), due[i].key});
          }
        }
        move.emplace(inbox_.BeginReady(std::move(entries)));
      });

  Changes changes;
  changes.Reserve(2 * due.size() + 8);
  std::vector<std::string_view> names;
  for (size_t i = 0; i < due.size(); ++i) {
    names.clear();
    for (const GroupRegistry::Taker& taker : takers[topic_of[i]]) {
      names.push_back(taker.name);
    }
    lifecycle::ComeDue(changes, due[i].topic, due[i].key, names);
  }
  lifecycle::MoveLoaderCursor(changes, cursor);
  // No fsync: if a power cut loses this move, the schedule entries and the
  // old cursor come back, and the messages come due again.
  changes.set_needs_sync(false);
  // Written on this thread, beside the commit queue: the publishes of these
  // messages have completed, and a cancel in the queue holds its message
  // back from coming due (Scheduler::BeginCancel).
  const absl::Status written = commits_->WriteDirect(changes.Take());
  std::move(*move).End(written.ok());
  return written;
}

// ---- Steps.

absl::StatusOr<absl::Time> Dispatcher::Step() { return StepImpl(true); }

void Dispatcher::TakeInbox() {
  StepInbox::Work work = inbox_.Take();
  for (absl::AnyInvocable<void() &&>& call : work.calls) std::move(call)();
  for (const StepInbox::ReadyMoved& moved : work.ready) {
    state_->AddReady(moved);
  }
  for (StepInbox::ConsumerEvent& event : work.events) {
    state_->Apply(std::move(event));
  }
}

absl::StatusOr<absl::Time> Dispatcher::StepImpl(bool deliver) {
  TakeInbox();
  absl::StatusOr<bool> worked = step_->Run(deliver);
  if (!worked.ok()) return worked.status();
  bool ran = false;
  // Tasks decide what to delete from what the store holds: they run only
  // once every ack taken is written, which Run ensures.
  if (deliver) {
    absl::StatusOr<bool> task = tasks_->RunChunk();
    if (!task.ok()) return task.status();
    ran = *task;
  }
  state_->PublishCounts();
  if (*worked || ran) return clock_->Now();  // Look for more at once.
  absl::Time next = absl::InfiniteFuture();
  if (std::optional<int64_t> timer = state_->NextTimer()) {
    next = absl::FromUnixMillis(*timer);
  }
  if (std::optional<absl::Time> stall = state_->NextStall()) {
    next = std::min(next, *stall);
  }
  return next;
}

void Dispatcher::Start() {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "hg-dispatcher");
    Run();
  });
}

void Dispatcher::Run() {
  while (true) {
    const absl::StatusOr<absl::Time> next = Step();
    if (!next.ok() && options_.store_errors != nullptr) {
      options_.store_errors->Count("deliver", next.status());
    }
    // After a failed step (store error), retry after kRetryDelay rather
    // than spin: the failed step's undo and any work arriving meanwhile
    // are taken by the next step anyway.
    const bool running = next.ok()
                             ? inbox_.Wait(*next - clock_->Now())
                             : inbox_.Wait(kRetryDelay, /*wake_on_work=*/false);
    if (!running) return;
  }
}

void Dispatcher::Shutdown(absl::Status status) {
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_.has_value()) return;
    shutdown_ = status;
  }
  inbox_.Stop();
  if (thread_.joinable()) thread_.join();
  // Acks that arrived since the last step are written, so that a restart
  // does not deliver those messages again. (A failure leaves them to
  // redelivery after the restart.) Subscriptions waiting are refused.
  (void)StepImpl(/*deliver=*/false);
  tasks_->Abandon(status);
  for (const std::shared_ptr<Consumer>& sink : state_->Sinks()) {
    sink->End(status);
  }
}

}  // namespace hourglass::broker
