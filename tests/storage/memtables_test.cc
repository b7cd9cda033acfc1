// The memtables of RocksDbStore's tables (storage/memtables.h): the append
// memtable on its own, held to RocksDB's memtable contract with keys in and
// out of order, and the choice each memtable makes in a real RocksDB. The
// stores' tests (message_store_test.cc) read them through the store.

#include "storage/memtables.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <iostream>
#include <iterator>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
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

// The 8 bytes that end an internal key: its sequence number and type.
uint64_t Trailer(const rocksdb::Slice& internal_key) {
  uint64_t trailer = 0;
  for (int i = 7; i >= 0; --i) {
    trailer =
        trailer << 8 | static_cast<unsigned char>(
                           internal_key.data()[internal_key.size() - 8 + i]);
  }
  return trailer;
}

// RocksDB's memtable entries: their internal key's length (a varint; these
// keys are short, so one byte), then the internal key: the user key and 8
// bytes of sequence number and type, little-endian. Ordered as RocksDB's
// memtables order them: user keys bytewise, then the newest first.
class TestComparator final : public rocksdb::MemTableRep::KeyComparator {
 public:
  int operator()(const char* a, const char* b) const override {
    return Compare(rocksdb::GetLengthPrefixedSlice(a),
                   rocksdb::GetLengthPrefixedSlice(b));
  }
  int operator()(const char* a, const rocksdb::Slice& key) const override {
    return Compare(rocksdb::GetLengthPrefixedSlice(a), key);
  }

 private:
  static int Compare(const rocksdb::Slice& a, const rocksdb::Slice& b) {
    const int users = rocksdb::Slice(a.data(), a.size() - 8)
                          .compare(rocksdb::Slice(b.data(), b.size() - 8));
    if (users != 0) return users;
    const uint64_t trailer_a = Trailer(a), trailer_b = Trailer(b);
    return trailer_a > trailer_b ? -1 : trailer_a < trailer_b ? 1 : 0;
  }
};

// The internal key of `user_key` at `sequence`, a value's (type 1).
std::string InternalKey(const std::string& user_key, uint64_t sequence = 1) {
  std::string key = user_key;
  uint64_t trailer = sequence << 8 | 1;
  for (int i = 0; i < 8; ++i, trailer >>= 8) {
    key.push_back(static_cast<char>(trailer & 0xff));
  }
  return key;
}

// A memtable entry of `internal_key`, as RocksDB lays it out.
std::string Entry(const std::string& internal_key) {
  return std::string(1, static_cast<char>(internal_key.size())) + internal_key;
}

class AppendMemtableTest : public ::testing::Test {
 protected:
  // Inserts `user_key` at `sequence`, as RocksDB would an entry it
  // allocated.
  void Insert(const std::string& user_key, uint64_t sequence = 1) {
    ASSERT_LT(user_key.size() + 8, 128u);
    entries_.push_back(Entry(InternalKey(user_key, sequence)));
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
  // The user key of the entry `it` is at.
  static std::string Key(const rocksdb::MemTableRep::Iterator& it) {
    const rocksdb::Slice key = rocksdb::GetLengthPrefixedSlice(it.key());
    return std::string(key.data(), key.size() - 8);
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
      // At the sequence of every entry: a key the model holds is found.
      const std::string internal_key = InternalKey(target);
      const std::string encoded = Entry(internal_key);
      auto at_or_after = model.lower_bound(target);
      for (const char* memtable_key :
           {encoded.c_str(), static_cast<const char*>(nullptr)}) {
        it->Seek(internal_key, memtable_key);
        if (at_or_after == model.end()) {
          EXPECT_FALSE(it->Valid()) << "Seek " << target;
        } else {
          ASSERT_TRUE(it->Valid()) << "Seek " << target;
          EXPECT_EQ(Key(*it), *at_or_after);
        }
        it->SeekForPrev(internal_key, memtable_key);
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
    SCOPED_TRACE(::testing::Message()
                 << "written, " << model.size() << " keys");
    ExpectHolds(model, round % 2 == 0);
  }
  EXPECT_GE(memtable_->ApproximateMemoryUsage(),
            empty_memory + model.size() * sizeof(const char*));
  memtable_->MarkReadOnly();
  SCOPED_TRACE("read-only");
  ExpectHolds(model, true);
  ExpectHolds(model, false);
}

// The keys of a flush's sort as they come: sharing a long prefix (a
// topic's due keys), differing only past the first 16 bytes after it, one a
// prefix of another, a 0 byte where another key ends, and one user key at
// several sequence numbers (the newest is read first). Inserted in a
// seeded random order, most out of order; read back in RocksDB's order.
TEST_F(AppendMemtableTest, OutOfOrderKeysSortAsRocksDbOrdersThem) {
  const uint32_t seed = std::random_device()();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::cout << "seed " << seed << std::endl;
  std::mt19937 random(seed);
  const std::string topic = std::string("orders.eu-west", 15);  // ends in \0
  std::vector<std::pair<std::string, uint64_t>> expected;
  for (int due = 0; due < 40; ++due) {
    for (int sequence = 0; sequence < 3; ++sequence) {
      // 8 bytes of due time, the first 7 of them equal, then a sequence.
      std::string key = topic + std::string(7, '\0') + static_cast<char>(due) +
                        std::string(7, '\0') + static_cast<char>(sequence);
      expected.emplace_back(key, 5);
    }
  }
  expected.emplace_back(topic + "a", 5);
  expected.emplace_back(topic + "ab", 5);
  expected.emplace_back(topic + std::string("ab\0", 3), 5);
  expected.emplace_back(topic + "abcdefghijklmnop1", 5);
  expected.emplace_back(topic + "abcdefghijklmnop2", 5);
  for (uint64_t sequence : {9, 7, 3})
    expected.emplace_back(topic + "b", sequence);
  std::vector<std::pair<std::string, uint64_t>> order = expected;
  std::shuffle(order.begin(), order.end(), random);
  for (const auto& [key, sequence] : order) Insert(key, sequence);

  for (bool read_only : {false, true}) {
    if (read_only) memtable_->MarkReadOnly();
    SCOPED_TRACE(read_only ? "read-only" : "written");
    std::unique_ptr<rocksdb::MemTableRep::Iterator> it(
        memtable_->GetIterator(nullptr));
    std::vector<std::pair<std::string, uint64_t>> read;
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      read.emplace_back(
          Key(*it), Trailer(rocksdb::GetLengthPrefixedSlice(it->key())) >> 8);
    }
    EXPECT_THAT(read, ElementsAreArray(expected));
  }
}

// The writer appends without the lock that readers take (but when an
// array grows): a read alongside it sees keys in order, each one the
// writer inserted, and never fewer than an earlier read saw. After each
// chunk of keys the writer waits for two whole reads, so that reads always
// take keys appended since it last held the lock: ThreadSanitizer (the tsan
// preset runs this) then checks that publishing the size orders them.
TEST_F(AppendMemtableTest, ReadsAlongsideTheWriterSeeWhatItInserted) {
  constexpr int kKeys = 20000;
  constexpr int kChunk = 1000;
  // Every fourth key out of order; all made before the writer starts, so
  // that the reader may look them up.
  std::vector<std::string> user_keys;
  for (int i = 0; i < kKeys; ++i) {
    char key[16];
    std::snprintf(key, sizeof(key), "k%07d",
                  i % 4 == 3 ? kKeys - i : i + kKeys);
    user_keys.push_back(key);
  }
  std::vector<std::string> entries;
  entries.reserve(kKeys);
  for (const std::string& key : user_keys) {
    entries.push_back(Entry(InternalKey(key)));
  }
  const std::set<std::string> inserted(user_keys.begin(), user_keys.end());
  std::atomic<int> reads{0};
  std::atomic<bool> done{false};
  std::atomic<bool> reader_gone{false};
  std::thread writer([&] {
    for (int i = 0; i < kKeys; ++i) {
      memtable_->Insert(entries[i].data());
      if ((i + 1) % kChunk != 0) continue;
      // Loads only: a wait that the reader's notify would wake orders the
      // writer's appends before the reader's next read, hiding the orders
      // under test.
      const int until = reads.load() + 2;
      while (reads.load() < until && !reader_gone.load()) {
        std::this_thread::yield();
      }
    }
    done.store(true);
  });
  size_t seen = 0;
  for (bool last = false; !last && !HasFailure();) {
    last = done.load();  // The read after the writer is done sees all.
    std::unique_ptr<rocksdb::MemTableRep::Iterator> it(
        memtable_->GetIterator(nullptr));
    const std::vector<std::string> read = Forward(*it);
    EXPECT_TRUE(std::is_sorted(read.begin(), read.end()));
    EXPECT_GE(read.size(), seen);
    for (const std::string& key : read) {
      EXPECT_EQ(inserted.count(key), 1u) << key;
    }
    seen = read.size();
    reads.fetch_add(1);
  }
  reader_gone.store(true);
  writer.join();
  EXPECT_GE(reads.load(), 2 * kKeys / kChunk);
  EXPECT_EQ(seen, static_cast<size_t>(kKeys));
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
      OpenRocksDb(dir.path(), *resources, memtables,
                  /*keep_write_log_seconds=*/0);
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
