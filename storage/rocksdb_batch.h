#ifndef HOURGLASS_STORAGE_ROCKSDB_BATCH_H_
#define HOURGLASS_STORAGE_ROCKSDB_BATCH_H_

// The RocksDB store's own write format (MessageStore::WriteEncoding): the
// write batches it writes, named by the column family id of each table,
// joined and read back as operations. RocksDB types appear here, so nothing
// outside storage/ includes this header.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "rocksdb/write_batch.h"
#include "storage/message_store.h"
#include "storage/rocksdb_open.h"

namespace hourglass::storage {

// The column family id of each table, in Table order.
using TableIds = std::array<uint32_t, kNumTables>;

// The name of `database`'s format, which lists its TableIds.
std::string EncodingOf(const OpenDatabase& database);
// The TableIds an EncodingOf name lists; nullopt for any other string.
std::optional<TableIds> IdsOf(std::string_view encoding);

// The records of `batches`, RocksDB write batches, one after the other under
// one header, as WriteBatch(rep) takes them. INVALID_ARGUMENT for one too
// short for a header, or more records in all than a batch counts. Their
// records are not checked: ReadBatch does that.
absl::StatusOr<std::string> JoinBatches(
    absl::Span<const std::string_view> batches);

// Calls `visit` with each record of `batch` as the operation a WriteBatch
// of ours would have made it (the RocksDB store's mapping, backwards), in
// order, the views into the batch. INVALID_ARGUMENT, saying why, for a batch
// that store could not have written: a record of a column family `ids` does
// not name, a single delete outside a write-once table, a merge outside a
// counter table or of other than 8 bytes, any other kind of record (range
// deletes, transactions' markers), or a count that does not match the
// records. Log data, which nothing reads, is skipped as RocksDB skips it.
absl::Status ReadBatch(const rocksdb::WriteBatch& batch, const TableIds& ids,
                       absl::FunctionRef<void(const OperationView&)> visit);

}  // namespace hourglass::storage

#endif  // HOURGLASS_STORAGE_ROCKSDB_BATCH_H_
