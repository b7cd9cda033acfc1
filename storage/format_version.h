#ifndef HOURGLASS_STORAGE_FORMAT_VERSION_H_
#define HOURGLASS_STORAGE_FORMAT_VERSION_H_

#include "absl/status/status.h"
#include "storage/message_store.h"
#include "storage/rocksdb_store.h"

namespace hourglass::storage {

// Checks the format version of the store just opened at options.path and
// brings it to RocksDbStore::kFormatVersion: a new store gets it, an older
// one (down to kOldestFormatVersion) is upgraded in place, calling
// options.on_upgrade after. Each upgrade step writes its changes and the new
// version in one synced batch, so a crash leaves the store at one version or
// the next. FAILED_PRECONDITION, in one line naming the path and what to do,
// for a version outside the range; the store's errors otherwise. The rules
// are in storage/README.md.
absl::Status UpgradeFormat(MessageStore& store,
                           const RocksDbStoreOptions& options);

}  // namespace hourglass::storage

#endif  // HOURGLASS_STORAGE_FORMAT_VERSION_H_
