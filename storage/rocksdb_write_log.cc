#include "storage/rocksdb_write_log.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "rocksdb/transaction_log.h"
#include "spdlog/spdlog.h"

namespace hourglass::storage {
namespace {

absl::Status NoWriteLogAt(const std::string& path, uint64_t sequence) {
  return absl::NotFoundError(absl::StrCat(
      "data dir ", path, ": the write log no longer holds write ", sequence));
}

std::string Context(const std::string& path, const char* what) {
  return absl::StrCat(what, " in data dir ", path);
}

// RocksDB counts these: each hold ends only its own.
class Hold final : public MessageStore::WriteLogHold {
 public:
  Hold(std::string path, std::weak_ptr<const OpenDatabase> database)
      : path_(std::move(path)), database_(std::move(database)) {}
  ~Hold() override {
    const std::shared_ptr<const OpenDatabase> database = database_.lock();
    if (database == nullptr) return;
    const rocksdb::Status s =
        database->db->EnableFileDeletions(/*force=*/false);
    if (!s.ok()) {
      spdlog::warn("data dir {}: cannot let old files go again: {}", path_,
                   s.ToString());
    }
  }

 private:
  const std::string path_;
  const std::weak_ptr<const OpenDatabase> database_;
};

}  // namespace

absl::Status ReadRocksDbWriteLog(
    rocksdb::DB& db, const std::string& path, uint64_t from,
    absl::FunctionRef<bool(uint64_t, std::string_view)> visit) {
  std::unique_ptr<rocksdb::TransactionLogIterator> log;
  rocksdb::Status s = db.GetUpdatesSince(from, &log);
  if (s.IsNotFound()) return NoWriteLogAt(path, from);
  if (!s.ok()) return ToStatus(s, Context(path, "read the write log"));
  for (bool first = true; log->Valid(); log->Next(), first = false) {
    rocksdb::BatchResult batch = log->GetBatch();
    // The first write must hold `from`: RocksDB starts at the oldest it
    // has when `from` is older.
    if (first && batch.sequence > from) return NoWriteLogAt(path, from);
    if (!visit(batch.sequence, batch.writeBatchPtr->Data())) {
      return absl::OkStatus();
    }
  }
  s = log->status();
  // The end of the log reads as a "not found" at its last write.
  if (s.ok() || s.IsNotFound()) return absl::OkStatus();
  return ToStatus(s, Context(path, "read the write log"));
}

absl::StatusOr<std::vector<uint64_t>> RocksDbWriteLogStarts(
    rocksdb::DB& db, const std::string& path) {
  rocksdb::VectorLogPtr files;
  const rocksdb::Status s = db.GetSortedWalFiles(files);
  if (!s.ok()) return ToStatus(s, Context(path, "list the write log"));
  std::vector<uint64_t> starts;
  for (const std::unique_ptr<rocksdb::LogFile>& file : files) {
    // An empty file (the one being started) holds no write to start at.
    if (file->SizeFileBytes() > 0) starts.push_back(file->StartSequence());
  }
  return starts;
}

std::unique_ptr<MessageStore::WriteLogHold> HoldRocksDbWriteLog(
    const std::shared_ptr<const OpenDatabase>& database,
    const std::string& path) {
  const rocksdb::Status s = database->db->DisableFileDeletions();
  if (!s.ok()) {
    spdlog::warn("data dir {}: cannot keep old files: {}", path, s.ToString());
    return nullptr;
  }
  return std::make_unique<Hold>(path, database);
}

}  // namespace hourglass::storage
