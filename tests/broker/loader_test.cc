#include "broker/loader.h"

#include <memory>
#include <string>
#include <vector>

#include "broker/lifecycle.h"
#include "broker/lifecycle_reads.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/keys.h"
#include "storage/memory_store.h"
#include "storage/rocksdb_store.h"
#include "tests/testing/temp_dir.h"

namespace hourglass::broker {
namespace {

using storage::DueKey;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

class LoaderTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "memory") {
      store_ = storage::MemoryStore::Open();
    } else {
      auto store = storage::RocksDbStore::Open({.path = dir_.path()});
      ASSERT_TRUE(store.ok()) << store.status();
      store_ = *std::move(store);
    }
  }

  void Schedule(std::vector<std::pair<DueKey, std::string>> entries) {
    storage::WriteBatch batch;
    for (const auto& [key, topic] : entries) {
      batch.Put(storage::Table::kSchedule, storage::ScheduleKey(key), topic);
    }
    ASSERT_TRUE(store_->Write(batch).ok());
  }

  std::vector<ScheduledEntry> Load(Loader& loader, int64_t until_ms,
                                   size_t max_entries) {
    auto entries = loader.LoadUntil(until_ms, max_entries);
    EXPECT_TRUE(entries.ok()) << entries.status();
    return entries.ok() ? *entries : std::vector<ScheduledEntry>{};
  }

  testing::TempDir dir_;
  std::unique_ptr<storage::MessageStore> store_;
};

ScheduledEntry E(int64_t due, uint64_t seq, std::string topic) {
  return {DueKey{due, seq}, std::move(topic)};
}

TEST_P(LoaderTest, EmptyStoreLoadsNothingAndMovesToTheHorizon) {
  Loader loader(store_.get(), DueKey{});
  EXPECT_THAT(Load(loader, 60'000, 100), IsEmpty());
  EXPECT_EQ(loader.position(), (DueKey{60'000, 0}));
}

TEST_P(LoaderTest, LoadsInDueOrderInBoundedChunks) {
  Schedule({{{100, 5}, "a"},
            {{100, 2}, "b"},
            {{50, 9}, "c"},
            {{200, 1}, "d"},
            {{1000, 3}, "e"}});
  Loader loader(store_.get(), DueKey{});
  EXPECT_THAT(Load(loader, 201, 2), ElementsAre(E(50, 9, "c"), E(100, 2, "b")));
  EXPECT_EQ(loader.position(), (DueKey{100, 3}));
  EXPECT_THAT(Load(loader, 201, 2),
              ElementsAre(E(100, 5, "a"), E(200, 1, "d")));
  EXPECT_EQ(loader.position(), (DueKey{200, 2}));
  EXPECT_THAT(Load(loader, 201, 2), IsEmpty());
  EXPECT_EQ(loader.position(), (DueKey{201, 0}));
  EXPECT_THAT(Load(loader, 5000, 10), ElementsAre(E(1000, 3, "e")));
}

TEST_P(LoaderTest, TheHorizonIsExclusive) {
  Schedule({{{100, 1}, "a"}, {{101, 0}, "b"}});
  Loader loader(store_.get(), DueKey{});
  EXPECT_THAT(Load(loader, 101, 10), ElementsAre(E(100, 1, "a")));
  EXPECT_THAT(Load(loader, 102, 10), ElementsAre(E(101, 0, "b")));
}

TEST_P(LoaderTest, EntriesWrittenBehindThePositionAreLeftToTheirWriter) {
  Schedule({{{100, 1}, "a"}});
  Loader loader(store_.get(), DueKey{});
  EXPECT_THAT(Load(loader, 200, 10), ElementsAre(E(100, 1, "a")));
  // Published after the loader passed 150: Publish puts it in the wheel.
  Schedule({{{150, 2}, "late"}, {{250, 3}, "ahead"}});
  EXPECT_THAT(Load(loader, 300, 10), ElementsAre(E(250, 3, "ahead")));
}

TEST_P(LoaderTest, AHorizonBehindThePositionReadsNothing) {
  Schedule({{{100, 1}, "a"}});
  Loader loader(store_.get(), DueKey{500, 0});
  EXPECT_THAT(Load(loader, 300, 10), IsEmpty());
  EXPECT_EQ(loader.position(), (DueKey{500, 0}));
}

TEST_P(LoaderTest, DeletedEntriesAreNotLoaded) {
  Schedule({{{100, 1}, "a"}, {{110, 2}, "b"}, {{120, 3}, "c"}});
  storage::WriteBatch cancel;
  cancel.Delete(storage::Table::kSchedule, storage::ScheduleKey({110, 2}));
  ASSERT_TRUE(store_->Write(cancel).ok());
  Loader loader(store_.get(), DueKey{});
  EXPECT_THAT(Load(loader, 200, 10),
              ElementsAre(E(100, 1, "a"), E(120, 3, "c")));
}

TEST_P(LoaderTest, ResumesFromThePersistedCursor) {
  auto fresh = lifecycle::ReadLoaderCursor(*store_);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ(*fresh, DueKey{});

  Schedule({{{100, 1}, "done"}, {{300, 2}, "pending"}});
  storage::WriteBatch dispatch;
  dispatch.Delete(storage::Table::kSchedule, storage::ScheduleKey({100, 1}));
  {
    Changes cursor;
    lifecycle::MoveLoaderCursor(cursor, DueKey{100, 2});
    dispatch.Append(cursor.Take());
  }
  ASSERT_TRUE(store_->Write(dispatch).ok());

  auto cursor = lifecycle::ReadLoaderCursor(*store_);
  ASSERT_TRUE(cursor.ok()) << cursor.status();
  EXPECT_EQ(*cursor, (DueKey{100, 2}));
  Loader loader(store_.get(), *cursor);
  EXPECT_THAT(Load(loader, 1000, 10), ElementsAre(E(300, 2, "pending")));
}

TEST_P(LoaderTest, MalformedCursorIsDataLoss) {
  storage::WriteBatch batch;
  batch.Put(storage::Table::kMeta, std::string(storage::kLoaderCursorKey),
            "short");
  ASSERT_TRUE(store_->Write(batch).ok());
  EXPECT_EQ(lifecycle::ReadLoaderCursor(*store_).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST_P(LoaderTest, MalformedScheduleKeyIsDataLossAndKeepsThePosition) {
  storage::WriteBatch batch;
  batch.Put(storage::Table::kSchedule, std::string(20, 'x'), "t");
  ASSERT_TRUE(store_->Write(batch).ok());
  Loader loader(store_.get(), DueKey{});
  auto entries = loader.LoadUntil(INT64_MAX, 10);
  EXPECT_EQ(entries.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(loader.position(), DueKey{});
}

INSTANTIATE_TEST_SUITE_P(Stores, LoaderTest,
                         ::testing::Values("memory", "rocksdb"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace hourglass::broker
