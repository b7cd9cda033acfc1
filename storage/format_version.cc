#include "storage/format_version.h"

#include <cstdint>
#include <optional>
#include <string>

#include "absl/random/random.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "storage/keys.h"

namespace hourglass::storage {
namespace {

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
  // 2 -> 3: the store gets its identity.
  if (absl::Status s = write_version(3, with_store_id()); !s.ok()) return s;
  if (options.on_upgrade) options.on_upgrade(v, RocksDbStore::kFormatVersion);
  return absl::OkStatus();
}

}  // namespace hourglass::storage
