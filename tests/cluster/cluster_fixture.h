#ifndef HOURGLASS_TESTS_CLUSTER_CLUSTER_FIXTURE_H_
#define HOURGLASS_TESTS_CLUSTER_CLUSTER_FIXTURE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "hourglass/v1/broker.pb.h"
#include "hourglass/v1/cluster.pb.h"
#include "tests/testing/daemon.h"
#include "tests/testing/etcd_server.h"
#include "tests/testing/temp_dir.h"

namespace grpc {
class ClientContext;
}  // namespace grpc

namespace hourglass::client {
class Channel;
}  // namespace hourglass::client

namespace hourglass::testing {

// How long a cluster test waits for a condition.
inline constexpr absl::Duration kClusterPatience = absl::Seconds(30);

// What a node answered, with the redirect trailers if any.
struct Answer {
  grpc::StatusCode code = grpc::StatusCode::UNKNOWN;
  std::string message;
  std::string primary;  // hourglass-primary
  std::string epoch;    // hourglass-epoch
};

// A topic of each shard of a cluster of `shards` ("orders-<i>", the first
// found in each by the documented hash), by shard.
std::vector<std::string> TopicPerShard(int shards);

// A real etcd and real hourglassd processes on loopback ports (built with
// HOURGLASSD_PATH), for the end-to-end cluster tests (cluster_test.cc,
// wiped_node_test.cc, multi_shard_test.cc, shard_count_test.cc): starts the
// nodes, and calls them directly, without the client library, so that
// each answer is the node's own.
class ClusterFixture : public ::testing::Test {
 protected:
  void SetUp() override;
  // After a failure: the end of each node's log, for the failure's story.
  void TearDown() override;

  // Starts node `id`, and the others after it, in id order, with `flags`
  // besides the cluster's. Without --shards among `flags` a node takes the
  // cluster's shard count, or creates the cluster with 16: a test of one
  // shard says --shards=1.
  void StartNodes(std::vector<std::string> ids,
                  std::vector<std::string> flags = {});

  // Broker.Publish of one message per topic of `topics`, with ids `id`,
  // `id`-1, ..., due after `delay`, sent to `node`.
  Answer Publish(const std::string& node, const std::string& topic,
                 const std::string& id, absl::Duration delay);
  Answer PublishBatch(const std::string& node,
                      const std::vector<std::string>& topics,
                      const std::string& id, absl::Duration delay);
  grpc::StatusCode Cancel(const std::string& node, const std::string& topic,
                          const std::string& id);
  // Whether `node` serves Admin.GetStats of every topic, with what it said.
  Answer Stats(const std::string& node);
  // Cluster.GetClusterMap of `node`.
  absl::StatusOr<v1::ClusterMap> MapOf(const std::string& node);
  // A client library channel to node `id` alone (null, the test failed,
  // if it cannot be made).
  std::shared_ptr<client::Channel> ChannelTo(const std::string& id);
  // A client library channel given the addresses of the nodes `ids`.
  std::shared_ptr<client::Channel> ChannelToNodes(
      const std::vector<std::string>& ids);

  // The node among `candidates` that serves, once one does ("" if none
  // does within the patience).
  std::string AwaitPrimary(const std::vector<std::string>& candidates);
  // Whether every node of `ids` sees shard 0 at `epoch` with `primary`, the
  // cluster having one shard, once they all do (false if not within the
  // patience).
  bool AwaitEveryoneSees(const std::vector<std::string>& ids, int64_t epoch,
                         const std::string& primary);

  // Puts the fixture's token, if any, on a call.
  void Authorize(grpc::ClientContext& context) const;

  TempDir dir_;
  std::unique_ptr<EtcdServer> etcd_;
  std::map<std::string, std::unique_ptr<Daemon>> nodes_;
  // A token of the nodes' --auth_tokens that every call of the fixture (and
  // its client library channels) carries; none if empty.
  std::string token_;
};

}  // namespace hourglass::testing

#endif  // HOURGLASS_TESTS_CLUSTER_CLUSTER_FIXTURE_H_
