#include "storage/format_version.h"

#include <cstdint>
#include <optional>
#include <string>

#include "absl/random/random.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "storage/keys.h"
#include "storage/schedule_counts.h"

namespace hourglass::storage {
namespace {

// How many scheduled messages an upgrade counts between calls of
// on_upgrade_progress.
constexpr uint64_t kUpgradeProgressEvery = 1'000'000;

// 32 random lowercase hex digits.
std::string NewStoreId() {
  absl::BitGen random;
  std::string bytes(16, '\0');
  for (char& c : bytes) c = static_cast<char>(absl::Uniform<uint8_t>(random));
  return absl::BytesToHexString(bytes);
}

}  // namespace

absl::Status UpgradeFormat(MessageStore& store,
                           const RocksDbStoreOptions& options) {
  const std::string& path = options.path;
  absl::StatusOr<std::optional<std::string>> version =
      store.Get(Table::kMeta, kFormatVersionKey);
  if (!version.ok()) return version.status();
  auto write_version = [&store](uint32_t v, WriteBatch batch) {
    std::string encoded;
    AppendU32(encoded, v);
    batch.Put(Table::kMeta, std::string(kFormatVersionKey), encoded);
    if (absl::Status s = store.Write(batch); !s.ok()) return s;
    return store.SyncLog();
  };
  auto with_store_id = [] {
    WriteBatch batch;
    batch.Put(Table::kMeta, std::string(kStoreIdKey), NewStoreId());
    return batch;
  };
  if (!version->has_value()) {
    return write_version(RocksDbStore::kFormatVersion, with_store_id());
  }
  const std::string& found = **version;
  if (found.size() != 4) {
    return absl::FailedPreconditionError(
        absl::StrCat("data dir ", path, " has an unreadable format version"));
  }
  const uint32_t v = ReadU32(found);
  const std::string readable = absl::StrCat(
      "this hourglassd ", "reads format versions ",
      RocksDbStore::kOldestFormatVersion, " to ", RocksDbStore::kFormatVersion);
  if (v > RocksDbStore::kFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "data dir ", path, " has format version ", v, "; ", readable,
        ": run the hourglassd that wrote it, or a newer one"));
  }
  if (v < RocksDbStore::kOldestFormatVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("data dir ", path, " has format version ", v, "; ",
                     readable, ": upgrade it with an older hourglassd first"));
  }
  if (v == RocksDbStore::kFormatVersion) return absl::OkStatus();
  // 3 -> 4: the schedule counts, from the schedule table, once.
  ScheduleCountDeltas counts;
  if (absl::Status s = CountSchedule(store, counts, kUpgradeProgressEvery,
                                     [&options](uint64_t counted) {
                                       if (options.on_upgrade_progress) {
                                         options.on_upgrade_progress(counted);
                                       }
                                     });
      !s.ok()) {
    return s;
  }
  WriteBatch with_counts;
  counts.AppendTo(with_counts);
  if (absl::Status s = write_version(4, std::move(with_counts)); !s.ok()) {
    return s;
  }
  if (options.on_upgrade) options.on_upgrade(v, RocksDbStore::kFormatVersion);
  return absl::OkStatus();
}

}  // namespace hourglass::storage
