#include "replication/log_entry.h"

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "replication/replication.pb.h"
#include "storage/keys.h"

namespace hourglass::replication {
namespace {

namespace v1 = ::hourglass::replication::v1;
using storage::Table;
using storage::WriteBatch;

std::string EncodeU64Pair(int64_t a, int64_t b) {
  std::string out;
  storage::AppendU64(out, static_cast<uint64_t>(a));
  storage::AppendU64(out, static_cast<uint64_t>(b));
  return out;
}

// Protobuf's wire format (protobuf.dev/programming-guides/encoding), the
// little of it an Entry needs.
constexpr int kVarint = 0;
constexpr int kFixed64 = 1;
constexpr int kLengthDelimited = 2;
constexpr int kFixed32 = 5;

constexpr char Tag(int field, int wire_type) {
  return static_cast<char>((field << 3) | wire_type);
}

size_t VarintSize(uint64_t value) {
  size_t size = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++size;
  }
  return size;
}

char* PutVarint(char* p, uint64_t value) {
  while (value >= 0x80) {
    *p++ = static_cast<char>((value & 0x7f) | 0x80);
    value >>= 7;
  }
  *p++ = static_cast<char>(value);
  return p;
}

// A bytes field, left out when empty (proto3's default).
char* PutBytes(char* p, int field, std::string_view bytes) {
  if (bytes.empty()) return p;
  *p++ = Tag(field, kLengthDelimited);
  p = PutVarint(p, bytes.size());
  std::memcpy(p, bytes.data(), bytes.size());
  return p + bytes.size();
}

size_t BytesFieldSize(std::string_view bytes) {
  return bytes.empty() ? 0 : 1 + VarintSize(bytes.size()) + bytes.size();
}

int OperationKind(WriteBatch::Operation::Kind kind) {
  switch (kind) {
    case WriteBatch::Operation::Kind::kPut:
      return v1::Operation::PUT;
    case WriteBatch::Operation::Kind::kDelete:
      return v1::Operation::DELETE;
    case WriteBatch::Operation::Kind::kAdd:
      return v1::Operation::ADD;
  }
  return v1::Operation::PUT;
}

// The bytes of an Operation message holding `op`.
size_t OperationSize(const WriteBatch::Operation& op) {
  size_t size = 0;
  if (op.table != Table{}) {
    size += 1 + VarintSize(static_cast<uint64_t>(
                    static_cast<int64_t>(static_cast<int>(op.table))));
  }
  const int kind = OperationKind(op.kind);
  if (kind != 0) size += 1 + VarintSize(static_cast<uint64_t>(kind));
  return size + BytesFieldSize(op.key) + BytesFieldSize(op.value);
}

// An Entry's fields 1 to 3, each left out when it is its default: their
// size, and the bytes.
size_t HeaderSize(int64_t epoch, int64_t index, bool needs_sync) {
  size_t size = 0;
  if (epoch != 0) size += 1 + VarintSize(static_cast<uint64_t>(epoch));
  if (index != 0) size += 1 + VarintSize(static_cast<uint64_t>(index));
  if (needs_sync) size += 2;
  return size;
}
char* PutHeader(char* p, int64_t epoch, int64_t index, bool needs_sync) {
  if (epoch != 0) {
    *p++ = Tag(v1::Entry::kEpochFieldNumber, kVarint);
    p = PutVarint(p, static_cast<uint64_t>(epoch));
  }
  if (index != 0) {
    *p++ = Tag(v1::Entry::kIndexFieldNumber, kVarint);
    p = PutVarint(p, static_cast<uint64_t>(index));
  }
  if (needs_sync) {
    *p++ = Tag(v1::Entry::kNeedsSyncFieldNumber, kVarint);
    *p++ = 1;
  }
  return p;
}

// Reads protobuf's wire format from `bytes`, field by field, as protobuf's
// parser does: the last of a repeated scalar wins, unknown fields are
// skipped. Stricter than protobuf in one way: groups (wire types 3 and 4,
// which proto3 never writes) are refused.
class WireReader {
 public:
  explicit WireReader(std::string_view bytes) : rest_(bytes) {}

  bool done() const { return rest_.empty(); }
  // What went wrong, once a read returned false.
  const char* error() const { return error_; }

  // A field's tag: its number and wire type. As protobuf reads tags: at
  // most 5 bytes, bits beyond 32 dropped, field number 0 refused.
  bool Tag(int& field, int& wire_type) {
    uint32_t tag = 0;
    for (int i = 0; i < 5; ++i) {
      if (rest_.empty()) return Fail("a tag cut short");
      const uint8_t byte = static_cast<uint8_t>(rest_.front());
      rest_.remove_prefix(1);
      tag |= static_cast<uint32_t>(byte & 0x7f) << (7 * i);
      if ((byte & 0x80) == 0) {
        if ((tag >> 3) == 0) return Fail("field number 0");
        field = static_cast<int>(tag >> 3);
        wire_type = static_cast<int>(tag & 7);
        return true;
      }
    }
    return Fail("a tag longer than 5 bytes");
  }

  // At most 10 bytes; bits beyond 64 are dropped, as protobuf drops them.
  bool Varint(uint64_t& value) {
    value = 0;
    for (int i = 0; i < 10; ++i) {
      if (rest_.empty()) return Fail("a varint cut short");
      const uint8_t byte = static_cast<uint8_t>(rest_.front());
      rest_.remove_prefix(1);
      value |= static_cast<uint64_t>(byte & 0x7f) << (7 * i);
      if ((byte & 0x80) == 0) return true;
    }
    return Fail("a varint longer than 10 bytes");
  }

  bool Bytes(std::string_view& bytes) {
    uint64_t size;
    if (!Varint(size)) return false;
    if (size > rest_.size()) return Fail("a length beyond the end");
    bytes = rest_.substr(0, size);
    rest_.remove_prefix(size);
    return true;
  }

  // Skips the value of an unknown field of `wire_type`.
  bool Skip(int wire_type) {
    uint64_t ignored;
    std::string_view ignored_bytes;
    switch (wire_type) {
      case kVarint:
        return Varint(ignored);
      case kFixed64:
        return Fixed(8);
      case kLengthDelimited:
        return Bytes(ignored_bytes);
      case kFixed32:
        return Fixed(4);
      default:
        return Fail("a group or an unknown wire type");
    }
  }

 private:
  bool Fixed(size_t size) {
    if (size > rest_.size()) return Fail("a fixed-size field cut short");
    rest_.remove_prefix(size);
    return true;
  }
  bool Fail(const char* error) {
    error_ = error;
    return false;
  }

  std::string_view rest_;
  const char* error_ = "";
};

absl::Status NotAnEntry(const WireReader& in) {
  return absl::InvalidArgumentError(
      absl::StrCat("not a replicated log entry: ", in.error()));
}

}  // namespace

std::string EncodeEntry(int64_t epoch, int64_t index,
                        absl::Span<const WriteBatch* const> batches,
                        bool needs_sync) {
  // Two passes over the operations: their sizes, then their bytes, into
  // one string of the exact size.
  size_t size = HeaderSize(epoch, index, needs_sync);
  for (const WriteBatch* batch : batches) {
    for (const WriteBatch::Operation& op : batch->operations()) {
      const size_t op_size = OperationSize(op);
      size += 1 + VarintSize(op_size) + op_size;
    }
  }
  std::string out;
  out.resize(size);
  char* p = PutHeader(out.data(), epoch, index, needs_sync);
  for (const WriteBatch* batch : batches) {
    for (const WriteBatch::Operation& op : batch->operations()) {
      *p++ = Tag(v1::Entry::kOperationsFieldNumber, kLengthDelimited);
      p = PutVarint(p, OperationSize(op));
      const int kind = OperationKind(op.kind);
      if (op.table != Table{}) {
        *p++ = Tag(v1::Operation::kTableFieldNumber, kVarint);
        // int32 fields are varints of the value sign-extended to 64 bits.
        p = PutVarint(p, static_cast<uint64_t>(
                             static_cast<int64_t>(static_cast<int>(op.table))));
      }
      if (kind != 0) {
        *p++ = Tag(v1::Operation::kKindFieldNumber, kVarint);
        p = PutVarint(p, static_cast<uint64_t>(kind));
      }
      p = PutBytes(p, v1::Operation::kKeyFieldNumber, op.key);
      p = PutBytes(p, v1::Operation::kValueFieldNumber, op.value);
    }
  }
  return out;
}

std::string EncodeEntry(int64_t epoch, int64_t index, bool needs_sync,
                        std::string_view store_encoding,
                        std::string_view store_write) {
  std::string out;
  out.resize(HeaderSize(epoch, index, needs_sync) +
             BytesFieldSize(store_encoding) + BytesFieldSize(store_write));
  char* p = PutHeader(out.data(), epoch, index, needs_sync);
  p = PutBytes(p, v1::Entry::kStoreEncodingFieldNumber, store_encoding);
  PutBytes(p, v1::Entry::kStoreWriteFieldNumber, store_write);
  return out;
}

absl::StatusOr<LogEntry> DecodeEntry(std::string_view bytes) {
  // The fields of the entry first, its operations as views into `bytes`;
  // then the operations' checks, which name the entry's index.
  struct RawOperation {
    int32_t table = 0;
    int32_t kind = 0;
    std::string_view key;
    std::string_view value;
  };
  LogEntry out;
  bool needs_sync = false;
  std::vector<RawOperation> operations;
  WireReader in(bytes);
  while (!in.done()) {
    int field;
    int wire_type;
    if (!in.Tag(field, wire_type)) return NotAnEntry(in);
    if (field == v1::Entry::kOperationsFieldNumber &&
        wire_type == kLengthDelimited) {
      std::string_view message;
      if (!in.Bytes(message)) return NotAnEntry(in);
      RawOperation& op = operations.emplace_back();
      WireReader op_in(message);
      while (!op_in.done()) {
        int op_field;
        int op_wire_type;
        if (!op_in.Tag(op_field, op_wire_type)) return NotAnEntry(op_in);
        bool read;
        uint64_t value = 0;
        if (op_field == v1::Operation::kTableFieldNumber &&
            op_wire_type == kVarint) {
          read = op_in.Varint(value);
          op.table = static_cast<int32_t>(value);
        } else if (op_field == v1::Operation::kKindFieldNumber &&
                   op_wire_type == kVarint) {
          read = op_in.Varint(value);
          op.kind = static_cast<int32_t>(value);
        } else if (op_field == v1::Operation::kKeyFieldNumber &&
                   op_wire_type == kLengthDelimited) {
          read = op_in.Bytes(op.key);
        } else if (op_field == v1::Operation::kValueFieldNumber &&
                   op_wire_type == kLengthDelimited) {
          read = op_in.Bytes(op.value);
        } else {
          read = op_in.Skip(op_wire_type);
        }
        if (!read) return NotAnEntry(op_in);
      }
      continue;
    }
    bool read;
    uint64_t value = 0;
    if (field == v1::Entry::kEpochFieldNumber && wire_type == kVarint) {
      read = in.Varint(value);
      out.epoch = static_cast<int64_t>(value);
    } else if (field == v1::Entry::kIndexFieldNumber && wire_type == kVarint) {
      read = in.Varint(value);
      out.index = static_cast<int64_t>(value);
    } else if (field == v1::Entry::kNeedsSyncFieldNumber &&
               wire_type == kVarint) {
      read = in.Varint(value);
      needs_sync = value != 0;
    } else if (field == v1::Entry::kStoreEncodingFieldNumber &&
               wire_type == kLengthDelimited) {
      read = in.Bytes(out.store_encoding);
    } else if (field == v1::Entry::kStoreWriteFieldNumber &&
               wire_type == kLengthDelimited) {
      read = in.Bytes(out.store_write);
    } else {
      read = in.Skip(wire_type);
    }
    if (!read) return NotAnEntry(in);
  }

  out.needs_sync = needs_sync;
  if (!out.store_write.empty() && !operations.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "log entry ", out.index, " holds both operations and a store's write"));
  }
  out.operations.reserve(operations.size());
  for (const RawOperation& op : operations) {
    if (op.table < 0 || op.table >= storage::kNumTables) {
      return absl::InvalidArgumentError(absl::StrCat("log entry ", out.index,
                                                     " names table ", op.table,
                                                     ", which does not exist"));
    }
    const Table table = static_cast<Table>(op.table);
    WriteBatch::Operation::Kind kind;
    switch (op.kind) {
      case v1::Operation::PUT:
        kind = WriteBatch::Operation::Kind::kPut;
        break;
      case v1::Operation::DELETE:
        kind = WriteBatch::Operation::Kind::kDelete;
        break;
      case v1::Operation::ADD:
        if (!storage::IsCounterTable(table)) {
          return absl::InvalidArgumentError(
              absl::StrCat("log entry ", out.index, " adds to table ",
                           std::string(storage::TableName(table)),
                           ", which holds no counters"));
        }
        if (op.value.size() != 8) {
          return absl::InvalidArgumentError(
              absl::StrCat("log entry ", out.index, " adds a delta of ",
                           op.value.size(), " bytes, not 8"));
        }
        kind = WriteBatch::Operation::Kind::kAdd;
        break;
      default:
        return absl::InvalidArgumentError(absl::StrCat(
            "log entry ", out.index, " has an unknown operation ", op.kind));
    }
    // A delete's value is empty whatever the entry says, as in a WriteBatch.
    out.operations.push_back({table, kind, op.key,
                              kind == WriteBatch::Operation::Kind::kDelete
                                  ? std::string_view()
                                  : op.value});
  }
  return out;
}

void AddPositionKeys(LogPosition previous, LogPosition next,
                     WriteBatch& batch) {
  batch.Put(Table::kMeta, std::string(storage::kReplicationPositionKey),
            EncodeU64Pair(next.epoch, next.index));
  if (next.epoch != previous.epoch) {
    std::string start;
    storage::AppendU64(start, static_cast<uint64_t>(next.index));
    batch.Put(
        Table::kMeta,
        storage::ReplicationEpochStartKey(static_cast<uint64_t>(next.epoch)),
        std::move(start));
  }
}

absl::StatusOr<LogPosition> ReadPosition(storage::MessageStore& store) {
  absl::StatusOr<std::optional<std::string>> value =
      store.Get(Table::kMeta, storage::kReplicationPositionKey);
  if (!value.ok()) return value.status();
  if (!value->has_value()) return LogPosition{};
  if ((*value)->size() != 16) {
    return absl::DataLossError(
        absl::StrCat("meta/", std::string(storage::kReplicationPositionKey),
                     " has ", (*value)->size(), " bytes, not 16"));
  }
  return LogPosition{static_cast<int64_t>(storage::ReadU64(**value)),
                     static_cast<int64_t>(storage::ReadU64(
                         std::string_view(**value).substr(8)))};
}

absl::StatusOr<int64_t> ReadAcceptedEpoch(storage::MessageStore& store) {
  absl::StatusOr<std::optional<std::string>> value =
      store.Get(Table::kMeta, storage::kReplicationEpochKey);
  if (!value.ok()) return value.status();
  if (!value->has_value()) return 0;
  if ((*value)->size() != 8) {
    return absl::DataLossError(
        absl::StrCat("meta/", std::string(storage::kReplicationEpochKey),
                     " has ", (*value)->size(), " bytes, not 8"));
  }
  return static_cast<int64_t>(storage::ReadU64(**value));
}

absl::StatusOr<bool> Diverged(storage::MessageStore& store, LogPosition last,
                              LogPosition copy) {
  if (copy.index > last.index) return true;
  if (copy.index == 0) return false;
  // The epoch of this log's entry at the copy's last index: the latest
  // epoch that started at or before it. One primary writes each index of
  // an epoch once, and a copy follows only a log it is a prefix of, so the
  // copy is a prefix of this log exactly when the two agree there.
  int64_t epoch_there = 0;
  absl::Status scanned = store.Scan(
      Table::kMeta, storage::kReplicationEpochStartPrefix,
      storage::PrefixEnd(storage::kReplicationEpochStartPrefix),
      [&](std::string_view key, std::string_view value) {
        if (value.size() != 8 ||
            key.size() != storage::kReplicationEpochStartPrefix.size() + 8) {
          return true;
        }
        if (static_cast<int64_t>(storage::ReadU64(value)) > copy.index) {
          return false;  // Epochs start in increasing order of index.
        }
        epoch_there = static_cast<int64_t>(storage::ReadU64(
            key.substr(storage::kReplicationEpochStartPrefix.size())));
        return true;
      });
  if (!scanned.ok()) return scanned;
  return epoch_there != copy.epoch;
}

}  // namespace hourglass::replication
