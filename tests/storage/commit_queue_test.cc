#include "storage/commit_queue.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/memory_store.h"
#include "tests/testing/forwarding_store.h"

namespace hourglass::storage {
namespace {

using ::testing::ElementsAre;

// Wraps a store: records each Write's keys and each SyncLog, can hold the
// first Write (and, when asked, the first SyncLog) until released, and can
// fail writes and syncs.
class RecordingStore final : public testing::ForwardingStore {
 public:
  absl::Status Write(const WriteBatch& batch) override {
    std::vector<std::string> keys;
    for (const auto& op : batch.operations()) keys.push_back(op.key);
    {
      absl::MutexLock lock(&mu_);
      writes_.push_back(keys);
      write_needs_sync_.push_back(batch.needs_sync());
    }
    if (!entered_first_.HasBeenNotified()) {
      entered_first_.Notify();
      release_first_.WaitForNotification();
    }
    absl::Status failure;
    {
      absl::MutexLock lock(&mu_);
      failure = failure_;
    }
    if (!failure.ok()) return failure;
    return ForwardingStore::Write(batch);
  }

  absl::Status SyncLog() override {
    bool hold;
    absl::Status failure;
    {
      absl::MutexLock lock(&mu_);
      syncs_.push_back(writes_.size());
      hold = hold_first_sync_ && syncs_.size() == 1;
      failure = sync_failure_;
    }
    if (hold) {
      entered_first_sync_.Notify();
      release_first_sync_.WaitForNotification();
    }
    if (!failure.ok()) return failure;
    return ForwardingStore::SyncLog();
  }

  void Fail(absl::Status status) {
    absl::MutexLock lock(&mu_);
    failure_ = std::move(status);
  }
  void FailSyncs(absl::Status status) {
    absl::MutexLock lock(&mu_);
    sync_failure_ = std::move(status);
  }
  // From now on the first SyncLog waits for release_first_sync_.
  void HoldFirstSync() {
    absl::MutexLock lock(&mu_);
    hold_first_sync_ = true;
  }
  std::vector<std::vector<std::string>> writes() {
    absl::MutexLock lock(&mu_);
    return writes_;
  }
  // For each SyncLog, how many writes had started before it.
  std::vector<size_t> syncs() {
    absl::MutexLock lock(&mu_);
    return syncs_;
  }
  // For each Write, whether its group needed a sync after it.
  std::vector<bool> write_needs_sync() {
    absl::MutexLock lock(&mu_);
    return write_needs_sync_;
  }

  absl::Notification entered_first_;
  absl::Notification release_first_;
  absl::Notification entered_first_sync_;
  absl::Notification release_first_sync_;

 private:
  absl::Mutex mu_;
  std::vector<std::vector<std::string>> writes_ ABSL_GUARDED_BY(mu_);
  std::vector<size_t> syncs_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> write_needs_sync_ ABSL_GUARDED_BY(mu_);
  bool hold_first_sync_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  absl::Status sync_failure_ ABSL_GUARDED_BY(mu_);
};

WriteBatch Unsynced(WriteBatch batch) {
  batch.set_needs_sync(false);
  return batch;
}

WriteBatch OneKey(const std::string& key) {
  WriteBatch batch;
  batch.Put(Table::kMessages, key, "v");
  return batch;
}

// Collects callback results in the order callbacks ran.
struct Results {
  absl::Mutex mu;
  std::vector<std::pair<std::string, absl::StatusCode>> done
      ABSL_GUARDED_BY(mu);

  CommitQueue::Callback For(std::string name) {
    return [this, name](absl::Status status) {
      absl::MutexLock lock(&mu);
      done.emplace_back(name, status.code());
    };
  }
  size_t size() {
    absl::MutexLock lock(&mu);
    return done.size();
  }
  std::vector<std::pair<std::string, absl::StatusCode>> Done() {
    absl::MutexLock lock(&mu);
    return done;
  }
};

TEST(CommitQueueTest, BatchesQueuedDuringAWriteShareTheNextOne) {
  RecordingStore store;
  Results results;
  {
    CommitQueue queue(&store);
    queue.Submit(OneKey("a"), results.For("a"));
    store.entered_first_.WaitForNotification();
    // While "a" is being written, three more arrive.
    queue.Submit(OneKey("b"), results.For("b"));
    queue.Submit(OneKey("c"), results.For("c"));
    queue.Submit(OneKey("d"), results.For("d"));
    store.release_first_.Notify();
    EXPECT_TRUE(queue.Commit(OneKey("e")).ok());
    EXPECT_EQ(queue.stats().batches, 5u);
  }
  // "e" was submitted after b, c, d were queued: it rides with them or
  // after them, never before.
  const auto writes = store.writes();
  ASSERT_GE(writes.size(), 2u);
  EXPECT_THAT(writes[0], ElementsAre("a"));
  EXPECT_EQ(writes[1][0], "b");
  EXPECT_EQ(writes[1][1], "c");
  EXPECT_EQ(writes[1][2], "d");
  EXPECT_THAT(results.Done(), ElementsAre(std::pair("a", absl::StatusCode::kOk),
                                        std::pair("b", absl::StatusCode::kOk),
                                        std::pair("c", absl::StatusCode::kOk),
                                        std::pair("d", absl::StatusCode::kOk)));
  for (const char* key : {"a", "b", "c", "d", "e"}) {
    auto value = store.Get(Table::kMessages, key);
    ASSERT_TRUE(value.ok());
    EXPECT_TRUE(value->has_value()) << key;
  }
}

// The batches of a group that count something change each counter once,
// by the sum of their Adds.
TEST(CommitQueueTest, AGroupAddsToEachCounterOnce) {
  RecordingStore store;
  Results results;
  auto counted = [](const std::string& key) {
    WriteBatch batch = OneKey(key);
    batch.Add("count", 1);
    batch.Add(key + "-count", 1);
    return batch;
  };
  {
    CommitQueue queue(&store);
    queue.Submit(counted("a"), results.For("a"));
    store.entered_first_.WaitForNotification();
    for (const char* key : {"b", "c", "d"}) {
      queue.Submit(counted(key), results.For(key));
    }
    store.release_first_.Notify();
  }  // The destructor writes what is queued.
  EXPECT_THAT(store.writes(),
              ElementsAre(ElementsAre("a", "count", "a-count"),
                          ElementsAre("b", "count", "b-count", "c", "c-count",
                                      "d", "d-count")));
  auto count = store.Get(Table::kCounters, "count");
  ASSERT_TRUE(count.ok() && count->has_value());
  EXPECT_EQ(DecodeCounter(**count), 4);
  EXPECT_EQ(results.size(), 4u);
}

// WriteDirect writes on the caller's thread: it does not wait for the
// group the writer is in the middle of, and reports like a group.
TEST(CommitQueueTest, AWriteDirectDoesNotWaitBehindTheQueue) {
  RecordingStore store;
  Results results;
  std::vector<CommitQueue::WriteInfo> infos;
  absl::Mutex infos_mu;
  {
    CommitQueue queue(&store,
                      {.on_write = [&](const CommitQueue::WriteInfo& info) {
                        absl::MutexLock lock(&infos_mu);
                        infos.push_back(info);
                      }});
    queue.Submit(Unsynced(OneKey("a")), results.For("a"));
    store.entered_first_.WaitForNotification();  // "a" is held.
    WriteBatch direct = Unsynced(OneKey("x"));
    direct.Put(Table::kMessages, "y", "v");
    EXPECT_TRUE(queue.WriteDirect(direct).ok());
    EXPECT_EQ(results.size(), 0u);  // "a" is still being written.
    auto value = store.Get(Table::kMessages, "x");
    ASSERT_TRUE(value.ok());
    EXPECT_TRUE(value->has_value());
    // A batch that needs a sync must go through the queue.
    EXPECT_EQ(queue.WriteDirect(OneKey("s")).code(),
              absl::StatusCode::kInternal);

    store.Fail(absl::UnavailableError("disk gone"));
    EXPECT_EQ(queue.WriteDirect(Unsynced(OneKey("z"))).code(),
              absl::StatusCode::kUnavailable);
    store.Fail(absl::OkStatus());
    store.release_first_.Notify();
    EXPECT_TRUE(queue.Commit(Unsynced(OneKey("b"))).ok());
    EXPECT_EQ(queue.stats().groups, 4u);
    EXPECT_EQ(queue.stats().batches, 4u);
  }
  EXPECT_THAT(store.writes(),
              ElementsAre(ElementsAre("a"), ElementsAre("x", "y"),
                          ElementsAre("z"), ElementsAre("b")));
  absl::MutexLock lock(&infos_mu);
  ASSERT_EQ(infos.size(), 4u);
  // In the order the writes ended: x, z (while a was held), a, b.
  EXPECT_EQ(infos[0].batches, 1u);
  EXPECT_TRUE(infos[0].status.ok());
  EXPECT_EQ(infos[1].status.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(infos[2].status.ok());
}

// The log is synced (SyncLog) after a group with a batch that needs it; a
// group of batches that do not needs no sync.
TEST(CommitQueueTest, AGroupIsSyncedIfOneOfItsBatchesNeedsIt) {
  RecordingStore store;
  Results results;
  {
    CommitQueue queue(&store);
    queue.Submit(Unsynced(OneKey("a")), results.For("a"));
    store.entered_first_.WaitForNotification();
    queue.Submit(Unsynced(OneKey("b")), results.For("b"));
    queue.Submit(OneKey("c"), results.For("c"));  // Needs a sync.
    queue.Submit(Unsynced(OneKey("d")), results.For("d"));
    store.release_first_.Notify();
  }
  EXPECT_THAT(store.writes(),
              ElementsAre(ElementsAre("a"), ElementsAre("b", "c", "d")));
  EXPECT_THAT(store.syncs(), ElementsAre(2u));  // After the second write.
  EXPECT_THAT(store.write_needs_sync(), ElementsAre(false, true));
  // b and d need no sync: they complete once written, before c's sync.
  EXPECT_THAT(results.Done(), ElementsAre(std::pair("a", absl::StatusCode::kOk),
                                        std::pair("b", absl::StatusCode::kOk),
                                        std::pair("d", absl::StatusCode::kOk),
                                        std::pair("c", absl::StatusCode::kOk)));
}

// A slow fsync holds up only the batches that wait for it: the writer goes
// on, and batches that need no sync complete meanwhile.
TEST(CommitQueueTest, BatchesThatNeedNoSyncDoNotWaitForAnEarlierSync) {
  RecordingStore store;
  store.HoldFirstSync();
  store.release_first_.Notify();  // Writes go through.
  Results results;
  {
    CommitQueue queue(&store);
    queue.Submit(OneKey("publish"), results.For("publish"));
    store.entered_first_sync_.WaitForNotification();
    // The publish's sync is under way; a delivery is written and done.
    EXPECT_TRUE(queue.Commit(Unsynced(OneKey("delivery"))).ok());
    EXPECT_EQ(results.size(), 0u);
    auto value = store.Get(Table::kMessages, "delivery");
    ASSERT_TRUE(value.ok());
    EXPECT_EQ(*value, "v");
    store.release_first_sync_.Notify();
  }
  EXPECT_THAT(results.Done(),
              ElementsAre(std::pair("publish", absl::StatusCode::kOk)));
  EXPECT_THAT(store.syncs(), ElementsAre(1u));
}

// A failed sync fails the batches that waited for it; what was written
// stays visible (its durability is unknown).
TEST(CommitQueueTest, AFailedSyncFailsTheBatchesThatWaitedForIt) {
  RecordingStore store;
  store.release_first_.Notify();
  store.FailSyncs(absl::UnavailableError("fsync: I/O error"));
  Results results;
  {
    CommitQueue queue(&store);
    queue.Submit(OneKey("a"), results.For("a"));
  }
  EXPECT_THAT(results.Done(),
              ElementsAre(std::pair("a", absl::StatusCode::kUnavailable)));
  auto value = store.Get(Table::kMessages, "a");
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(*value, "v");
}

TEST(CommitQueueTest, AFailedGroupFailsEveryBatchInIt) {
  RecordingStore store;
  Results results;
  {
    CommitQueue queue(&store);
    queue.Submit(OneKey("a"), results.For("a"));
    store.entered_first_.WaitForNotification();
    store.Fail(absl::ResourceExhaustedError("disk full"));
    queue.Submit(OneKey("b"), results.For("b"));
    queue.Submit(OneKey("c"), results.For("c"));
    store.release_first_.Notify();
  }  // The destructor writes what is queued and runs every callback.
  EXPECT_THAT(
      results.Done(),
      ElementsAre(std::pair("a", absl::StatusCode::kResourceExhausted),
                  std::pair("b", absl::StatusCode::kResourceExhausted),
                  std::pair("c", absl::StatusCode::kResourceExhausted)));
  auto value = store.Get(Table::kMessages, "b");
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(*value, std::nullopt);
}

TEST(CommitQueueTest, GroupsStopGrowingAtTheByteLimit) {
  RecordingStore store;
  Results results;
  {
    CommitQueue queue(&store, {.max_group_bytes = 10});
    queue.Submit(OneKey("first"), results.For("first"));
    store.entered_first_.WaitForNotification();
    for (const char* key : {"k1", "k2", "k3", "k4", "k5"}) {
      queue.Submit(OneKey(key), results.For(key));  // 3 bytes each.
    }
    store.release_first_.Notify();
  }
  EXPECT_THAT(store.writes(),
              ElementsAre(ElementsAre("first"), ElementsAre("k1", "k2", "k3"),
                          ElementsAre("k4", "k5")));
  EXPECT_EQ(results.size(), 6u);
}

TEST(CommitQueueTest, ConcurrentCommitsAllLand) {
  std::unique_ptr<MessageStore> store = MemoryStore::Open();
  CommitQueue queue(store.get());
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        ASSERT_TRUE(queue.Commit(OneKey(std::to_string(t * 1000 + i))).ok());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  size_t count = 0;
  ASSERT_TRUE(store
                  ->Scan(Table::kMessages, "", "",
                         [&](std::string_view, std::string_view) {
                           ++count;
                           return true;
                         })
                  .ok());
  EXPECT_EQ(count, 1600u);
  EXPECT_EQ(queue.stats().batches, 1600u);
  EXPECT_LE(queue.stats().groups, 1600u);
}

}  // namespace
}  // namespace hourglass::storage
