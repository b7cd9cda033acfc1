#include "broker/lifecycle_reads.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace hourglass::broker::lifecycle {
namespace {

using storage::DueKey;
using storage::Table;

absl::Status Malformed(const std::string& what) {
  return absl::DataLossError(absl::StrCat(what, " is malformed"));
}

}  // namespace

absl::StatusOr<uint64_t> ReadNextSequence(storage::MessageStore& store) {
  absl::StatusOr<std::optional<std::string>> last =
      store.LastKey(Table::kMessages);
  if (!last.ok()) return last.status();
  uint64_t next = 1;
  if (last->has_value()) {
    const std::optional<uint64_t> sequence = storage::DecodeMessageKey(**last);
    if (!sequence.has_value()) {
      return absl::DataLossError("messages table holds a malformed key");
    }
    next = *sequence + 1;
  }
  absl::StatusOr<std::optional<std::string>> reserved =
      store.Get(Table::kMeta, storage::kSequenceReservedKey);
  if (!reserved.ok()) return reserved.status();
  if (reserved->has_value()) {
    if ((*reserved)->size() != 8) {
      return absl::DataLossError("meta/sequence_reserved is not 8 bytes");
    }
    next = std::max(next, storage::ReadU64(**reserved));
  }
  return next;
}

absl::StatusOr<StoreIdentity> ReadStoreIdentity(storage::MessageStore& store) {
  StoreIdentity identity;
  absl::StatusOr<std::optional<std::string>> version =
      store.Get(Table::kMeta, storage::kFormatVersionKey);
  if (!version.ok()) return version.status();
  if (version->has_value() && (*version)->size() == 4) {
    identity.format_version = storage::ReadU32(**version);
  }
  absl::StatusOr<std::optional<std::string>> id =
      store.Get(Table::kMeta, storage::kStoreIdKey);
  if (!id.ok()) return id.status();
  if (id->has_value()) identity.store_id = **id;
  return identity;
}

absl::StatusOr<DueKey> ReadLoaderCursor(storage::MessageStore& store) {
  absl::StatusOr<std::optional<std::string>> value =
      store.Get(Table::kMeta, storage::kLoaderCursorKey);
  if (!value.ok()) return value.status();
  if (!value->has_value()) return DueKey{};
  const std::optional<DueKey> cursor = storage::DecodeScheduleKey(**value);
  if (!cursor.has_value()) {
    return absl::DataLossError("meta/loader_cursor is not 16 bytes");
  }
  return *cursor;
}

absl::StatusOr<std::vector<StoredGroup>> ReadGroups(
    storage::MessageStore& store) {
  const std::string prefix(storage::kGroupKeyPrefix);
  std::vector<StoredGroup> groups;
  absl::Status corrupt;
  absl::Status scanned = store.Scan(
      Table::kMeta, prefix, storage::PrefixEnd(prefix),
      [&](std::string_view key, std::string_view value) {
        std::optional<std::pair<std::string, std::string>> names =
            storage::DecodeGroupKey(key);
        StoredGroup group;
        if (!names.has_value() ||
            !group.record.ParseFromString(std::string(value))) {
          corrupt = absl::DataLossError("meta holds a malformed group entry");
          return false;
        }
        group.topic = std::move(names->first);
        group.group = std::move(names->second);
        groups.push_back(std::move(group));
        return true;
      });
  if (!scanned.ok()) return scanned;
  if (!corrupt.ok()) return corrupt;
  return groups;
}

namespace {

absl::Status ScanInFlightRange(
    storage::MessageStore& store, std::string_view from, std::string_view until,
    absl::FunctionRef<bool(StoredInFlight&&)> visit) {
  absl::Status corrupt;
  absl::Status scanned = store.Scan(
      Table::kInFlight, from, until,
      [&](std::string_view key, std::string_view value) {
        std::optional<storage::InFlightKeyParts> parts =
            storage::DecodeInFlightKey(key);
        StoredInFlight entry;
        if (!parts.has_value() ||
            !entry.record.ParseFromString(std::string(value))) {
          corrupt = absl::DataLossError("inflight holds a malformed entry");
          return false;
        }
        entry.topic = std::move(parts->topic);
        entry.group = std::move(parts->group);
        entry.sequence = parts->sequence;
        return visit(std::move(entry));
      });
  return scanned.ok() ? corrupt : scanned;
}

}  // namespace

absl::Status ScanInFlight(storage::MessageStore& store,
                          absl::FunctionRef<bool(StoredInFlight&&)> visit) {
  return ScanInFlightRange(store, "", "", visit);
}

absl::Status ScanInFlight(storage::MessageStore& store, std::string_view topic,
                          std::string_view group,
                          absl::FunctionRef<bool(StoredInFlight&&)> visit) {
  const std::string prefix = storage::InFlightPrefix(topic, group);
  return ScanInFlightRange(store, prefix, storage::PrefixEnd(prefix), visit);
}

absl::StatusOr<std::vector<ScheduledEntry>> ReadSchedule(
    storage::MessageStore& store, const DueKey& from, const DueKey& until,
    size_t limit) {
  std::vector<ScheduledEntry> entries;
  if (limit == 0 || until <= from) return entries;
  absl::Status corrupt;
  const absl::Status scanned = store.Scan(
      Table::kSchedule, storage::ScheduleKey(from), storage::ScheduleKey(until),
      [&](std::string_view key, std::string_view topic) {
        const std::optional<DueKey> due = storage::DecodeScheduleKey(key);
        if (!due.has_value()) {
          corrupt = absl::DataLossError(
              "schedule table holds a key that is not 16 bytes");
          return false;
        }
        entries.push_back({*due, std::string(topic)});
        return entries.size() < limit;
      });
  if (!scanned.ok()) return scanned;
  if (!corrupt.ok()) return corrupt;
  return entries;
}

absl::StatusOr<bool> IsScheduled(storage::MessageStore& store,
                                 const DueKey& key) {
  absl::StatusOr<std::optional<std::string>> value =
      store.Get(Table::kSchedule, storage::ScheduleKey(key));
  if (!value.ok()) return value.status();
  return value->has_value();
}

absl::StatusOr<std::optional<DueKey>> FindId(storage::MessageStore& store,
                                             std::string_view topic,
                                             std::string_view id) {
  if (storage::IsAssignedIdForm(id)) {
    const uint64_t sequence = storage::AssignedSequence(id);
    absl::StatusOr<std::optional<storage::MessageRecord>> record =
        ReadMessage(store, sequence);
    if (!record.ok()) return record.status();
    if (record->has_value() && (*record)->topic() == topic &&
        (*record)->id() == id) {
      return DueKey{(*record)->deliver_at_ms(), sequence};
    }
  }
  absl::StatusOr<std::optional<std::string>> value =
      store.Get(Table::kIds, storage::IdKey(topic, id));
  if (!value.ok()) return value.status();
  if (!value->has_value()) return std::nullopt;
  std::optional<DueKey> key = storage::DecodeIdValue(**value);
  if (!key.has_value()) {
    return Malformed(absl::StrCat("ids entry of \"", std::string(id),
                                  "\" in topic \"", std::string(topic), "\""));
  }
  return key;
}

absl::StatusOr<std::optional<std::string>> IdAt(storage::MessageStore& store,
                                                std::string_view topic,
                                                const DueKey& key) {
  return store.Get(Table::kTopicDue, storage::TopicDueKey(topic, key));
}

absl::Status ScanTopic(
    storage::MessageStore& store, std::string_view topic, const DueKey& from,
    absl::FunctionRef<bool(const DueKey&, std::string_view id)> visit) {
  const std::string prefix = storage::TopicDuePrefix(topic);
  absl::Status corrupt;
  absl::Status scanned = store.Scan(
      Table::kTopicDue, storage::TopicDueKey(topic, from),
      storage::PrefixEnd(prefix),
      [&](std::string_view key, std::string_view id) {
        std::optional<DueKey> due = storage::DecodeReadySuffix(key, prefix);
        if (!due.has_value()) {
          corrupt = Malformed("a topic_due entry");
          return false;
        }
        return visit(*due, id);
      });
  return scanned.ok() ? corrupt : scanned;
}

absl::StatusOr<std::optional<storage::MessageRecord>> ReadMessage(
    storage::MessageStore& store, uint64_t sequence) {
  absl::StatusOr<std::optional<std::string>> value =
      store.Get(Table::kMessages, storage::MessageKey(sequence));
  if (!value.ok()) return value.status();
  if (!value->has_value()) return std::nullopt;
  storage::MessageRecord record;
  if (!record.ParseFromString(**value)) {
    return Malformed(absl::StrCat("message ", sequence));
  }
  return record;
}

absl::StatusOr<std::vector<std::optional<std::string>>> ReadMessageValues(
    storage::MessageStore& store, absl::Span<const uint64_t> sequences) {
  std::vector<std::string> keys;
  keys.reserve(sequences.size());
  for (uint64_t sequence : sequences) {
    keys.push_back(storage::MessageKey(sequence));
  }
  return store.MultiGet(Table::kMessages, keys);
}

absl::Status ScanReady(
    storage::MessageStore& store, std::string_view topic,
    std::string_view stored_under, const DueKey& from,
    absl::FunctionRef<bool(const DueKey&, uint32_t attempt)> visit) {
  const std::string prefix = storage::ReadyPrefix(topic, stored_under);
  absl::Status corrupt;
  absl::Status scanned = store.Scan(
      Table::kReady, storage::ReadyKey(topic, stored_under, from),
      storage::PrefixEnd(prefix),
      [&](std::string_view key, std::string_view value) {
        std::optional<DueKey> due = storage::DecodeReadySuffix(key, prefix);
        std::optional<uint32_t> attempt = storage::DecodeReadyValue(value);
        if (!due.has_value() || !attempt.has_value()) {
          corrupt = absl::DataLossError("ready holds a malformed entry");
          return false;
        }
        return visit(*due, *attempt);
      });
  return scanned.ok() ? corrupt : scanned;
}

absl::StatusOr<std::optional<uint32_t>> ReadReady(storage::MessageStore& store,
                                                  std::string_view topic,
                                                  const ReadyPlace& entry) {
  absl::StatusOr<std::optional<std::string>> value = store.Get(
      Table::kReady, storage::ReadyKey(topic, entry.stored_under, entry.key));
  if (!value.ok()) return value.status();
  if (!value->has_value()) return std::nullopt;
  std::optional<uint32_t> attempt = storage::DecodeReadyValue(**value);
  if (!attempt.has_value()) return Malformed("a ready entry");
  return attempt;
}

absl::StatusOr<std::optional<storage::InFlightRecord>> ReadInFlight(
    storage::MessageStore& store, std::string_view topic,
    std::string_view group, uint64_t sequence) {
  absl::StatusOr<std::optional<std::string>> value =
      store.Get(Table::kInFlight, storage::InFlightKey(topic, group, sequence));
  if (!value.ok()) return value.status();
  if (!value->has_value()) return std::nullopt;
  storage::InFlightRecord record;
  if (!record.ParseFromString(**value)) return Malformed("an inflight entry");
  return record;
}

std::map<std::string, TopicCounts> ReadCounts(storage::MessageStore& store) {
  std::map<std::string, TopicCounts> counts;
  for (const auto& [key, value] : store.NonZeroCounters()) {
    std::optional<storage::CounterKeyParts> parts =
        storage::DecodeCounterKey(key);
    if (!parts.has_value() || value <= 0) continue;
    TopicCounts& topic = counts[parts->topic];
    const uint64_t n = static_cast<uint64_t>(value);
    switch (parts->kind) {
      case storage::CounterKeyParts::Kind::kScheduled:
        topic.scheduled = n;
        break;
      case storage::CounterKeyParts::Kind::kMessages:
        topic.messages = n;
        break;
      case storage::CounterKeyParts::Kind::kReady:
        topic.ready[parts->group] = n;
        break;
    }
  }
  return counts;
}

absl::StatusOr<std::vector<uint64_t>> ReadScheduleCounts(
    storage::MessageStore& store, std::string_view topic,
    const storage::ScheduleCountQuery& query) {
  absl::StatusOr<std::vector<int64_t>> counts =
      storage::ReadScheduleCounts(store, topic, query);
  if (!counts.ok()) return counts.status();
  std::vector<uint64_t> out;
  out.reserve(counts->size());
  for (int64_t n : *counts) out.push_back(n > 0 ? static_cast<uint64_t>(n) : 0);
  return out;
}

}  // namespace hourglass::broker::lifecycle
