// What a node's view says of its peers' hellos and checkpoint fetches
// (cluster/record_checks.h).

#include "cluster/record_checks.h"

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace hourglass::cluster {
namespace {

ClusterView View() {
  ClusterView view;
  view.nodes["a"] = NodeRecord{};
  view.nodes["b"] = NodeRecord{};
  view.nodes["d"] = NodeRecord{};
  ShardRecord record;
  record.epoch = 3;
  record.primary = "a";
  record.replicas = {"a", "b", "c"};
  record.isr = {"a", "b"};
  view.shards[0] = {record, 10};
  return view;
}

TEST(ConfirmHelloTest, OnlyTheRecordsPrimaryAtItsEpoch) {
  const ClusterView view = View();
  EXPECT_TRUE(ConfirmHello(view, 0, 3, "a").ok());

  const absl::Status ahead = ConfirmHello(view, 0, 4, "b");
  EXPECT_EQ(ahead.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(ahead.message(),
            "this node has not seen epoch 4 of shard 0 yet (it knows epoch "
            "3): try again");
  const absl::Status old = ConfirmHello(view, 0, 2, "a");
  EXPECT_EQ(old.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(old.message(),
            "shard 0 is not led by a at epoch 2: its record names primary a "
            "at epoch 3");
  EXPECT_EQ(ConfirmHello(view, 0, 3, "b").code(),
            absl::StatusCode::kFailedPrecondition);
  // A shard without a record yet, and a record without a primary (given
  // back).
  EXPECT_EQ(ConfirmHello(view, 1, 1, "a").code(),
            absl::StatusCode::kUnavailable);
  ClusterView given_back = View();
  given_back.shards[0].record.primary.clear();
  const absl::Status none = ConfirmHello(given_back, 0, 3, "a");
  EXPECT_EQ(none.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(none.message(),
            "shard 0 is not led by a at epoch 3: its record names no primary "
            "at epoch 3");
}

TEST(MayFetchCheckpointTest, RebuildsForReplicasSnapshotsForLiveNodes) {
  const ClusterView view = View();
  EXPECT_TRUE(MayFetchCheckpoint(view, 0, "b", false).ok());
  EXPECT_TRUE(MayFetchCheckpoint(view, 0, "c", false).ok());  // Out of ISR.
  const absl::Status other = MayFetchCheckpoint(view, 0, "d", false);
  EXPECT_EQ(other.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(other.message(),
            "a checkpoint of shard 0 goes only to a replica the shard's "
            "record names, and d is not one");
  EXPECT_EQ(MayFetchCheckpoint(view, 0, "", false).message(),
            "a checkpoint of shard 0 goes only to a replica the shard's "
            "record names, and the caller named none");

  EXPECT_TRUE(MayFetchCheckpoint(view, 0, "d", true).ok());
  const absl::Status gone = MayFetchCheckpoint(view, 0, "c", true);
  EXPECT_EQ(gone.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(gone.message(),
            "a snapshot of shard 0 goes only to a live node of the cluster, "
            "and c is not one");
}

}  // namespace
}  // namespace hourglass::cluster
