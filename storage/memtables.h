#ifndef HOURGLASS_STORAGE_MEMTABLES_H_
#define HOURGLASS_STORAGE_MEMTABLES_H_

// Storage-internal: the memtables of RocksDbStore's tables, which follow
// MessageStore::SetWriteOnly. RocksDB's types appear here.

#include <atomic>

#include "rocksdb/memtablerep.h"

namespace hourglass::storage {

// The memtables of a store's tables but counters and meta (whose keys are
// read back while still in a memtable: merges, positions). Each memtable
// decides what it is at its first key: sorted, as RocksDB's skiplists keep
// them, unless the store is write-only (a backup's copy) at that moment;
// then an append memtable (NewAppendMemtable). A store that changes its mind
// switches to new memtables for whichever of its tables hold keys
// (RocksDbStoreImpl::SetWriteOnly); an empty one decides when its first key
// comes. Thread-safe; one per store, kept across its reopens.
class StoreMemtables final : public rocksdb::MemTableRepFactory {
 public:
  // Returns what it was.
  bool set_write_only(bool write_only) {
    return write_only_.exchange(write_only, std::memory_order_relaxed);
  }
  bool write_only() const {
    return write_only_.load(std::memory_order_relaxed);
  }
  // How many memtables chose to be append memtables so far (for tests).
  int appended() const { return appended_.load(std::memory_order_relaxed); }

  using rocksdb::MemTableRepFactory::CreateMemTableRep;
  rocksdb::MemTableRep* CreateMemTableRep(
      const rocksdb::MemTableRep::KeyComparator& compare,
      rocksdb::Allocator* allocator, const rocksdb::SliceTransform* transform,
      rocksdb::Logger* logger) override;
  const char* Name() const override { return "HourglassStoreMemtables"; }

 private:
  std::atomic<bool> write_only_{false};
  std::atomic<int> appended_{0};
  rocksdb::SkipListFactory sorted_;
};

// A RocksDB memtable that is cheap to write and dear to read: an insert
// appends the key to one of two arrays, keys that come after the last one
// appended in order to the first, and any other to the second; a read
// sorts the second and merges the two. So keys written in increasing order,
// as most of a broker's are (message sequences, due times), are compared
// once on the way in, where a skiplist walks down to each; keys in no order
// cost one sort, which compares most keys by 16 bytes loaded as integers.
// (RocksDB's vector memtable sorts every key at the flush, which costs a
// backup more than the skiplist it saves.)
//
// REQUIRES: `compare` orders RocksDB's internal keys over user keys that
// compare bytewise (RocksDB's default comparator, every store table's): the
// sort relies on it.
//
// While the memtable is written, each read sorts and merges a copy of the
// keys inserted so far, under a lock that inserts take only to grow an
// array: for a store that reads seldom. Once it is read-only (RocksDB marks
// it so when it switches to a new memtable), the first read sorts it for
// good, and its flush and later reads use that.
//
// Thread-safe as RocksDB's contract asks: one writer at a time (the
// database opened without concurrent memtable writes), readers alongside.
rocksdb::MemTableRep* NewAppendMemtable(
    const rocksdb::MemTableRep::KeyComparator& compare,
    rocksdb::Allocator* allocator);

}  // namespace hourglass::storage

#endif  // HOURGLASS_STORAGE_MEMTABLES_H_
