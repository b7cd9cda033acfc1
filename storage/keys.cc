#include "storage/keys.h"

#include <utility>

namespace hourglass::storage {
namespace {

void AppendName(std::string& out, std::string_view name) {
  out.append(name);
  out.push_back('\0');
}

// Bytes of an encoded DueKey.
constexpr size_t kDueKeyBytes = 16;

// "topic \0 group \0", with room for `suffix` more bytes: keys are built
// with one allocation.
std::string QueuePrefix(std::string_view topic, std::string_view group,
                        size_t suffix) {
  std::string key;
  key.reserve(topic.size() + group.size() + 2 + suffix);
  AppendName(key, topic);
  AppendName(key, group);
  return key;
}

void AppendDueKey(std::string& out, const DueKey& key) {
  AppendU64(out, static_cast<uint64_t>(key.deliver_at_ms));
  AppendU64(out, key.sequence);
}

DueKey ReadDueKey(std::string_view in) {
  return DueKey{static_cast<int64_t>(ReadU64(in)), ReadU64(in.substr(8))};
}

}  // namespace

void AppendU64(std::string& out, uint64_t value) {
  for (int shift = 56; shift >= 0; shift -= 8) {
    out.push_back(static_cast<char>((value >> shift) & 0xff));
  }
}

uint64_t ReadU64(std::string_view in) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) {
    value = (value << 8) | static_cast<uint8_t>(in[i]);
  }
  return value;
}

void AppendU32(std::string& out, uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) {
    out.push_back(static_cast<char>((value >> shift) & 0xff));
  }
}

uint32_t ReadU32(std::string_view in) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) {
    value = (value << 8) | static_cast<uint8_t>(in[i]);
  }
  return value;
}

std::string MessageKey(uint64_t sequence) {
  std::string key;
  key.reserve(8);
  AppendU64(key, sequence);
  return key;
}

std::optional<uint64_t> DecodeMessageKey(std::string_view key) {
  if (key.size() != 8) return std::nullopt;
  return ReadU64(key);
}

std::string IdKey(std::string_view topic, std::string_view id) {
  std::string key;
  key.reserve(topic.size() + 1 + id.size());
  AppendName(key, topic);
  key.append(id);
  return key;
}

std::string ScheduleKey(const DueKey& key) {
  std::string out;
  out.reserve(kDueKeyBytes);
  AppendDueKey(out, key);
  return out;
}

std::optional<DueKey> DecodeScheduleKey(std::string_view key) {
  if (key.size() != 16) return std::nullopt;
  return ReadDueKey(key);
}

std::string ReadyPrefix(std::string_view topic, std::string_view group) {
  return QueuePrefix(topic, group, 0);
}

std::string ReadyKey(std::string_view topic, std::string_view group,
                     const DueKey& key) {
  std::string out = QueuePrefix(topic, group, kDueKeyBytes);
  AppendDueKey(out, key);
  return out;
}

std::optional<DueKey> DecodeReadySuffix(std::string_view key,
                                        std::string_view prefix) {
  if (key.size() != prefix.size() + 16 || !key.starts_with(prefix)) {
    return std::nullopt;
  }
  return ReadDueKey(key.substr(prefix.size()));
}

std::string InFlightPrefix(std::string_view topic, std::string_view group) {
  return ReadyPrefix(topic, group);
}

std::string InFlightKey(std::string_view topic, std::string_view group,
                        uint64_t sequence) {
  std::string key = QueuePrefix(topic, group, 8);
  AppendU64(key, sequence);
  return key;
}

std::optional<InFlightKeyParts> DecodeInFlightKey(std::string_view key) {
  const size_t topic_end = key.find('\0');
  if (topic_end == std::string_view::npos) return std::nullopt;
  const size_t group_end = key.find('\0', topic_end + 1);
  if (group_end == std::string_view::npos || key.size() != group_end + 9) {
    return std::nullopt;
  }
  return InFlightKeyParts{
      std::string(key.substr(0, topic_end)),
      std::string(key.substr(topic_end + 1, group_end - topic_end - 1)),
      ReadU64(key.substr(group_end + 1))};
}

std::string TopicDuePrefix(std::string_view topic) {
  std::string key;
  AppendName(key, topic);
  return key;
}

std::string TopicDueKey(std::string_view topic, const DueKey& key) {
  std::string out;
  out.reserve(topic.size() + 1 + kDueKeyBytes);
  AppendName(out, topic);
  AppendDueKey(out, key);
  return out;
}

std::string ScheduleCountPrefix(std::string_view topic,
                                Granularity granularity) {
  std::string key;
  key.reserve(topic.size() + 2 + 8);
  AppendName(key, topic);
  key.push_back(static_cast<char>(granularity));
  return key;
}

std::string ScheduleCountKey(std::string_view topic, Granularity granularity,
                             int64_t start_ms) {
  std::string key = ScheduleCountPrefix(topic, granularity);
  AppendU64(key, static_cast<uint64_t>(start_ms));
  return key;
}

std::optional<int64_t> DecodeScheduleCountSuffix(std::string_view key,
                                                 std::string_view prefix) {
  if (key.size() != prefix.size() + 8 || !key.starts_with(prefix)) {
    return std::nullopt;
  }
  return static_cast<int64_t>(ReadU64(key.substr(prefix.size())));
}

std::string ScheduledCounter(std::string_view topic) {
  std::string key;
  AppendName(key, "scheduled");
  key.append(topic);
  return key;
}

std::string MessagesCounter(std::string_view topic) {
  std::string key(kMessagesCounterPrefix);
  key.append(topic);
  return key;
}

std::string ReadyCounter(std::string_view topic, std::string_view group) {
  std::string key;
  AppendName(key, "ready");
  AppendName(key, topic);
  key.append(group);
  return key;
}

std::optional<std::string> DecodeMessagesCounter(std::string_view key) {
  if (!key.starts_with(kMessagesCounterPrefix)) return std::nullopt;
  return std::string(key.substr(kMessagesCounterPrefix.size()));
}

std::optional<CounterKeyParts> DecodeCounterKey(std::string_view key) {
  const size_t end = key.find('\0');
  if (end == std::string_view::npos) return std::nullopt;
  const std::string_view kind = key.substr(0, end);
  const std::string_view rest = key.substr(end + 1);
  using Kind = CounterKeyParts::Kind;
  if (kind == "scheduled") {
    return CounterKeyParts{Kind::kScheduled, std::string(rest), ""};
  }
  if (kind == "messages") {
    return CounterKeyParts{Kind::kMessages, std::string(rest), ""};
  }
  if (kind != "ready") return std::nullopt;
  const size_t topic_end = rest.find('\0');
  if (topic_end == std::string_view::npos) return std::nullopt;
  return CounterKeyParts{Kind::kReady, std::string(rest.substr(0, topic_end)),
                         std::string(rest.substr(topic_end + 1))};
}

std::string ReplicationEpochStartKey(uint64_t epoch) {
  std::string key(kReplicationEpochStartPrefix);
  AppendU64(key, epoch);
  return key;
}

std::string GroupKey(std::string_view topic, std::string_view group) {
  std::string key(kGroupKeyPrefix);
  AppendName(key, topic);
  key.append(group);
  return key;
}

std::optional<std::pair<std::string, std::string>> DecodeGroupKey(
    std::string_view key) {
  if (!key.starts_with(kGroupKeyPrefix)) return std::nullopt;
  key.remove_prefix(kGroupKeyPrefix.size());
  const size_t end = key.find('\0');
  if (end == std::string_view::npos) return std::nullopt;
  return std::pair(std::string(key.substr(0, end)),
                   std::string(key.substr(end + 1)));
}

std::string PrefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty() && static_cast<uint8_t>(end.back()) == 0xff) {
    end.pop_back();
  }
  if (!end.empty()) end.back() = static_cast<char>(end.back() + 1);
  return end;
}

std::string IdValue(uint64_t sequence, int64_t deliver_at_ms) {
  std::string value;
  AppendU64(value, sequence);
  AppendU64(value, static_cast<uint64_t>(deliver_at_ms));
  return value;
}

std::optional<DueKey> DecodeIdValue(std::string_view value) {
  if (value.size() != 16) return std::nullopt;
  return DueKey{static_cast<int64_t>(ReadU64(value.substr(8))), ReadU64(value)};
}

namespace {
constexpr std::string_view kAssignedPrefix = "hg-";
}  // namespace

std::string AssignedId(uint64_t sequence) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(kAssignedPrefix);
  for (int shift = 60; shift >= 0; shift -= 4) {
    id.push_back(kHex[(sequence >> shift) & 0xf]);
  }
  return id;
}

bool IsAssignedIdForm(std::string_view id) {
  if (id.size() != kAssignedPrefix.size() + 16 ||
      !id.starts_with(kAssignedPrefix)) {
    return false;
  }
  for (char c : id.substr(kAssignedPrefix.size())) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

uint64_t AssignedSequence(std::string_view id) {
  uint64_t sequence = 0;
  for (char c : id.substr(kAssignedPrefix.size())) {
    sequence = sequence << 4 |
               static_cast<uint64_t>(c <= '9' ? c - '0' : c - 'a' + 10);
  }
  return sequence;
}

bool HasIdEntry(std::string_view id, uint64_t sequence) {
  return !IsAssignedIdForm(id) || AssignedSequence(id) != sequence;
}

std::string ReadyValue(uint32_t attempt) {
  std::string value;
  AppendU32(value, attempt);
  return value;
}

std::optional<uint32_t> DecodeReadyValue(std::string_view value) {
  if (value.size() != 4) return std::nullopt;
  return ReadU32(value);
}

}  // namespace hourglass::storage
