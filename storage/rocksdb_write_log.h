#ifndef HOURGLASS_STORAGE_ROCKSDB_WRITE_LOG_H_
#define HOURGLASS_STORAGE_ROCKSDB_WRITE_LOG_H_

// RocksDB's write-ahead log read back, for RocksDbStore's
// MessageStore::ReadWriteLog, WriteLogStarts and HoldWriteLog (their
// contracts are there). Internal to storage/: RocksDB's types appear here.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/message_store.h"
#include "storage/rocksdb_open.h"

namespace hourglass::storage {

// Errors name the data dir `path`.
absl::Status ReadRocksDbWriteLog(
    rocksdb::DB& db, const std::string& path, uint64_t from,
    absl::FunctionRef<bool(uint64_t sequence, std::string_view encoded)> visit);
absl::StatusOr<std::vector<uint64_t>> RocksDbWriteLogStarts(
    rocksdb::DB& db, const std::string& path);
// Null if RocksDB refuses (logged). The hold does not keep `database`
// open: if the store reopens it meanwhile, the new one holds nothing.
std::unique_ptr<MessageStore::WriteLogHold> HoldRocksDbWriteLog(
    const std::shared_ptr<const OpenDatabase>& database,
    const std::string& path);

}  // namespace hourglass::storage

#endif  // HOURGLASS_STORAGE_ROCKSDB_WRITE_LOG_H_
