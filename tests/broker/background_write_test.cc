#include "broker/background_write.h"

#include <optional>
#include <string>

#include "gtest/gtest.h"
#include "storage/commit_queue.h"
#include "storage/message_store.h"
#include "tests/testing/faulty_store.h"

namespace hourglass::broker {
namespace {

using storage::Table;

storage::WriteBatch Unsynced(const std::string& key) {
  storage::WriteBatch batch;
  batch.Put(Table::kMeta, key, "v");
  batch.set_needs_sync(false);
  return batch;
}

std::optional<std::string> Read(storage::MessageStore& store,
                                const std::string& key) {
  absl::StatusOr<std::optional<std::string>> value =
      store.Get(Table::kMeta, key);
  EXPECT_TRUE(value.ok()) << value.status();
  return value.ok() ? *value : std::nullopt;
}

TEST(BackgroundWriteTest, WritesOneBatchAtATimeAndFinishWaitsForIt) {
  testing::FaultyStore store;
  storage::CommitQueue commits(&store);
  BackgroundWrite writer(&commits, "test-writer");
  EXPECT_FALSE(writer.busy());
  for (const std::string key : {"a", "b"}) {
    writer.Start(Unsynced(key));
    EXPECT_TRUE(writer.busy());
    storage::WriteBatch failed;
    EXPECT_TRUE(writer.Finish(&failed).ok());
    EXPECT_FALSE(writer.busy());
    EXPECT_TRUE(failed.empty());
    EXPECT_EQ(Read(store, key), "v");
  }
}

TEST(BackgroundWriteTest, AFailedWriteHandsTheBatchBackUnchanged) {
  testing::FaultyStore store;
  storage::CommitQueue commits(&store);
  BackgroundWrite writer(&commits, "test-writer");
  store.FailWrites(absl::UnavailableError("I/O error"));
  writer.Start(Unsynced("a"));
  storage::WriteBatch failed;
  EXPECT_EQ(writer.Finish(&failed), absl::UnavailableError("I/O error"));
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed.operations()[0].key, "a");
  EXPECT_EQ(Read(store, "a"), std::nullopt);

  store.FailWrites(absl::OkStatus());
  writer.Start(std::move(failed));
  storage::WriteBatch again;
  EXPECT_TRUE(writer.Finish(&again).ok());
  EXPECT_EQ(Read(store, "a"), "v");
}

// A batch that needs a sync is not for WriteDirect: refused, and handed
// back.
TEST(BackgroundWriteTest, ABatchThatNeedsASyncIsRefused) {
  testing::FaultyStore store;
  storage::CommitQueue commits(&store);
  BackgroundWrite writer(&commits, "test-writer");
  storage::WriteBatch batch = Unsynced("a");
  batch.set_needs_sync(true);
  writer.Start(std::move(batch));
  storage::WriteBatch failed;
  EXPECT_EQ(writer.Finish(&failed).code(), absl::StatusCode::kInternal);
  EXPECT_EQ(failed.size(), 1u);
  EXPECT_EQ(Read(store, "a"), std::nullopt);
}

// Destroying the writer finishes the write in progress.
TEST(BackgroundWriteTest, DestructionFinishesTheWriteInProgress) {
  testing::FaultyStore store;
  storage::CommitQueue commits(&store);
  {
    BackgroundWrite writer(&commits, "test-writer");
    writer.Start(Unsynced("a"));
  }
  EXPECT_EQ(Read(store, "a"), "v");
}

}  // namespace
}  // namespace hourglass::broker
