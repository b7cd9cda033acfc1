// Stores of one process sharing RocksDbResources (a cluster node's shards):
// one block cache, one memtable budget, and no more threads for sixteen
// stores than for one.

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "storage/message_store.h"
#include "storage/rocksdb_store.h"
#include "tests/testing/temp_dir.h"

namespace hourglass::storage {
namespace {

constexpr int kStores = 16;

// Threads of this process now.
int Threads() {
  int count = 0;
  for ([[maybe_unused]] const auto& entry :
       std::filesystem::directory_iterator("/proc/self/task")) {
    ++count;
  }
  return count;
}

class SharedResourcesTest : public ::testing::Test {
 protected:
  std::unique_ptr<MessageStore> Open(int n) {
    RocksDbStoreOptions options;
    options.path = absl::StrCat(dir_.path(), "/shard-", n);
    options.shared = resources_;
    absl::StatusOr<std::unique_ptr<MessageStore>> store =
        RocksDbStore::Open(options);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }

  testing::TempDir dir_;
  std::shared_ptr<RocksDbResources> resources_ =
      RocksDbResources::Create({.block_cache_bytes = size_t{4} << 20,
                                .write_buffer_bytes = size_t{64} << 20});
};

TEST_F(SharedResourcesTest, SixteenStoresHaveNoMoreThreadsThanOne) {
  std::vector<std::unique_ptr<MessageStore>> stores;
  stores.push_back(Open(0));
  ASSERT_NE(stores[0], nullptr);
  const int with_one = Threads();
  for (int n = 1; n < kStores; ++n) {
    stores.push_back(Open(n));
    ASSERT_NE(stores.back(), nullptr);
  }
  EXPECT_EQ(Threads(), with_one);
}

TEST_F(SharedResourcesTest, StoresFillOneCacheAndOneMemtableBudget) {
  std::vector<std::unique_ptr<MessageStore>> stores;
  for (int n = 0; n < kStores; ++n) {
    stores.push_back(Open(n));
    ASSERT_NE(stores.back(), nullptr);
  }
  const size_t empty = resources_->memtable_usage();
  // 16 stores × 256 values of 1 KiB: 4 MiB of memtables in all.
  for (int n = 0; n < kStores; ++n) {
    WriteBatch batch;
    for (int i = 0; i < 256; ++i) {
      batch.Put(Table::kIds, absl::StrCat("key-", 1000 + i),
                std::string(1024, 'v'));
    }
    ASSERT_TRUE(stores[n]->Write(batch).ok());
  }
  EXPECT_GE(resources_->memtable_usage(), empty + (size_t{4} << 20));
  EXPECT_LE(resources_->memtable_usage(), size_t{64} << 20);
  // Reads of flushed tables go through the one cache, which holds no more
  // than its 4 MiB however many stores read.
  for (int n = 0; n < kStores; ++n) {
    ASSERT_TRUE(stores[n]
                    ->Checkpoint(absl::StrCat(dir_.path(), "/cp-", n))
                    .ok());  // Flushes the memtables to tables.
    for (int i = 0; i < 256; ++i) {
      absl::StatusOr<std::optional<std::string>> got =
          stores[n]->Get(Table::kIds, absl::StrCat("key-", 1000 + i));
      ASSERT_TRUE(got.ok() && got->has_value());
    }
  }
  EXPECT_GT(resources_->block_cache_usage(), 0u);
  EXPECT_LE(resources_->block_cache_usage(), size_t{4} << 20);
}

}  // namespace
}  // namespace hourglass::storage
