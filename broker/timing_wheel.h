#ifndef HOURGLASS_BROKER_TIMING_WHEEL_H_
#define HOURGLASS_BROKER_TIMING_WHEEL_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/functional/function_ref.h"

namespace hourglass::broker {

// Names one scheduled entry. Returned by TimingWheel::Schedule, accepted by
// TimingWheel::Cancel. A handle stays safe to pass to Cancel after its entry
// expired or was cancelled: Cancel then returns false.
struct TimerHandle {
  int64_t due_ms = 0;
  uint32_t id = 0;
  uint32_t sequence = 0;

  friend bool operator==(const TimerHandle&, const TimerHandle&) = default;
};

// What ExpireUntil hands out: the entry's due time and its caller-chosen
// value (for the broker, a reference to the message).
struct TimerEntry {
  int64_t due_ms;
  uint64_t value;
};

// A hierarchical timing wheel with 1 ms resolution.
//
// Seven levels of 64 slots each: a slot of level L spans 64^L ms, so the
// levels together span 2^42 ms (139 years). Each level keeps a 64-bit
// occupancy bitmap, so the next occupied slot is found with a count of
// trailing zeros instead of by ticking through empty time. An entry is
// placed on the lowest level whose slot still separates it from the
// wheel's current time; when time reaches a coarse slot, its entries are
// re-inserted (cascaded) into finer levels, so every entry comes out at its
// exact millisecond. Entries due beyond the top level's window wait in an
// overflow list and are cascaded when time enters their window; entries
// already due when scheduled wait in an overdue list and come out on the
// next ExpireUntil.
//
// Slots store 24-byte entries in pooled blocks of 64, in schedule order:
// no heap allocation per entry, and cascading reads and writes memory
// sequentially. Each pending entry costs its 24 bytes plus a 4-byte
// sequence per id, so about 28 bytes in all (see MemoryUsage). A stale
// handle is recognised by its sequence, a 32-bit counter: it could only be
// mistaken for a live one after exactly 2^32 further Schedule calls. Schedule
// and Cancel are O(1); ExpireUntil is O(entries handed out + entries cascaded),
// and each entry cascades at most once per level.
//
// Times are int64 milliseconds on the owner's clock, in [0, kMaxTimeMs].
//
// Thread-safety: none. A wheel is owned by one thread (the broker's timer
// thread), which makes every call; callers needing sharing must lock.
class TimingWheel {
 public:
  static constexpr int kSlotBits = 6;
  static constexpr int kSlotsPerLevel = 1 << kSlotBits;
  static constexpr int kLevels = 7;
  // Times past this are treated as this.
  static constexpr int64_t kMaxTimeMs = int64_t{1} << 62;

  // Creates an empty wheel whose current time is `now_ms`: entries due at
  // or before it are already due.
  explicit TimingWheel(int64_t now_ms);

  TimingWheel(const TimingWheel&) = delete;
  TimingWheel& operator=(const TimingWheel&) = delete;

  ~TimingWheel();

  // Schedules `value` to come out of ExpireUntil once its `now_ms` reaches
  // `due_ms`. An entry already due (`due_ms` <= now()) comes out on the
  // next ExpireUntil call. Entries with equal due times come out in the
  // order they were scheduled.
  TimerHandle Schedule(int64_t due_ms, uint64_t value);

  // Removes the entry named by `handle`. Returns true if it was pending;
  // false if it already came out of ExpireUntil or was cancelled.
  bool Cancel(const TimerHandle& handle);

  // Hands every entry due at or before `now_ms` to `expired`, in due order,
  // ties in schedule order, and advances the wheel's time to `now_ms`.
  // Never hands out an entry before its due time. Returns the number handed
  // out. A `now_ms` below now() is treated as now().
  //
  // REQUIRES: `expired` does not call into this wheel.
  size_t ExpireUntil(int64_t now_ms,
                     absl::FunctionRef<void(const TimerEntry&)> expired);

  // The earliest time at which ExpireUntil may have work to do, or nullopt
  // when the wheel is empty. No entry is due before it, so the owner may
  // sleep until then (or until it schedules something earlier). It is the
  // exact next due time unless entries of the next slot were cancelled, in
  // which case it may be earlier; a value <= now() means entries are
  // already due (they were scheduled in the past).
  std::optional<int64_t> NextExpiry() const;

  // The wheel's current time: the largest `now_ms` passed to ExpireUntil or
  // the constructor.
  int64_t now() const { return elapsed_ - 1; }

  // Number of pending entries.
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // Bytes of heap memory the wheel holds, for metrics and benchmarks.
  size_t MemoryUsage() const;

 private:
  struct Entry {
    int64_t due_ms;
    uint64_t value;
    uint32_t id;        // Indexes sequence_chunks_.
    uint32_t sequence;  // Pending while it equals SequenceOf(id).
  };
  static_assert(sizeof(Entry) == 24);

  static constexpr int kBlockEntries = 64;
  struct Block {
    Block* next;
    uint32_t size;
    Entry entries[kBlockEntries];
  };

  // A FIFO list of entries. Cancelled entries stay in their slot until it
  // is processed; when none are, processing skips the per-id checks.
  struct Slot {
    Block* head = nullptr;
    Block* tail = nullptr;
    uint32_t pending = 0;
    uint32_t cancelled = 0;
    int64_t min_due_ms = 0;  // Lower bound on pending entries' due times.
  };
  // A slot's blocks, detached from it.
  struct Detached {
    Block* blocks;
    bool has_cancelled;
  };

  static constexpr int kOverdueSlot = kLevels * kSlotsPerLevel;
  static constexpr int kOverflowSlot = kOverdueSlot + 1;
  static constexpr int kNumSlots = kOverflowSlot + 1;

  // Index into slots_ for an entry due at `due_ms`, given the current time.
  int SlotIndexFor(int64_t due_ms) const;
  // Start time of slot `slot` of level `level`.
  int64_t SlotStart(int level, int slot) const;

  // Appends an entry to the slot it belongs in now.
  void Insert(const Entry& entry);
  // Detaches every block of `slot` and marks it empty.
  Detached TakeSlot(int slot);
  // Re-inserts each pending entry of `slot`, releases the ids of the
  // cancelled ones, recycles the blocks.
  void Cascade(Detached slot);
  // Hands the pending entries of `slot` to `expired` in list order.
  size_t HandOut(Detached slot,
                 absl::FunctionRef<void(const TimerEntry&)> expired);
  // Same, sorted by due time (stable), for the overdue list.
  size_t HandOutOverdue(absl::FunctionRef<void(const TimerEntry&)> expired);
  // Releases the ids of (cancelled) entries in `blocks`, recycles them.
  void ReleaseBlocks(Block* blocks);

  uint32_t AllocateId();
  void ReleaseId(uint32_t id);
  bool IsPending(const Entry& entry) {
    return SequenceOf(entry.id) == entry.sequence;
  }
  uint32_t& SequenceOf(uint32_t id) {
    return sequence_chunks_[id >> kSequenceChunkBits]
                           [id & ((uint32_t{1} << kSequenceChunkBits) - 1)];
  }
  Block* AllocateBlock();
  void RecycleBlock(Block* block);

  // All entries due before elapsed_ have been handed out.
  int64_t elapsed_;
  // Start of the top-level window after the one overflow entries were
  // inserted in; every overflow entry is due at or after it. ExpireUntil
  // cascades the overflow list when elapsed_ reaches it.
  int64_t overflow_window_end_ = 0;
  size_t size_ = 0;
  uint32_t next_sequence_ = 1;

  std::array<Slot, kNumSlots> slots_;
  std::array<uint64_t, kLevels> occupied_{};  // Bit s: slot s has pending.
  uint32_t occupied_levels_ = 0;              // Bit L: occupied_[L] != 0.

  // Per-id state: the sequence of the id's pending entry, or 0 when it has
  // none. Ids of pending entries, and of cancelled entries still sitting in
  // a slot, are in use; the rest are on free_ids_ (reused last-in first-out,
  // so a new entry's sequence lands on a recently touched cache line).
  static constexpr int kSequenceChunkBits = 16;
  std::vector<std::unique_ptr<uint32_t[]>> sequence_chunks_;
  std::vector<uint32_t> free_ids_;
  uint32_t next_id_ = 0;

  Block* free_blocks_ = nullptr;
  size_t free_block_count_ = 0;
  size_t block_count_ = 0;

  // Scratch for HandOutOverdue, kept to avoid reallocating.
  std::vector<Entry> overdue_scratch_;
  bool expiring_ = false;
};

}  // namespace hourglass::broker

#endif  // HOURGLASS_BROKER_TIMING_WHEEL_H_
