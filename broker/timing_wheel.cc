#include "broker/timing_wheel.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <memory>
#include <utility>

namespace hourglass::broker {
namespace {

constexpr int kTopBits = TimingWheel::kLevels * TimingWheel::kSlotBits;
// Low bits shared by every time in the top level's window.
constexpr uint64_t kTopWindowMask = (uint64_t{1} << kTopBits) - 1;
// Recycled blocks kept for reuse; more go back to the allocator, so a
// burst does not pin its memory.
constexpr size_t kMaxFreeBlocks = 256;

int64_t ClampTime(int64_t t) { return std::min(t, TimingWheel::kMaxTimeMs); }

}  // namespace

TimingWheel::TimingWheel(int64_t now_ms)
    : elapsed_(std::max<int64_t>(ClampTime(now_ms), -1) + 1) {}

TimingWheel::~TimingWheel() {
  for (int i = 0; i < kNumSlots; ++i) {
    for (Block* b = slots_[i].head; b != nullptr;)
      delete std::exchange(b, b->next);
  }
  for (Block* b = free_blocks_; b != nullptr;) delete std::exchange(b, b->next);
}

TimerHandle TimingWheel::Schedule(int64_t due_ms, uint64_t value) {
  due_ms = ClampTime(due_ms);
  const uint32_t id = AllocateId();
  // 0 marks an id without a pending entry, so the counter skips it.
  if (next_sequence_ == 0) next_sequence_ = 1;
  const uint32_t sequence = next_sequence_++;
  SequenceOf(id) = sequence;
  Insert(Entry{due_ms, value, id, sequence});
  ++size_;
  return TimerHandle{due_ms, id, sequence};
}

bool TimingWheel::Cancel(const TimerHandle& handle) {
  assert(!expiring_ && "Cancel called from an ExpireUntil callback");
  if (handle.id >= next_id_ || handle.sequence == 0 ||
      SequenceOf(handle.id) != handle.sequence) {
    return false;
  }
  // The entry stays in its slot, recognisable by its stale sequence, until
  // the slot is processed; its id is released then. A slot left with no
  // pending entry is emptied at once so that NextExpiry skips it.
  SequenceOf(handle.id) = 0;
  --size_;
  const int index = SlotIndexFor(handle.due_ms);
  Slot& slot = slots_[index];
  ++slot.cancelled;
  if (--slot.pending == 0) ReleaseBlocks(TakeSlot(index).blocks);
  return true;
}

size_t TimingWheel::ExpireUntil(
    int64_t now_ms, absl::FunctionRef<void(const TimerEntry&)> expired) {
  assert(!expiring_ && "ExpireUntil called from its own callback");
  expiring_ = true;
  now_ms = std::max(ClampTime(now_ms), now());
  size_t handed_out = 0;
  if (slots_[kOverdueSlot].pending > 0) handed_out += HandOutOverdue(expired);
  // Process slots in time order: the lowest occupied level holds the
  // earliest entries, and overflow lies beyond every level. A coarse slot
  // (and the overflow list) is cascaded as soon as the wheel's time reaches
  // its start, so no entry ever sits in a slot that starts at or before
  // elapsed_ on a level above 0.
  while (true) {
    if (occupied_levels_ != 0) {
      const int level = std::countr_zero(occupied_levels_);
      const int slot = std::countr_zero(occupied_[level]);
      const int64_t start = SlotStart(level, slot);
      if (level == 0) {
        // Every entry of a level-0 slot is due exactly at its start.
        if (start > now_ms) break;
        const Detached detached = TakeSlot(slot);
        elapsed_ = start + 1;
        handed_out += HandOut(detached, expired);
      } else {
        if (start > now_ms + 1) break;
        const Detached detached = TakeSlot(level * kSlotsPerLevel + slot);
        elapsed_ = start;
        Cascade(detached);
      }
    } else if (slots_[kOverflowSlot].pending > 0 &&
               overflow_window_end_ <= now_ms + 1) {
      // Jump straight to the top-level window of the earliest overflow
      // entry (or as near it as now_ms allows): the windows before it are
      // empty, and entering them one by one would cascade the whole list
      // once per window (2^20 windows from 0 to kMaxTimeMs).
      const int64_t first_window = static_cast<int64_t>(
          static_cast<uint64_t>(slots_[kOverflowSlot].min_due_ms) &
          ~kTopWindowMask);
      elapsed_ =
          std::max(overflow_window_end_, std::min(first_window, now_ms + 1));
      Cascade(TakeSlot(kOverflowSlot));
    } else {
      break;
    }
  }
  // Nothing remains due at or before now_ms, so the wheel may jump past it.
  // Remaining entries keep their slots: level-0 entries are due after
  // now_ms in the same 64 ms window, and coarser slots start after
  // now_ms + 1, which is where SlotIndexFor places them for the new time.
  elapsed_ = std::max(elapsed_, now_ms + 1);
  expiring_ = false;
  return handed_out;
}

std::optional<int64_t> TimingWheel::NextExpiry() const {
  if (slots_[kOverdueSlot].pending > 0) return slots_[kOverdueSlot].min_due_ms;
  if (occupied_levels_ != 0) {
    const int level = std::countr_zero(occupied_levels_);
    const int slot = std::countr_zero(occupied_[level]);
    return slots_[level * kSlotsPerLevel + slot].min_due_ms;
  }
  if (slots_[kOverflowSlot].pending > 0) {
    return slots_[kOverflowSlot].min_due_ms;
  }
  return std::nullopt;
}

size_t TimingWheel::MemoryUsage() const {
  return block_count_ * sizeof(Block) +
         sequence_chunks_.size() *
             ((size_t{1} << kSequenceChunkBits) * sizeof(uint32_t)) +
         sequence_chunks_.capacity() * sizeof(sequence_chunks_[0]) +
         free_ids_.capacity() * sizeof(uint32_t) +
         overdue_scratch_.capacity() * sizeof(Entry);
}

// An entry due at or after elapsed_ belongs to the lowest level whose slot
// separates it from elapsed_: the level of the highest bit in which the two
// times differ. Its slot there is its digit at that level, which is larger
// than elapsed_'s digit, so a level's occupied slots all lie ahead of the
// current position and the first set bit is the earliest slot.
int TimingWheel::SlotIndexFor(int64_t due_ms) const {
  if (due_ms < elapsed_) return kOverdueSlot;
  const uint64_t differing =
      (static_cast<uint64_t>(elapsed_) ^ static_cast<uint64_t>(due_ms)) |
      (kSlotsPerLevel - 1);
  const int level = (63 - std::countl_zero(differing)) / kSlotBits;
  if (level >= kLevels) return kOverflowSlot;
  const int slot =
      static_cast<int>((static_cast<uint64_t>(due_ms) >> (level * kSlotBits)) &
                       (kSlotsPerLevel - 1));
  return level * kSlotsPerLevel + slot;
}

int64_t TimingWheel::SlotStart(int level, int slot) const {
  const int shift = level * kSlotBits;
  const uint64_t window_mask = (uint64_t{1} << (shift + kSlotBits)) - 1;
  return static_cast<int64_t>((static_cast<uint64_t>(elapsed_) & ~window_mask) |
                              (static_cast<uint64_t>(slot) << shift));
}

void TimingWheel::Insert(const Entry& entry) {
  const int index = SlotIndexFor(entry.due_ms);
  Slot& slot = slots_[index];
  if (slot.tail == nullptr || slot.tail->size == kBlockEntries) {
    Block* block = AllocateBlock();
    if (slot.tail == nullptr) {
      slot.head = block;
    } else {
      slot.tail->next = block;
    }
    slot.tail = block;
  }
  slot.tail->entries[slot.tail->size++] = entry;
  if (slot.pending++ == 0) {
    slot.min_due_ms = entry.due_ms;
    if (index == kOverflowSlot) {
      overflow_window_end_ = static_cast<int64_t>(
          (static_cast<uint64_t>(elapsed_) | kTopWindowMask) + 1);
    } else if (index < kOverdueSlot) {
      const int level = index / kSlotsPerLevel;
      occupied_[level] |= uint64_t{1} << (index % kSlotsPerLevel);
      occupied_levels_ |= 1u << level;
    }
  } else {
    slot.min_due_ms = std::min(slot.min_due_ms, entry.due_ms);
  }
}

TimingWheel::Detached TimingWheel::TakeSlot(int index) {
  const Detached detached{slots_[index].head, slots_[index].cancelled > 0};
  slots_[index] = Slot{};
  if (index < kOverdueSlot) {
    const int level = index / kSlotsPerLevel;
    occupied_[level] &= ~(uint64_t{1} << (index % kSlotsPerLevel));
    if (occupied_[level] == 0) occupied_levels_ &= ~(1u << level);
  }
  return detached;
}

// Cascade and HandOut walk a chain of blocks scattered over the heap; the
// next block is prefetched while the current one is processed.
void TimingWheel::Cascade(Detached slot) {
  for (Block* blocks = slot.blocks; blocks != nullptr;) {
    Block* block = std::exchange(blocks, blocks->next);
    if (blocks != nullptr) __builtin_prefetch(blocks);
    for (uint32_t i = 0; i < block->size; ++i) {
      const Entry& entry = block->entries[i];
      if (!slot.has_cancelled || IsPending(entry)) {
        Insert(entry);
      } else {
        ReleaseId(entry.id);
      }
    }
    RecycleBlock(block);
  }
}

size_t TimingWheel::HandOut(
    Detached slot, absl::FunctionRef<void(const TimerEntry&)> expired) {
  size_t handed_out = 0;
  for (Block* blocks = slot.blocks; blocks != nullptr;) {
    Block* block = std::exchange(blocks, blocks->next);
    if (blocks != nullptr) __builtin_prefetch(blocks);
    for (uint32_t i = 0; i < block->size; ++i) {
      const Entry& entry = block->entries[i];
      if (!slot.has_cancelled || IsPending(entry)) {
        SequenceOf(entry.id) = 0;
        ++handed_out;
        expired(TimerEntry{entry.due_ms, entry.value});
      }
      ReleaseId(entry.id);
    }
    RecycleBlock(block);
  }
  size_ -= handed_out;
  return handed_out;
}

size_t TimingWheel::HandOutOverdue(
    absl::FunctionRef<void(const TimerEntry&)> expired) {
  overdue_scratch_.clear();
  const Detached slot = TakeSlot(kOverdueSlot);
  for (Block* blocks = slot.blocks; blocks != nullptr;) {
    Block* block = std::exchange(blocks, blocks->next);
    for (uint32_t i = 0; i < block->size; ++i) {
      const Entry& entry = block->entries[i];
      if (IsPending(entry)) {
        overdue_scratch_.push_back(entry);
      } else {
        ReleaseId(entry.id);
      }
    }
    RecycleBlock(block);
  }
  // Overdue entries were scheduled in any due order; a stable sort keeps
  // schedule order among equal due times.
  auto by_due = [](const Entry& a, const Entry& b) {
    return a.due_ms < b.due_ms;
  };
  if (!std::is_sorted(overdue_scratch_.begin(), overdue_scratch_.end(),
                      by_due)) {
    std::stable_sort(overdue_scratch_.begin(), overdue_scratch_.end(), by_due);
  }
  for (const Entry& entry : overdue_scratch_) {
    SequenceOf(entry.id) = 0;
    ReleaseId(entry.id);
    expired(TimerEntry{entry.due_ms, entry.value});
  }
  size_ -= overdue_scratch_.size();
  return overdue_scratch_.size();
}

void TimingWheel::ReleaseBlocks(Block* blocks) {
  while (blocks != nullptr) {
    Block* block = std::exchange(blocks, blocks->next);
    for (uint32_t i = 0; i < block->size; ++i) {
      ReleaseId(block->entries[i].id);
    }
    RecycleBlock(block);
  }
}

uint32_t TimingWheel::AllocateId() {
  if (!free_ids_.empty()) {
    const uint32_t id = free_ids_.back();
    free_ids_.pop_back();
    return id;
  }
  const uint32_t id = next_id_++;
  if ((id >> kSequenceChunkBits) >= sequence_chunks_.size()) {
    sequence_chunks_.push_back(
        std::make_unique<uint32_t[]>(size_t{1} << kSequenceChunkBits));
  }
  return id;
}

void TimingWheel::ReleaseId(uint32_t id) { free_ids_.push_back(id); }

TimingWheel::Block* TimingWheel::AllocateBlock() {
  Block* block = free_blocks_;
  if (block != nullptr) {
    free_blocks_ = block->next;
    --free_block_count_;
  } else {
    block = new Block;
    ++block_count_;
  }
  block->next = nullptr;
  block->size = 0;
  return block;
}

void TimingWheel::RecycleBlock(Block* block) {
  if (free_block_count_ >= kMaxFreeBlocks) {
    delete block;
    --block_count_;
    return;
  }
  block->next = free_blocks_;
  free_blocks_ = block;
  ++free_block_count_;
}

}  // namespace hourglass::broker
