#include "broker/dispatcher.h"

#include <pthread.h>

#include <algorithm>
#include <set>
#include <string_view>
#include <utility>

#include "absl/container/btree_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "broker/background_write.h"
#include "broker/dispatcher_internal.h"
#include "broker/lifecycle.h"
#include "broker/lifecycle_reads.h"
#include "broker/ready_window.h"
#include "spdlog/spdlog.h"
#include "storage/keys.h"
#include "storage/records.pb.h"

namespace hourglass::broker {
namespace {

using storage::DueKey;

// Debian's abseil has its own string_view type: hashed-container lookups by
// std::string_view go through it to avoid building a std::string.
absl::string_view AbslView(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

// A timer set `delay` from now fires at the first whole millisecond at or
// after now + delay, so it never fires before the full delay has passed.
int64_t CeilMillis(absl::Time t) {
  return absl::ToInt64Milliseconds(
      absl::Ceil(t - absl::UnixEpoch(), absl::Milliseconds(1)));
}

// DeliveryBytes of the delivery `record` makes.
size_t RecordBytes(const storage::MessageRecord& record) {
  size_t bytes =
      record.id().size() + record.topic().size() + record.payload().size();
  for (const auto& [key, value] : record.headers()) {
    bytes += key.size() + value.size();
  }
  return bytes;
}

}  // namespace

size_t DeliveryBytes(const Delivery& delivery) {
  size_t bytes =
      delivery.id.size() + delivery.topic.size() + delivery.payload.size();
  for (const auto& [key, value] : delivery.headers) {
    bytes += key.size() + value.size();
  }
  return bytes;
}

// ---- Construction and recovery.

Dispatcher::Dispatcher(storage::MessageStore* store,
                       storage::CommitQueue* commits, Publisher* publisher,
                       Clock* clock, Activity* activity, Options options)
    : store_(store),
      commits_(commits),
      publisher_(publisher),
      clock_(clock),
      activity_(activity),
      options_(options),
      ack_writer_(std::make_unique<BackgroundWrite>(commits, "hg-ack-writer")),
      timers_(absl::ToUnixMillis(clock->Now())) {}

absl::StatusOr<std::unique_ptr<Dispatcher>> Dispatcher::Open(
    storage::MessageStore* store, storage::CommitQueue* commits,
    Publisher* publisher, Clock* clock, Activity* activity, Options options) {
  std::unique_ptr<Dispatcher> dispatcher(
      new Dispatcher(store, commits, publisher, clock, activity, options));
  if (absl::Status s = dispatcher->Recover(); !s.ok()) return s;
  return dispatcher;
}

absl::Status Dispatcher::Recover() {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::vector<lifecycle::StoredGroup>> stored =
      lifecycle::ReadGroups(*store_);
  if (!stored.ok()) return stored.status();
  // Registered groups by topic, then name.
  std::map<std::string, std::map<std::string, storage::GroupRecord>> groups;
  for (lifecycle::StoredGroup& g : *stored) {
    groups[g.topic][g.group] = std::move(g.record);
  }
  for (auto& [topic, records] : groups) {
    // A topic whose groups own no waiting area (its owner was deleted, or
    // its registration failed while a later one's did not) hands it to its
    // oldest group, so that nothing left there waits for ever.
    auto owner = std::find_if(records.begin(), records.end(), [](auto& r) {
      return r.second.owns_waiting_area();
    });
    if (owner == records.end()) {
      owner = std::min_element(
          records.begin(), records.end(), [](auto& a, auto& b) {
            return a.second.created_at_ms() < b.second.created_at_ms();
          });
      owner->second.set_owns_waiting_area(true);
    }
    for (const auto& [name, record] : records) {
      AddGroupLocked(topic, name, absl::FromUnixMillis(record.created_at_ms()),
                     record.owns_waiting_area(), /*queue_empty=*/false);
    }
  }
  for (const auto& [topic, groups] : topics_) recovery_.groups += groups.size();

  // Deliveries in flight when the last run stopped: their streams are gone,
  // so they are due again at once, unless a nack's delay still runs.
  const int64_t now_ms = absl::ToUnixMillis(clock_->Now());
  return lifecycle::ScanInFlight(
      *store_, [&](lifecycle::StoredInFlight&& stored) {
        Group* group = FindGroupLocked(stored.topic, stored.group);
        if (group == nullptr) return true;  // Its group is gone.
        const storage::InFlightRecord& record = stored.record;
        InFlight entry;
        entry.key = DueKey{record.deliver_at_ms(), stored.sequence};
        entry.attempt = record.attempt();
        entry.token = next_token_++;
        InFlight& in_flight =
            group->in_flight.insert_or_assign(stored.sequence, entry)
                .first->second;
        if (record.waiting() && record.redeliver_at_ms() > now_ms) {
          in_flight.waiting = true;
          SetTimerLocked(*group, in_flight, record.redeliver_at_ms());
          ++recovery_.waiting;
        } else {
          group->redeliverable.insert(entry.key);
          ++recovery_.due_again;
        }
        return true;
      });
}

Dispatcher::~Dispatcher() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

Dispatcher::Group* Dispatcher::FindGroupLocked(std::string_view topic,
                                               std::string_view group) {
  auto t = topics_.find(std::string(topic));
  if (t == topics_.end()) return nullptr;
  auto g = t->second.find(std::string(group));
  return g == t->second.end() ? nullptr : g->second.get();
}

Dispatcher::Group* Dispatcher::AddGroupLocked(const std::string& topic,
                                              const std::string& group,
                                              absl::Time created_at,
                                              bool owns_waiting_area,
                                              bool queue_empty) {
  std::unique_ptr<Group>& slot = topics_[topic][group];
  if (slot == nullptr) {
    slot = std::make_unique<Group>(topic, group, created_at, owns_waiting_area,
                                   options_.ready_window, queue_empty);
  }
  return slot.get();
}

Dispatcher::Group* Dispatcher::WaitingAreaOwnerLocked(
    const std::string& topic) {
  auto t = topics_.find(topic);
  if (t == topics_.end()) return nullptr;
  for (auto& [name, group] : t->second) {
    if (group->owns_waiting_area) return group.get();
  }
  return nullptr;
}

// ---- Groups.

void Dispatcher::RegisterGroup(std::string topic, std::string group,
                               absl::AnyInvocable<void(absl::Status) &&> done) {
  Register(std::move(topic), std::move(group), /*must_be_new=*/false,
           std::move(done));
}

void Dispatcher::CreateGroup(std::string topic, std::string group,
                             absl::AnyInvocable<void(absl::Status) &&> done) {
  Register(std::move(topic), std::move(group), /*must_be_new=*/true,
           std::move(done));
}

void Dispatcher::Register(std::string topic, std::string group,
                          bool must_be_new,
                          absl::AnyInvocable<void(absl::Status) &&> done) {
  std::optional<absl::Status> refused;
  {
    absl::MutexLock lock(&mu_);
    auto waiting = registering_.find({topic, group});
    if (FindGroupLocked(topic, group) == nullptr) {
      if (waiting == registering_.end()) {
        refused = CheckGroupLimitLocked(topic);
        if (!refused.has_value()) {
          SubmitRegistrationLocked(std::move(topic), std::move(group),
                                   std::move(done));
          return;
        }
      } else if (!must_be_new) {
        waiting->second.push_back(std::move(done));
        return;
      }
    }
  }
  if (refused.has_value()) {
    std::move(done)(*std::move(refused));
    return;
  }
  // The group exists, or is being registered and must be new.
  std::move(done)(must_be_new ? absl::AlreadyExistsError(absl::StrCat(
                                    "group ", Quoted(group), " of topic ",
                                    Quoted(topic), " already exists"))
                              : absl::OkStatus());
}

std::optional<absl::Status> Dispatcher::CheckGroupLimitLocked(
    const std::string& topic) {
  if (options_.max_groups_per_topic == 0) return std::nullopt;
  size_t groups = 0;
  if (auto t = topics_.find(topic); t != topics_.end()) {
    for (const auto& [name, group] : t->second) {
      if (!group->deleting) ++groups;
    }
  }
  for (auto r = registering_.lower_bound({topic, ""});
       r != registering_.end() && r->first.first == topic; ++r) {
    ++groups;
  }
  if (groups < options_.max_groups_per_topic) return std::nullopt;
  return absl::ResourceExhaustedError(absl::StrCat(
      "topic ", Quoted(topic), " has ", groups, " groups; the limit is ",
      options_.max_groups_per_topic, " (--max_groups_per_topic)"));
}

void Dispatcher::SubmitRegistrationLocked(
    std::string topic, std::string group,
    absl::AnyInvocable<void(absl::Status) &&> done) {
  // The topic's first group also takes its waiting area. Registrations of
  // one topic are decided here one at a time, so only one is first; and
  // each is queued before the lock is released, so the first reaches the
  // store first and a crash never keeps a later one without it.
  auto t = topics_.find(topic);
  const bool has_groups = t != topics_.end() && !t->second.empty();
  auto same_topic = registering_.lower_bound({topic, ""});
  const bool others_registering =
      same_topic != registering_.end() && same_topic->first.first == topic;
  const bool owns_waiting_area = !has_groups && !others_registering;
  registering_[{topic, group}].push_back(std::move(done));
  const absl::Time created_at =
      absl::FromUnixMillis(absl::ToUnixMillis(clock_->Now()));
  storage::GroupRecord record;
  record.set_created_at_ms(absl::ToUnixMillis(created_at));
  record.set_owns_waiting_area(owns_waiting_area);
  Changes changes;
  lifecycle::RegisterGroup(changes, topic, group, record);
  commits_->Submit(
      changes.Take(), [this, topic = std::move(topic), group = std::move(group),
                       created_at, owns_waiting_area](absl::Status status) {
        std::vector<absl::AnyInvocable<void(absl::Status) &&>> waiters;
        {
          absl::MutexLock lock(&mu_);
          auto it = registering_.find({topic, group});
          waiters = std::move(it->second);
          registering_.erase(it);
          if (status.ok()) {
            // A group that owns the waiting area may find entries there.
            AddGroupLocked(topic, group, created_at, owns_waiting_area,
                           /*queue_empty=*/!owns_waiting_area);
            WakeLocked();
          }
        }
        for (auto& waiter : waiters) std::move(waiter)(status);
      });
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

void Dispatcher::Subscribe(
    SubscribeOptions options, std::shared_ptr<Consumer> consumer,
    absl::AnyInvocable<void(absl::StatusOr<ConsumerId>) &&> done) {
  if (options.max_in_flight == 0) {
    options.max_in_flight = options_.default_max_in_flight;
  }
  if (options.ack_timeout <= absl::ZeroDuration()) {
    options.ack_timeout = options_.default_ack_timeout;
  }
  // Adds the consumer to its (registered) group.
  auto attach =
      [this](const SubscribeOptions& options,
             std::shared_ptr<Consumer> consumer) -> absl::StatusOr<ConsumerId> {
    absl::MutexLock lock(&mu_);
    if (shutdown_.has_value()) return *shutdown_;
    Group* group = FindGroupLocked(options.topic, options.group);
    if (group == nullptr || group->deleting) {
      return absl::NotFoundError(
          absl::StrCat("group ", Quoted(options.group), " of topic ",
                       Quoted(options.topic), " was deleted"));
    }
    auto state = std::make_unique<ConsumerState>();
    state->id = next_consumer_id_++;
    state->group = group;
    state->max_in_flight = options.max_in_flight;
    state->ack_timeout = options.ack_timeout;
    state->sink = std::move(consumer);
    state->last_progress = clock_->Now();
    group->consumers.push_back(state.get());
    const ConsumerId id = state->id;
    consumers_.emplace(id, std::move(state));
    WakeLocked();
    return id;
  };
  bool registered = false;
  std::optional<absl::Status> refused;
  {
    absl::MutexLock lock(&mu_);
    refused = shutdown_;
    registered = FindGroupLocked(options.topic, options.group) != nullptr;
  }
  if (refused.has_value()) {
    std::move(done)(*refused);
    return;
  }
  if (registered) {
    std::move(done)(attach(options, std::move(consumer)));
    return;
  }
  if (!options.may_create_group) {
    std::move(done)(absl::NotFoundError(absl::StrCat(
        "group ", Quoted(options.group), " of topic ", Quoted(options.topic),
        " does not exist, and this token may not create it: an admin creates "
        "it (hourglass groups create --topic=",
        options.topic, " --group=", options.group, ")")));
    return;
  }
  std::string topic = options.topic, group = options.group;
  RegisterGroup(std::move(topic), std::move(group),
                [attach = std::move(attach), options = std::move(options),
                 consumer = std::move(consumer),
                 done = std::move(done)](absl::Status status) mutable {
                  if (!status.ok()) {
                    std::move(done)(status);
                    return;
                  }
                  std::move(done)(attach(options, std::move(consumer)));
                });
}

void Dispatcher::Unsubscribe(ConsumerId id) {
  absl::MutexLock lock(&mu_);
  auto it = consumers_.find(id);
  if (it == consumers_.end()) return;
  RemoveConsumerLocked(*it->second);
}

std::shared_ptr<Consumer> Dispatcher::RemoveConsumerLocked(
    ConsumerState& consumer) {
  Group& group = *consumer.group;
  const std::vector<uint64_t> owned(consumer.owned.begin(),
                                    consumer.owned.end());
  for (uint64_t sequence : owned) {
    auto entry = group.in_flight.find(sequence);
    if (entry != group.in_flight.end()) {
      MakeRedeliverableLocked(group, entry->second);
    }
  }
  if (consumer.stall_deadline.has_value()) {
    stall_deadlines_.erase({*consumer.stall_deadline, consumer.id});
  }
  std::erase(group.consumers, &consumer);
  std::shared_ptr<Consumer> sink = std::move(consumer.sink);
  const ConsumerId id = consumer.id;
  consumers_.erase(id);  // Destroys `consumer`.
  WakeLocked();
  return sink;
}

size_t Dispatcher::Ack(ConsumerId id,
                       absl::Span<const std::string_view> message_ids) {
  absl::MutexLock lock(&mu_);
  auto it = consumers_.find(id);
  if (it == consumers_.end()) {
    unknown_acks_ += message_ids.size();
    return message_ids.size();
  }
  ConsumerState& consumer = *it->second;
  Group& group = *consumer.group;
  consumer.last_progress = clock_->Now();
  consumer.reported_stuck = false;
  size_t unknown = 0;
  for (const std::string_view message_id : message_ids) {
    auto delivered = consumer.by_id.find(AbslView(message_id));
    if (delivered == consumer.by_id.end()) {
      ++unknown;
      continue;
    }
    const uint64_t sequence = delivered->second;
    consumer.by_id.erase(delivered);
    consumer.owned.erase(sequence);
    auto entry = group.in_flight.find(sequence);
    ClearTimerLocked(entry->second);
    entry->second.owner = nullptr;
    ++group.finishing[sequence];
    finished_.push_back(
        Finished{Finished::Kind::kAck, &group, std::move(entry->second)});
    group.in_flight.erase(entry);
  }
  unknown_acks_ += unknown;
  WakeLocked();
  return unknown;
}

void Dispatcher::Written(ConsumerId id, size_t deliveries, size_t bytes) {
  absl::MutexLock lock(&mu_);
  auto it = consumers_.find(id);
  if (it == consumers_.end()) return;
  ConsumerState& consumer = *it->second;
  consumer.unsent -= std::min(deliveries, consumer.unsent);
  consumer.unsent_bytes -= std::min(bytes, consumer.unsent_bytes);
  UpdateStallDeadlineLocked(consumer, clock_->Now());
  WakeLocked();  // It may have room for more.
}

void Dispatcher::UpdateStallDeadlineLocked(ConsumerState& consumer,
                                           absl::Time now) {
  if (consumer.stall_deadline.has_value()) {
    stall_deadlines_.erase({*consumer.stall_deadline, consumer.id});
    consumer.stall_deadline.reset();
  }
  if (consumer.unsent == 0) return;
  consumer.stall_deadline = now + options_.stall_timeout;
  stall_deadlines_.insert({*consumer.stall_deadline, consumer.id});
}

std::vector<std::pair<std::shared_ptr<Consumer>, absl::Status>>
Dispatcher::RemoveStalledConsumersLocked(absl::Time now) {
  std::vector<std::pair<std::shared_ptr<Consumer>, absl::Status>> stalled;
  while (!stall_deadlines_.empty() && stall_deadlines_.begin()->first <= now) {
    ConsumerState& consumer = *consumers_.at(stall_deadlines_.begin()->second);
    const Group& group = *consumer.group;
    const std::string what = absl::StrCat(
        "wrote nothing to the client for ",
        absl::FormatDuration(options_.stall_timeout),
        " (--stream_stall_timeout) while ", consumer.unsent, " deliveries (",
        consumer.unsent_bytes, " bytes) waited to be sent; its ",
        consumer.owned.size(), " unacknowledged deliveries went back to group ",
        Quoted(group.name));
    spdlog::warn("consumer {} of group \"{}\" on topic \"{}\" ended: it {}",
                 consumer.id, group.name, group.topic, what);
    absl::Status status =
        absl::DeadlineExceededError(absl::StrCat("the stream ", what));
    stalled.emplace_back(RemoveConsumerLocked(consumer), std::move(status));
  }
  return stalled;
}

bool Dispatcher::Nack(ConsumerId id, std::string_view message_id,
                      absl::Duration delay) {
  absl::MutexLock lock(&mu_);
  auto it = consumers_.find(id);
  if (it == consumers_.end()) {
    ++unknown_acks_;
    return false;
  }
  ConsumerState& consumer = *it->second;
  auto delivered = consumer.by_id.find(AbslView(message_id));
  if (delivered == consumer.by_id.end()) {
    ++unknown_acks_;
    return false;
  }
  Group& group = *consumer.group;
  InFlight& entry = group.in_flight.at(delivered->second);
  consumer.last_progress = clock_->Now();
  consumer.reported_stuck = false;
  activity_->Nacked(group.topic, 1);
  if (delay <= absl::ZeroDuration()) {
    MakeRedeliverableLocked(group, entry);
    return true;
  }
  ReleaseFromOwnerLocked(entry);
  ClearTimerLocked(entry);
  entry.token = next_token_++;
  entry.waiting = true;
  const int64_t redeliver_at_ms = CeilMillis(clock_->Now() + delay);
  SetTimerLocked(group, entry, redeliver_at_ms);
  finished_.push_back(
      Finished{Finished::Kind::kNack, &group, entry, redeliver_at_ms});
  WakeLocked();
  return true;
}

// ---- Dispatch from the scheduler.

uint64_t Dispatcher::BeginDispatch(const std::vector<ScheduledEntry>& due,
                                   Changes& changes) {
  std::vector<std::string_view> groups;
  absl::MutexLock lock(&mu_);
  const uint64_t ticket = next_ticket_++;
  std::vector<PendingDispatch>& pending = dispatching_[ticket];
  pending.reserve(due.size());
  changes.Reserve(2 * due.size() + 8);
  for (const ScheduledEntry& entry : due) {
    pending_ready_.insert(entry.key.sequence);
    // A group being deleted takes nothing new: a dispatch naming it could
    // still be in progress when its last chunk is written.
    groups.clear();
    if (auto t = topics_.find(entry.topic); t != topics_.end()) {
      for (auto& [name, group] : t->second) {
        if (group->deleting) continue;
        groups.push_back(name);
        pending.push_back({group.get(), std::string(), entry.key});
      }
    }
    // Only the waiting area needs the topic at EndDispatch.
    if (groups.empty()) pending.push_back({nullptr, entry.topic, entry.key});
    lifecycle::ComeDue(changes, entry.topic, entry.key, groups);
  }
  return ticket;
}

void Dispatcher::EndDispatch(uint64_t ticket, bool written) {
  absl::MutexLock lock(&mu_);
  auto it = dispatching_.find(ticket);
  if (it == dispatching_.end()) return;
  for (const PendingDispatch& p : it->second) {
    pending_ready_.erase(p.key.sequence);
    if (!written) continue;
    if (p.group != nullptr) {
      p.group->window.Add(ReadyItem{p.key, false, 0});
    } else if (Group* owner = WaitingAreaOwnerLocked(p.topic)) {
      owner->window.Add(ReadyItem{p.key, true, 0});
    }
  }
  dispatching_.erase(it);
  WakeLocked();
}

// ---- Steps.

absl::StatusOr<absl::Time> Dispatcher::Step() { return StepImpl(true); }

absl::StatusOr<absl::Time> Dispatcher::StepImpl(bool deliver) {
  const int64_t now_ms = absl::ToUnixMillis(clock_->Now());
  StepWork work;
  std::vector<std::pair<std::shared_ptr<Consumer>, absl::Status>> stalled;
  absl::Status taken;
  {
    absl::MutexLock lock(&mu_);
    ExpireTimersLocked(now_ms);
    ReportStuckConsumersLocked(absl::FromUnixMillis(now_ms));
    stalled = RemoveStalledConsumersLocked(absl::FromUnixMillis(now_ms));
    taken = TakeFinishedLocked(work);
    if (taken.ok() && deliver) taken = TakeDeliveriesLocked(now_ms, work);
    if (!taken.ok()) UndoStepLocked(work);
  }
  for (auto& [sink, status] : stalled) sink->Abort(std::move(status));
  if (!taken.ok()) return taken;

  std::vector<std::pair<std::shared_ptr<Consumer>, std::vector<Delivery>>>
      sends;
  if (!work.empty() || !unwritten_acks_.empty()) {
    // The acks (with any a failed step left) are written on their own
    // thread while this one reads and writes the rest: they delete what
    // consumers are done with and touch no key the rest does.
    // No fsync for either: deliveries, acks, nacks and dead letters that a
    // power cut loses are redelivered (at least once); the client waits on
    // none.
    storage::WriteBatch acks = std::exchange(unwritten_acks_, {});
    {
      Changes ack_changes;
      BuildAckBatch(work, ack_changes);
      acks.Append(ack_changes.Take());
    }
    if (!acks.empty()) {
      acks.set_needs_sync(false);
      ack_writer_->Start(std::move(acks));
    }
    Changes changes;
    absl::Status status = BuildBatch(now_ms, work, changes);
    changes.set_needs_sync(false);
    // Written on this thread, beside the commit queue: the step waits for
    // it anyway, and every write it builds on (publishes, dispatches,
    // registrations, earlier steps) has completed.
    if (status.ok() && !changes.empty()) {
      status = commits_->WriteDirect(changes.Take());
    }
    for (StepWork::DeadLetter& dead : work.dead_letters) {
      if (!dead.prepared.has_value()) continue;
      absl::StatusOr<std::vector<PublishReceipt>> finished =
          publisher_->Finish(*std::move(dead.prepared), status);
      dead.prepared.reset();
      (void)finished;  // Same status as the step's.
    }
    if (!status.ok()) {
      {
        absl::MutexLock lock(&mu_);
        UndoStepLocked(work);
      }
      (void)FinishAckWrite();  // Kept for the next step if it failed too.
      return status;
    }
    absl::MutexLock lock(&mu_);
    CommitStepLocked(work);
    // Which deliveries go to which stream, in order; the deliveries are
    // built after the lock is released, which acks and writes also want.
    absl::flat_hash_map<ConsumerId, size_t> slot;
    for (Assignment& a : work.deliveries) {
      if (a.record == nullptr || a.deferred) continue;
      auto consumer = consumers_.find(a.consumer);
      if (consumer == consumers_.end()) continue;
      auto entry = a.group->in_flight.find(a.sequence);
      if (entry == a.group->in_flight.end() || entry->second.token != a.token) {
        continue;  // Handed back while it was being written.
      }
      auto [s, inserted] = slot.try_emplace(a.consumer, sends.size());
      if (inserted) sends.push_back({consumer->second->sink, {}});
      a.send_to = s->second;
      // Into the stream's outbox until it reports the write.
      ConsumerState& c = *consumer->second;
      if (c.unsent++ == 0) UpdateStallDeadlineLocked(c, clock_->Now());
      c.unsent_bytes += RecordBytes(*a.record);
    }
  }
  for (Assignment& a : work.deliveries) {
    if (!a.send_to.has_value()) continue;
    storage::MessageRecord& r = *a.record;
    Delivery delivery;
    // CommitStepLocked copied the id; the record is needed no more but
    // for its times.
    delivery.id = std::move(*r.mutable_id());
    delivery.topic = std::move(*r.mutable_topic());
    delivery.payload = std::move(*r.mutable_payload());
    delivery.headers.insert(r.headers().begin(), r.headers().end());
    delivery.deliver_at = absl::FromUnixMillis(r.deliver_at_ms());
    delivery.published_at = absl::FromUnixMillis(r.published_at_ms());
    delivery.attempt = r.dead_letter_attempts() + a.attempt;
    sends[*a.send_to].second.push_back(std::move(delivery));
  }
  // Activity for stats and metrics: acks, dead letters, deliveries, and how
  // late first deliveries were.
  const absl::Time now = absl::FromUnixMillis(now_ms);
  absl::flat_hash_map<const Group*, uint64_t> acked;
  for (const Finished& f : work.acked) ++acked[f.group];
  for (const auto& [group, n] : acked) {
    activity_->Acked(group->topic, group->name, n);
  }
  for (const StepWork::DeadLetter& dead : work.dead_letters) {
    activity_->DeadLettered(dead.group->topic, 1);
  }
  // By topic: how late each first delivery was, and how many were again.
  struct TopicDeliveries {
    std::vector<absl::Duration> lateness;
    uint64_t again = 0;
  };
  absl::flat_hash_map<std::string_view, TopicDeliveries> delivered;
  for (const Assignment& a : work.deliveries) {
    if (a.record == nullptr || a.deferred) continue;
    TopicDeliveries& d = delivered[a.group->topic];
    if (a.attempt == 1) {
      d.lateness.push_back(now -
                           absl::FromUnixMillis(a.record->deliver_at_ms()));
    } else {
      ++d.again;
    }
  }
  for (const auto& [topic, d] : delivered) {
    activity_->Delivered(topic, d.lateness);
    if (d.again > 0) activity_->Redelivered(topic, d.again);
  }
  for (auto& [consumer, deliveries] : sends) {
    consumer->Send(std::move(deliveries));
  }
  // Tasks decide what to delete from what the store holds, so they run
  // only once every ack taken is written.
  if (absl::Status acks = FinishAckWrite(); !acks.ok()) return acks;
  if (deliver) {
    absl::StatusOr<bool> ran = RunTask();
    if (!ran.ok()) return ran.status();
    if (*ran) return clock_->Now();
  }
  if (!work.empty()) return clock_->Now();  // Look for more at once.
  absl::MutexLock lock(&mu_);
  std::optional<int64_t> next_timer = timers_.NextExpiry();
  absl::Time next = next_timer.has_value() ? absl::FromUnixMillis(*next_timer)
                                           : absl::InfiniteFuture();
  if (!stall_deadlines_.empty()) {
    next = std::min(next, stall_deadlines_.begin()->first);
  }
  return next;
}

void Dispatcher::ExpireTimersLocked(int64_t now_ms) {
  std::vector<uint64_t> expired;
  timers_.ExpireUntil(
      now_ms, [&](const TimerEntry& timer) { expired.push_back(timer.value); });
  for (uint64_t token : expired) {
    auto target = timer_targets_.find(token);
    if (target == timer_targets_.end()) continue;
    auto [group, sequence] = target->second;
    timer_targets_.erase(target);
    auto entry = group->in_flight.find(sequence);
    if (entry == group->in_flight.end()) continue;
    entry->second.timer.reset();
    MakeRedeliverableLocked(*group, entry->second);
  }
}

absl::Status Dispatcher::TakeFinishedLocked(StepWork& work) {
  work.finished = std::move(finished_);
  finished_.clear();
  // In arrival order: an ack decides against the acks taken before it, so
  // of two groups acking one message the later one deletes it.
  for (Finished& f : work.finished) {
    if (f.kind != Finished::Kind::kAck) continue;
    auto it = f.group->finishing.find(f.entry.key.sequence);
    if (--it->second == 0) f.group->finishing.erase(it);
    ++work.finished_taken;
    absl::StatusOr<bool> held = HeldElsewhereLocked(*f.group, f.entry.key);
    if (!held.ok()) return held.status();
    f.delete_message = !*held;
  }
  return absl::OkStatus();
}

absl::Status Dispatcher::TakeDeliveriesLocked(int64_t now_ms, StepWork& work) {
  // Groups with consumers share the step: each gets an equal part, and the
  // first served changes from step to step, so that no group's backlog
  // holds back another's deliveries.
  std::vector<Group*> active;
  for (auto& [topic, groups] : topics_) {
    for (auto& [name, group] : groups) {
      if (!group->consumers.empty()) active.push_back(group.get());
    }
  }
  if (active.empty()) return absl::OkStatus();
  const size_t share =
      std::max<size_t>(64, options_.step_limit / active.size());
  const size_t first = next_group_++ % active.size();
  // Deliveries given each stream in this step: with what it has not yet
  // written, at most its credit.
  absl::flat_hash_map<const ConsumerState*, size_t> given;
  auto has_room = [&](const ConsumerState& c) {
    return c.owned.size() < c.max_in_flight &&
           c.unsent + given[&c] < c.max_in_flight &&
           c.unsent_bytes < options_.max_unsent_bytes;
  };
  for (size_t k = 0; k < active.size(); ++k) {
    Group& group = *active[(first + k) % active.size()];
    const size_t limit =
        std::min(options_.step_limit, work.deliveries.size() + share);
    {
      while (work.deliveries.size() < limit) {
        // The next consumer with credit, round robin.
        ConsumerState* consumer = nullptr;
        for (size_t i = 0; i < group.consumers.size(); ++i) {
          ConsumerState* c = group.consumers[(group.next_consumer + i) %
                                             group.consumers.size()];
          if (has_room(*c)) {
            consumer = c;
            group.next_consumer =
                (group.next_consumer + i + 1) % group.consumers.size();
            break;
          }
        }
        if (consumer == nullptr) break;
        if (group.window.WantsRefill()) {
          if (absl::Status s = RefillLocked(group); !s.ok()) return s;
        }
        // Whichever is due first: a redelivery or the ready queue's head.
        std::optional<ReadyItem> head = group.window.Front();
        const bool redeliver =
            !group.redeliverable.empty() &&
            (!head.has_value() || *group.redeliverable.begin() < head->key);
        if (!redeliver && !head.has_value()) break;

        Assignment a;
        a.group = &group;
        a.consumer = consumer->id;
        a.ack_timeout = consumer->ack_timeout;
        if (redeliver) {
          const DueKey key = *group.redeliverable.begin();
          group.redeliverable.erase(group.redeliverable.begin());
          auto entry = group.in_flight.find(key.sequence);
          if (entry->second.attempt >= options_.max_attempts) {
            StepWork::DeadLetter dead{&group, std::move(entry->second)};
            group.in_flight.erase(entry);
            absl::StatusOr<bool> held = HeldElsewhereLocked(group, key);
            if (!held.ok()) {
              // Keep it, as it was, for the undo.
              work.dead_letters.push_back(std::move(dead));
              return held.status();
            }
            dead.delete_message = !*held;
            work.dead_letters.push_back(std::move(dead));
            continue;
          }
          InFlight& e = entry->second;
          a.previous_attempt = e.attempt;
          e.attempt += 1;
          e.waiting = false;
          e.owner = consumer;
          e.token = next_token_++;
          a.sequence = key.sequence;
          a.token = e.token;
          a.attempt = e.attempt;
        } else {
          group.window.PopFront();
          InFlight e;
          e.key = head->key;
          e.attempt = head->attempt + 1;
          e.owner = consumer;
          e.token = next_token_++;
          a.sequence = head->key.sequence;
          a.token = e.token;
          a.attempt = e.attempt;
          a.previous_attempt = head->attempt;
          a.from_window = *head;
          group.in_flight.insert_or_assign(head->key.sequence, std::move(e));
        }
        consumer->owned.insert(a.sequence);
        ++given[consumer];
        work.outbox_room.try_emplace(
            consumer->id, options_.max_unsent_bytes - consumer->unsent_bytes);
        work.deliveries.push_back(std::move(a));
      }
    }
  }
  (void)now_ms;
  return absl::OkStatus();
}

absl::Status Dispatcher::RefillLocked(Group& group) {
  const size_t want = group.window.RefillSize();
  const DueKey from = *group.window.frontier();
  std::vector<ReadyItem> read;
  std::optional<DueKey> next;  // Nullopt: the disk holds nothing more.
  auto scan = [&](std::string_view stored_under, bool waiting_area) {
    size_t count = 0;
    return lifecycle::ScanReady(
        *store_, group.topic, stored_under, from,
        [&](const DueKey& due, uint32_t attempt) {
          ++count;
          if (!pending_ready_.contains(due.sequence) &&
              !group.in_flight.contains(due.sequence)) {
            read.push_back({due, waiting_area, attempt});
          }
          if (count < want) return true;
          const DueKey bound{due.deliver_at_ms, due.sequence + 1};
          if (!next.has_value() || bound < *next) next = bound;
          return false;
        });
  };
  if (absl::Status s = scan(group.name, false); !s.ok()) return s;
  if (group.owns_waiting_area) {
    if (absl::Status s = scan("", true); !s.ok()) return s;
  }
  // Of two scans, only keys before both bounds are known complete.
  if (next.has_value()) {
    std::erase_if(read,
                  [&](const ReadyItem& item) { return item.key >= *next; });
  }
  std::sort(
      read.begin(), read.end(),
      [](const ReadyItem& a, const ReadyItem& b) { return a.key < b.key; });
  group.window.ApplyRefill(read, next);
  return absl::OkStatus();
}

absl::StatusOr<bool> Dispatcher::HeldElsewhereLocked(const Group& group,
                                                     const DueKey& key) {
  return HeldLocked(group.topic, key, &group, nullptr);
}

absl::StatusOr<bool> Dispatcher::HeldLocked(
    const std::string& topic, const DueKey& key, const Group* except,
    const absl::flat_hash_set<std::pair<std::string, uint64_t>>* removing) {
  auto removed = [&](const std::string& stored_under) {
    return removing != nullptr &&
           removing->contains({stored_under, key.sequence});
  };
  // A ready entry on disk, beyond what a window holds. Rare: only groups
  // with a backlog beyond their window, or an unowned waiting area, get
  // here. A read under the lock keeps the answer consistent with refills.
  auto on_disk = [&](const std::string& stored_under) -> absl::StatusOr<bool> {
    if (removed(stored_under)) return false;
    absl::StatusOr<std::optional<uint32_t>> ready =
        lifecycle::ReadReady(*store_, topic, ReadyPlace{stored_under, key});
    if (!ready.ok()) return ready.status();
    return ready->has_value();
  };
  bool area_owned = false;
  auto t = topics_.find(topic);
  if (t != topics_.end()) {
    for (const auto& [name, other_ptr] : t->second) {
      const Group& other = *other_ptr;
      area_owned = area_owned || other.owns_waiting_area;
      if (&other == except || other.deleting) continue;
      if (other.in_flight.contains(key.sequence) ||
          other.finishing.contains(key.sequence) ||
          other.window.Contains(key)) {
        return true;
      }
      if (!other.window.MayBeOnDiskOnly(key)) continue;
      absl::StatusOr<bool> held = on_disk(other.name);
      if (!held.ok() || *held) return held;
      if (other.owns_waiting_area) {
        held = on_disk("");
        if (!held.ok() || *held) return held;
      }
    }
  }
  // A waiting area no group owns holds its messages for the first group.
  if (!area_owned) return on_disk("");
  return false;
}

void Dispatcher::BuildAckBatch(StepWork& work, Changes& changes) {
  std::vector<Finished> nacks;
  changes.Reserve(3 * work.finished.size() + 4);
  for (Finished& f : work.finished) {
    if (f.kind != Finished::Kind::kAck) {
      nacks.push_back(std::move(f));
      continue;
    }
    const Group& group = *f.group;
    lifecycle::Ack(changes, group.topic, group.name, f.entry.key, f.entry.id,
                   /*last_holder=*/f.delete_message);
    work.acked.push_back(std::move(f));
  }
  work.finished = std::move(nacks);
  // Whatever happens to the rest of the step, the acks are not taken back.
  work.finished_taken = 0;
}

absl::Status Dispatcher::FinishAckWrite() {
  if (!ack_writer_->busy()) return absl::OkStatus();
  return ack_writer_->Finish(&unwritten_acks_);
}

absl::Status Dispatcher::BuildBatch(int64_t now_ms, StepWork& work,
                                    Changes& changes) {
  // The records of the deliveries, then of the dead letters, in one read.
  std::vector<uint64_t> sequences;
  sequences.reserve(work.deliveries.size() + work.dead_letters.size());
  for (const Assignment& a : work.deliveries) sequences.push_back(a.sequence);
  for (const StepWork::DeadLetter& dead : work.dead_letters) {
    sequences.push_back(dead.entry.key.sequence);
  }
  absl::StatusOr<std::vector<std::optional<std::string>>> values;
  if (!sequences.empty()) {
    values = lifecycle::ReadMessageValues(*store_, sequences);
    if (!values.ok()) return values.status();
  }
  size_t next_value = 0;
  // The next record read, in the order above, on the step's arena; null if
  // it is gone.
  auto read_record =
      [&](uint64_t sequence) -> absl::StatusOr<storage::MessageRecord*> {
    std::optional<std::string>& value = (*values)[next_value++];
    if (!value.has_value()) return nullptr;
    auto* record =
        google::protobuf::Arena::CreateMessage<storage::MessageRecord>(
            &work.arena);
    if (!record->ParseFromString(*value)) {
      return absl::DataLossError(
          absl::StrCat("message ", sequence, " is malformed"));
    }
    return record;
  };
  // One operation per nack, up to three per delivery.
  changes.Reserve(work.finished.size() + 3 * work.deliveries.size() +
                  8 * work.dead_letters.size() + 16);

  // Nacks: BuildAckBatch took the acks.
  for (const Finished& f : work.finished) {
    storage::InFlightRecord record;
    record.set_attempt(f.entry.attempt);
    record.set_deliver_at_ms(f.entry.key.deliver_at_ms);
    record.set_redeliver_at_ms(f.redeliver_at_ms);
    record.set_waiting(true);
    lifecycle::Nack(changes, f.group->topic, f.group->name,
                    f.entry.key.sequence, record);
  }

  for (Assignment& a : work.deliveries) {
    absl::StatusOr<storage::MessageRecord*> record = read_record(a.sequence);
    if (!record.ok()) return record.status();
    if (*record != nullptr) {
      // The stream's outbox takes deliveries while it has room, the last
      // of them possibly past its limit; the rest wait for a later step.
      size_t& room = work.outbox_room[a.consumer];
      if (room == 0) {
        a.deferred = true;
        continue;
      }
      room -= std::min(room, RecordBytes(**record));
    }
    std::optional<ReadyPlace> from;
    if (a.from_window.has_value()) {
      from = ReadyPlace{a.from_window->waiting_area
                            ? std::string_view()
                            : std::string_view(a.group->name),
                        a.from_window->key};
    }
    if (*record == nullptr) {
      // Gone (purged): nothing to deliver.
      lifecycle::DeliveryOfGone(changes, a.group->topic, a.group->name,
                                a.sequence, from ? &*from : nullptr);
      continue;
    }
    a.record = *record;
    storage::InFlightRecord in_flight;
    in_flight.set_attempt(a.attempt);
    in_flight.set_deliver_at_ms(a.record->deliver_at_ms());
    in_flight.set_redeliver_at_ms(now_ms +
                                  absl::ToInt64Milliseconds(a.ack_timeout));
    if (from.has_value()) {
      lifecycle::Deliver(changes, a.group->topic, a.group->name, *from,
                         in_flight);
    } else {
      lifecycle::Redeliver(changes, a.group->topic, a.group->name, a.sequence,
                           in_flight);
    }
  }

  // Several groups may dead-letter one message in one step: the first
  // letter publishes it, and the others, duplicates of it, publish nothing
  // (a second Prepare of the id would be refused as still in progress, and
  // so would every retry of the step).
  std::set<std::pair<std::string, std::string>> lettered;  // (topic, id)
  for (StepWork::DeadLetter& dead : work.dead_letters) {
    const uint64_t sequence = dead.entry.key.sequence;
    absl::StatusOr<storage::MessageRecord*> record = read_record(sequence);
    if (!record.ok()) return record.status();
    const Group& group = *dead.group;
    if (*record == nullptr) {
      lifecycle::DropInFlight(changes, group.topic, group.name, sequence);
      continue;
    }
    storage::MessageRecord& r = **record;
    lifecycle::DeadLetter(changes, group.topic, group.name, dead.entry.key,
                          r.id(), /*last_holder=*/dead.delete_message);
    if (!lettered.emplace(group.topic, r.id()).second) continue;
    NewMessage letter;
    letter.topic = absl::StrCat(group.topic, ".dlq");
    letter.id = r.id();
    letter.payload = std::move(*r.mutable_payload());
    letter.headers.insert(r.headers().begin(), r.headers().end());
    letter.deliver_at = absl::FromUnixMillis(now_ms);
    letter.dead_letter_attempts = r.dead_letter_attempts() + dead.entry.attempt;
    letter.dead_letter_group = group.name;
    std::vector<NewMessage> letters;
    letters.push_back(std::move(letter));
    absl::StatusOr<PreparedPublish> prepared =
        publisher_->Prepare(std::move(letters));
    if (!prepared.ok()) return prepared.status();
    changes.Append(std::move(prepared->changes));
    dead.prepared = *std::move(prepared);
  }
  return absl::OkStatus();
}

void Dispatcher::CommitStepLocked(StepWork& work) {
  // Ack timeouts run from the hand-over, which follows at once: a stream
  // that stalls cannot keep its deliveries from other consumers.
  const absl::Time now = clock_->Now();
  for (Assignment& a : work.deliveries) {
    if (a.deferred) {
      UndoDeliveryLocked(a);
      continue;
    }
    auto entry = a.group->in_flight.find(a.sequence);
    if (entry == a.group->in_flight.end()) continue;
    InFlight& e = entry->second;
    if (a.record == nullptr) {
      // The message is gone; so is this entry.
      if (e.token == a.token) {
        ReleaseFromOwnerLocked(e);
        ClearTimerLocked(e);
        a.group->redeliverable.erase(e.key);
        a.group->in_flight.erase(entry);
      }
      continue;
    }
    e.id = a.record->id();
    if (e.token != a.token) continue;  // Handed back meanwhile.
    auto consumer = consumers_.find(a.consumer);
    if (consumer == consumers_.end()) continue;
    consumer->second->by_id[e.id] = a.sequence;
    SetTimerLocked(*a.group, e, CeilMillis(now + a.ack_timeout));
  }
}

void Dispatcher::UndoDeliveryLocked(Assignment& a) {
  auto entry = a.group->in_flight.find(a.sequence);
  if (entry == a.group->in_flight.end()) return;
  InFlight& e = entry->second;
  ReleaseFromOwnerLocked(e);
  ClearTimerLocked(e);
  if (a.from_window.has_value()) {
    a.group->redeliverable.erase(e.key);
    a.group->in_flight.erase(entry);
    a.group->window.Add(*a.from_window);  // Its ready key is still there.
  } else {
    e.attempt = a.previous_attempt;
    e.token = next_token_++;
    a.group->redeliverable.insert(e.key);
  }
  WakeLocked();
}

void Dispatcher::UndoStepLocked(StepWork& work) {
  // Deliveries: back where they came from, in reverse order.
  for (auto a = work.deliveries.rbegin(); a != work.deliveries.rend(); ++a) {
    UndoDeliveryLocked(*a);
  }
  // Dead letters: redeliverable again, to be retried.
  for (StepWork::DeadLetter& dead : work.dead_letters) {
    const DueKey key = dead.entry.key;
    dead.entry.owner = nullptr;
    dead.entry.timer.reset();
    dead.entry.token = next_token_++;
    dead.group->in_flight.insert_or_assign(key.sequence, std::move(dead.entry));
    dead.group->redeliverable.insert(key);
  }
  // Acks and nacks: queued again, ahead of newer ones, with the counts of
  // the acks already taken restored.
  size_t restored = 0;
  for (Finished& f : work.finished) {
    if (f.kind != Finished::Kind::kAck || restored == work.finished_taken) {
      continue;
    }
    ++f.group->finishing[f.entry.key.sequence];
    ++restored;
  }
  work.finished_taken = 0;
  work.finished.insert(work.finished.end(),
                       std::make_move_iterator(finished_.begin()),
                       std::make_move_iterator(finished_.end()));
  finished_ = std::move(work.finished);
  work.finished.clear();
  work.deliveries.clear();
  work.dead_letters.clear();
  WakeLocked();
}

void Dispatcher::ReportStuckConsumersLocked(absl::Time now) {
  // Cheap enough every step, but once a second is plenty.
  if (now - last_stuck_check_ < absl::Seconds(1)) return;
  last_stuck_check_ = now;
  for (auto& [id, consumer] : consumers_) {
    if (consumer->reported_stuck ||
        consumer->owned.size() < consumer->max_in_flight ||
        now - consumer->last_progress < kStuckAfter) {
      continue;
    }
    consumer->reported_stuck = true;
    std::string unsent;
    if (consumer->unsent > 0) {
      unsent = absl::StrCat(
          "; ", consumer->unsent, " deliveries (", consumer->unsent_bytes,
          " bytes) wait to be written to it, and it is ended if it writes "
          "nothing for ",
          absl::FormatDuration(options_.stall_timeout),
          " (--stream_stall_timeout)");
    }
    spdlog::warn(
        "consumer {} of group \"{}\" on topic \"{}\" is stuck: it has acked "
        "nothing for {} and holds its whole credit ({} deliveries); each "
        "goes back to the group {} after it was handed to the stream (its "
        "ack timeout) and is delivered again, to any consumer of the "
        "group{}",
        id, consumer->group->name, consumer->group->topic,
        absl::FormatDuration(now - consumer->last_progress),
        consumer->owned.size(), absl::FormatDuration(consumer->ack_timeout),
        unsent);
  }
}

// ---- Timers and ownership.

void Dispatcher::SetTimerLocked(Group& group, InFlight& entry, int64_t due_ms) {
  ClearTimerLocked(entry);
  const uint64_t token = next_token_++;
  entry.timer = timers_.Schedule(due_ms, token);
  entry.timer_token = token;
  timer_targets_[token] = {&group, entry.key.sequence};
  WakeLocked();  // The thread may sleep past the new timer.
}

void Dispatcher::ClearTimerLocked(InFlight& entry) {
  if (!entry.timer.has_value()) return;
  timers_.Cancel(*entry.timer);
  timer_targets_.erase(entry.timer_token);
  entry.timer.reset();
}

void Dispatcher::ReleaseFromOwnerLocked(InFlight& entry) {
  ConsumerState* owner = entry.owner;
  if (owner == nullptr) return;
  owner->owned.erase(entry.key.sequence);
  if (!entry.id.empty()) {
    auto it = owner->by_id.find(entry.id);
    if (it != owner->by_id.end() && it->second == entry.key.sequence) {
      owner->by_id.erase(it);
    }
  }
  entry.owner = nullptr;
}

void Dispatcher::MakeRedeliverableLocked(Group& group, InFlight& entry) {
  ReleaseFromOwnerLocked(entry);
  ClearTimerLocked(entry);
  entry.token = next_token_++;
  entry.waiting = false;
  group.redeliverable.insert(entry.key);
  WakeLocked();
}

// ---- The thread.

void Dispatcher::Start() {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "hg-dispatcher");
    Run();
  });
}

void Dispatcher::Run() {
  while (true) {
    const absl::StatusOr<absl::Time> next = Step();
    absl::MutexLock lock(&mu_);
    if (next.ok()) {
      mu_.AwaitWithTimeout(
          absl::Condition(
              +[](Dispatcher* d) ABSL_EXCLUSIVE_LOCKS_REQUIRED(d->mu_) {
                return d->wake_ || d->stopping_;
              },
              this),
          *next - clock_->Now());
    } else {
      // After a failed step (store error), retry after kRetryDelay rather
      // than spin: the failed step's undo, and any work arriving, set
      // wake_, and the next step takes all of it anyway.
      mu_.AwaitWithTimeout(absl::Condition(
                               +[](Dispatcher* d) ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                                    d->mu_) { return d->stopping_; },
                               this),
                           kRetryDelay);
    }
    if (stopping_) return;
    wake_ = false;
  }
}

void Dispatcher::Shutdown(absl::Status status) {
  std::vector<std::shared_ptr<Consumer>> sinks;
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_.has_value()) return;
    shutdown_ = status;
    stopping_ = true;
    for (auto& [id, consumer] : consumers_) sinks.push_back(consumer->sink);
  }
  if (thread_.joinable()) thread_.join();
  // Acks that arrived since the last step are written, so that a restart
  // does not deliver those messages again. (A failure leaves them to
  // redelivery after the restart.)
  (void)StepImpl(/*deliver=*/false);
  for (const std::shared_ptr<Consumer>& sink : sinks) sink->End(status);
}

// ---- Introspection.

std::vector<Dispatcher::GroupInfo> Dispatcher::Groups() {
  absl::MutexLock lock(&mu_);
  std::vector<GroupInfo> groups;
  for (const auto& [topic, by_name] : topics_) {
    for (const auto& [name, group] : by_name) {
      if (group->deleting) continue;
      groups.push_back({topic, name, group->created_at, group->in_flight.size(),
                        group->consumers.size(), group->owns_waiting_area});
    }
  }
  return groups;
}

uint64_t Dispatcher::unknown_acks() {
  absl::MutexLock lock(&mu_);
  return unknown_acks_;
}

}  // namespace hourglass::broker
