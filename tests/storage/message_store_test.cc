// One suite for the MessageStore interface, run against every
// implementation, then RocksDB-specific behaviour: persistence and open
// failures.

#include "storage/message_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/keys.h"
#include "storage/memory_store.h"
#include "storage/records.pb.h"
#include "storage/rocksdb_store.h"
#include "storage/schedule_counts.h"
#include "tests/testing/temp_dir.h"

namespace hourglass::storage {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Optional;
using ::testing::Pair;

using KeyValues = std::vector<std::pair<std::string, std::string>>;

KeyValues ScanAll(MessageStore& store, Table table, std::string_view from = "",
                  std::string_view to = "") {
  KeyValues out;
  const absl::Status s =
      store.Scan(table, from, to, [&](std::string_view k, std::string_view v) {
        out.emplace_back(k, v);
        return true;
      });
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

class MessageStoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { Reopen(); }

  // Closes and opens the store again. The memory store keeps its object (it
  // has nothing to reopen); RocksDB reopens from disk, with memtables that
  // follow SetWriteOnly for "rocksdb_switchable".
  void Reopen() {
    if (GetParam() == "memory") {
      if (store_ == nullptr) store_ = MemoryStore::Open();
      return;
    }
    store_.reset();
    auto store = RocksDbStore::Open(
        {.path = dir_.path() + "/data",
         .switchable_memtables = GetParam() == "rocksdb_switchable"});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }

  std::optional<std::string> Get(Table table, std::string_view key) {
    auto value = store_->Get(table, key);
    EXPECT_TRUE(value.ok()) << value.status();
    return value.ok() ? *value : std::nullopt;
  }

  testing::TempDir dir_;
  std::unique_ptr<MessageStore> store_;
};

TEST_P(MessageStoreTest, EmptyStoreHasNothing) {
  for (int t = 0; t < kNumTables; ++t) {
    const Table table = static_cast<Table>(t);
    SCOPED_TRACE(TableName(table));
    if (table == Table::kMeta) continue;  // Holds the format version.
    EXPECT_EQ(Get(table, "k"), std::nullopt);
    EXPECT_THAT(ScanAll(*store_, table), IsEmpty());
    auto last = store_->LastKey(table);
    ASSERT_TRUE(last.ok());
    EXPECT_EQ(*last, std::nullopt);
  }
}

TEST_P(MessageStoreTest, TablesAreSeparateKeySpaces) {
  WriteBatch batch;
  batch.Put(Table::kMessages, "k", "message");
  batch.Put(Table::kIds, "k", "id");
  ASSERT_TRUE(store_->Write(batch).ok());
  EXPECT_THAT(Get(Table::kMessages, "k"), Optional(std::string("message")));
  EXPECT_THAT(Get(Table::kIds, "k"), Optional(std::string("id")));
  EXPECT_EQ(Get(Table::kSchedule, "k"), std::nullopt);
}

TEST_P(MessageStoreTest, BatchAppliesInOrderLaterOperationsWin) {
  WriteBatch first;
  first.Put(Table::kMessages, "a", "1");
  first.Put(Table::kMessages, "b", "2");
  ASSERT_TRUE(store_->Write(first).ok());

  WriteBatch second;
  second.Delete(Table::kMessages, "a");
  second.Put(Table::kMessages, "b", "3");
  second.Put(Table::kMessages, "c", "4");
  second.Delete(Table::kMessages, "c");
  second.Put(Table::kMessages, "d", "5");
  second.Delete(Table::kMessages, "never-written");
  ASSERT_TRUE(store_->Write(second).ok());
  EXPECT_THAT(ScanAll(*store_, Table::kMessages),
              ElementsAre(Pair("b", "3"), Pair("d", "5")));
}

// WriteAll is one Write of its batches one after the other: later
// operations win across batches, counters add up, and the counters' cache
// (NonZeroCounters) sees every batch.
TEST_P(MessageStoreTest, WriteAllWritesItsBatchesInOrderAsOne) {
  WriteBatch first;
  first.Put(Table::kMessages, "a", "1");
  first.Put(Table::kMessages, "b", "1");
  first.Add("c", 5);
  WriteBatch second;
  second.Delete(Table::kMessages, "a");
  second.Put(Table::kMessages, "b", "2");
  second.Put(Table::kMeta, "position", "p");
  second.Add("c", -2);
  const WriteBatch* const batches[] = {&first, &second};
  ASSERT_TRUE(store_->WriteAll(batches).ok());
  EXPECT_THAT(ScanAll(*store_, Table::kMessages), ElementsAre(Pair("b", "2")));
  EXPECT_THAT(Get(Table::kMeta, "position"), Optional(std::string("p")));
  EXPECT_THAT(Get(Table::kCounters, "c"), Optional(EncodeCounter(3)));
  EXPECT_THAT(store_->NonZeroCounters(), ElementsAre(Pair("c", 3)));
  Reopen();
  EXPECT_THAT(ScanAll(*store_, Table::kMessages), ElementsAre(Pair("b", "2")));
  EXPECT_THAT(Get(Table::kCounters, "c"), Optional(EncodeCounter(3)));
}

// WriteOperations writes views as one batch holding them: in order, the
// counters' cache included.
TEST_P(MessageStoreTest, WriteOperationsWritesItsViewsInOrderAsOne) {
  using Kind = WriteBatch::Operation::Kind;
  // The bytes the views point into, as a backup holds its primary's entry.
  const std::string bytes = "abposition" + EncodeCounter(5) + EncodeCounter(-2);
  const std::string_view view(bytes);
  const OperationView operations[] = {
      {Table::kMessages, Kind::kPut, view.substr(0, 1), view.substr(1, 1)},
      {Table::kCounters, Kind::kAdd, view.substr(0, 1), view.substr(10, 8)},
      {Table::kMessages, Kind::kPut, view.substr(1, 1), view.substr(0, 1)},
      {Table::kMessages, Kind::kDelete, view.substr(0, 1), {}},
      {Table::kMeta, Kind::kPut, view.substr(2, 8), view.substr(1, 1)},
      {Table::kCounters, Kind::kAdd, view.substr(0, 1), view.substr(18, 8)},
  };
  ASSERT_TRUE(store_->WriteOperations(operations).ok());
  EXPECT_THAT(ScanAll(*store_, Table::kMessages), ElementsAre(Pair("b", "a")));
  EXPECT_THAT(Get(Table::kMeta, "position"), Optional(std::string("b")));
  EXPECT_THAT(Get(Table::kCounters, "a"), Optional(EncodeCounter(3)));
  EXPECT_THAT(store_->NonZeroCounters(), ElementsAre(Pair("a", 3)));
  Reopen();
  EXPECT_THAT(ScanAll(*store_, Table::kMessages), ElementsAre(Pair("b", "a")));
  EXPECT_THAT(Get(Table::kCounters, "a"), Optional(EncodeCounter(3)));
}

// The order a batch gives decides between operations on one key, however
// its keys are ordered and whichever tables they are in.
TEST_P(MessageStoreTest, OperationsOnOneKeyApplyInBatchOrderAmongOtherKeys) {
  WriteBatch batch;
  batch.Put(Table::kMessages, "z", "1");
  batch.Add("c", 5);
  batch.Put(Table::kMessages, "a", "1");
  batch.Put(Table::kIds, "m", "x");
  batch.Delete(Table::kMessages, "z");
  batch.Delete(Table::kCounters, "c");
  batch.Put(Table::kMessages, "z", "2");
  batch.Delete(Table::kMessages, "a");
  batch.Add("c", 2);
  batch.Put(Table::kMessages, "a", "3");
  batch.Delete(Table::kIds, "m");
  batch.Put(Table::kMessages, "k", "9");
  batch.Delete(Table::kMessages, "k");
  batch.Put(Table::kIds, "b", "y");
  ASSERT_TRUE(store_->Write(batch).ok());
  for (int pass = 0; pass < 2; ++pass) {
    SCOPED_TRACE(pass == 0 ? "as written" : "after reopen");
    EXPECT_THAT(ScanAll(*store_, Table::kMessages),
                ElementsAre(Pair("a", "3"), Pair("z", "2")));
    EXPECT_THAT(ScanAll(*store_, Table::kIds), ElementsAre(Pair("b", "y")));
    EXPECT_THAT(ScanAll(*store_, Table::kCounters),
                ElementsAre(Pair("c", EncodeCounter(2))));
    Reopen();
  }
}

// Schedule, ready and topic_due keys are put only while absent; deletes of
// them may rely on it (IsWriteOnce). A key deleted may be put again, also in
// the same batch.
TEST_P(MessageStoreTest, WriteOnceKeysMayBePutAgainAfterTheirDelete) {
  for (Table table : {Table::kSchedule, Table::kReady, Table::kTopicDue}) {
    SCOPED_TRACE(TableName(table));
    ASSERT_TRUE(IsWriteOnce(table));
    WriteBatch put;
    put.Put(table, "a", "1");
    put.Put(table, "b", "1");
    ASSERT_TRUE(store_->Write(put).ok());
    WriteBatch again;
    again.Delete(table, "a");
    again.Put(table, "a", "2");
    again.Delete(table, "b");
    ASSERT_TRUE(store_->Write(again).ok());
    Reopen();
    EXPECT_THAT(ScanAll(*store_, table), ElementsAre(Pair("a", "2")));
    WriteBatch last;
    last.Delete(table, "a");
    last.Put(table, "b", "3");
    ASSERT_TRUE(store_->Write(last).ok());
    Reopen();
    EXPECT_THAT(ScanAll(*store_, table), ElementsAre(Pair("b", "3")));
  }
  EXPECT_FALSE(IsWriteOnce(Table::kMessages));
  EXPECT_FALSE(IsWriteOnce(Table::kInFlight));
}

// The memory store, which the broker's tests run on, holds the broker to
// that rule.
TEST(MemoryStoreTest, OverwriteOfAWriteOnceKeyIsRefusedAndNothingApplies) {
  std::unique_ptr<MessageStore> store = MemoryStore::Open();
  WriteBatch first;
  first.Put(Table::kReady, "a", "1");
  ASSERT_TRUE(store->Write(first).ok());

  WriteBatch overwrite;
  overwrite.Put(Table::kMessages, "m", "kept out");
  overwrite.Put(Table::kReady, "a", "2");
  const absl::Status s = store->Write(overwrite);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("overwrite of key \"a\" of write-once table ready"));
  EXPECT_THAT(ScanAll(*store, Table::kMessages), IsEmpty());
  EXPECT_THAT(ScanAll(*store, Table::kReady), ElementsAre(Pair("a", "1")));

  WriteBatch twice;
  twice.Put(Table::kSchedule, "s", "1");
  twice.Put(Table::kSchedule, "s", "2");
  EXPECT_EQ(store->Write(twice).code(), absl::StatusCode::kInternal);
  EXPECT_THAT(ScanAll(*store, Table::kSchedule), IsEmpty());
}

TEST_P(MessageStoreTest, ScanIsOrderedBoundedAndStoppable) {
  WriteBatch batch;
  for (uint64_t due : {300, 100, 200, 400}) {
    batch.Put(Table::kSchedule, ScheduleKey({static_cast<int64_t>(due), 1}),
              "t");
  }
  ASSERT_TRUE(store_->Write(batch).ok());

  std::vector<int64_t> dues;
  for (const auto& [k, v] :
       ScanAll(*store_, Table::kSchedule, ScheduleKey({150, 0}),
               ScheduleKey({400, 0}))) {
    dues.push_back(DecodeScheduleKey(k)->deliver_at_ms);
  }
  EXPECT_THAT(dues, ElementsAre(200, 300));

  int visited = 0;
  ASSERT_TRUE(store_
                  ->Scan(Table::kSchedule, "", "",
                         [&](std::string_view, std::string_view) {
                           return ++visited < 3;
                         })
                  .ok());
  EXPECT_EQ(visited, 3);
}

TEST_P(MessageStoreTest, LongScansCrossInternalChunks) {
  WriteBatch batch;
  for (uint64_t i = 0; i < 1000; ++i)
    batch.Put(Table::kMessages, MessageKey(i), "");
  ASSERT_TRUE(store_->Write(batch).ok());
  const KeyValues all = ScanAll(*store_, Table::kMessages);
  ASSERT_EQ(all.size(), 1000u);
  for (uint64_t i = 0; i < 1000; ++i) {
    ASSERT_EQ(DecodeMessageKey(all[i].first), i);
  }
}

TEST_P(MessageStoreTest, ScanVisitorMayWrite) {
  WriteBatch batch;
  batch.Put(Table::kReady, "a", "");
  batch.Put(Table::kReady, "b", "");
  ASSERT_TRUE(store_->Write(batch).ok());
  ASSERT_TRUE(store_
                  ->Scan(Table::kReady, "", "",
                         [&](std::string_view key, std::string_view) {
                           WriteBatch del;
                           del.Delete(Table::kReady, std::string(key));
                           EXPECT_TRUE(store_->Write(del).ok());
                           return true;
                         })
                  .ok());
  EXPECT_THAT(ScanAll(*store_, Table::kReady), IsEmpty());
}

TEST_P(MessageStoreTest, LastKeyIsTheGreatest) {
  WriteBatch batch;
  batch.Put(Table::kMessages, MessageKey(7), "");
  batch.Put(Table::kMessages, MessageKey(300), "");
  batch.Put(Table::kMessages, MessageKey(12), "");
  ASSERT_TRUE(store_->Write(batch).ok());
  auto last = store_->LastKey(Table::kMessages);
  ASSERT_TRUE(last.ok());
  EXPECT_THAT(*last, Optional(MessageKey(300)));
}

TEST_P(MessageStoreTest, BinaryKeysAndValuesSurviveIntact) {
  const std::string key("\0\xff\x01", 3);
  const std::string value("\0\0payload\xfe", 10);
  WriteBatch batch;
  batch.Put(Table::kIds, key, value);
  ASSERT_TRUE(store_->Write(batch).ok());
  Reopen();
  EXPECT_THAT(Get(Table::kIds, key), Optional(value));
}

TEST_P(MessageStoreTest, MultiGetAnswersEachKeyInOrder) {
  WriteBatch batch;
  batch.Put(Table::kMessages, "a", "1");
  batch.Put(Table::kMessages, "c", "3");
  batch.Put(Table::kIds, "b", "other table");
  ASSERT_TRUE(store_->Write(batch).ok());
  auto values = store_->MultiGet(Table::kMessages, {"c", "b", "a", "c"});
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_THAT(*values, ElementsAre(Optional(std::string("3")), std::nullopt,
                                   Optional(std::string("1")),
                                   Optional(std::string("3"))));
  values = store_->MultiGet(Table::kMessages, {});
  ASSERT_TRUE(values.ok());
  EXPECT_THAT(*values, IsEmpty());
}

TEST_P(MessageStoreTest, CountersAddUpAcrossBatchesAndReopen) {
  WriteBatch first;
  first.Add("c", 5);
  first.Add("c", -2);
  first.Add("other", 7);
  ASSERT_TRUE(store_->Write(first).ok());
  WriteBatch second;
  second.Add("c", 10);
  ASSERT_TRUE(store_->Write(second).ok());
  EXPECT_THAT(Get(Table::kCounters, "c"), Optional(EncodeCounter(13)));
  Reopen();
  // Many small adds, as every dispatch and ack makes: all count.
  for (int i = 0; i < 100; ++i) {
    WriteBatch batch;
    batch.Add("c", -1);
    ASSERT_TRUE(store_->Write(batch).ok());
  }
  EXPECT_EQ(DecodeCounter(*Get(Table::kCounters, "c")), -87);
  EXPECT_EQ(DecodeCounter(*Get(Table::kCounters, "other")), 7);
  EXPECT_THAT(ScanAll(*store_, Table::kCounters),
              ElementsAre(Pair("c", EncodeCounter(-87)),
                          Pair("other", EncodeCounter(7))));
}

TEST_P(MessageStoreTest,
       ScheduleCountsAddUpAcrossReopenApartFromTheCountersTable) {
  WriteBatch batch;
  batch.Add(Table::kScheduleCounts, "m", 3);
  batch.Add("m", 100);  // Table::kCounters: another key space.
  batch.Add(Table::kScheduleCounts, "m", -1);
  batch.CombineAdds();
  EXPECT_EQ(batch.size(), 2u);
  ASSERT_TRUE(store_->Write(batch).ok());
  Reopen();
  WriteBatch more;
  more.Add(Table::kScheduleCounts, "m", 5);
  more.Add(Table::kScheduleCounts, "n", 0);
  ASSERT_TRUE(store_->Write(more).ok());
  EXPECT_THAT(
      ScanAll(*store_, Table::kScheduleCounts),
      ElementsAre(Pair("m", EncodeCounter(7)), Pair("n", EncodeCounter(0))));
  // Only the counters table is kept in memory.
  EXPECT_THAT(store_->NonZeroCounters(), ElementsAre(Pair("m", 100)));
}

TEST_P(MessageStoreTest, NonZeroCountersListsCountersNotAt0InKeyOrder) {
  EXPECT_THAT(store_->NonZeroCounters(), IsEmpty());
  WriteBatch first;
  first.Add(MessagesCounter("b"), 2);
  first.Add(MessagesCounter("a"), 1);
  first.Add(ReadyCounter("a", "g"), 1);
  first.Put(Table::kMessages, "m", EncodeCounter(7));  // Not a counter.
  ASSERT_TRUE(store_->Write(first).ok());
  WriteBatch second;
  second.Add(MessagesCounter("a"), -1);  // Back to 0: left out.
  second.Add(ReadyCounter("a", "g"), -3);
  ASSERT_TRUE(store_->Write(second).ok());
  EXPECT_THAT(store_->NonZeroCounters(),
              ElementsAre(Pair(MessagesCounter("b"), 2),
                          Pair(ReadyCounter("a", "g"), -2)));
  // A counter at 0 stays in the table, and out of NonZeroCounters after a
  // reopen too.
  EXPECT_THAT(Get(Table::kCounters, MessagesCounter("a")),
              Optional(EncodeCounter(0)));
  Reopen();
  EXPECT_THAT(store_->NonZeroCounters(),
              ElementsAre(Pair(MessagesCounter("b"), 2),
                          Pair(ReadyCounter("a", "g"), -2)));
  WriteBatch third;
  third.Add(MessagesCounter("a"), 5);
  third.Add(MessagesCounter("b"), -2);
  ASSERT_TRUE(store_->Write(third).ok());
  EXPECT_THAT(store_->NonZeroCounters(),
              ElementsAre(Pair(MessagesCounter("a"), 5),
                          Pair(ReadyCounter("a", "g"), -2)));
}

// Writes from many threads at once: the counters in memory end where the
// table does.
TEST_P(MessageStoreTest, NonZeroCountersMatchTheTableAfterConcurrentWrites) {
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        WriteBatch batch;
        batch.Add(MessagesCounter("shared"), i % 2 == 0 ? 3 : -1);
        batch.Add(MessagesCounter(absl::StrCat("own-", t)), 1);
        ASSERT_TRUE(store_->Write(batch).ok());
      }
    });
  }
  for (std::thread& writer : writers) writer.join();
  std::vector<std::pair<std::string, int64_t>> scanned;
  for (const auto& [key, value] : ScanAll(*store_, Table::kCounters)) {
    scanned.emplace_back(key, DecodeCounter(value));
  }
  EXPECT_EQ(store_->NonZeroCounters(), scanned);
  EXPECT_THAT(scanned, ::testing::Contains(
                           Pair(MessagesCounter("shared"), 4 * 100 * (3 - 1))));
}

// Operations as (key, value) pairs, counter values decoded.
std::vector<std::pair<std::string, std::string>> KeysAndValues(
    const WriteBatch& batch) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const WriteBatch::Operation& op : batch.operations()) {
    out.emplace_back(op.key, op.kind == WriteBatch::Operation::Kind::kAdd
                                 ? absl::StrCat("+", DecodeCounter(op.value))
                                 : op.value);
  }
  return out;
}

TEST(WriteBatchTest, CombineAddsSumsEachCounterWhereItsFirstAddWas) {
  WriteBatch batch;
  batch.Put(Table::kMessages, "m1", "v1");
  batch.Add("a", 1);
  batch.Add("b", 2);
  batch.Put(Table::kMessages, "m2", "v2");
  batch.Add("a", 3);
  batch.Add("b", -2);
  batch.Delete(Table::kMessages, "m0");
  batch.Add("c", INT64_MAX);
  batch.Add("c", 2);  // Wraps, as two separate Adds would.
  batch.CombineAdds();
  EXPECT_THAT(KeysAndValues(batch),
              ElementsAre(Pair("m1", "v1"), Pair("a", "+4"), Pair("b", "+0"),
                          Pair("m2", "v2"), Pair("m0", ""),
                          Pair("c", absl::StrCat("+", INT64_MIN + 1))));
  EXPECT_EQ(batch.size(), 6u);
  EXPECT_EQ(batch.ByteSize(), (2 + 2) + (1 + 8) * 3 + (2 + 2) + 2);
}

TEST(WriteBatchTest, CombineAddsKeepsAddsApartAcrossAPutOfTheirCounter) {
  WriteBatch batch;
  batch.Add("a", 1);
  batch.Add("a", 1);
  batch.Put(Table::kCounters, "a", EncodeCounter(10));
  batch.Add("a", 2);
  batch.Add("a", 3);
  batch.CombineAdds();
  EXPECT_THAT(KeysAndValues(batch),
              ElementsAre(Pair("a", "+2"), Pair("a", EncodeCounter(10)),
                          Pair("a", "+5")));
}

TEST(CounterTest, EncodingRoundTrips) {
  for (int64_t v :
       {int64_t{0}, int64_t{1}, int64_t{-1}, INT64_MAX, INT64_MIN}) {
    EXPECT_EQ(DecodeCounter(EncodeCounter(v)), v);
    EXPECT_EQ(EncodeCounter(v).size(), 8u);
  }
  EXPECT_EQ(DecodeCounter("short"), 0);
}

TEST_P(MessageStoreTest, LargeValuesSurviveReopen) {
  const std::string payload(1 << 20, 'x');
  WriteBatch batch;
  batch.Put(Table::kMessages, MessageKey(1), payload);
  ASSERT_TRUE(store_->Write(batch).ok());
  Reopen();
  EXPECT_THAT(Get(Table::kMessages, MessageKey(1)), Optional(payload));
}

// The commit queue's way of making writes durable: write without a sync,
// sync the log afterwards, while other writes go on.
TEST_P(MessageStoreTest, SyncLogWhileWritingKeepsEveryWrite) {
  std::thread writer([&] {
    for (int i = 0; i < 200; ++i) {
      WriteBatch batch;
      batch.set_needs_sync(false);
      batch.Put(Table::kMessages, MessageKey(i), "v");
      ASSERT_TRUE(store_->Write(batch).ok());
    }
  });
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(store_->SyncLog().ok());
  writer.join();
  ASSERT_TRUE(store_->SyncLog().ok());
  Reopen();
  EXPECT_EQ(ScanAll(*store_, Table::kMessages).size(), 200u);
}

// A store written while write-only (a backup's copy) reads as one that
// never was: during, after, and after a reopen. Writes before the hint go
// to the memtables it replaces, writes during it to new ones (append memtables,
// in RocksDbStore).
TEST_P(MessageStoreTest, WhatIsWrittenWhileWriteOnlyReadsTheSame) {
  WriteBatch before;
  before.Put(Table::kMessages, MessageKey(5), "m5");
  before.Put(Table::kSchedule, ScheduleKey({200, 3}), "c");
  ASSERT_TRUE(store_->Write(before).ok());
  store_->SetWriteOnly(true);
  // Keys out of order, one deleted and put again, in three tables.
  WriteBatch during;
  for (uint64_t i : {9, 2, 7, 1, 8}) {
    during.Put(Table::kMessages, MessageKey(i), absl::StrCat("m", i));
  }
  during.Delete(Table::kMessages, MessageKey(7));
  during.Put(Table::kSchedule, ScheduleKey({300, 1}), "a");
  during.Put(Table::kSchedule, ScheduleKey({100, 2}), "b");
  during.Add("c", 4);
  ASSERT_TRUE(store_->Write(during).ok());
  WriteBatch later;
  later.Put(Table::kMessages, MessageKey(7), "again");
  later.Delete(Table::kSchedule, ScheduleKey({300, 1}));
  ASSERT_TRUE(store_->Write(later).ok());

  KeyValues messages = {{MessageKey(1), "m1"}, {MessageKey(2), "m2"},
                        {MessageKey(5), "m5"}, {MessageKey(7), "again"},
                        {MessageKey(8), "m8"}, {MessageKey(9), "m9"}};
  auto expect_contents = [&] {
    EXPECT_EQ(ScanAll(*store_, Table::kMessages), messages);
    KeyValues from_3_to_8;
    std::copy_if(messages.begin(), messages.end(),
                 std::back_inserter(from_3_to_8), [](const auto& kv) {
                   return kv.first >= MessageKey(3) && kv.first < MessageKey(8);
                 });
    EXPECT_EQ(ScanAll(*store_, Table::kMessages, MessageKey(3), MessageKey(8)),
              from_3_to_8);
    EXPECT_THAT(Get(Table::kMessages, MessageKey(9)),
                Optional(std::string("m9")));
    EXPECT_EQ(Get(Table::kMessages, MessageKey(4)), std::nullopt);
    EXPECT_THAT(store_->LastKey(Table::kMessages).value(),
                Optional(messages.back().first));
    EXPECT_THAT(ScanAll(*store_, Table::kSchedule),
                ElementsAre(Pair(ScheduleKey({100, 2}), "b"),
                            Pair(ScheduleKey({200, 3}), "c")));
    EXPECT_THAT(store_->NonZeroCounters(), ElementsAre(Pair("c", 4)));
  };
  {
    SCOPED_TRACE("write-only");
    expect_contents();
  }
  store_->SetWriteOnly(false);
  {
    SCOPED_TRACE("no longer write-only");
    expect_contents();
  }
  WriteBatch after;
  after.Put(Table::kMessages, MessageKey(3), "m3");
  ASSERT_TRUE(store_->Write(after).ok());
  messages.insert(messages.begin() + 2, {MessageKey(3), "m3"});
  {
    SCOPED_TRACE("written after");
    expect_contents();
  }
  Reopen();
  SCOPED_TRACE("reopened");
  expect_contents();
}

INSTANTIATE_TEST_SUITE_P(Implementations, MessageStoreTest,
                         ::testing::Values("memory", "rocksdb",
                                           "rocksdb_switchable"),
                         [](const auto& info) { return info.param; });

TEST(RocksDbStoreTest, SecondOpenOfADataDirIsRefusedNamingIt) {
  testing::TempDir dir;
  auto first = RocksDbStore::Open({.path = dir.path()});
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = RocksDbStore::Open({.path = dir.path()});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(second.status().message()), HasSubstr(dir.path()));
  EXPECT_THAT(std::string(second.status().message()),
              HasSubstr("is in use by another hourglassd"));
}

// What Open says of a data dir whose format version is `version`.
absl::Status OpenWithFormatVersion(const std::string& path, uint32_t version) {
  {
    auto store = RocksDbStore::Open({.path = path});
    if (!store.ok()) return store.status();
    std::string encoded;
    AppendU32(encoded, version);
    WriteBatch batch;
    batch.Put(Table::kMeta, std::string(kFormatVersionKey), encoded);
    if (absl::Status s = (*store)->Write(batch); !s.ok()) return s;
  }
  return RocksDbStore::Open({.path = path}).status();
}

TEST(RocksDbStoreTest,
     AFormatVersionOutsideTheReadableRangeIsRefusedInOneLine) {
  testing::TempDir dir;
  // Newer: a rollback to an older binary after an upgrade.
  const absl::Status newer = OpenWithFormatVersion(dir.path() + "/newer", 5);
  EXPECT_EQ(newer.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(newer.message(),
            absl::StrCat("data dir ", dir.path(),
                         "/newer has format version "
                         "5; this hourglassd reads format versions 3 to 4: "
                         "run the hourglassd that wrote it, or a newer one"));
  const absl::Status older = OpenWithFormatVersion(dir.path() + "/older", 2);
  EXPECT_EQ(older.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(older.message(),
            absl::StrCat("data dir ", dir.path(),
                         "/older has format version "
                         "2; this hourglassd reads format versions 3 to 4: "
                         "upgrade it with an older hourglassd first"));
}

// Checks that `store` is of format 4 with an identity.
void ExpectFormat4WithAnIdentity(MessageStore& store) {
  auto version = store.Get(Table::kMeta, kFormatVersionKey);
  ASSERT_TRUE(version.ok() && version->has_value());
  EXPECT_EQ(ReadU32(**version), 4u);
  auto id = store.Get(Table::kMeta, kStoreIdKey);
  ASSERT_TRUE(id.ok() && id->has_value());
  EXPECT_THAT(**id, ::testing::MatchesRegex("[0-9a-f]{32}"));
}

TEST(RocksDbStoreTest, ANewStoreHasTheCurrentFormatAndAnIdentity) {
  testing::TempDir dir;
  auto store = RocksDbStore::Open({.path = dir.path()});
  ASSERT_TRUE(store.ok()) << store.status();
  ExpectFormat4WithAnIdentity(**store);
}

// The fixture is a data dir that hourglassd wrote in format 3 (main at
// e036d4b): topic orders with order-6 (rescheduled from 2036-01-05),
// order-1 and order-2 due in the minute 2036-01-01T00:00, order-3 at 01:30
// and order-4 on 2036-01-02T12:00 (order-5 was cancelled); payments with
// p-1 due 2036-03-01 and p-2 waiting for a group; reminders with r-1 and
// r-2 ready in group mailer.
TEST(RocksDbStoreTest,
     AFormat3DataDirIsUpgradedInPlaceWithScheduleCountsOfItsScheduledMessages) {
  testing::TempDir dir;
  const std::string data = dir.path() + "/data";
  ASSERT_TRUE(RocksDbStore::Restore(HOURGLASS_FORMAT3_FIXTURE, data).ok());
  std::vector<std::pair<uint32_t, uint32_t>> upgrades;
  std::vector<uint64_t> progress;
  const std::string store_id = "6869ace227e52003d545785e8b0643e4";
  {
    auto store = RocksDbStore::Open(
        {.path = data,
         .on_upgrade = [&](uint32_t from,
                           uint32_t to) { upgrades.emplace_back(from, to); },
         .on_upgrade_progress =
             [&](uint64_t counted) { progress.push_back(counted); }});
    ASSERT_TRUE(store.ok()) << store.status();
    EXPECT_THAT(upgrades, ElementsAre(Pair(3u, 4u)));
    EXPECT_THAT(progress, IsEmpty());  // Called after each million only.
    ExpectFormat4WithAnIdentity(**store);
    auto id = (*store)->Get(Table::kMeta, kStoreIdKey);
    ASSERT_TRUE(id.ok()) << id.status();
    EXPECT_THAT(*id, Optional(store_id));  // Kept by the upgrade.

    // One count per minute, hour and day of the five scheduled messages.
    auto at = [](const char* rfc3339) {
      absl::Time t;
      std::string error;
      EXPECT_TRUE(absl::ParseTime(absl::RFC3339_full, rfc3339, &t, &error))
          << error;
      return absl::ToUnixMillis(t);
    };
    auto count = [](std::string_view topic, Granularity g, int64_t start) {
      return Pair(ScheduleCountKey(topic, g, start), EncodeCounter(1));
    };
    auto counts = [&](std::string_view topic, Granularity g, int64_t start,
                      int64_t n) {
      return Pair(ScheduleCountKey(topic, g, start), EncodeCounter(n));
    };
    EXPECT_THAT(
        ScanAll(**store, Table::kScheduleCounts),
        ElementsAre(
            counts("orders", Granularity::kMinute, at("2036-01-01T00:00:00Z"),
                   3),
            count("orders", Granularity::kMinute, at("2036-01-01T01:30:00Z")),
            count("orders", Granularity::kMinute, at("2036-01-02T12:00:00Z")),
            counts("orders", Granularity::kHour, at("2036-01-01T00:00:00Z"), 3),
            count("orders", Granularity::kHour, at("2036-01-01T01:00:00Z")),
            count("orders", Granularity::kHour, at("2036-01-02T12:00:00Z")),
            counts("orders", Granularity::kDay, at("2036-01-01T00:00:00Z"), 4),
            count("orders", Granularity::kDay, at("2036-01-02T00:00:00Z")),
            count("payments", Granularity::kMinute, at("2036-03-01T00:00:00Z")),
            count("payments", Granularity::kHour, at("2036-03-01T00:00:00Z")),
            count("payments", Granularity::kDay, at("2036-03-01T00:00:00Z"))));
    // And the rest of the store as it was.
    EXPECT_THAT((*store)->NonZeroCounters(),
                ElementsAre(Pair(MessagesCounter("orders"), 5),
                            Pair(MessagesCounter("payments"), 2),
                            Pair(MessagesCounter("reminders"), 2),
                            Pair(ReadyCounter("payments", ""), 1),
                            Pair(ReadyCounter("reminders", "mailer"), 2),
                            Pair(ScheduledCounter("orders"), 5),
                            Pair(ScheduledCounter("payments"), 1)));
  }
  // Upgraded once: the next open finds format 4 and counts nothing again.
  auto again = RocksDbStore::Open(
      {.path = data, .on_upgrade = [&](uint32_t from, uint32_t to) {
         upgrades.emplace_back(from, to);
       }});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(upgrades.size(), 1u);
  EXPECT_EQ(ScanAll(**again, Table::kScheduleCounts).size(), 11u);
}

TEST(RocksDbStoreTest,
     UpgradeCountsAMillionScheduledMessagesReportingProgress) {
  testing::TempDir dir;
  const std::string data = dir.path() + "/data";
  constexpr int64_t kMessages = 1'000'001;
  constexpr int64_t kDay = 86'400'000;
  {
    auto store = RocksDbStore::Open({.path = data, .sync = false});
    ASSERT_TRUE(store.ok()) << store.status();
    for (int64_t i = 0; i < kMessages; i += 10'000) {
      WriteBatch batch;
      for (int64_t j = i; j < std::min(i + 10'000, kMessages); ++j) {
        // Over 100 days, a message every 8.64 s.
        batch.Put(Table::kSchedule,
                  ScheduleKey(
                      {j * (100 * kDay / kMessages), static_cast<uint64_t>(j)}),
                  j % 2 == 0 ? "even" : "odd");
      }
      ASSERT_TRUE((*store)->Write(batch).ok());
    }
    // Back to format 3, as a store written before format 4 would be.
    std::string three;
    AppendU32(three, 3);
    WriteBatch batch;
    batch.Put(Table::kMeta, std::string(kFormatVersionKey), three);
    ASSERT_TRUE((*store)->Write(batch).ok());
  }
  std::vector<uint64_t> progress;
  auto store = RocksDbStore::Open(
      {.path = data, .on_upgrade_progress = [&](uint64_t counted) {
         progress.push_back(counted);
       }});
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_THAT(progress, ElementsAre(1'000'000u));
  int64_t days = 0;
  int64_t total = 0;
  const std::string prefix = ScheduleCountPrefix("even", Granularity::kDay);
  for (const auto& [key, value] :
       ScanAll(**store, Table::kScheduleCounts, prefix, PrefixEnd(prefix))) {
    ++days;
    total += DecodeCounter(value);
  }
  EXPECT_EQ(days, 100);
  EXPECT_EQ(total, kMessages / 2 + 1);
}

TEST(RocksDbStoreTest, ACheckpointTakenDuringWritesHoldsEveryEarlierWrite) {
  testing::TempDir dir;
  auto store = RocksDbStore::Open({.path = dir.path() + "/data"});
  ASSERT_TRUE(store.ok()) << store.status();
  auto put = [&](int i) {
    WriteBatch batch;
    batch.Put(Table::kMessages, MessageKey(i), absl::StrCat("v", i));
    batch.Add(MessagesCounter("t"), 1);
    return (*store)->Write(batch);
  };
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(put(i).ok());
  // Writes go on while the checkpoint is taken.
  std::atomic<int> next{1000};
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    while (!stop.load()) ASSERT_TRUE(put(next++).ok());
  });
  auto info = (*store)->Checkpoint(dir.path() + "/snap");
  stop = true;
  writer.join();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->dir, dir.path() + "/snap");
  EXPECT_GT(info->files, 0u);
  EXPECT_GT(info->bytes, 0u);
  struct stat st;
  ASSERT_EQ(stat(info->dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  // The snapshot opens as a data dir: the first 1000 writes and a prefix of
  // the rest, each with its counter (all or nothing of each write).
  auto snapshot = RocksDbStore::Open({.path = info->dir});
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  const KeyValues messages = ScanAll(**snapshot, Table::kMessages);
  ASSERT_GE(messages.size(), 1000u);
  for (size_t i = 0; i < messages.size(); ++i) {
    ASSERT_EQ(messages[i].first, MessageKey(i));
    ASSERT_EQ(messages[i].second, absl::StrCat("v", i));
  }
  EXPECT_THAT((*snapshot)->NonZeroCounters(),
              ElementsAre(Pair(MessagesCounter("t"),
                               static_cast<int64_t>(messages.size()))));
  // It is the same store: same identity.
  EXPECT_EQ(*(*snapshot)->Get(Table::kMeta, kStoreIdKey),
            *(*store)->Get(Table::kMeta, kStoreIdKey));
}

// A store's own write format: a write of one RocksDB store, written by
// another as it is (a backup writing its primary's batch).
class EncodedWriteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto primary = RocksDbStore::Open({.path = dir_.path() + "/primary"});
    ASSERT_TRUE(primary.ok()) << primary.status();
    primary_ = *std::move(primary);
    auto backup = RocksDbStore::Open({.path = dir_.path() + "/backup"});
    ASSERT_TRUE(backup.ok()) << backup.status();
    backup_ = *std::move(backup);
  }

  // What the primary's store wrote for `batches`.
  std::string WriteOnPrimary(std::initializer_list<const WriteBatch*> batches) {
    std::string encoded = "left from before";
    const absl::Status s = primary_->WriteAllEncoded(
        absl::MakeConstSpan(batches.begin(), batches.size()), encoded);
    EXPECT_TRUE(s.ok()) << s;
    return encoded;
  }

  // Every table but meta (which holds each store's identity), and meta's
  // "position".
  static std::vector<KeyValues> Contents(MessageStore& store) {
    std::vector<KeyValues> out;
    for (int t = 0; t < kNumTables; ++t) {
      if (static_cast<Table>(t) == Table::kMeta) continue;
      out.push_back(ScanAll(store, static_cast<Table>(t)));
    }
    absl::StatusOr<std::optional<std::string>> position =
        store.Get(Table::kMeta, "position");
    EXPECT_TRUE(position.ok()) << position.status();
    out.push_back({{"position", position->value_or("(none)")}});
    return out;
  }

  testing::TempDir dir_;
  std::unique_ptr<MessageStore> primary_;
  std::unique_ptr<MessageStore> backup_;
};

// Puts, a delete in a write-once table (a RocksDB SingleDelete), a delete
// elsewhere, and counters, in two batches.
std::pair<WriteBatch, WriteBatch> MixedBatches() {
  WriteBatch first;
  first.Put(Table::kMessages, "m1", "one");
  first.Put(Table::kMessages, "m2", "two");
  first.Put(Table::kSchedule, "s1", "t");
  first.Put(Table::kSchedule, "s2", "t");
  first.Add(MessagesCounter("t"), 2);
  first.Add(Table::kScheduleCounts, "t/minute", 2);
  WriteBatch second;
  second.Delete(Table::kSchedule, "s1");
  second.Delete(Table::kMessages, "m2");
  second.Put(Table::kReady, "r1", "0");
  second.Put(Table::kMeta, "position", "p1");
  second.Add(MessagesCounter("t"), -1);
  return {std::move(first), std::move(second)};
}

TEST_F(EncodedWriteTest, TheBackupHoldsWhatThePrimaryWroteAcrossAReopen) {
  ASSERT_FALSE(primary_->WriteEncoding().empty());
  // Fresh stores name their tables' column families alike.
  ASSERT_EQ(backup_->WriteEncoding(), primary_->WriteEncoding());
  const auto [first, second] = MixedBatches();
  const std::string encoded = WriteOnPrimary({&first, &second});
  ASSERT_FALSE(encoded.empty());

  const std::string_view writes[] = {encoded};
  ASSERT_TRUE(backup_->WriteEncoded(writes).ok());
  EXPECT_EQ(Contents(*backup_), Contents(*primary_));
  EXPECT_THAT(ScanAll(*backup_, Table::kSchedule),
              ElementsAre(Pair("s2", "t")));
  EXPECT_THAT(backup_->NonZeroCounters(),
              ElementsAre(Pair(MessagesCounter("t"), 1)));
  EXPECT_EQ(backup_->NonZeroCounters(), primary_->NonZeroCounters());

  backup_.reset();
  auto reopened = RocksDbStore::Open({.path = dir_.path() + "/backup"});
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_EQ(Contents(**reopened), Contents(*primary_));
  EXPECT_EQ((*reopened)->NonZeroCounters(), primary_->NonZeroCounters());
}

// Several writes go in as one, in order: a later one wins over an earlier.
TEST_F(EncodedWriteTest, WritesGoInOneAfterTheOther) {
  WriteBatch put;
  put.Put(Table::kMessages, "a", "1");
  put.Put(Table::kMessages, "b", "1");
  put.Add(MessagesCounter("t"), 2);
  WriteBatch change;
  change.Put(Table::kMessages, "a", "2");
  change.Delete(Table::kMessages, "b");
  change.Add(MessagesCounter("t"), -1);
  const std::string w1 = WriteOnPrimary({&put});
  const std::string w2 = WriteOnPrimary({&change});
  const std::string_view writes[] = {w1, w2};
  ASSERT_TRUE(backup_->WriteEncoded(writes).ok());
  EXPECT_THAT(ScanAll(*backup_, Table::kMessages), ElementsAre(Pair("a", "2")));
  EXPECT_THAT(backup_->NonZeroCounters(),
              ElementsAre(Pair(MessagesCounter("t"), 1)));
}

TEST_F(EncodedWriteTest, BytesThatAreNotAWriteAreRefusedAndNothingIsWritten) {
  WriteBatch batch;
  batch.Put(Table::kMessages, "a", "1");
  const std::string good = WriteOnPrimary({&batch});
  // A record cut short: the header counts one record more than there is.
  const std::string cut = good.substr(0, good.size() - 1);
  std::string extra_count = good;
  extra_count[8] = static_cast<char>(extra_count[8] + 1);
  for (const std::string& bad : {std::string("short"), cut, extra_count}) {
    SCOPED_TRACE(absl::CEscape(bad));
    const std::string_view writes[] = {good, bad};
    const absl::Status s = backup_->WriteEncoded(writes);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr("not a write of a store like this one"));
  }
  EXPECT_THAT(ScanAll(*backup_, Table::kMessages), IsEmpty());
}

TEST_F(EncodedWriteTest, DecodingGivesTheBatchesOperationsInOrder) {
  const auto [first, second] = MixedBatches();
  const std::string encoded = WriteOnPrimary({&first, &second});
  absl::StatusOr<WriteBatch> decoded =
      DecodeRocksDbWrite(primary_->WriteEncoding(), encoded);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  std::vector<WriteBatch::Operation> expected = first.operations();
  for (const WriteBatch::Operation& op : second.operations()) {
    expected.push_back(op);
  }
  ASSERT_EQ(decoded->size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(decoded->operations()[i].table, expected[i].table);
    EXPECT_EQ(decoded->operations()[i].kind, expected[i].kind);
    EXPECT_EQ(decoded->operations()[i].key, expected[i].key);
    EXPECT_EQ(decoded->operations()[i].value, expected[i].value);
  }
  // Into a store of another kind, it writes what the primary holds.
  std::unique_ptr<MessageStore> memory = MemoryStore::Open();
  ASSERT_TRUE(memory->Write(*decoded).ok());
  EXPECT_EQ(Contents(*memory), Contents(*primary_));
}

// The encoding says which column family is which table: read with another
// one's ids, the write holds records of no table, or merges into a table
// that holds no counters, and is refused.
TEST_F(EncodedWriteTest, RecordsOutsideWhatTheStoreWritesAreRefused) {
  const auto [first, second] = MixedBatches();
  const std::string encoded = WriteOnPrimary({&first, &second});
  const std::string encoding(primary_->WriteEncoding());
  const std::string prefix = encoding.substr(0, encoding.rfind(' ') + 1);
  std::vector<std::string> ids =
      absl::StrSplit(encoding.substr(prefix.size()), ',');
  ASSERT_EQ(ids.size(), static_cast<size_t>(kNumTables));

  std::vector<std::string> shifted;
  for (const std::string& id : ids) {
    shifted.push_back(absl::StrCat(std::stoi(id) + 100));
  }
  absl::StatusOr<WriteBatch> unknown =
      DecodeRocksDbWrite(prefix + absl::StrJoin(shifted, ","), encoded);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.status().message(),
              HasSubstr(absl::StrCat("a record of column family ",
                                     ids[static_cast<int>(Table::kMessages)],
                                     ", which holds no table")));

  std::vector<std::string> swapped = ids;
  std::swap(swapped[static_cast<int>(Table::kCounters)],
            swapped[static_cast<int>(Table::kMessages)]);
  absl::StatusOr<WriteBatch> merge =
      DecodeRocksDbWrite(prefix + absl::StrJoin(swapped, ","), encoded);
  EXPECT_EQ(merge.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(merge.status().message(), HasSubstr("a merge in table messages"));

  EXPECT_EQ(DecodeRocksDbWrite("tables 1,2,3", encoded).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MemoryStoreTest, HasNoWriteFormatOfItsOwn) {
  std::unique_ptr<MessageStore> store = MemoryStore::Open();
  EXPECT_EQ(store->WriteEncoding(), "");
  WriteBatch batch;
  batch.Put(Table::kMessages, "a", "1");
  const WriteBatch* const batches[] = {&batch};
  std::string encoded = "left from before";
  ASSERT_TRUE(store->WriteAllEncoded(batches, encoded).ok());
  EXPECT_EQ(encoded, "");
  EXPECT_THAT(ScanAll(*store, Table::kMessages), ElementsAre(Pair("a", "1")));
  const std::string_view writes[] = {"anything"};
  EXPECT_EQ(store->WriteEncoded(writes).code(),
            absl::StatusCode::kUnimplemented);
}

TEST(RocksDbStoreTest, ACheckpointNeedsANewAbsoluteDirWithAParent) {
  testing::TempDir dir;
  auto store = RocksDbStore::Open({.path = dir.path() + "/data"});
  ASSERT_TRUE(store.ok()) << store.status();
  auto relative = (*store)->Checkpoint("snap");
  EXPECT_EQ(relative.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(relative.status().message(),
            "snapshot dir \"snap\" is not an absolute path");
  auto existing = (*store)->Checkpoint(dir.path());
  EXPECT_EQ(existing.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(existing.status().message(),
            absl::StrCat("snapshot dir ", dir.path(), " already exists"));
  auto orphan = (*store)->Checkpoint(dir.path() + "/no/such");
  EXPECT_EQ(orphan.status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/no"));
}

TEST(MemoryStoreTest, CheckpointIsUnimplemented) {
  auto store = MemoryStore::Open();
  EXPECT_EQ(store->Checkpoint("/tmp/x").status().code(),
            absl::StatusCode::kUnimplemented);
}

TEST(RocksDbStoreTest, RestoreCopiesASnapshotIntoAnEmptyDataDirOnly) {
  testing::TempDir dir;
  {
    auto store = RocksDbStore::Open({.path = dir.path() + "/data"});
    ASSERT_TRUE(store.ok()) << store.status();
    WriteBatch batch;
    batch.Put(Table::kMessages, MessageKey(7), "seven");
    ASSERT_TRUE((*store)->Write(batch).ok());
    ASSERT_TRUE((*store)->Checkpoint(dir.path() + "/snap").ok());
  }
  // Into a missing dir, and into an empty one.
  ASSERT_TRUE(std::filesystem::create_directory(dir.path() + "/empty"));
  for (const std::string target : {"/new", "/empty"}) {
    const std::string to = dir.path() + target;
    ASSERT_TRUE(RocksDbStore::Restore(dir.path() + "/snap", to).ok()) << to;
    auto restored = RocksDbStore::Open({.path = to});
    ASSERT_TRUE(restored.ok()) << restored.status();
    EXPECT_THAT(*(*restored)->Get(Table::kMessages, MessageKey(7)),
                Optional(std::string("seven")));
  }
  // Never over data.
  absl::Status over =
      RocksDbStore::Restore(dir.path() + "/snap", dir.path() + "/data");
  EXPECT_EQ(over.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(over.message(),
            absl::StrCat("cannot restore into data dir ", dir.path(),
                         "/data: it is not an empty directory (restore needs "
                         "a new or empty one)"));
  // Only from a store.
  absl::Status nothing =
      RocksDbStore::Restore(dir.path() + "/empty-not", dir.path() + "/x");
  EXPECT_EQ(nothing.code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/x"));
}

TEST(RocksDbStoreTest, UncreatableDataDirIsRefusedNamingIt) {
  testing::TempDir dir;
  // A path under a regular file (RocksDB's LOCK file) cannot be created.
  ASSERT_TRUE(RocksDbStore::Open({.path = dir.path()}).ok());
  const std::string path = dir.path() + "/LOCK/data";
  auto store = RocksDbStore::Open({.path = path});
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(store.status().message()),
              HasSubstr("cannot create data dir " + path));
}

// The permission bits of `path`, or -1 if it cannot be stat'ed.
int ModeOf(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? static_cast<int>(st.st_mode & 07777)
                                      : -1;
}

TEST(RocksDbStoreTest, ANewDataDirIsOpenToItsOwnerOnly) {
  testing::TempDir dir;
  for (const std::string& path :
       {dir.path() + "/data", dir.path() + "/parent/data",
        dir.path() + "/slash/data/"}) {
    auto store = RocksDbStore::Open({.path = path});
    ASSERT_TRUE(store.ok()) << store.status();
    EXPECT_EQ(ModeOf(path), 0700) << path;
  }
}

TEST(RocksDbStoreTest, AnExistingDataDirKeepsItsMode) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/data";
  ASSERT_EQ(mkdir(path.c_str(), 0700), 0);
  ASSERT_EQ(chmod(path.c_str(), 0750), 0);
  auto store = RocksDbStore::Open({.path = path});
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(ModeOf(path), 0750);
}

TEST(RocksDbStoreTest, ADataDirThatIsAFileIsRefusedNamingIt) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/data";
  ASSERT_EQ(close(open(path.c_str(), O_CREAT | O_WRONLY, 0600)), 0);
  EXPECT_EQ(RocksDbStore::Open({.path = path}).status(),
            absl::FailedPreconditionError(absl::StrCat(
                "cannot create data dir ", path, ": Not a directory")));
}

TEST(RocksDbStoreTest, ASymlinkAtEitherLockFileIsRefusedAndNotFollowed) {
  for (const char* lock : {"hourglassd.lock", "LOCK"}) {
    SCOPED_TRACE(lock);
    testing::TempDir dir;
    const std::string data = dir.path() + "/data";
    const std::string planted = absl::StrCat(data, "/", lock);
    // Where the link points: nothing yet, which following it would create.
    const std::string target = dir.path() + "/elsewhere";
    ASSERT_EQ(mkdir(data.c_str(), 0700), 0);
    ASSERT_EQ(symlink(target.c_str(), planted.c_str()), 0);

    EXPECT_EQ(RocksDbStore::Open({.path = data}).status(),
              absl::FailedPreconditionError(absl::StrCat(
                  "cannot open ", planted,
                  ": it is a symbolic link, which hourglassd does not follow "
                  "(remove it; the lock file is made afresh)")));
    EXPECT_EQ(ModeOf(target), -1) << "the link was followed";

    // Once the link is gone, the store opens.
    ASSERT_EQ(unlink(planted.c_str()), 0);
    EXPECT_TRUE(RocksDbStore::Open({.path = data}).ok());
  }
}

TEST(RocksDbStoreTest, EmptyPathIsInvalid) {
  auto store = RocksDbStore::Open({.path = ""});
  EXPECT_EQ(store.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hourglass::storage
