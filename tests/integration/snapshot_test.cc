// Online snapshots and restores, end to end: a real hourglassd takes a
// snapshot while producers publish, and a second hourglassd started with
// --restore_from holds every message acknowledged before the snapshot
// began, in the state it had, and nothing that was never published.

#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "hourglass/v1/admin.grpc.pb.h"
#include "tests/testing/broker_client.h"
#include "tests/testing/daemon.h"
#include "tests/testing/temp_dir.h"

namespace hourglass {
namespace {

using ::hourglass::testing::BrokerClient;
using ::hourglass::testing::Daemon;
using ::hourglass::testing::TempDir;
using ::hourglass::testing::ToTime;
using ::testing::HasSubstr;
using v1::MessageState;

// Every message of `topic` in `state`, by id, read page by page.
std::map<std::string, v1::MessageInfo> ListAll(v1::Admin::Stub& admin,
                                               const std::string& topic,
                                               MessageState state) {
  std::map<std::string, v1::MessageInfo> all;
  v1::ListMessagesRequest request;
  request.set_topic(topic);
  request.set_state(state);
  request.set_page_size(1000);
  while (true) {
    grpc::ClientContext context;
    v1::ListMessagesResponse page;
    const grpc::Status status = admin.ListMessages(&context, request, &page);
    EXPECT_TRUE(status.ok()) << status.error_message();
    if (!status.ok()) return all;
    for (const v1::MessageInfo& m : page.messages()) all[m.id()] = m;
    if (page.next_page_token().empty()) return all;
    request.set_page_token(page.next_page_token());
  }
}

class SnapshotTest : public ::testing::Test {
 protected:
  std::unique_ptr<Daemon> Start(const std::string& data_dir,
                                std::vector<std::string> flags = {}) {
    auto daemon = Daemon::Start(HOURGLASSD_PATH, data_dir, std::move(flags));
    EXPECT_TRUE(daemon.ok()) << daemon.status();
    return daemon.ok() ? *std::move(daemon) : nullptr;
  }

  TempDir dir_;
};

TEST_F(SnapshotTest, ARestoredSnapshotHoldsEveryMessageAckedBeforeIt) {
  auto broker =
      Start(dir_.path() + "/a", {"--snapshot_dir=" + dir_.path() + "/snaps"});
  ASSERT_NE(broker, nullptr);
  auto admin = v1::Admin::NewStub(broker->Channel());
  BrokerClient client(broker->Channel());
  {
    grpc::ClientContext context;
    v1::CreateGroupRequest request;
    request.set_topic("reminders");
    request.set_group("mailer");
    v1::Group group;
    ASSERT_TRUE(admin->CreateGroup(&context, request, &group).ok());
  }
  // Scheduled messages of orders, and messages of reminders that came due
  // and wait, ready, in group mailer (no consumer takes them).
  std::map<std::string, absl::Time> acked;  // id -> its receipt's due time
  for (int i = 0; i < 200; ++i) {
    const std::string id = absl::StrCat("before-", i);
    auto receipt = client.Publish("orders", id, absl::Hours(1), id);
    ASSERT_TRUE(receipt.ok()) << receipt.status();
    acked[id] = ToTime(receipt->deliver_at());
  }
  std::set<std::string> ready;
  for (int i = 0; i < 50; ++i) {
    const std::string id = absl::StrCat("due-", i);
    ASSERT_TRUE(client.Publish("reminders", id, absl::ZeroDuration(), id).ok());
    ready.insert(id);
  }

  // A producer publishes on while the snapshot is taken; it notes when
  // each publish was acknowledged.
  absl::Mutex mu;
  // id -> (when acknowledged, due at)
  std::map<std::string, std::pair<absl::Time, absl::Time>> during
      ABSL_GUARDED_BY(mu);
  std::set<std::string> attempted ABSL_GUARDED_BY(mu);
  std::atomic<bool> stop{false};
  std::thread producer([&] {
    BrokerClient producer_client(broker->Channel());
    for (int i = 0; !stop.load(); ++i) {
      const std::string id = absl::StrCat("during-", i);
      {
        absl::MutexLock lock(&mu);
        attempted.insert(id);
      }
      auto receipt = producer_client.Publish("orders", id, absl::Hours(1), id);
      const absl::Time at = absl::Now();
      if (!receipt.ok()) continue;
      absl::MutexLock lock(&mu);
      during[id] = {at, ToTime(receipt->deliver_at())};
    }
  });
  // Waits until the producer has `n` acknowledgements.
  struct Acked {
    const std::map<std::string, std::pair<absl::Time, absl::Time>>* during;
    size_t n;
    static bool Reached(Acked* a) { return a->during->size() >= a->n; }
  };
  auto await_acked = [&](size_t n) {
    Acked wanted{&during, n};
    absl::MutexLock lock(&mu);
    return mu.AwaitWithTimeout(absl::Condition(&Acked::Reached, &wanted),
                               absl::Seconds(30));
  };
  // Let the producer get going: its first acknowledgements.
  ASSERT_TRUE(await_acked(20));
  const absl::Time snapshot_began = absl::Now();
  v1::Snapshot snapshot;
  grpc::Status snapshotted;
  {
    grpc::ClientContext context;
    v1::CreateSnapshotRequest request;
    request.set_dir("snap");
    snapshotted = admin->CreateSnapshot(&context, request, &snapshot);
  }
  // A few more acknowledgements after it, then stop.
  size_t seen;
  {
    absl::MutexLock lock(&mu);
    seen = during.size();
  }
  EXPECT_TRUE(await_acked(seen + 20));
  stop = true;
  producer.join();
  ASSERT_TRUE(snapshotted.ok()) << snapshotted.error_message();
  EXPECT_EQ(snapshot.dir(), dir_.path() + "/snaps/snap");
  EXPECT_EQ(snapshot.format_version(), 4u);
  EXPECT_THAT(snapshot.store_id(), ::testing::MatchesRegex("[0-9a-f]{32}"));
  EXPECT_GT(snapshot.files(), 0u);
  broker->Stop();

  // A new broker restored from it, into a new data dir.
  auto restored = Start(dir_.path() + "/b",
                        {"--restore_from=" + dir_.path() + "/snaps/snap"});
  ASSERT_NE(restored, nullptr);
  auto restored_admin = v1::Admin::NewStub(restored->Channel());
  const std::map<std::string, v1::MessageInfo> scheduled =
      ListAll(*restored_admin, "orders", v1::MESSAGE_STATE_SCHEDULED);
  // Every message acknowledged before the snapshot began, with its due time.
  size_t acked_during_before = 0;
  for (const auto& [id, ack] : during) {
    if (ack.first < snapshot_began) {
      acked[id] = ack.second;
      ++acked_during_before;
    }
  }
  EXPECT_GE(acked_during_before, 20u);
  for (const auto& [id, due] : acked) {
    auto it = scheduled.find(id);
    ASSERT_NE(it, scheduled.end()) << id << " was acknowledged before the "
                                   << "snapshot and is missing";
    EXPECT_EQ(ToTime(it->second.deliver_at()), due) << id;
    EXPECT_EQ(it->second.state(), v1::MESSAGE_STATE_SCHEDULED) << id;
  }
  // Nothing that was never published; what came with the concurrent
  // producer has the due time its receipt said (if it got one).
  for (const auto& [id, info] : scheduled) {
    if (acked.contains(id)) continue;
    EXPECT_TRUE(attempted.contains(id)) << id << " was never published";
    auto ack = during.find(id);
    if (ack != during.end()) {
      EXPECT_EQ(ToTime(info.deliver_at()), ack->second.second) << id;
    }
  }
  // The ready messages are still ready in their group.
  const std::map<std::string, v1::MessageInfo> waiting =
      ListAll(*restored_admin, "reminders", v1::MESSAGE_STATE_READY);
  std::set<std::string> waiting_ids;
  for (const auto& [id, info] : waiting) {
    waiting_ids.insert(id);
    ASSERT_EQ(info.groups_size(), 1) << id;
    EXPECT_EQ(info.groups(0).group(), "mailer") << id;
  }
  EXPECT_EQ(waiting_ids, ready);
  // The same store: GetStats says which.
  grpc::ClientContext context;
  v1::GetStatsResponse stats;
  ASSERT_TRUE(
      restored_admin->GetStats(&context, v1::GetStatsRequest(), &stats).ok());
  EXPECT_EQ(stats.store_id(), snapshot.store_id());
  EXPECT_EQ(stats.format_version(), 4u);
  EXPECT_TRUE(stats.serving());
}

// A caller names a snapshot; the broker decides where it goes (its
// --snapshot_dir, by default snapshots under --data_dir). A path, or a name
// that would leave the directory, is refused and nothing is written.
TEST_F(SnapshotTest, ASnapshotIsANewNameInTheSnapshotDir) {
  auto broker = Start(dir_.path() + "/a");
  ASSERT_NE(broker, nullptr);
  auto admin = v1::Admin::NewStub(broker->Channel());
  auto snapshot = [&](const std::string& dir, v1::Snapshot* response) {
    grpc::ClientContext context;
    v1::CreateSnapshotRequest request;
    request.set_dir(dir);
    return admin->CreateSnapshot(&context, request, response);
  };
  const std::string snapshots = dir_.path() + "/a/snapshots";
  v1::Snapshot response;
  grpc::Status empty = snapshot("", &response);
  EXPECT_EQ(empty.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(empty.error_message(),
            "dir is empty: name the new snapshot (letters, digits, '.', '_', "
            "'-'); it is written into the broker's --snapshot_dir, " +
                snapshots);
  for (const std::string& hostile :
       {dir_.path() + "/outside", std::string("../outside"), std::string("a/b"),
        std::string("."), std::string(".."), std::string("x y"),
        std::string(201, 'n')}) {
    grpc::Status refused = snapshot(hostile, &response);
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << hostile;
    EXPECT_THAT(refused.error_message(),
                HasSubstr("is not a plain name: name the new snapshot with "
                          "up to 200 letters, digits"))
        << hostile;
  }
  EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/outside"));
  EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/a/outside"));

  ASSERT_TRUE(snapshot("nightly-1", &response).ok());
  EXPECT_EQ(response.dir(), snapshots + "/nightly-1");
  EXPECT_TRUE(std::filesystem::exists(snapshots + "/nightly-1/CURRENT"));
  grpc::Status again = snapshot("nightly-1", &response);
  EXPECT_EQ(again.error_code(), grpc::StatusCode::ALREADY_EXISTS);
}

TEST_F(SnapshotTest, RestoreRefusesADataDirThatHoldsData) {
  auto broker = Start(dir_.path() + "/a");
  ASSERT_NE(broker, nullptr);
  {
    auto admin = v1::Admin::NewStub(broker->Channel());
    grpc::ClientContext context;
    v1::CreateSnapshotRequest request;
    request.set_dir("snap");
    v1::Snapshot response;
    ASSERT_TRUE(admin->CreateSnapshot(&context, request, &response).ok());
  }
  broker->Stop();
  // Onto the data dir it came from: refused, with a one-line reason.
  auto refused =
      Daemon::Start(HOURGLASSD_PATH, dir_.path() + "/a",
                    {"--restore_from=" + dir_.path() + "/a/snapshots/snap"});
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("cannot restore into data dir " + dir_.path() +
                        "/a: it is not an empty directory"));
}

}  // namespace
}  // namespace hourglass
