#include "broker/lifecycle.h"

#include <utility>

#include "absl/hash/hash.h"

namespace hourglass::broker {
namespace {

using storage::DueKey;
using storage::Table;

// The keys Publish wrote but schedule: messages, ids (where there is one)
// and topic_due; and the topic's count of messages.
void DeleteMessage(Changes& changes, std::string_view topic, const DueKey& key,
                   std::string_view id) {
  storage::WriteBatch& batch = changes.batch();
  batch.Delete(Table::kMessages, storage::MessageKey(key.sequence));
  if (storage::HasIdEntry(id, key.sequence)) {
    batch.Delete(Table::kIds, storage::IdKey(topic, id));
  }
  batch.Delete(Table::kTopicDue, storage::TopicDueKey(topic, key));
  changes.Count(Changes::Counter::kMessages, topic, "", -1);
}

void TakeReady(Changes& changes, std::string_view topic,
               const ReadyPlace& entry) {
  changes.batch().Delete(
      Table::kReady, storage::ReadyKey(topic, entry.stored_under, entry.key));
  changes.Count(Changes::Counter::kReady, topic, entry.stored_under, -1);
}

}  // namespace

size_t Changes::CounterHash::operator()(const CounterView& c) const {
  return absl::HashOf(static_cast<int>(c.kind), c.topic, c.group);
}

void Changes::Count(Counter kind, std::string_view topic,
                    std::string_view group, int64_t delta) {
  auto it = counters_.find(CounterView{kind, topic, group});
  if (it == counters_.end()) {
    counters_.emplace(CounterName{kind, std::string(topic), std::string(group)},
                      delta);
  } else {
    it->second += delta;
  }
}

void Changes::CountScheduled(std::string_view topic, int64_t deliver_at_ms,
                             int64_t delta) {
  Count(Counter::kScheduled, topic, "", delta);
  schedule_counts_.Add(topic, deliver_at_ms, delta);
}

void Changes::Append(Changes other) {
  batch_.Append(std::move(other.batch_));
  for (auto& [name, delta] : other.counters_) {
    Count(name.kind, name.topic, name.group, delta);
  }
  schedule_counts_.Append(other.schedule_counts_);
}

storage::WriteBatch Changes::Take() {
  for (const auto& [name, delta] : counters_) {
    if (delta == 0) continue;
    switch (name.kind) {
      case Counter::kScheduled:
        batch_.Add(storage::ScheduledCounter(name.topic), delta);
        break;
      case Counter::kMessages:
        batch_.Add(storage::MessagesCounter(name.topic), delta);
        break;
      case Counter::kReady:
        batch_.Add(storage::ReadyCounter(name.topic, name.group), delta);
        break;
    }
  }
  counters_.clear();
  schedule_counts_.AppendTo(batch_);
  schedule_counts_.clear();
  const bool needs_sync = batch_.needs_sync();
  storage::WriteBatch taken = std::exchange(batch_, storage::WriteBatch());
  batch_.set_needs_sync(needs_sync);
  return taken;
}

namespace lifecycle {

void Publish(Changes& changes, const storage::MessageRecord& record,
             const DueKey& key) {
  storage::WriteBatch& batch = changes.batch();
  const std::string& topic = record.topic();
  const std::string& id = record.id();
  batch.Put(Table::kMessages, storage::MessageKey(key.sequence),
            record.SerializeAsString());
  if (storage::HasIdEntry(id, key.sequence)) {
    batch.Put(Table::kIds, storage::IdKey(topic, id),
              storage::IdValue(key.sequence, key.deliver_at_ms));
  }
  batch.Put(Table::kSchedule, storage::ScheduleKey(key), topic);
  batch.Put(Table::kTopicDue, storage::TopicDueKey(topic, key), id);
  changes.CountScheduled(topic, key.deliver_at_ms, 1);
  changes.Count(Changes::Counter::kMessages, topic, "", 1);
}

void Cancel(Changes& changes, std::string_view topic, const DueKey& key,
            std::string_view id) {
  DeleteMessage(changes, topic, key, id);
  changes.batch().Delete(Table::kSchedule, storage::ScheduleKey(key));
  changes.CountScheduled(topic, key.deliver_at_ms, -1);
}

void Reschedule(Changes& changes, const storage::MessageRecord& record,
                const DueKey& old_key, const DueKey& new_key) {
  storage::WriteBatch& batch = changes.batch();
  const std::string& topic = record.topic();
  const std::string& id = record.id();
  batch.Delete(Table::kSchedule, storage::ScheduleKey(old_key));
  batch.Put(Table::kSchedule, storage::ScheduleKey(new_key), topic);
  batch.Delete(Table::kTopicDue, storage::TopicDueKey(topic, old_key));
  batch.Put(Table::kTopicDue, storage::TopicDueKey(topic, new_key), id);
  batch.Put(Table::kMessages, storage::MessageKey(new_key.sequence),
            record.SerializeAsString());
  if (storage::HasIdEntry(id, new_key.sequence)) {
    batch.Put(Table::kIds, storage::IdKey(topic, id),
              storage::IdValue(new_key.sequence, new_key.deliver_at_ms));
  }
  changes.CountScheduled(topic, old_key.deliver_at_ms, -1);
  changes.CountScheduled(topic, new_key.deliver_at_ms, 1);
}

void ComeDue(Changes& changes, std::string_view topic, const DueKey& key,
             absl::Span<const std::string_view> groups) {
  storage::WriteBatch& batch = changes.batch();
  static const std::string* const kFirstAttempt =
      new std::string(storage::ReadyValue(0));
  auto ready = [&](std::string_view stored_under) {
    batch.Put(Table::kReady, storage::ReadyKey(topic, stored_under, key),
              *kFirstAttempt);
    changes.Count(Changes::Counter::kReady, topic, stored_under, 1);
  };
  if (groups.empty()) {
    ready("");
  } else {
    for (std::string_view group : groups) ready(group);
  }
  batch.Delete(Table::kSchedule, storage::ScheduleKey(key));
  changes.CountScheduled(topic, key.deliver_at_ms, -1);
}

void MoveLoaderCursor(Changes& changes, const DueKey& cursor) {
  changes.batch().Put(Table::kMeta, std::string(storage::kLoaderCursorKey),
                      storage::ScheduleKey(cursor));
}

void ProbeWrite(Changes& changes, absl::Time now) {
  std::string value;
  storage::AppendU64(value, static_cast<uint64_t>(absl::ToUnixMillis(now)));
  changes.batch().Put(Table::kMeta, std::string(storage::kHealthProbeKey),
                      value);
}

void ReserveSequences(Changes& changes, uint64_t until) {
  std::string value;
  storage::AppendU64(value, until);
  changes.batch().Put(Table::kMeta, std::string(storage::kSequenceReservedKey),
                      value);
}

void Deliver(Changes& changes, std::string_view topic, std::string_view group,
             const ReadyPlace& from, const storage::InFlightRecord& record) {
  TakeReady(changes, topic, from);
  changes.batch().Put(Table::kInFlight,
                      storage::InFlightKey(topic, group, from.key.sequence),
                      record.SerializeAsString());
}

void Redeliver(Changes& changes, std::string_view topic, std::string_view group,
               uint64_t sequence, const storage::InFlightRecord& record) {
  changes.batch().Put(Table::kInFlight,
                      storage::InFlightKey(topic, group, sequence),
                      record.SerializeAsString());
}

void DeliveryOfGone(Changes& changes, std::string_view topic,
                    std::string_view group, uint64_t sequence,
                    const ReadyPlace* from) {
  if (from != nullptr) TakeReady(changes, topic, *from);
  changes.batch().Delete(Table::kInFlight,
                         storage::InFlightKey(topic, group, sequence));
}

void Ack(Changes& changes, std::string_view topic, std::string_view group,
         const DueKey& key, std::string_view id, bool last_holder) {
  changes.batch().Delete(Table::kInFlight,
                         storage::InFlightKey(topic, group, key.sequence));
  if (last_holder) DeleteMessage(changes, topic, key, id);
}

void Nack(Changes& changes, std::string_view topic, std::string_view group,
          uint64_t sequence, const storage::InFlightRecord& record) {
  changes.batch().Put(Table::kInFlight,
                      storage::InFlightKey(topic, group, sequence),
                      record.SerializeAsString());
}

void DeadLetter(Changes& changes, std::string_view topic,
                std::string_view group, const DueKey& key, std::string_view id,
                bool last_holder) {
  Ack(changes, topic, group, key, id, last_holder);
}

void Expire(Changes& changes, std::string_view topic, std::string_view group,
            const DueKey& key, std::string_view id, const ReadyPlace* from,
            bool last_holder) {
  DeliveryOfGone(changes, topic, group, key.sequence, from);
  if (last_holder) DeleteMessage(changes, topic, key, id);
}

void PurgeReady(Changes& changes, std::string_view topic,
                const ReadyPlace& entry) {
  TakeReady(changes, topic, entry);
}

void DropInFlight(Changes& changes, std::string_view topic,
                  std::string_view group, uint64_t sequence) {
  changes.batch().Delete(Table::kInFlight,
                         storage::InFlightKey(topic, group, sequence));
}

void DeleteUnheld(Changes& changes, std::string_view topic, const DueKey& key,
                  std::string_view id) {
  DeleteMessage(changes, topic, key, id);
}

void Redrive(Changes& changes, std::string_view dead_topic, const DueKey& key,
             std::string_view id,
             absl::Span<const std::string_view> ready_under,
             absl::Span<const std::string_view> groups) {
  for (std::string_view group : groups) {
    DropInFlight(changes, dead_topic, group, key.sequence);
  }
  for (std::string_view stored_under : ready_under) {
    TakeReady(changes, dead_topic, ReadyPlace{stored_under, key});
  }
  DeleteMessage(changes, dead_topic, key, id);
}

void RegisterGroup(Changes& changes, std::string_view topic,
                   std::string_view group, const storage::GroupRecord& record) {
  changes.batch().Put(Table::kMeta, storage::GroupKey(topic, group),
                      record.SerializeAsString());
}

void UnregisterGroup(Changes& changes, std::string_view topic,
                     std::string_view group) {
  changes.batch().Delete(Table::kMeta, storage::GroupKey(topic, group));
}

}  // namespace lifecycle
}  // namespace hourglass::broker
