// client::Admin against a real hourglassd.

#include "client/admin.h"

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "client/channel.h"
#include "client/publisher.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/daemon.h"
#include "tests/testing/temp_dir.h"

namespace hourglass::client {
namespace {

class AdminTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto daemon = testing::Daemon::Start(HOURGLASSD_PATH, dir_.path() + "/data",
                                         {"--shutdown_grace=500ms"});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = *std::move(daemon);
    ChannelOptions options;
    options.address = daemon_->address();
    channel_ = *Channel::Create(options);
  }

  testing::TempDir dir_;
  std::unique_ptr<testing::Daemon> daemon_;
  std::shared_ptr<Channel> channel_;
};

TEST_F(AdminTest, HealthSaysServing) {
  Admin admin(channel_);
  absl::StatusOr<std::string> health = admin.Health();
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, "SERVING");
  EXPECT_EQ(admin.Health("no.such.Service").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(AdminTest, GroupsAndStats) {
  Admin admin(channel_);
  hourglass::v1::CreateGroupRequest create;
  create.set_topic("orders");
  create.set_group("billing");
  absl::StatusOr<hourglass::v1::Group> group = admin.CreateGroup(create);
  ASSERT_TRUE(group.ok()) << group.status();
  EXPECT_EQ(group->name(), "billing");
  EXPECT_EQ(admin.CreateGroup(create).status().code(),
            absl::StatusCode::kAlreadyExists);

  Publisher publisher(channel_);
  Message m;
  m.topic = "orders";
  m.id = "o1";
  m.delay = absl::Hours(1);
  ASSERT_TRUE(publisher.Publish(m).ok());

  hourglass::v1::GetStatsRequest request;
  request.set_topic("orders");
  absl::StatusOr<hourglass::v1::GetStatsResponse> stats =
      admin.GetStats(request);
  ASSERT_TRUE(stats.ok()) << stats.status();
  ASSERT_EQ(stats->topics_size(), 1);
  EXPECT_EQ(stats->topics(0).scheduled(), 1u);
  ASSERT_EQ(stats->topics(0).groups_size(), 1);
  EXPECT_EQ(stats->topics(0).groups(0).group(), "billing");

  hourglass::v1::ListGroupsRequest list;
  list.set_topic("orders");
  absl::StatusOr<hourglass::v1::ListGroupsResponse> groups =
      admin.ListGroups(list);
  ASSERT_TRUE(groups.ok()) << groups.status();
  ASSERT_EQ(groups->groups_size(), 1);

  hourglass::v1::GetMessageRequest get;
  get.set_topic("orders");
  get.set_id("nope");
  EXPECT_EQ(admin.GetMessage(get).status().code(), absl::StatusCode::kNotFound);
  hourglass::v1::CancelRequest cancel;
  cancel.set_topic("orders");
  cancel.set_id("o1");
  EXPECT_TRUE(admin.CancelMessage(cancel).ok());
}

}  // namespace
}  // namespace hourglass::client
