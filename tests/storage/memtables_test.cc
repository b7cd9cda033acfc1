// The memtables of RocksDbStore's tables (storage/memtables.h): the append
// memtable on its own, held to RocksDB's memtable contract with keys in and
// out of order, and the choice each memtable makes in a real RocksDB. The
// stores' tests (message_store_test.cc) read them through the store.

#include "storage/memtables.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <iostream>
#include <iterator>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rocksdb/db.h"
#include "rocksdb/options.h"
#include "rocksdb/slice.h"
#include "storage/keys.h"
#include "storage/rocksdb_open.h"
#include "tests/testing/temp_dir.h"

namespace hourglass::storage {
namespace {

using ::testing::ElementsAreArray;

// RocksDB's memtable entries begin with their key's length (a varint);
// these keys are short, so one byte. Compared bytewise.
class TestComparator final : public rocksdb::MemTableRep::KeyComparator {
 public:
  int operator()(const char* a, const char* b) const override {
    return rocksdb::GetLengthPrefixedSlice(a).compare(
        rocksdb::GetLengthPrefixedSlice(b));
  }
  int operator()(const char* a, const rocksdb::Slice& key) const override {
    return rocksdb::GetLengthPrefixedSlice(a).compare(key);
  }
};

class AppendMemtableTest : public ::testing::Test {
 protected:
  // Inserts `key`, as RocksDB would an entry it allocated.
  void Insert(const std::string& key) {
    ASSERT_LT(key.size(), 128u);
    entries_.push_back(std::string(1, static_cast<char>(key.size())) + key);
    memtable_->Insert(const_cast<char*>(entries_.back().data()));
  }

  // Every key an iterator visits from the first, and from the last back.
  static std::vector<std::string> Forward(rocksdb::MemTableRep::Iterator& it) {
    std::vector<std::string> keys;
    for (it.SeekToFirst(); it.Valid(); it.Next()) keys.push_back(Key(it));
    return keys;
  }
  static std::vector<std::string> Backward(rocksdb::MemTableRep::Iterator& it) {
    std::vector<std::string> keys;
    for (it.SeekToLast(); it.Valid(); it.Prev()) keys.push_back(Key(it));
    return keys;
  }
  static std::string Key(const rocksdb::MemTableRep::Iterator& it) {
    return rocksdb::GetLengthPrefixedSlice(it.key()).ToString();
  }

  // Checks a full read of the memtable against `model`: both directions,
  // Seek and SeekForPrev of each key and of the gaps around them, and
  // Contains.
  void ExpectHolds(const std::set<std::string>& model, bool in_arena) {
    SCOPED_TRACE(in_arena ? "iterator in RocksDB's arena"
                          : "iterator on the heap");
    // Never dereferenced: the memtable only learns from it that RocksDB
    // will destroy the iterator without freeing it.
    int arena_stand_in = 0;
    rocksdb::MemTableRep::Iterator* it = memtable_->GetIterator(
        in_arena ? reinterpret_cast<rocksdb::Arena*>(&arena_stand_in)
                 : nullptr);
    const std::vector<std::string> sorted(model.begin(), model.end());
    EXPECT_THAT(Forward(*it), ElementsAreArray(sorted));
    EXPECT_THAT(Backward(*it),
                ElementsAreArray(sorted.rbegin(), sorted.rend()));
    std::vector<std::string> targets = sorted;
    for (const std::string& key : sorted) {
      targets.push_back(key + '\0');                     // just after it
      targets.push_back(key.substr(0, key.size() - 1));  // before it
    }
    targets.push_back("");
    targets.push_back("\xff\xff");
    for (const std::string& target : targets) {
      const std::string encoded =
          std::string(1, static_cast<char>(target.size())) + target;
      auto at_or_after = model.lower_bound(target);
      for (const char* memtable_key :
           {encoded.c_str(), static_cast<const char*>(nullptr)}) {
        it->Seek(target, memtable_key);
        if (at_or_after == model.end()) {
          EXPECT_FALSE(it->Valid()) << "Seek " << target;
        } else {
          ASSERT_TRUE(it->Valid()) << "Seek " << target;
          EXPECT_EQ(Key(*it), *at_or_after);
        }
        it->SeekForPrev(target, memtable_key);
        auto after = model.upper_bound(target);
        if (after == model.begin()) {
          EXPECT_FALSE(it->Valid()) << "SeekForPrev " << target;
        } else {
          ASSERT_TRUE(it->Valid()) << "SeekForPrev " << target;
          EXPECT_EQ(Key(*it), *std::prev(after));
        }
      }
      EXPECT_EQ(memtable_->Contains(encoded.c_str()), model.count(target) == 1)
          << target;
    }
    if (in_arena) {
      it->~Iterator();
    } else {
      delete it;
    }
  }

  TestComparator compare_;
  std::deque<std::string> entries_;
  std::unique_ptr<rocksdb::MemTableRep> memtable_{
      NewAppendMemtable(compare_, nullptr)};
};

TEST_F(AppendMemtableTest, AnEmptyMemtableReadsNothing) {
  ExpectHolds({}, false);
  memtable_->MarkReadOnly();
  ExpectHolds({}, true);
}

// Most keys come after the last (as message sequences do), some anywhere
// (as due times of mixed delays do); a read sees them all in order, while
// the memtable is written and once it is read-only.
TEST_F(AppendMemtableTest, KeysInAndOutOfOrderAreReadInOrder) {
  const uint32_t seed = std::random_device()();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::cout << "seed " << seed << std::endl;
  std::mt19937 random(seed);
  std::set<std::string> model;
  int next = 0;
  const size_t empty_memory = memtable_->ApproximateMemoryUsage();
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < 500; ++i) {
      char key[16];
      const int n =
          std::uniform_int_distribution<int>(0, 9)(random) < 8
              ? next += 1 + std::uniform_int_distribution<int>(0, 2)(random)
              : std::uniform_int_distribution<int>(0, next + 100)(random);
      std::snprintf(key, sizeof(key), "k%07d", n);
      if (!model.insert(key).second) continue;  // Entries are unique.
      Insert(key);
    }
    SCOPED_TRACE(::testing::Message() << "written, " << model.size() << " keys");
    ExpectHolds(model, round % 2 == 0);
  }
  EXPECT_GE(memtable_->ApproximateMemoryUsage(),
            empty_memory + model.size() * sizeof(const char*));
  memtable_->MarkReadOnly();
  SCOPED_TRACE("read-only");
  ExpectHolds(model, true);
  ExpectHolds(model, false);
}

// An iterator reads what the memtable held when it was made, however much
// is inserted while it is read.
TEST_F(AppendMemtableTest, AnIteratorReadsTheKeysOfItsMaking) {
  Insert("b");
  Insert("d");
  std::unique_ptr<rocksdb::MemTableRep::Iterator> it(
      memtable_->GetIterator(nullptr));
  Insert("a");
  Insert("c");
  Insert("e");
  EXPECT_THAT(Forward(*it), ElementsAreArray({"b", "d"}));
  std::unique_ptr<rocksdb::MemTableRep::Iterator> later(
      memtable_->GetIterator(nullptr));
  EXPECT_THAT(Forward(*later), ElementsAreArray({"a", "b", "c", "d", "e"}));
}

// Each memtable of a table chooses at its first key: an append memtable
// while the store is write-only, a skiplist otherwise. Changing the state
// does nothing to memtables that hold keys until they are switched (as
// RocksDbStoreImpl::SetWriteOnly does at once), and an empty one chooses
// when its first key comes, whenever that is.
TEST(StoreMemtablesTest, EachMemtableChoosesAtItsFirstKey) {
  testing::TempDir dir;
  std::shared_ptr<RocksDbResources> resources = RocksDbResources::Create({});
  auto memtables = std::make_shared<StoreMemtables>();
  absl::StatusOr<std::shared_ptr<const OpenDatabase>> opened =
      OpenRocksDb(dir.path(), *resources, memtables);
  ASSERT_TRUE(opened.ok()) << opened.status();
  rocksdb::DB& db = *(*opened)->db;
  rocksdb::ColumnFamilyHandle* messages = (*opened)->Handle(Table::kMessages);
  rocksdb::ColumnFamilyHandle* schedule = (*opened)->Handle(Table::kSchedule);
  rocksdb::ColumnFamilyHandle* ready = (*opened)->Handle(Table::kReady);
  auto put = [&](rocksdb::ColumnFamilyHandle* table, const std::string& key) {
    ASSERT_TRUE(db.Put(rocksdb::WriteOptions(), table, key, "v").ok());
  };
  auto switch_memtable = [&](rocksdb::ColumnFamilyHandle* table) {
    ASSERT_TRUE(db.Flush(rocksdb::FlushOptions(), table).ok());
  };

  put(messages, "m1");  // a skiplist
  EXPECT_EQ(memtables->appended(), 0);
  EXPECT_FALSE(memtables->set_write_only(true));
  put(messages, "m2");  // the same skiplist
  EXPECT_EQ(memtables->appended(), 0);
  switch_memtable(messages);
  put(messages, "m3");  // an append memtable
  put(schedule, "s1");  // the table's first: an append memtable
  EXPECT_EQ(memtables->appended(), 2);

  EXPECT_TRUE(memtables->set_write_only(false));
  switch_memtable(messages);
  put(schedule, "s2");  // the same append memtable
  put(messages, "m4");  // a skiplist
  put(ready, "r1");     // the table's first: a skiplist
  EXPECT_EQ(memtables->appended(), 2);

  for (const auto& [table, keys] :
       {std::pair{messages, std::vector<std::string>{"m1", "m2", "m3", "m4"}},
        std::pair{schedule, std::vector<std::string>{"s1", "s2"}},
        std::pair{ready, std::vector<std::string>{"r1"}}}) {
    std::unique_ptr<rocksdb::Iterator> it(
        db.NewIterator(rocksdb::ReadOptions(), table));
    std::vector<std::string> read;
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      read.push_back(it->key().ToString());
    }
    ASSERT_TRUE(it->status().ok()) << it->status().ToString();
    EXPECT_THAT(read, ElementsAreArray(keys));
  }
}

}  // namespace
}  // namespace hourglass::storage
