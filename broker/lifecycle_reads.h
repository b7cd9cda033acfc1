#ifndef HOURGLASS_BROKER_LIFECYCLE_READS_H_
#define HOURGLASS_BROKER_LIFECYCLE_READS_H_

// The message lifecycle's reads: what state a stored message is in, and
// the states of many, read from a MessageStore. With lifecycle.h (the
// transitions) this is the one part of the broker that names storage
// tables; see storage/README.md for the keys of each state.
//
// Each function reads the store and nothing else; all are thread-safe
// (the store is). Errors: the store's status, or DATA_LOSS naming what is
// malformed.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "broker/lifecycle.h"
#include "storage/keys.h"
#include "storage/message_store.h"
#include "storage/records.pb.h"
#include "storage/schedule_counts.h"

namespace hourglass::broker::lifecycle {

// ---- What start-up reads.

// The first publish sequence this run may use: past every stored message
// and every sequence an earlier run reserved (ReserveSequences).
absl::StatusOr<uint64_t> ReadNextSequence(storage::MessageStore& store);

// What the store says of itself: its format version and identity
// (storage/README.md).
struct StoreIdentity {
  uint32_t format_version = 0;
  std::string store_id;  // Empty for a store that keeps none (MemoryStore).
};
absl::StatusOr<StoreIdentity> ReadStoreIdentity(storage::MessageStore& store);

// The persisted low-water mark of the schedule (MoveLoaderCursor): every
// schedule entry before it has come due. {0, 0} for a new store.
absl::StatusOr<storage::DueKey> ReadLoaderCursor(storage::MessageStore& store);

struct StoredGroup {
  std::string topic;
  std::string group;
  storage::GroupRecord record;
};
// Every registered group, by topic, then name.
absl::StatusOr<std::vector<StoredGroup>> ReadGroups(
    storage::MessageStore& store);

struct StoredInFlight {
  std::string topic;
  std::string group;
  uint64_t sequence = 0;
  storage::InFlightRecord record;
};
// Calls `visit` with every in-flight entry (of `topic` and `group` if
// given), in key order, until it returns false.
absl::Status ScanInFlight(storage::MessageStore& store,
                          absl::FunctionRef<bool(StoredInFlight&&)> visit);
absl::Status ScanInFlight(storage::MessageStore& store, std::string_view topic,
                          std::string_view group,
                          absl::FunctionRef<bool(StoredInFlight&&)> visit);

// ---- Scheduled messages.

// Up to `limit` schedule entries from `from` (inclusive) to `until`
// (exclusive), in due order.
absl::StatusOr<std::vector<ScheduledEntry>> ReadSchedule(
    storage::MessageStore& store, const storage::DueKey& from,
    const storage::DueKey& until, size_t limit);

// Whether the message due at `key` is scheduled (not yet come due).
absl::StatusOr<bool> IsScheduled(storage::MessageStore& store,
                                 const storage::DueKey& key);

// ---- Messages by id, and a topic's messages in due order.

// The stored message of `topic` with `id`: its due time and sequence, or
// nullopt if there is none. Reads the messages table for ids of the
// assigned form (storage::IsAssignedIdForm), then the ids table.
absl::StatusOr<std::optional<storage::DueKey>> FindId(
    storage::MessageStore& store, std::string_view topic, std::string_view id);

// The id of the message of `topic` due at `key`, or nullopt if it is gone.
absl::StatusOr<std::optional<std::string>> IdAt(storage::MessageStore& store,
                                                std::string_view topic,
                                                const storage::DueKey& key);

// Calls `visit` with the due key and id of every pending message of
// `topic`, whatever its state, from `from` on in due order, until it
// returns false.
absl::Status ScanTopic(
    storage::MessageStore& store, std::string_view topic,
    const storage::DueKey& from,
    absl::FunctionRef<bool(const storage::DueKey&, std::string_view id)> visit);

// ---- Message records.

// The record of the message with `sequence`, or nullopt if it is gone.
absl::StatusOr<std::optional<storage::MessageRecord>> ReadMessage(
    storage::MessageStore& store, uint64_t sequence);

// The serialized records of `sequences`, in their order (nullopt where a
// message is gone), in one read: for callers that parse them onto an
// arena.
absl::StatusOr<std::vector<std::optional<std::string>>> ReadMessageValues(
    storage::MessageStore& store, absl::Span<const uint64_t> sequences);

// ---- Ready and in-flight entries.

// Calls `visit` with the due key and attempt of each ready entry of
// `topic` stored under `stored_under` ("" is the waiting area), from `from`
// on in due order, until it returns false.
absl::Status ScanReady(
    storage::MessageStore& store, std::string_view topic,
    std::string_view stored_under, const storage::DueKey& from,
    absl::FunctionRef<bool(const storage::DueKey&, uint32_t attempt)> visit);

// The attempt of the ready entry `entry` of `topic`, or nullopt if there is
// none.
absl::StatusOr<std::optional<uint32_t>> ReadReady(storage::MessageStore& store,
                                                  std::string_view topic,
                                                  const ReadyPlace& entry);

// The in-flight entry `sequence` of `topic` and `group`, or nullopt.
absl::StatusOr<std::optional<storage::InFlightRecord>> ReadInFlight(
    storage::MessageStore& store, std::string_view topic,
    std::string_view group, uint64_t sequence);

// ---- Counts.

// The counts of the counters table (storage/keys.h) that are not 0, read
// from memory (storage::MessageStore::NonZeroCounters): by topic, its
// scheduled and pending messages and its ready entries by group ("" is
// the waiting area). Negative counts, which a bug would make, read as 0.
struct TopicCounts {
  uint64_t scheduled = 0;
  uint64_t messages = 0;
  std::map<std::string, uint64_t> ready;
};
std::map<std::string, TopicCounts> ReadCounts(storage::MessageStore& store);

// How many scheduled messages of `topic` are due in each bucket of `query`
// (storage::ReadScheduleCounts). Negative counts, which a bug would make,
// read as 0.
absl::StatusOr<std::vector<uint64_t>> ReadScheduleCounts(
    storage::MessageStore& store, std::string_view topic,
    const storage::ScheduleCountQuery& query);

}  // namespace hourglass::broker::lifecycle

#endif  // HOURGLASS_BROKER_LIFECYCLE_READS_H_
