// The Cluster service's own checks, over loopback gRPC, with the node's
// side (the map, drains, moves) replaced by recording functions: who may
// drain and move, and which requests are refused before the node sees
// them. What the node checks (shard range, live and draining nodes) and
// does is tested against real nodes (tests/cluster/multi_shard_test.cc).

#include "api/cluster_service.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "api/auth.h"
#include "api/server.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "hourglass/v1/cluster.grpc.pb.h"

namespace hourglass::api {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr absl::Duration kWait = absl::Seconds(10);

class ClusterServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Authorizer>> authorizer =
        Authorizer::FromText(
            "admin-everything-0001 admin\n"
            "producer-everything-03 produce\n",
            "tokens.txt");
    ASSERT_TRUE(authorizer.ok()) << authorizer.status();
    authorizer_ = *std::move(authorizer);
    service_ = std::make_unique<ClusterService>(
        [] { return v1::ClusterMap(); },
        [this](const std::string& node, bool drain) {
          calls_.push_back(absl::StrCat("drain ", node, " ", drain));
          return absl::OkStatus();
        },
        [this](int shard, const std::string& node, bool undo) {
          calls_.push_back(absl::StrCat("move ", shard, " ", node, " ", undo));
          return answer_;
        },
        [this](int shard, const std::string& node,
               bool accept_loss) -> absl::StatusOr<v1::RecoverShardResponse> {
          calls_.push_back(
              absl::StrCat("recover ", shard, " ", node, " ", accept_loss));
          if (!answer_.ok()) return answer_;
          v1::RecoverShardResponse response;
          response.set_loss("nothing");
          response.set_recovered(accept_loss);
          return response;
        },
        authorizer_.get());
    auto server = Server::Start(
        {.listen_address = "127.0.0.1:0", .services = {service_.get()}});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = v1::Cluster::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                            grpc::InsecureChannelCredentials()));
  }

  grpc::Status Move(int shard, const std::string& node, bool undo,
                    const std::string& token) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + kWait));
    if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
    v1::MoveShardRequest request;
    request.set_shard(shard);
    request.set_node(node);
    request.set_undo(undo);
    v1::MoveShardResponse response;
    return stub_->MoveShard(&context, request, &response);
  }

  grpc::Status Drain(const std::string& node, const std::string& token) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + kWait));
    if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
    v1::DrainNodeRequest request;
    request.set_node(node);
    v1::DrainNodeResponse response;
    return stub_->DrainNode(&context, request, &response);
  }

  absl::StatusOr<v1::RecoverShardResponse> Recover(int shard,
                                                   const std::string& node,
                                                   bool accept_loss,
                                                   const std::string& token) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + kWait));
    if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
    v1::RecoverShardRequest request;
    request.set_shard(shard);
    request.set_node(node);
    request.set_accept_loss(accept_loss);
    v1::RecoverShardResponse response;
    const grpc::Status status =
        stub_->RecoverShard(&context, request, &response);
    if (!status.ok()) {
      return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                          status.error_message());
    }
    return response;
  }

  std::unique_ptr<Authorizer> authorizer_;
  std::unique_ptr<ClusterService> service_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<v1::Cluster::Stub> stub_;
  // What the node was asked to do (on gRPC threads, one call at a time).
  std::vector<std::string> calls_;
  absl::Status answer_;
};

TEST_F(ClusterServiceTest, MovesAndDrainsNeedTheAdminRole) {
  EXPECT_EQ(Move(1, "d", false, "").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  const grpc::Status producer = Move(1, "d", false, "producer-everything-03");
  EXPECT_EQ(producer.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(producer.error_message(), "token lacks role admin");
  EXPECT_EQ(Drain("d", "producer-everything-03").error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(calls_, IsEmpty());

  EXPECT_TRUE(Move(1, "d", false, "admin-everything-0001").ok());
  EXPECT_TRUE(Move(1, "", true, "admin-everything-0001").ok());
  EXPECT_TRUE(Drain("d", "admin-everything-0001").ok());
  EXPECT_THAT(calls_, ElementsAre("move 1 d 0", "move 1  1", "drain d 1"));
}

TEST_F(ClusterServiceTest, AMoveWithoutANodeOrANodeWithUndoIsRefused) {
  const grpc::Status no_node = Move(2, "", false, "admin-everything-0001");
  EXPECT_EQ(no_node.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(no_node.error_message(),
            "node: a node id is required (the node to move shard 2 to)");
  const grpc::Status both = Move(2, "d", true, "admin-everything-0001");
  EXPECT_EQ(both.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(both.error_message(),
            "node: \"d\" given with undo, which removes shard 2's pin "
            "whatever its node: give no node");
  EXPECT_THAT(calls_, IsEmpty());
}

TEST_F(ClusterServiceTest, TheNodesRefusalIsTheAnswer) {
  answer_ = absl::NotFoundError("node x is not a live node of cluster c");
  const grpc::Status refused = Move(0, "x", false, "admin-everything-0001");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(refused.error_message(), "node x is not a live node of cluster c");
}

TEST_F(ClusterServiceTest, ARecoveryNeedsTheAdminRoleAndANode) {
  EXPECT_EQ(Recover(0, "b", true, "producer-everything-03").status().code(),
            absl::StatusCode::kPermissionDenied);
  absl::StatusOr<v1::RecoverShardResponse> no_node =
      Recover(0, "", false, "admin-everything-0001");
  EXPECT_EQ(no_node.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(no_node.status().message(),
            "node: a node id is required (the node whose copy of shard 0 to "
            "promote)");
  EXPECT_THAT(calls_, IsEmpty());
  absl::StatusOr<v1::RecoverShardResponse> looked =
      Recover(0, "b", false, "admin-everything-0001");
  ASSERT_TRUE(looked.ok()) << looked.status();
  EXPECT_FALSE(looked->recovered());
  absl::StatusOr<v1::RecoverShardResponse> done =
      Recover(0, "b", true, "admin-everything-0001");
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_TRUE(done->recovered());
  EXPECT_THAT(calls_, ElementsAre("recover 0 b 0", "recover 0 b 1"));
}

}  // namespace
}  // namespace hourglass::api
