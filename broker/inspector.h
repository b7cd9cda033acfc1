#ifndef HOURGLASS_BROKER_INSPECTOR_H_
#define HOURGLASS_BROKER_INSPECTOR_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "broker/activity.h"
#include "broker/dispatcher.h"
#include "storage/keys.h"
#include "storage/message_store.h"

namespace hourglass::broker {

// Where a message is in its life (numbered as hourglass.v1.MessageState).
enum class MessageState {
  kScheduled = 1,
  kReady = 2,
  kInFlight = 3,
  kDead = 4
};

// Read-only views of what the broker holds, for the Admin service and the
// metrics: one message, pages of a topic's messages by state, and stats.
// Reads the store and the dispatcher's view of groups and consumers; counts
// come from the exact counters (storage/README.md).
//
// Thread-safe; GetMessage and List block on store reads.
class Inspector {
 public:
  // REQUIRES: the pointers outlive the inspector.
  Inspector(storage::MessageStore* store, Dispatcher* dispatcher,
            Activity* activity)
      : store_(store), dispatcher_(dispatcher), activity_(activity) {}

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
    uint64_t payload_size = 0;
    std::map<std::string, std::string> headers;
    std::string payload_preview;
    std::vector<GroupView> groups;
    // Highest over groups, plus, for a dead letter, the attempts made in
    // its original topic.
    uint32_t attempt = 0;
  };

  // One message by id, with its state in every group and the first
  // `preview_bytes` of its payload. NOT_FOUND if the topic holds no
  // pending message with that id.
  absl::StatusOr<MessageView> GetMessage(std::string_view topic,
                                         std::string_view id,
                                         size_t preview_bytes);

  // Where a page ended: the group (READY and IN_FLIGHT list group after
  // group, in name order) and the last message's due key.
  struct Position {
    std::string group;
    storage::DueKey key;
    friend bool operator==(const Position&, const Position&) = default;
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
    std::optional<Position> after;
  };
  struct ListPage {
    std::vector<MessageView> messages;  // Without payload previews.
    std::optional<Position> next;       // Set if more may follow.
  };
  // A page of a topic's messages in one state, in due order (ties: publish
  // order). DEAD lists the dead letters of the topic (those in
  // `<topic>.dlq`). SCHEDULED reads from the loader cursor on, so it skips
  // what came due long ago; READY reads only the groups' ready queues;
  // IN_FLIGHT reads the groups' in-flight entries, which consumer credit
  // bounds.
  absl::StatusOr<ListPage> List(const ListQuery& query);

  struct GroupStats {
    std::string group;
    absl::Time created_at;
    uint64_t ready = 0;
    uint64_t in_flight = 0;
    uint32_t consumers = 0;
    double ack_rate = 0;
  };
  struct TopicStats {
    std::string topic;
    uint64_t scheduled = 0;
    uint64_t ready = 0;          // All groups, plus the waiting area.
    uint64_t in_flight = 0;      // All groups.
    uint64_t messages = 0;       // Pending in any state.
    uint64_t dead_lettered = 0;  // Pending in `<topic>.dlq`.
    Activity::TopicView activity;
    std::vector<GroupStats> groups;  // In name order.
  };
  // Every topic with pending messages or groups, in name order; or only
  // `topic` (NOT_FOUND if it has neither). Reads no table: the counts are
  // the store's non-zero counters, kept in memory
  // (MessageStore::NonZeroCounters), so a call costs the topics and groups
  // that hold messages plus the groups, however many topics ever existed.
  absl::StatusOr<std::vector<TopicStats>> Stats(
      std::optional<std::string_view> topic);

 private:
  // Fills `view` from the stored message `sequence`; false if it is gone.
  absl::StatusOr<bool> ReadMessage(uint64_t sequence, size_t preview_bytes,
                                   MessageView& view);
  absl::StatusOr<ListPage> ListScheduledOrDead(const ListQuery& query);
  absl::StatusOr<ListPage> ListReady(const ListQuery& query);
  absl::StatusOr<ListPage> ListInFlight(const ListQuery& query);

  storage::MessageStore* const store_;
  Dispatcher* const dispatcher_;
  Activity* const activity_;
};

}  // namespace hourglass::broker

#endif  // HOURGLASS_BROKER_INSPECTOR_H_
