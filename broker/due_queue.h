#ifndef HOURGLASS_BROKER_DUE_QUEUE_H_
#define HOURGLASS_BROKER_DUE_QUEUE_H_

#include <cstddef>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "broker/loader.h"
#include "storage/keys.h"

namespace hourglass::broker {

// Messages that came due and wait to be dispatched, one FIFO per topic.
// Take hands out chunks that share the chunk among the waiting topics, so
// that a burst of a million due messages in one topic delays another
// topic's messages by one chunk, not by the whole burst. Within a topic,
// due order is kept.
//
// Thread-compatible: owned by the engine's timer thread.
class DueQueue {
 public:
  // Appends entries in due order (as Scheduler::Poll returns them).
  void Add(std::vector<ScheduledEntry> entries);

  // Takes up to `max` entries: topics in turn (round robin, starting after
  // the one the last chunk ended on), each giving an equal share of what is
  // left, in its due order. The result is in no particular order across
  // topics.
  std::vector<ScheduledEntry> Take(size_t max);

  // Returns a chunk that Take handed out (and that could not be
  // dispatched) to the front of the queues, as it was.
  void PutBack(std::vector<ScheduledEntry> chunk);

  // The least key still waiting, if any.
  std::optional<storage::DueKey> Least() const;

  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }

 private:
  std::map<std::string, std::deque<ScheduledEntry>> topics_;
  std::string last_topic_;  // Where the last Take ended.
  size_t size_ = 0;
};

}  // namespace hourglass::broker

#endif  // HOURGLASS_BROKER_DUE_QUEUE_H_
