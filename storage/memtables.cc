#include "storage/memtables.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <iterator>
#include <memory>
#include <new>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
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

  void Insert(rocksdb::KeyHandle handle) override {
    const char* key = static_cast<const char*>(handle);
    absl::MutexLock lock(&mu_);
    if (in_order_.empty() || compare_(in_order_.back(), key) < 0) {
      in_order_.push_back(key);
    } else {
      out_of_order_.push_back(key);
    }
    CountMemoryLocked();
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
    Keys others = out_of_order_;
    std::sort(others.begin(), others.end(), Less{&compare_});
    auto keys = std::make_shared<Keys>();
    keys->reserve(in_order_.size() + others.size());
    std::merge(in_order_.begin(), in_order_.end(), others.begin(), others.end(),
               std::back_inserter(*keys), Less{&compare_});
    if (read_only_) {
      sorted_ = keys;
      in_order_ = Keys();
      out_of_order_ = Keys();
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
  // Sorted() of a read-only memtable moves the keys into sorted_.
  mutable Keys in_order_ ABSL_GUARDED_BY(mu_);
  mutable Keys out_of_order_ ABSL_GUARDED_BY(mu_);
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
