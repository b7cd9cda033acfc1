#include "storage/rocksdb_batch.h"

#include <algorithm>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "storage/rocksdb_store.h"

namespace hourglass::storage {
namespace {

// RocksDB's write batch, as WriteBatch(rep) takes it and Data() gives it: a
// 12-byte header (the sequence number, a little-endian fixed64, then the
// count of records, a little-endian fixed32) followed by the records.
constexpr size_t kBatchHeaderBytes = 12;

uint32_t BatchCount(std::string_view rep) {
  uint32_t count = 0;
  for (int i = 3; i >= 0; --i) {
    count = (count << 8) | static_cast<uint8_t>(rep[8 + i]);
  }
  return count;
}

// The name WriteEncoding() gives: the column family id of each table, in
// Table order.
constexpr std::string_view kEncodingPrefix = "rocksdb write batch, tables in ";

// ReadBatch's reader: each record as an operation, or the reason the
// RocksDB store could not have written it.
class BatchReader final : public rocksdb::WriteBatch::Handler {
 public:
  BatchReader(const TableIds& ids,
              absl::FunctionRef<void(const OperationView&)> visit)
      : ids_(ids), visit_(visit) {}

  rocksdb::Status PutCF(uint32_t id, const rocksdb::Slice& key,
                        const rocksdb::Slice& value) override {
    return Visit(id, WriteBatch::Operation::Kind::kPut, key, value);
  }
  rocksdb::Status DeleteCF(uint32_t id, const rocksdb::Slice& key) override {
    return Visit(id, WriteBatch::Operation::Kind::kDelete, key, {});
  }
  rocksdb::Status SingleDeleteCF(uint32_t id,
                                 const rocksdb::Slice& key) override {
    std::optional<Table> table = TableOf(id);
    if (table.has_value() && !IsWriteOnce(*table)) {
      return Refuse("a single delete in table ", *table);
    }
    return Visit(id, WriteBatch::Operation::Kind::kDelete, key, {});
  }
  rocksdb::Status MergeCF(uint32_t id, const rocksdb::Slice& key,
                          const rocksdb::Slice& value) override {
    std::optional<Table> table = TableOf(id);
    if (table.has_value() && !IsCounterTable(*table)) {
      return Refuse("a merge in table ", *table);
    }
    if (value.size() != 8) {
      return rocksdb::Status::InvalidArgument(
          absl::StrCat("a merge of ", value.size(), " bytes, not 8"));
    }
    return Visit(id, WriteBatch::Operation::Kind::kAdd, key, value);
  }
  // Everything else (range deletes, transactions' markers, wide columns)
  // keeps the Handler's answer: InvalidArgument. Log data, which nothing
  // reads, is ignored as RocksDB ignores it.

 private:
  std::optional<Table> TableOf(uint32_t id) const {
    for (int t = 0; t < kNumTables; ++t) {
      if (ids_[t] == id) return static_cast<Table>(t);
    }
    return std::nullopt;
  }
  rocksdb::Status Visit(uint32_t id, WriteBatch::Operation::Kind kind,
                        const rocksdb::Slice& key,
                        const rocksdb::Slice& value) {
    std::optional<Table> table = TableOf(id);
    if (!table.has_value()) {
      return rocksdb::Status::InvalidArgument(absl::StrCat(
          "a record of column family ", id, ", which holds no table"));
    }
    visit_({*table, kind, key.ToStringView(), value.ToStringView()});
    return rocksdb::Status::OK();
  }
  static rocksdb::Status Refuse(std::string_view what, Table table) {
    return rocksdb::Status::InvalidArgument(
        absl::StrCat(std::string(what), std::string(TableName(table))));
  }

  const TableIds& ids_;
  absl::FunctionRef<void(const OperationView&)> visit_;
};

}  // namespace

std::string EncodingOf(const OpenDatabase& database) {
  std::string out(kEncodingPrefix);
  for (int t = 0; t < kNumTables; ++t) {
    absl::StrAppend(&out, t == 0 ? "" : ",",
                    database.Handle(static_cast<Table>(t))->GetID());
  }
  return out;
}

std::optional<TableIds> IdsOf(std::string_view encoding) {
  if (encoding.substr(0, kEncodingPrefix.size()) != kEncodingPrefix) {
    return std::nullopt;
  }
  encoding.remove_prefix(kEncodingPrefix.size());
  const std::vector<absl::string_view> parts =
      absl::StrSplit(absl::string_view(encoding.data(), encoding.size()), ',');
  if (parts.size() != kNumTables) return std::nullopt;
  TableIds ids{};
  for (int t = 0; t < kNumTables; ++t) {
    if (!absl::SimpleAtoi(parts[t], &ids[t])) return std::nullopt;
  }
  return ids;
}

absl::StatusOr<std::string> JoinBatches(
    absl::Span<const std::string_view> batches) {
  size_t bytes = kBatchHeaderBytes;
  uint64_t count = 0;
  for (std::string_view batch : batches) {
    if (batch.size() < kBatchHeaderBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("not a write of a store like this one: ", batch.size(),
                       " bytes, too few for a write batch"));
    }
    bytes += batch.size() - kBatchHeaderBytes;
    count += BatchCount(batch);
  }
  if (count > UINT32_MAX) {
    return absl::InvalidArgumentError(
        "not a write of a store like this one: more records than a batch "
        "holds");
  }
  std::string rep;
  rep.reserve(bytes);
  rep.append(8, '\0');  // The sequence number, which the write sets.
  for (int i = 0; i < 4; ++i) {
    rep.push_back(static_cast<char>(count >> (8 * i)));
  }
  for (std::string_view batch : batches) {
    rep.append(batch.substr(kBatchHeaderBytes));
  }
  return rep;
}

absl::Status ReadBatch(const rocksdb::WriteBatch& batch, const TableIds& ids,
                       absl::FunctionRef<void(const OperationView&)> visit) {
  BatchReader reader(ids, visit);
  const rocksdb::Status s = batch.Iterate(&reader);
  if (s.ok()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("not a write of a store like this one: ", s.ToString()));
}

absl::StatusOr<WriteBatch> DecodeRocksDbWrite(std::string_view encoding,
                                              std::string_view encoded) {
  const std::optional<TableIds> ids = IdsOf(encoding);
  if (!ids.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "not a RocksDB store's write format: \"", std::string(encoding), "\""));
  }
  const rocksdb::WriteBatch batch{std::string(encoded)};
  WriteBatch out;
  // Room for the records the header counts, as many as the bytes can hold
  // (a record takes at least 3).
  out.Reserve(std::min<size_t>(batch.Count(), encoded.size() / 3));
  absl::Status read = ReadBatch(
      batch, *ids, [&](const OperationView& op) { AppendCopy(op, out); });
  if (!read.ok()) return read;
  return out;
}

}  // namespace hourglass::storage
