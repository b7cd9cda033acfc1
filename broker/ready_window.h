#ifndef HOURGLASS_BROKER_READY_WINDOW_H_
#define HOURGLASS_BROKER_READY_WINDOW_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/btree_map.h"
#include "storage/keys.h"

namespace hourglass::broker {

// One entry of a group's ready queue (storage/README.md, table `ready`).
struct ReadyItem {
  storage::DueKey key;
  // The entry lives in the topic's waiting area (the empty group name)
  // rather than under the group's own name.
  bool waiting_area = false;
  // Deliveries made before it became ready again; 0 for a new message.
  uint32_t attempt = 0;

  friend bool operator==(const ReadyItem&, const ReadyItem&) = default;
};

// The in-memory head of one group's ready queue. The queue itself is on
// disk; the window holds its first entries, at most `capacity`, so that a
// backlog of millions costs memory for only a few thousand.
//
// The frontier keeps the two consistent: every durable ready entry with a
// key before the frontier is in the window (or has left the queue); entries
// at or after it may be on disk only. No frontier means the window holds
// the whole queue. New entries before the frontier are added as they become
// durable (Add); a refill (ApplyRefill) reads the disk from the frontier
// and moves it forward.
//
// Thread-compatible: the dispatcher guards each window with its lock.
class ReadyWindow {
 public:
  // `complete`: the queue on disk is known to be empty (a new group).
  // Otherwise the frontier starts at the beginning of the queue.
  ReadyWindow(size_t capacity, bool complete);

  // A ready entry became durable. It joins the window if it is before the
  // frontier; past capacity, the window drops its greatest entries (which
  // stay on disk) and the frontier moves back to the least dropped.
  void Add(const ReadyItem& item);

  // The least entry, or nullopt if the window is empty.
  std::optional<ReadyItem> Front() const;
  // Removes the least entry. REQUIRES: !empty().
  void PopFront();

  // Removes the entry with `key`, if the window holds it.
  std::optional<ReadyItem> Erase(const storage::DueKey& key);

  bool Contains(const storage::DueKey& key) const {
    return items_.contains(key);
  }
  // Whether an entry with `key` may be on disk without being in the window.
  bool MayBeOnDiskOnly(const storage::DueKey& key) const {
    return frontier_.has_value() && key >= *frontier_;
  }

  // True when the disk may hold entries past the window and the window has
  // room for at least half its capacity.
  bool WantsRefill() const {
    return frontier_.has_value() && items_.size() <= capacity_ / 2;
  }
  // How many entries a refill should read.
  size_t RefillSize() const { return capacity_ - items_.size(); }
  const std::optional<storage::DueKey>& frontier() const { return frontier_; }

  // Applies a refill: a read of the disk from the frontier found `items`
  // (in key order, minus any the caller must skip) and nothing else before
  // `next`; nullopt means nothing else at all. Moves the frontier to `next`.
  // REQUIRES: `next` is nullopt or after the frontier and every item.
  void ApplyRefill(const std::vector<ReadyItem>& items,
                   std::optional<storage::DueKey> next);

  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }

 private:
  void Trim();

  const size_t capacity_;
  absl::btree_map<storage::DueKey, ReadyItem> items_;
  std::optional<storage::DueKey> frontier_;
};

}  // namespace hourglass::broker

#endif  // HOURGLASS_BROKER_READY_WINDOW_H_
