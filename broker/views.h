#ifndef HOURGLASS_BROKER_VIEWS_H_
#define HOURGLASS_BROKER_VIEWS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "storage/keys.h"

namespace hourglass::broker {

// What the broker shows of itself to operators: the values its admin
// queries answer with (Broker::Stats, ListMessages, GetMessage). Plain
// values, copied out of the broker; holding one holds no lock.

// Where a message is in its life (numbered as hourglass.v1.MessageState).
enum class MessageState {
  kScheduled = 1,
  kReady = 2,
  kInFlight = 3,
  kDead = 4
};

// A message's state in one group ("" is the topic's waiting area).
struct GroupView {
  std::string group;
  MessageState state = MessageState::kReady;
  uint32_t attempt = 0;
  absl::Time redeliver_at = absl::InfinitePast();  // In flight only.
};

struct MessageView {
  std::string id;
  std::string topic;
  MessageState state = MessageState::kScheduled;
  absl::Time deliver_at;
  absl::Time published_at;
  // The deadline (Message.expire_at); InfiniteFuture() without one.
  absl::Time expire_at = absl::InfiniteFuture();
  // At its deadline it goes to <topic>.dlq; else it is dropped.
  bool dead_letter_on_expire = false;
  uint64_t payload_size = 0;
  std::map<std::string, std::string> headers;
  std::string payload_preview;
  std::vector<GroupView> groups;
  // Highest over groups, plus, for a dead letter, the attempts made in its
  // original topic.
  uint32_t attempt = 0;
};

// Where a page of a listing ended: the group (READY and IN_FLIGHT list
// group after group, in name order) and the last message's due key.
struct ListPosition {
  std::string group;
  storage::DueKey key;
  friend bool operator==(const ListPosition&, const ListPosition&) = default;
};

// A schedule histogram (Broker::GetSchedule): `count` buckets of `bucket`
// each, the first starting at `first`.
struct ScheduleQuery {
  std::string topic;
  absl::Time first;       // Whole minutes since the Unix epoch, not before it.
  absl::Duration bucket;  // Whole minutes, positive.
  size_t count = 0;
};

// One bucket of a schedule histogram: how many scheduled messages are due
// in [start, start + the query's bucket).
struct ScheduleBucket {
  absl::Time start;
  uint64_t count = 0;

  friend bool operator==(const ScheduleBucket&,
                         const ScheduleBucket&) = default;
};

struct ListQuery {
  std::string topic;
  MessageState state = MessageState::kScheduled;
  // READY and IN_FLIGHT only: just this group.
  std::optional<std::string> group;
  // Due-time range [from, to); unset ends are open.
  std::optional<absl::Time> from;
  std::optional<absl::Time> to;
  size_t limit = 100;
  // Start after this position (the previous page's `next`).
  std::optional<ListPosition> after;
};

struct ListPage {
  std::vector<MessageView> messages;  // Without payload previews.
  std::optional<ListPosition> next;   // Set if more may follow.
};

// Lateness of first deliveries (delivery minus deliver_at) over the last
// minute.
struct Percentiles {
  absl::Duration p50, p90, p99, max;
};

// A topic's recent activity.
struct TopicActivity {
  double publish_rate = 0;   // Per second over the last minute.
  double delivery_rate = 0;  // First deliveries per second.
  Percentiles lateness;      // Zero when nothing was delivered.
};

struct GroupStats {
  std::string group;
  absl::Time created_at;
  uint64_t ready = 0;
  uint64_t in_flight = 0;
  uint32_t consumers = 0;
  double ack_rate = 0;  // Per second over the last minute.
};

struct TopicStats {
  std::string topic;
  uint64_t scheduled = 0;
  uint64_t ready = 0;          // All groups, plus the waiting area.
  uint64_t in_flight = 0;      // All groups.
  uint64_t messages = 0;       // Pending in any state.
  uint64_t dead_lettered = 0;  // Pending in `<topic>.dlq`.
  TopicActivity activity;
  std::vector<GroupStats> groups;  // In name order.
};

}  // namespace hourglass::broker

#endif  // HOURGLASS_BROKER_VIEWS_H_
