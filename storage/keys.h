#ifndef HOURGLASS_STORAGE_KEYS_H_
#define HOURGLASS_STORAGE_KEYS_H_

// Binary key encodings of the store's tables (see storage/README.md).
//
// Integers are fixed-width big-endian, so byte order is numeric order; names
// (topics, groups) end with a 0 byte, which they cannot contain, so a name
// is never a prefix of another name's key. Every encoding is
// order-preserving: comparing encoded keys bytewise compares the tuples.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace hourglass::storage {

// A message's place in due-time order: deliver_at, then publish sequence.
struct DueKey {
  int64_t deliver_at_ms = 0;  // REQUIRES: >= 0.
  uint64_t sequence = 0;

  friend auto operator<=>(const DueKey&, const DueKey&) = default;
};

// messages: sequence -> MessageRecord.
std::string MessageKey(uint64_t sequence);
std::optional<uint64_t> DecodeMessageKey(std::string_view key);

// ids: topic, id -> sequence. Idempotency keys and lookups by id.
std::string IdKey(std::string_view topic, std::string_view id);

// The ids table's value: the message's sequence and due time.
std::string IdValue(uint64_t sequence, int64_t deliver_at_ms);
std::optional<DueKey> DecodeIdValue(std::string_view value);

// The id the broker assigns to the message with `sequence`: "hg-" and the
// sequence in 16 lowercase hex digits. It names the message's messages key.
std::string AssignedId(uint64_t sequence);
// Whether `id` has the form of the ids the broker assigns: "hg-" and 16
// lowercase hex digits. Producers may not choose such ids (the API refuses
// them), or one could equal an id the broker assigns later in the topic.
bool IsAssignedIdForm(std::string_view id);
// The sequence an id of the assigned form names.
// REQUIRES: IsAssignedIdForm(id).
uint64_t AssignedSequence(std::string_view id);
// Whether the message with `sequence` and `id` has an entry in the ids
// table. One whose id is AssignedId(sequence) has none: its id names its
// messages key, so publishing it and deleting it each write one key less.
// (A dead letter or a redriven message keeps its id under a new sequence,
// and has an entry.)
bool HasIdEntry(std::string_view id, uint64_t sequence);

// schedule: (deliver_at, sequence) -> topic. The loader scans it in order.
std::string ScheduleKey(const DueKey& key);
std::optional<DueKey> DecodeScheduleKey(std::string_view key);

// ready: topic, group, (deliver_at, sequence) -> attempt. A group's due
// messages in delivery order. An empty group name holds a topic's due
// messages that arrived before its first group.
std::string ReadyKey(std::string_view topic, std::string_view group,
                     const DueKey& key);
std::string ReadyPrefix(std::string_view topic, std::string_view group);
// Decodes the DueKey that follows `prefix` in a ready key.
std::optional<DueKey> DecodeReadySuffix(std::string_view key,
                                        std::string_view prefix);
// The ready table's value: deliveries made before the entry became ready
// (0 for a message that just came due).
std::string ReadyValue(uint32_t attempt);
std::optional<uint32_t> DecodeReadyValue(std::string_view value);

// inflight: topic, group, sequence -> InFlightRecord.
std::string InFlightKey(std::string_view topic, std::string_view group,
                        uint64_t sequence);
std::string InFlightPrefix(std::string_view topic, std::string_view group);
struct InFlightKeyParts {
  std::string topic;
  std::string group;
  uint64_t sequence = 0;
};
std::optional<InFlightKeyParts> DecodeInFlightKey(std::string_view key);

// topic_due: topic, (deliver_at, sequence) -> id. Every pending message of
// a topic, in due order, whatever its state: written with the message,
// deleted with it. For listing a topic's messages without reading others'.
std::string TopicDueKey(std::string_view topic, const DueKey& key);
std::string TopicDuePrefix(std::string_view topic);

// counters: exact counts, changed with WriteBatch::Add in the same batch as
// the state they count.
//   scheduled/<topic>        messages not yet due
//   messages/<topic>         pending messages in any state
//   ready/<topic>/<group>    ready entries of a group ("" = waiting area)
std::string ScheduledCounter(std::string_view topic);
std::string MessagesCounter(std::string_view topic);
std::string ReadyCounter(std::string_view topic, std::string_view group);
inline constexpr std::string_view kMessagesCounterPrefix =
    std::string_view("messages\0", 9);
// The topic of a MessagesCounter key.
std::optional<std::string> DecodeMessagesCounter(std::string_view key);
// Any counter key, split into its kind and names.
struct CounterKeyParts {
  enum class Kind { kScheduled, kMessages, kReady };
  Kind kind;
  std::string topic;
  std::string group;  // kReady only.
};
std::optional<CounterKeyParts> DecodeCounterKey(std::string_view key);

// schedule_counts: topic, granularity, bucket start -> int64: how many
// scheduled messages of the topic are due in the bucket [start, start +
// the granularity's length), changed with WriteBatch::Add in the same batch
// as the schedule keys they count (storage/schedule_counts.h). Buckets are
// whole UTC minutes, hours and days: start is a multiple of the length.
enum class Granularity : uint8_t { kMinute = 0, kHour = 1, kDay = 2 };
// "topic \0 granularity": the keys of one topic and granularity, in order
// of their start.
std::string ScheduleCountPrefix(std::string_view topic,
                                Granularity granularity);
// REQUIRES: start_ms >= 0.
std::string ScheduleCountKey(std::string_view topic, Granularity granularity,
                             int64_t start_ms);
// The start of the bucket whose key is `prefix` plus 8 bytes, or nullopt
// for another key.
std::optional<int64_t> DecodeScheduleCountSuffix(std::string_view key,
                                                 std::string_view prefix);

// meta: group registrations and single values.
std::string GroupKey(std::string_view topic, std::string_view group);
inline constexpr std::string_view kGroupKeyPrefix = "group/";
inline constexpr std::string_view kFormatVersionKey = "format_version";
// The store's identity (format 3 on): 32 lowercase hex digits, chosen when
// the store is created (or upgraded to format 3) and kept by its snapshots.
inline constexpr std::string_view kStoreIdKey = "store_id";
inline constexpr std::string_view kLoaderCursorKey = "loader_cursor";
// When the store-health probe last wrote (ms since the epoch, u64).
inline constexpr std::string_view kHealthProbeKey = "health_probe";
// Every publish sequence below this value may have been used.
inline constexpr std::string_view kSequenceReservedKey = "sequence_reserved";

// Cluster mode (replication/): where this copy of the shard's replicated
// log ends, written in the same batch as each log entry: u64 epoch of the
// entry, u64 index.
inline constexpr std::string_view kReplicationPositionKey =
    "replication/position";
// The highest epoch a backup has accepted (u64): it refuses older ones.
inline constexpr std::string_view kReplicationEpochKey = "replication/epoch";
// "replication/epoch_start/" + u64 epoch -> u64 index of the epoch's first
// entry: the history that tells a diverged copy.
inline constexpr std::string_view kReplicationEpochStartPrefix =
    "replication/epoch_start/";
std::string ReplicationEpochStartKey(uint64_t epoch);

// Splits a GroupKey back into topic and group.
std::optional<std::pair<std::string, std::string>> DecodeGroupKey(
    std::string_view key);

// The smallest key greater than every key starting with `prefix`, for
// exclusive upper bounds of prefix scans. REQUIRES: `prefix` is not all
// 0xff bytes.
std::string PrefixEnd(std::string_view prefix);

// Fixed-width big-endian integers.
void AppendU64(std::string& out, uint64_t value);
uint64_t ReadU64(std::string_view in);  // REQUIRES: in.size() >= 8.
void AppendU32(std::string& out, uint32_t value);
uint32_t ReadU32(std::string_view in);  // REQUIRES: in.size() >= 4.

}  // namespace hourglass::storage

#endif  // HOURGLASS_STORAGE_KEYS_H_
