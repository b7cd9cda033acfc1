#include "broker/ready_window.h"

#include <utility>

namespace hourglass::broker {

ReadyWindow::ReadyWindow(size_t capacity, bool complete)
    : capacity_(capacity < 2 ? 2 : capacity) {
  if (!complete) frontier_ = storage::DueKey{0, 0};
}

void ReadyWindow::Add(const ReadyItem& item) {
  if (MayBeOnDiskOnly(item.key)) return;  // A refill will read it.
  items_.insert_or_assign(item.key, item);
  Trim();
}

std::optional<ReadyItem> ReadyWindow::Front() const {
  if (items_.empty()) return std::nullopt;
  return items_.begin()->second;
}

void ReadyWindow::PopFront() { items_.erase(items_.begin()); }

std::optional<ReadyItem> ReadyWindow::Erase(const storage::DueKey& key) {
  auto it = items_.find(key);
  if (it == items_.end()) return std::nullopt;
  ReadyItem item = it->second;
  items_.erase(it);
  return item;
}

void ReadyWindow::ApplyRefill(const std::vector<ReadyItem>& items,
                              std::optional<storage::DueKey> next) {
  frontier_ = next;
  for (const ReadyItem& item : items) items_.insert_or_assign(item.key, item);
  Trim();
}

void ReadyWindow::Trim() {
  while (items_.size() > capacity_) {
    auto last = std::prev(items_.end());
    // Every entry kept is before every entry dropped, so the least dropped
    // one is the new frontier (unless the old one was already before it).
    if (!frontier_.has_value() || last->first < *frontier_) {
      frontier_ = last->first;
    }
    items_.erase(last);
  }
}

}  // namespace hourglass::broker
