#include "broker/delivery_state.h"

#include <algorithm>
#include <variant>

#include "absl/strings/str_cat.h"
#include "broker/lifecycle.h"
#include "broker/lifecycle_reads.h"
#include "broker/publisher.h"
#include "spdlog/spdlog.h"

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

}  // namespace

DeliveryState::DeliveryState(storage::MessageStore* store, Clock* clock,
                             Activity* activity, GroupRegistry* registry,
                             StepInbox* inbox, const DispatcherOptions& options)
    : store_(store),
      clock_(clock),
      activity_(activity),
      registry_(registry),
      inbox_(inbox),
      options_(options),
      timers_(absl::ToUnixMillis(clock->Now())) {}

// ---- Groups.

GroupState& DeliveryState::AddGroup(const GroupRegistry::Group& group,
                                    bool queue_empty) {
  std::unique_ptr<GroupState>& slot = topics_[group.topic][group.name];
  if (slot == nullptr) {
    slot =
        std::make_unique<GroupState>(group, options_.ready_window, queue_empty);
    by_id_[group.id] = slot.get();
  }
  return *slot;
}

GroupState* DeliveryState::FindGroup(GroupRegistry::GroupId id) {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : it->second;
}

GroupState* DeliveryState::FindGroup(std::string_view topic,
                                     std::string_view name) {
  auto t = topics_.find(topic);
  if (t == topics_.end()) return nullptr;
  auto g = t->second.find(std::string(name));
  return g == t->second.end() ? nullptr : g->second.get();
}

GroupState* DeliveryState::WaitingAreaOwner(std::string_view topic) {
  auto t = topics_.find(topic);
  if (t == topics_.end()) return nullptr;
  for (auto& [name, group] : t->second) {
    if (group->owns_waiting_area) return group.get();
  }
  return nullptr;
}

std::map<std::string, std::unique_ptr<GroupState>>* DeliveryState::GroupsOf(
    std::string_view topic) {
  auto t = topics_.find(topic);
  return t == topics_.end() ? nullptr : &t->second;
}

void DeliveryState::RemoveGroup(GroupState& group) {
  for (auto& [sequence, entry] : group.in_flight) ClearTimer(entry);
  by_id_.erase(group.id);
  const std::string topic = group.topic;
  auto t = topics_.find(topic);
  t->second.erase(group.name);  // Destroys `group`.
  if (t->second.empty()) topics_.erase(t);
}

// ---- Consumers.

absl::StatusOr<ConsumerId> DeliveryState::Attach(
    std::string_view topic, std::string_view group_name, uint32_t max_in_flight,
    absl::Duration ack_timeout, std::shared_ptr<Consumer> sink) {
  GroupState* group = FindGroup(topic, group_name);
  if (group == nullptr || group->deleting) {
    return absl::NotFoundError(absl::StrCat("group ", Quoted(group_name),
                                            " of topic ", Quoted(topic),
                                            " was deleted"));
  }
  auto state = std::make_unique<ConsumerState>();
  state->id = next_consumer_id_++;
  state->group = group;
  state->max_in_flight = max_in_flight;
  state->ack_timeout = ack_timeout;
  state->sink = std::move(sink);
  state->last_progress = clock_->Now();
  group->consumers.push_back(state.get());
  const ConsumerId id = state->id;
  consumers_.emplace(id, std::move(state));
  // Before the subscriber hears of it: a client that saw its stream open
  // sees the consumer in the statistics.
  PublishCounts();
  return id;
}

ConsumerState* DeliveryState::FindConsumer(ConsumerId id) {
  auto it = consumers_.find(id);
  return it == consumers_.end() ? nullptr : it->second.get();
}

std::shared_ptr<Consumer> DeliveryState::RemoveConsumer(
    ConsumerState& consumer) {
  GroupState& group = *consumer.group;
  const std::vector<uint64_t> owned(consumer.owned.begin(),
                                    consumer.owned.end());
  for (uint64_t sequence : owned) {
    auto entry = group.in_flight.find(sequence);
    if (entry != group.in_flight.end()) {
      MakeRedeliverable(group, entry->second);
    }
  }
  if (consumer.stall_deadline.has_value()) {
    stall_deadlines_.erase({*consumer.stall_deadline, consumer.id});
  }
  std::erase(group.consumers, &consumer);
  std::shared_ptr<Consumer> sink = std::move(consumer.sink);
  const ConsumerId id = consumer.id;
  consumers_.erase(id);  // Destroys `consumer`.
  return sink;
}

std::vector<std::shared_ptr<Consumer>> DeliveryState::Sinks() const {
  std::vector<std::shared_ptr<Consumer>> sinks;
  for (const auto& [id, consumer] : consumers_) {
    sinks.push_back(consumer->sink);
  }
  return sinks;
}

// ---- Inbox events.

void DeliveryState::AddReady(const StepInbox::ReadyMoved& moved) {
  if (!moved.written) return;
  for (const StepInbox::ReadyEntry& entry : moved.entries) {
    if (entry.group != 0) {
      if (GroupState* group = FindGroup(entry.group)) {
        group->window.Add(ReadyItem{entry.key, false, 0});
      }
    } else if (GroupState* owner = WaitingAreaOwner(entry.topic)) {
      owner->window.Add(ReadyItem{entry.key, true, 0});
    }
  }
}

void DeliveryState::Apply(StepInbox::ConsumerEvent event) {
  const absl::Time now = clock_->Now();
  if (auto* ack = std::get_if<StepInbox::Ack>(&event)) {
    ConsumerState* consumer = FindConsumer(ack->consumer);
    if (consumer == nullptr) {
      unknown_acks_ += ack->size();
      return;
    }
    GroupState& group = *consumer->group;
    consumer->last_progress = now;
    consumer->reported_stuck = false;
    for (size_t i = 0; i < ack->size(); ++i) {
      auto delivered = consumer->by_id.find(AbslView(ack->id(i)));
      if (delivered == consumer->by_id.end()) {
        ++unknown_acks_;
        continue;
      }
      const uint64_t sequence = delivered->second;
      consumer->by_id.erase(delivered);
      consumer->owned.erase(sequence);
      auto entry = group.in_flight.find(sequence);
      ClearTimer(entry->second);
      entry->second.owner = nullptr;
      ++group.finishing[sequence];
      finished_.push_back(
          Finished{Finished::Kind::kAck, &group, std::move(entry->second)});
      group.in_flight.erase(entry);
    }
  } else if (auto* nack = std::get_if<StepInbox::Nack>(&event)) {
    ConsumerState* consumer = FindConsumer(nack->consumer);
    if (consumer == nullptr) {
      ++unknown_acks_;
      return;
    }
    auto delivered = consumer->by_id.find(AbslView(nack->id));
    if (delivered == consumer->by_id.end()) {
      ++unknown_acks_;
      return;
    }
    GroupState& group = *consumer->group;
    InFlight& entry = group.in_flight.at(delivered->second);
    consumer->last_progress = now;
    consumer->reported_stuck = false;
    activity_->Nacked(group.topic, 1);
    if (nack->delay <= absl::ZeroDuration()) {
      MakeRedeliverable(group, entry);
      return;
    }
    ReleaseFromOwner(entry);
    ClearTimer(entry);
    entry.token = NextToken();
    entry.waiting = true;
    const int64_t redeliver_at_ms = CeilMillis(nack->at + nack->delay);
    SetTimer(group, entry, redeliver_at_ms);
    finished_.push_back(
        Finished{Finished::Kind::kNack, &group, entry, redeliver_at_ms});
  } else if (auto* written = std::get_if<StepInbox::Written>(&event)) {
    ConsumerState* consumer = FindConsumer(written->consumer);
    if (consumer == nullptr) return;
    consumer->unsent -= std::min(written->deliveries, consumer->unsent);
    consumer->unsent_bytes -= std::min(written->bytes, consumer->unsent_bytes);
    UpdateStallDeadline(*consumer, now);
  } else if (auto* detach = std::get_if<StepInbox::Detach>(&event)) {
    if (ConsumerState* consumer = FindConsumer(detach->consumer)) {
      RemoveConsumer(*consumer);
    }
  }
}

// ---- Timers and ownership.

void DeliveryState::SetTimer(GroupState& group, InFlight& entry,
                             int64_t due_ms) {
  ClearTimer(entry);
  const uint64_t token = NextToken();
  entry.timer = timers_.Schedule(due_ms, token);
  entry.timer_token = token;
  timer_targets_[token] = {&group, entry.key.sequence};
}

void DeliveryState::ClearTimer(InFlight& entry) {
  if (!entry.timer.has_value()) return;
  timers_.Cancel(*entry.timer);
  timer_targets_.erase(entry.timer_token);
  entry.timer.reset();
}

void DeliveryState::ExpireTimers(int64_t now_ms) {
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
    MakeRedeliverable(*group, entry->second);
  }
}

void DeliveryState::ReleaseFromOwner(InFlight& entry) {
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

void DeliveryState::MakeRedeliverable(GroupState& group, InFlight& entry) {
  ReleaseFromOwner(entry);
  ClearTimer(entry);
  entry.token = NextToken();
  entry.waiting = false;
  group.redeliverable.insert(entry.key);
}

// ---- Outboxes and stalls.

void DeliveryState::UpdateStallDeadline(ConsumerState& consumer,
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
DeliveryState::RemoveStalledConsumers(absl::Time now) {
  std::vector<std::pair<std::shared_ptr<Consumer>, absl::Status>> stalled;
  while (!stall_deadlines_.empty() && stall_deadlines_.begin()->first <= now) {
    ConsumerState& consumer = *consumers_.at(stall_deadlines_.begin()->second);
    const GroupState& group = *consumer.group;
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
    stalled.emplace_back(RemoveConsumer(consumer), std::move(status));
  }
  return stalled;
}

std::optional<absl::Time> DeliveryState::NextStall() const {
  if (stall_deadlines_.empty()) return std::nullopt;
  return stall_deadlines_.begin()->first;
}

void DeliveryState::ReportStuckConsumers(absl::Time now) {
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

// ---- Store reads.

absl::Status DeliveryState::Refill(GroupState& group) {
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
          if (!group.in_flight.contains(due.sequence)) {
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
  // Messages being moved to ready join the window when the move is taken.
  // (A move that ends after this check is still in the inbox then: the
  // step takes it at its next start, and nothing removes it from the
  // pending set but that.)
  inbox_->DropPending<ReadyItem>(
      read, [](const ReadyItem& item) { return item.key.sequence; });
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

absl::StatusOr<bool> DeliveryState::HeldElsewhere(const GroupState& group,
                                                  const DueKey& key) {
  return Held(group.topic, key, &group, nullptr);
}

absl::StatusOr<bool> DeliveryState::Held(
    std::string_view topic, const DueKey& key, const GroupState* except,
    const absl::flat_hash_set<std::pair<std::string, uint64_t>>* removing) {
  auto removed = [&](const std::string& stored_under) {
    return removing != nullptr &&
           removing->contains({stored_under, key.sequence});
  };
  // A ready entry on disk, beyond what a window holds. Rare: only groups
  // with a backlog beyond their window, or an unowned waiting area, get
  // here.
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
      const GroupState& other = *other_ptr;
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

// ---- Introspection.

void DeliveryState::PublishCounts() {
  for (auto& [topic, groups] : topics_) {
    for (auto& [name, group] : groups) {
      const std::pair<size_t, size_t> counts = {group->in_flight.size(),
                                                group->consumers.size()};
      if (counts == group->published_counts) continue;
      group->published_counts = counts;
      registry_->SetCounts(group->id, counts.first, counts.second);
    }
  }
}

}  // namespace hourglass::broker
