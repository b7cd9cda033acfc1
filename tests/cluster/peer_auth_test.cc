// Who may call a node's Replication service, with real processes: three
// hourglassd with client tokens on (--auth_tokens) and no TLS, sharing a
// peer secret. A stranger (no credentials) and a client (an admin token)
// are refused by every node, for every call; a caller with the secret is
// still held to the shard's record: a hello no record confirms writes
// nothing, and a checkpoint goes only to a replica. The cluster replicates
// on throughout: same epoch, same in-sync set, publishes acknowledged.

#include <sys/stat.h>

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "replication/replication.grpc.pb.h"
#include "tests/cluster/cluster_fixture.h"
#include "tests/testing/peer_secret.h"

namespace hourglass {
namespace {

namespace rv1 = ::hourglass::replication::v1;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

constexpr char kAdminToken[] = "admin-token-of-the-peer-auth-test";

// What a caller presents.
enum class Caller {
  kStranger,  // nothing
  kClient,    // an admin token
  kPeer,      // the cluster's peer secret
};

class PeerAuthTest : public testing::ClusterFixture {
 protected:
  void SetUp() override {
    ClusterFixture::SetUp();
    const std::string tokens = dir_.path() + "/tokens.txt";
    std::ofstream(tokens) << kAdminToken << " admin,produce,consume\n";
    ASSERT_EQ(chmod(tokens.c_str(), 0600), 0);
    token_ = kAdminToken;  // The fixture's own calls are a client's.
    StartNodes({"a", "b", "c"}, {"--shards=1", "--auth_tokens=" + tokens});
    ASSERT_EQ(AwaitPrimary({"a", "b", "c"}), "a");
    ASSERT_TRUE(AwaitEveryoneSees({"a", "b", "c"}, 1, "a"));
    ASSERT_TRUE(InSync({"a", "b", "c"}));
  }

  std::unique_ptr<rv1::Replication::Stub> Stub(const std::string& node) {
    return rv1::Replication::NewStub(grpc::CreateChannel(
        nodes_.at(node)->address(), grpc::InsecureChannelCredentials()));
  }

  static void Present(Caller caller, grpc::ClientContext& context) {
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    if (caller == Caller::kClient) {
      context.AddMetadata("authorization",
                          absl::StrCat("Bearer ", kAdminToken));
    } else if (caller == Caller::kPeer) {
      context.AddMetadata("hourglass-peer-secret", testing::kTestPeerSecret);
    }
  }

  // A Replicate stream to `node` that says hello as `primary` of shard 0
  // at `epoch`, and its end.
  grpc::Status Replicate(const std::string& node, Caller caller, int64_t epoch,
                         const std::string& primary) {
    grpc::ClientContext context;
    Present(caller, context);
    auto stream = Stub(node)->Replicate(&context);
    rv1::ReplicateRequest hello;
    hello.mutable_hello()->set_shard(0);
    hello.mutable_hello()->set_epoch(epoch);
    hello.mutable_hello()->set_primary(primary);
    stream->Write(hello);
    stream->WritesDone();
    rv1::ReplicateResponse response;
    while (stream->Read(&response)) {
    }
    return stream->Finish();
  }

  // A FetchCheckpoint of shard 0 from `node` for `asker`, and its end;
  // `chunks` counts what came.
  grpc::Status Fetch(const std::string& node, Caller caller,
                     const std::string& asker, bool snapshot, int& chunks) {
    grpc::ClientContext context;
    Present(caller, context);
    rv1::FetchCheckpointRequest request;
    request.set_shard(0);
    request.set_node(asker);
    request.set_snapshot(snapshot);
    auto reader = Stub(node)->FetchCheckpoint(&context, request);
    rv1::CheckpointChunk chunk;
    chunks = 0;
    while (reader->Read(&chunk)) ++chunks;
    return reader->Finish();
  }

  grpc::Status ShardStats(const std::string& node, Caller caller) {
    grpc::ClientContext context;
    Present(caller, context);
    rv1::ShardStatsRequest request;
    request.add_shards(0);
    rv1::ShardStatsResponse response;
    return Stub(node)->GetShardStats(&context, request, &response);
  }

  // Whether node a's map shows shard 0 at epoch 1 led by a with in-sync
  // set `isr`, once it does.
  bool InSync(const std::vector<std::string>& isr) {
    for (const absl::Time until = absl::Now() + testing::kClusterPatience;
         absl::Now() < until;) {
      absl::StatusOr<v1::ClusterMap> map = MapOf("a");
      if (map.ok() && map->shards_size() == 1 && map->shards(0).epoch() == 1 &&
          map->shards(0).primary() == "a" &&
          std::is_permutation(map->shards(0).isr().begin(),
                              map->shards(0).isr().end(), isr.begin(),
                              isr.end()) &&
          map->shards(0).isr_size() == static_cast<int>(isr.size())) {
        return true;
      }
      DrainLogs();
    }
    return false;
  }

  void DrainLogs() {
    for (auto& [id, node] : nodes_) {
      node->process().ReadUntil(absl::Now() + absl::Milliseconds(10));
    }
  }
};

TEST_F(PeerAuthTest, StrangersAndClientsAreRefusedByEveryNode) {
  for (const char* node : {"a", "b", "c"}) {
    SCOPED_TRACE(node);
    int chunks = 0;
    for (const Caller caller : {Caller::kStranger, Caller::kClient}) {
      const grpc::StatusCode expected =
          caller == Caller::kStranger ? grpc::StatusCode::UNAUTHENTICATED
                                      : grpc::StatusCode::PERMISSION_DENIED;
      const std::string why =
          caller == Caller::kStranger
              ? "only the cluster's nodes may call this: the call carries no "
                "peer secret (hourglass-peer-secret)"
              : "only the cluster's nodes may call this: a client's token "
                "does not open it";
      // A hello at an epoch far ahead would have fenced the real primary
      // off this copy for good.
      const grpc::Status hello = Replicate(node, caller, int64_t{1} << 62, "a");
      EXPECT_EQ(hello.error_code(), expected);
      EXPECT_EQ(hello.error_message(), why);
      const grpc::Status fetched = Fetch(node, caller, "b", false, chunks);
      EXPECT_EQ(fetched.error_code(), expected);
      EXPECT_EQ(chunks, 0);
      const grpc::Status stats = ShardStats(node, caller);
      EXPECT_EQ(stats.error_code(), expected);
      EXPECT_EQ(stats.error_message(), why);
    }
  }
  // Nothing changed: the primary's next publish is acknowledged by all.
  ASSERT_EQ(Publish("a", "orders", "after", absl::Hours(1)).code,
            grpc::StatusCode::OK);
  EXPECT_TRUE(InSync({"a", "b", "c"}));
  EXPECT_EQ(ShardStats("a", Caller::kPeer).error_code(), grpc::StatusCode::OK);
}

TEST_F(PeerAuthTest, APeersHelloAndFetchAreHeldToTheShardsRecord) {
  // A hello the record does not confirm is refused before the copy
  // accepts its epoch: one from the future, and a wrong primary.
  for (const char* backup : {"b", "c"}) {
    const grpc::Status ahead =
        Replicate(backup, Caller::kPeer, int64_t{1} << 62, "a");
    EXPECT_EQ(ahead.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_THAT(ahead.error_message(),
                HasSubstr("this node has not seen epoch 4611686018427387904 "
                          "of shard 0 yet (it knows epoch 1)"));
    const grpc::Status impostor = Replicate(backup, Caller::kPeer, 1, "b");
    EXPECT_EQ(impostor.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_EQ(impostor.error_message(),
              "shard 0 is not led by b at epoch 1: its record names primary "
              "a at epoch 1");
  }
  // A checkpoint goes to a replica (a rebuild) or a node of the cluster (a
  // snapshot), not to whoever names itself.
  int chunks = 0;
  const grpc::Status stranger = Fetch("a", Caller::kPeer, "x", false, chunks);
  EXPECT_EQ(stranger.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(stranger.error_message(),
            "a checkpoint of shard 0 goes only to a replica the shard's "
            "record names, and x is not one");
  EXPECT_EQ(chunks, 0);
  const grpc::Status snapshot = Fetch("a", Caller::kPeer, "x", true, chunks);
  EXPECT_EQ(snapshot.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(chunks, 0);
  const grpc::Status replica = Fetch("a", Caller::kPeer, "b", false, chunks);
  EXPECT_TRUE(replica.ok()) << replica.error_message();
  EXPECT_GT(chunks, 0);

  // The backups still follow a at epoch 1.
  ASSERT_EQ(Publish("a", "orders", "after", absl::Hours(1)).code,
            grpc::StatusCode::OK);
  EXPECT_TRUE(InSync({"a", "b", "c"}));
  for (const char* backup : {"b", "c"}) {
    EXPECT_THAT(nodes_.at(backup)->process().output(),
                ::testing::Not(HasSubstr("following primary b")));
  }
}

}  // namespace
}  // namespace hourglass
