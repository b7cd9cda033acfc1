// RestoreClusterSnapshot over real RocksDB stores: a cluster snapshot's
// shards land where a node keeps them, with the epoch each copy is at; a
// single store becomes shard 0 of one; what is not a complete snapshot, or
// a data dir that holds anything, is refused and leaves nothing.

#include "node/cluster_snapshot.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "replication/replica.h"
#include "storage/rocksdb_store.h"
#include "tests/testing/temp_dir.h"

namespace hourglass::node {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace fs = std::filesystem;

// Makes a store at `dir` whose copy accepted `epoch` (none if 0).
void MakeStore(const std::string& dir, int64_t epoch) {
  absl::StatusOr<std::unique_ptr<storage::MessageStore>> store =
      storage::RocksDbStore::Open({.path = dir});
  ASSERT_TRUE(store.ok()) << store.status();
  if (epoch == 0) return;
  absl::StatusOr<std::unique_ptr<replication::Replica>> replica =
      replication::Replica::Open(store->get());
  ASSERT_TRUE(replica.ok()) << replica.status();
  ASSERT_TRUE((*replica)->Accept(epoch).ok());
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

class RestoreClusterSnapshotTest : public ::testing::Test {
 protected:
  // A cluster snapshot of three shards, at epochs 4, 0 and 7.
  void MakeClusterSnapshot() {
    MakeStore(ShardDir(snapshot_, 0), 4);
    MakeStore(ShardDir(snapshot_, 1), 0);
    MakeStore(ShardDir(snapshot_, 2), 7);
    WriteFile(snapshot_ + "/CLUSTER_SNAPSHOT",
              "hourglass cluster snapshot\nshards 3\n");
  }

  testing::TempDir tmp_;
  const std::string snapshot_ = tmp_.path() + "/snap";
  const std::string data_dir_ = tmp_.path() + "/data";
};

TEST_F(RestoreClusterSnapshotTest, EveryShardLandsInTheDataDirWithItsEpoch) {
  MakeClusterSnapshot();
  absl::StatusOr<RestoredCluster> restored =
      RestoreClusterSnapshot(snapshot_, data_dir_);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_THAT(restored->epochs, ElementsAre(4, 0, 7));
  EXPECT_GT(restored->bytes, 0u);
  for (int shard = 0; shard < 3; ++shard) {
    EXPECT_TRUE(fs::exists(ShardDir(data_dir_, shard) + "/CURRENT")) << shard;
  }
  EXPECT_FALSE(fs::exists(ShardDir(data_dir_, 3)));
}

TEST_F(RestoreClusterSnapshotTest, AShardCountGivenMustBeTheSnapshots) {
  MakeClusterSnapshot();
  EXPECT_EQ(RestoreClusterSnapshot(snapshot_, data_dir_, 16).status(),
            absl::InvalidArgumentError(
                absl::StrCat("snapshot ", snapshot_,
                             " holds 3 shards, not --shards=16: give no "
                             "--shards to take the snapshot's")));
  EXPECT_FALSE(fs::exists(data_dir_));
  absl::StatusOr<RestoredCluster> restored =
      RestoreClusterSnapshot(snapshot_, data_dir_, 3);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->epochs.size(), 3u);
}

TEST_F(RestoreClusterSnapshotTest, ASingleStoreBecomesShardZeroOfOne) {
  MakeStore(snapshot_, 0);
  absl::StatusOr<RestoredCluster> restored =
      RestoreClusterSnapshot(snapshot_, data_dir_);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_THAT(restored->epochs, ElementsAre(0));
  EXPECT_TRUE(fs::exists(ShardDir(data_dir_, 0) + "/CURRENT"));
}

TEST_F(RestoreClusterSnapshotTest,
       AnIncompleteSnapshotIsRefusedLeavingNothing) {
  MakeClusterSnapshot();
  fs::remove_all(ShardDir(snapshot_, 2));
  absl::StatusOr<RestoredCluster> restored =
      RestoreClusterSnapshot(snapshot_, data_dir_);
  EXPECT_EQ(restored.status(),
            absl::DataLossError(absl::StrCat("cluster snapshot ", snapshot_,
                                             " of 3 shards lacks ",
                                             ShardDir(snapshot_, 2))));
  EXPECT_FALSE(fs::exists(data_dir_));

  WriteFile(snapshot_ + "/CLUSTER_SNAPSHOT", "hourglass cluster snapshot\n");
  restored = RestoreClusterSnapshot(snapshot_, data_dir_);
  EXPECT_EQ(restored.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(restored.status().message(),
              HasSubstr("is not a cluster snapshot's manifest"));
  EXPECT_FALSE(fs::exists(data_dir_));
}

TEST_F(RestoreClusterSnapshotTest, WhatIsNoSnapshotIsRefused) {
  EXPECT_EQ(RestoreClusterSnapshot(snapshot_, data_dir_).status().code(),
            absl::StatusCode::kNotFound);
  // A directory without a store nor a manifest.
  fs::create_directories(snapshot_);
  WriteFile(snapshot_ + "/notes.txt", "not a store");
  EXPECT_EQ(RestoreClusterSnapshot(snapshot_, data_dir_).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_FALSE(fs::exists(data_dir_));
}

TEST_F(RestoreClusterSnapshotTest, ADataDirThatHoldsAnythingIsRefused) {
  MakeClusterSnapshot();
  fs::create_directories(data_dir_);
  WriteFile(data_dir_ + "/keep", "mine");
  EXPECT_EQ(RestoreClusterSnapshot(snapshot_, data_dir_).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(fs::exists(data_dir_ + "/keep"));
  EXPECT_FALSE(fs::exists(data_dir_ + "/shards"));

  // An empty one is taken, and kept if the restore fails.
  fs::remove(data_dir_ + "/keep");
  fs::remove_all(ShardDir(snapshot_, 1) + "/CURRENT");
  EXPECT_EQ(RestoreClusterSnapshot(snapshot_, data_dir_).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(fs::is_empty(data_dir_));
}

}  // namespace
}  // namespace hourglass::node
