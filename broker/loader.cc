#include "broker/loader.h"

#include <string_view>
#include <utility>

#include "absl/status/status.h"

namespace hourglass::broker {

absl::StatusOr<std::vector<ScheduledEntry>> Loader::LoadUntil(
    int64_t until_ms, size_t max_entries) {
  std::vector<ScheduledEntry> entries;
  const storage::DueKey end{until_ms, 0};
  if (end <= position_ || max_entries == 0) return entries;
  absl::Status corrupt;
  const absl::Status scanned =
      store_->Scan(storage::Table::kSchedule, storage::ScheduleKey(position_),
                   storage::ScheduleKey(end),
                   [&](std::string_view key, std::string_view topic) {
                     const std::optional<storage::DueKey> due =
                         storage::DecodeScheduleKey(key);
                     if (!due.has_value()) {
                       corrupt = absl::DataLossError(
                           "schedule table holds a key that is not 16 bytes");
                       return false;
                     }
                     entries.push_back({*due, std::string(topic)});
                     return entries.size() < max_entries;
                   });
  if (!scanned.ok()) return scanned;
  if (!corrupt.ok()) return corrupt;
  if (entries.size() < max_entries) {
    position_ = end;
  } else {
    const storage::DueKey& last = entries.back().key;
    position_ = {last.deliver_at_ms, last.sequence + 1};
  }
  return entries;
}

absl::StatusOr<storage::DueKey> ReadLoaderCursor(storage::MessageStore& store) {
  absl::StatusOr<std::optional<std::string>> value =
      store.Get(storage::Table::kMeta, storage::kLoaderCursorKey);
  if (!value.ok()) return value.status();
  if (!value->has_value()) return storage::DueKey{};
  const std::optional<storage::DueKey> cursor =
      storage::DecodeScheduleKey(**value);
  if (!cursor.has_value()) {
    return absl::DataLossError("meta/loader_cursor is not 16 bytes");
  }
  return *cursor;
}

void PutLoaderCursor(storage::WriteBatch& batch,
                     const storage::DueKey& cursor) {
  batch.Put(storage::Table::kMeta, std::string(storage::kLoaderCursorKey),
            storage::ScheduleKey(cursor));
}

}  // namespace hourglass::broker
