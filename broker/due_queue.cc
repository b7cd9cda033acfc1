#include "broker/due_queue.h"

#include <algorithm>
#include <utility>

namespace hourglass::broker {

void DueQueue::Add(std::vector<ScheduledEntry> entries) {
  size_ += entries.size();
  for (ScheduledEntry& entry : entries) {
    topics_[entry.topic].push_back(std::move(entry));
  }
}

std::vector<ScheduledEntry> DueQueue::Take(size_t max) {
  std::vector<ScheduledEntry> chunk;
  max = std::min(max, size_);
  chunk.reserve(max);
  while (chunk.size() < max) {
    // One round over the topics, starting after the last one served; each
    // gives an equal share of what the chunk still lacks.
    const size_t topics = topics_.size();
    const size_t share = std::max<size_t>(1, (max - chunk.size()) / topics);
    auto it = topics_.upper_bound(last_topic_);
    for (size_t i = 0; i < topics && chunk.size() < max; ++i) {
      if (it == topics_.end()) it = topics_.begin();
      std::deque<ScheduledEntry>& queue = it->second;
      const size_t n = std::min({share, queue.size(), max - chunk.size()});
      for (size_t j = 0; j < n; ++j) {
        chunk.push_back(std::move(queue.front()));
        queue.pop_front();
      }
      last_topic_ = it->first;
      it = queue.empty() ? topics_.erase(it) : std::next(it);
    }
  }
  size_ -= chunk.size();
  return chunk;
}

void DueQueue::PutBack(std::vector<ScheduledEntry> chunk) {
  size_ += chunk.size();
  // Back to the front of each topic's queue, in their order.
  for (auto it = chunk.rbegin(); it != chunk.rend(); ++it) {
    std::string topic = it->topic;
    topics_[topic].push_front(std::move(*it));
  }
}

std::optional<storage::DueKey> DueQueue::Least() const {
  std::optional<storage::DueKey> least;
  for (const auto& [topic, queue] : topics_) {
    if (!least.has_value() || queue.front().key < *least) {
      least = queue.front().key;
    }
  }
  return least;
}

}  // namespace hourglass::broker
