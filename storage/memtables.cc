#include "storage/memtables.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <new>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "rocksdb/memtablerep.h"
#include "rocksdb/slice.h"

namespace hourglass::storage {
namespace {

using Compare = rocksdb::MemTableRep::KeyComparator;
// Memtable keys: RocksDB's entries, each a length-prefixed internal key
// followed by its value, in memory RocksDB allocated.
using Keys = std::vector<const char*>;

struct Less {
  bool operator()(const char* a, const char* b) const {
    return (*compare)(a, b) < 0;
  }
  const Compare* compare;
};

// The user key of a memtable entry: its internal key without the 8 bytes
// of sequence number and type that end every internal key.
std::string_view UserKey(const char* entry) {
  const rocksdb::Slice internal_key = rocksdb::GetLengthPrefixedSlice(entry);
  return {internal_key.data(), internal_key.size() - 8};
}

// Every entry of `in_order` (sorted) and `others` (in any order), in the
// order of `compare`: RocksDB's internal key order, over user keys compared
// bytewise (RocksDB's default comparator, which every table of a store
// keeps). Most comparisons are of two integers per entry, its rank: the 16
// bytes of its user key that follow the prefix every entry's user key
// shares, big-endian and padded with zeros (a due key's time and sequence,
// past a topic). Ranks order entries as their bytes do (a key that ends
// inside the 16 bytes is a prefix of any longer one with the same bytes,
// and comes first); only entries of equal rank are compared in full.
// Before, every comparison was in full: decoding both entries and a memcmp
// were most of a backup's flush sort.
Keys SortedEntries(absl::Span<const char* const> in_order,
                   absl::Span<const char* const> others,
                   const Compare& compare) {
  if (others.empty()) return Keys(in_order.begin(), in_order.end());
  // The prefix all share. The in-order keys, sorted, share whatever their
  // first and last share.
  const std::string_view first = UserKey(others.front());
  size_t shared = first.size();
  auto share = [&first, &shared](const char* key) {
    const std::string_view user = UserKey(key);
    shared = std::min(shared, user.size());
    shared = static_cast<size_t>(
        std::mismatch(first.begin(), first.begin() + shared, user.begin())
            .first -
        first.begin());
  };
  for (const char* key : others) share(key);
  if (!in_order.empty()) {
    share(in_order.front());
    share(in_order.back());
  }
  struct Ranked {
    uint64_t high;
    uint64_t low;
    const char* key;
  };
  auto rank = [shared](absl::Span<const char* const> keys) {
    // 8 bytes of `user` from `at`, as described above.
    auto eight_bytes = [](std::string_view user, size_t at) {
      uint64_t bytes = 0;
      for (size_t i = at; i < at + 8; ++i) {
        bytes = bytes << 8 |
                (i < user.size() ? static_cast<unsigned char>(user[i]) : 0u);
      }
      return bytes;
    };
    std::vector<Ranked> ranked;
    ranked.reserve(keys.size());
    for (const char* key : keys) {
      const std::string_view user = UserKey(key);
      ranked.push_back(
          {eight_bytes(user, shared), eight_bytes(user, shared + 8), key});
    }
    return ranked;
  };
  auto less = [&compare](const Ranked& a, const Ranked& b) {
    if (a.high != b.high) return a.high < b.high;
    if (a.low != b.low) return a.low < b.low;
    return compare(a.key, b.key) < 0;
  };
  const std::vector<Ranked> ranked_in_order = rank(in_order);
  std::vector<Ranked> ranked_others = rank(others);
  std::sort(ranked_others.begin(), ranked_others.end(), less);
  Keys keys;
  keys.reserve(in_order.size() + others.size());
  auto a = ranked_in_order.begin();
  auto b = ranked_others.begin();
  while (a != ranked_in_order.end() || b != ranked_others.end()) {
    const bool from_others = a == ranked_in_order.end() ||
                             (b != ranked_others.end() && less(*b, *a));
    keys.push_back(from_others ? (b++)->key : (a++)->key);
  }
  assert(std::is_sorted(keys.begin(), keys.end(), Less{&compare}));
  return keys;
}

// Keys that one writer appends without a lock, and readers read under a
// lock of their owner's, which the writer takes only to move them to a
// larger buffer: a key is stored before the size that covers it is
// published. (A lock per key was a tenth of a backup's apply thread.)
class AppendArray {
 public:
  // The writer's own: whether it appended nothing yet, and the last key.
  bool empty() const { return size_.load(std::memory_order_relaxed) == 0; }
  const char* back() const {
    return data_[size_.load(std::memory_order_relaxed) - 1];
  }
  // The writer's: appends `key`, holding `mu` while it moves the keys;
  // whether it moved them (the capacity grew).
  bool Append(const char* key, absl::Mutex& mu) {
    const size_t size = size_.load(std::memory_order_relaxed);
    const bool grow = size == capacity_;
    if (grow) {
      absl::MutexLock lock(&mu);
      const size_t capacity = std::max<size_t>(1024, 2 * capacity_);
      auto data = std::make_unique<const char*[]>(capacity);
      std::copy_n(data_.get(), size, data.get());
      data_ = std::move(data);
      capacity_ = capacity;
    }
    data_[size] = key;
    size_.store(size + 1, std::memory_order_release);
    return grow;
  }

  // Readers', holding the `mu` of Append: the keys appended so far.
  absl::Span<const char* const> keys() const {
    return {data_.get(), size_.load(std::memory_order_acquire)};
  }
  // Holding `mu`: how many keys fit before the keys move.
  size_t capacity() const { return capacity_; }
  // Holding `mu`, once nothing is appended any more: frees the keys.
  void Clear() {
    data_.reset();
    capacity_ = 0;
    size_.store(0, std::memory_order_relaxed);
  }

 private:
  std::unique_ptr<const char*[]> data_;
  size_t capacity_ = 0;
  std::atomic<size_t> size_{0};
};

// Over a sorted array of keys that it shares.
class SortedIterator final : public rocksdb::MemTableRep::Iterator {
 public:
  SortedIterator(std::shared_ptr<const Keys> keys, const Compare& compare)
      : keys_(std::move(keys)), compare_(compare), at_(keys_->size()) {}

  bool Valid() const override { return at_ < keys_->size(); }
  const char* key() const override { return (*keys_)[at_]; }
  void Next() override { ++at_; }
  void Prev() override { at_ = at_ == 0 ? keys_->size() : at_ - 1; }
  void SeekToFirst() override { at_ = 0; }
  void SeekToLast() override { at_ = keys_->empty() ? 0 : keys_->size() - 1; }

  // The first key at or after the target.
  void Seek(const rocksdb::Slice& internal_key,
            const char* memtable_key) override {
    at_ = static_cast<size_t>(FirstAfter(internal_key, memtable_key, false) -
                              keys_->begin());
  }
  // The last key at or before the target.
  void SeekForPrev(const rocksdb::Slice& internal_key,
                   const char* memtable_key) override {
    const size_t after = static_cast<size_t>(
        FirstAfter(internal_key, memtable_key, true) - keys_->begin());
    at_ = after == 0 ? keys_->size() : after - 1;
  }

 private:
  // The first key after the target (`or_equal`: or equal to it), which is
  // the memtable key if there is one, else the internal key.
  Keys::const_iterator FirstAfter(const rocksdb::Slice& internal_key,
                                  const char* memtable_key,
                                  bool or_equal) const {
    return std::partition_point(
        keys_->begin(), keys_->end(), [&](const char* key) {
          const int c = memtable_key != nullptr ? compare_(key, memtable_key)
                                                : compare_(key, internal_key);
          return or_equal ? c <= 0 : c < 0;
        });
  }

  const std::shared_ptr<const Keys> keys_;
  const Compare& compare_;
  size_t at_;  // keys_->size(): not valid.
};

class AppendMemtable final : public rocksdb::MemTableRep {
 public:
  AppendMemtable(const Compare& compare, rocksdb::Allocator* allocator)
      : rocksdb::MemTableRep(allocator), compare_(compare) {}

  // The writer's (RocksDB's contract: one at a time); takes mu_ only when
  // an array grows.
  void Insert(rocksdb::KeyHandle handle) override {
    const char* key = static_cast<const char*>(handle);
    AppendArray& keys = in_order_.empty() || compare_(in_order_.back(), key) < 0
                            ? in_order_
                            : out_of_order_;
    if (keys.Append(key, mu_)) {
      absl::MutexLock lock(&mu_);
      CountMemoryLocked();
    }
  }

  bool Contains(const char* key) const override {
    const std::shared_ptr<const Keys> keys = Sorted();
    return std::binary_search(keys->begin(), keys->end(), key, Less{&compare_});
  }

  void MarkReadOnly() override {
    absl::MutexLock lock(&mu_);
    read_only_ = true;
  }

  size_t ApproximateMemoryUsage() override {
    return memory_.load(std::memory_order_relaxed);
  }

  // RocksDB's own Get (MemTableRep::Get) seeks an iterator it asks of
  // GetDynamicPrefixIterator and never frees it, and its LookupKey is not in
  // the public headers, so this Get cannot do without it: it calls RocksDB's
  // and frees the iterator when that returns.
  void Get(const rocksdb::LookupKey& key, void* callback_args,
           bool (*callback)(void* arg, const char* entry)) override {
    GetScope scope(this);
    rocksdb::MemTableRep::Get(key, callback_args, callback);
  }
  Iterator* GetDynamicPrefixIterator(rocksdb::Arena* arena) override {
    if (arena == nullptr && current_get != nullptr &&
        current_get->memtable == this) {
      current_get->iterators.push_back(
          std::make_unique<SortedIterator>(Sorted(), compare_));
      return current_get->iterators.back().get();
    }
    return GetIterator(arena);
  }

  Iterator* GetIterator(rocksdb::Arena* arena) override {
    std::shared_ptr<const Keys> keys = Sorted();
    if (arena == nullptr) return new SortedIterator(std::move(keys), compare_);
    // RocksDB destroys an iterator it asked to have placed in its arena
    // without freeing it; its Arena is not in the public headers, though.
    // Such iterators are placed in storage of the memtable's own instead,
    // freed with the memtable: a few dozen bytes each, for the few reads of
    // a memtable that is no longer written (its flush, mostly).
    auto storage = std::make_unique<IteratorStorage>();
    Iterator* iterator =
        new (storage->bytes) SortedIterator(std::move(keys), compare_);
    absl::MutexLock lock(&mu_);
    placed_.push_back(std::move(storage));
    return iterator;
  }

 private:
  // A Get of this thread under way (current_get), and the iterators it
  // asked for, freed when it returns.
  struct GetScope {
    explicit GetScope(const AppendMemtable* memtable)
        : memtable(memtable), outer(current_get) {
      current_get = this;
    }
    ~GetScope() { current_get = outer; }
    const AppendMemtable* const memtable;
    GetScope* const outer;
    std::vector<std::unique_ptr<Iterator>> iterators;
  };
  static thread_local GetScope* current_get;

  // Every key, in order. A read-only memtable's are sorted once and kept;
  // a written one's are sorted into a copy for each call.
  std::shared_ptr<const Keys> Sorted() const {
    absl::MutexLock lock(&mu_);
    if (sorted_ != nullptr) return sorted_;
    auto keys = std::make_shared<Keys>(
        SortedEntries(in_order_.keys(), out_of_order_.keys(), compare_));
    if (read_only_) {
      sorted_ = keys;
      in_order_.Clear();
      out_of_order_.Clear();
      CountMemoryLocked();
    }
    return keys;
  }

  void CountMemoryLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const size_t slots = in_order_.capacity() + out_of_order_.capacity() +
                         (sorted_ == nullptr ? 0 : sorted_->capacity());
    memory_.store(sizeof(*this) + slots * sizeof(const char*),
                  std::memory_order_relaxed);
  }

  const Compare& compare_;
  mutable absl::Mutex mu_;
  // Appended by the writer; read under mu_. Sorted() of a read-only
  // memtable moves the keys into sorted_.
  mutable AppendArray in_order_;
  mutable AppendArray out_of_order_;
  mutable std::shared_ptr<const Keys> sorted_ ABSL_GUARDED_BY(mu_);
  bool read_only_ ABSL_GUARDED_BY(mu_) = false;
  struct alignas(SortedIterator) IteratorStorage {
    std::byte bytes[sizeof(SortedIterator)];
  };
  std::vector<std::unique_ptr<IteratorStorage>> placed_ ABSL_GUARDED_BY(mu_);
  // What the arrays take, for ApproximateMemoryUsage without the lock:
  // RocksDB asks after every insert.
  mutable std::atomic<size_t> memory_{0};
};

thread_local AppendMemtable::GetScope* AppendMemtable::current_get = nullptr;

// What StoreMemtables makes: a memtable that becomes a skiplist or an
// append memtable at its first key (or iterator), as its store is then,
// and forwards every call to what it became. Before, it holds nothing.
class DeferredMemtable final : public rocksdb::MemTableRep {
 public:
  DeferredMemtable(const StoreMemtables& store, std::atomic<int>& appended,
                   rocksdb::MemTableRepFactory& sorted, const Compare& compare,
                   rocksdb::Allocator* allocator,
                   const rocksdb::SliceTransform* transform,
                   rocksdb::Logger* logger)
      : rocksdb::MemTableRep(allocator),
        store_(store),
        appended_(appended),
        sorted_(sorted),
        compare_(compare),
        transform_(transform),
        logger_(logger) {}
  ~DeferredMemtable() override { delete chosen_.load(); }

  rocksdb::KeyHandle Allocate(size_t len, char** buf) override {
    return Chosen().Allocate(len, buf);
  }
  // The writer's calls come after its Allocate: the choice is made.
  void Insert(rocksdb::KeyHandle handle) override { Chosen().Insert(handle); }
  bool InsertKey(rocksdb::KeyHandle handle) override {
    return Chosen().InsertKey(handle);
  }
  void InsertWithHint(rocksdb::KeyHandle handle, void** hint) override {
    Chosen().InsertWithHint(handle, hint);
  }
  bool InsertKeyWithHint(rocksdb::KeyHandle handle, void** hint) override {
    return Chosen().InsertKeyWithHint(handle, hint);
  }
  void InsertConcurrently(rocksdb::KeyHandle handle) override {
    Chosen().InsertConcurrently(handle);
  }
  bool InsertKeyConcurrently(rocksdb::KeyHandle handle) override {
    return Chosen().InsertKeyConcurrently(handle);
  }
  void InsertWithHintConcurrently(rocksdb::KeyHandle handle,
                                  void** hint) override {
    Chosen().InsertWithHintConcurrently(handle, hint);
  }
  bool InsertKeyWithHintConcurrently(rocksdb::KeyHandle handle,
                                     void** hint) override {
    return Chosen().InsertKeyWithHintConcurrently(handle, hint);
  }

  // Reads of a memtable that holds nothing yet answer nothing, but for
  // iterators, which RocksDB may place in its arena: only a real memtable
  // knows how, so making one makes the choice.
  bool Contains(const char* key) const override {
    rocksdb::MemTableRep* rep = Current();
    return rep != nullptr && rep->Contains(key);
  }
  void Get(const rocksdb::LookupKey& key, void* callback_args,
           bool (*callback)(void* arg, const char* entry)) override {
    if (rocksdb::MemTableRep* rep = Current()) {
      rep->Get(key, callback_args, callback);
    }
  }
  uint64_t ApproximateNumEntries(const rocksdb::Slice& start,
                                 const rocksdb::Slice& end) override {
    rocksdb::MemTableRep* rep = Current();
    return rep == nullptr ? 0 : rep->ApproximateNumEntries(start, end);
  }
  void UniqueRandomSample(uint64_t num_entries, uint64_t target_sample_size,
                          std::unordered_set<const char*>* entries) override {
    Chosen().UniqueRandomSample(num_entries, target_sample_size, entries);
  }
  size_t ApproximateMemoryUsage() override {
    rocksdb::MemTableRep* rep = Current();
    return rep == nullptr ? 0 : rep->ApproximateMemoryUsage();
  }
  Iterator* GetIterator(rocksdb::Arena* arena) override {
    return Chosen().GetIterator(arena);
  }
  Iterator* GetDynamicPrefixIterator(rocksdb::Arena* arena) override {
    return Chosen().GetDynamicPrefixIterator(arena);
  }
  void MarkReadOnly() override {
    if (rocksdb::MemTableRep* rep = Current()) rep->MarkReadOnly();
  }
  void MarkFlushed() override {
    if (rocksdb::MemTableRep* rep = Current()) rep->MarkFlushed();
  }

 private:
  // What it became, or null before the choice.
  rocksdb::MemTableRep* Current() const {
    return chosen_.load(std::memory_order_acquire);
  }
  // What it became, choosing now if it has not.
  rocksdb::MemTableRep& Chosen() {
    if (rocksdb::MemTableRep* rep = Current()) return *rep;
    rocksdb::MemTableRep* rep;
    absl::MutexLock lock(&choose_mu_);
    rep = chosen_.load(std::memory_order_relaxed);
    if (rep == nullptr) {
      if (store_.write_only()) {
        rep = NewAppendMemtable(compare_, allocator_);
        appended_.fetch_add(1, std::memory_order_relaxed);
      } else {
        rep = sorted_.CreateMemTableRep(compare_, allocator_, transform_,
                                        logger_);
      }
      chosen_.store(rep, std::memory_order_release);
    }
    return *rep;
  }

  const StoreMemtables& store_;
  std::atomic<int>& appended_;
  rocksdb::MemTableRepFactory& sorted_;
  const Compare& compare_;
  const rocksdb::SliceTransform* const transform_;
  rocksdb::Logger* const logger_;
  absl::Mutex choose_mu_;
  // Set once, under choose_mu_; owned.
  std::atomic<rocksdb::MemTableRep*> chosen_{nullptr};
};

}  // namespace

rocksdb::MemTableRep* NewAppendMemtable(const Compare& compare,
                                        rocksdb::Allocator* allocator) {
  return new AppendMemtable(compare, allocator);
}

rocksdb::MemTableRep* StoreMemtables::CreateMemTableRep(
    const Compare& compare, rocksdb::Allocator* allocator,
    const rocksdb::SliceTransform* transform, rocksdb::Logger* logger) {
  return new DeferredMemtable(*this, appended_, sorted_, compare, allocator,
                              transform, logger);
}

}  // namespace hourglass::storage
