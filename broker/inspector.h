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
#include "broker/views.h"
#include "storage/keys.h"
#include "storage/message_store.h"

namespace hourglass::broker {

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

  // The views it answers with (views.h).
  using GroupView = broker::GroupView;
  using MessageView = broker::MessageView;
  using Position = ListPosition;
  using ListQuery = broker::ListQuery;
  using ListPage = broker::ListPage;
  using GroupStats = broker::GroupStats;
  using TopicStats = broker::TopicStats;
  using ScheduleQuery = broker::ScheduleQuery;
  using ScheduleBucket = broker::ScheduleBucket;

  // One message by id, with its state in every group and the first
  // `preview_bytes` of its payload. NOT_FOUND if the topic holds no
  // pending message with that id.
  absl::StatusOr<MessageView> GetMessage(std::string_view topic,
                                         std::string_view id,
                                         size_t preview_bytes);

  // A page of a topic's messages in one state, in due order (ties: publish
  // order). DEAD lists the dead letters of the topic (those in
  // `<topic>.dlq`). SCHEDULED reads from the loader cursor on, so it skips
  // what came due long ago; READY reads only the groups' ready queues;
  // IN_FLIGHT reads the groups' in-flight entries, which consumer credit
  // bounds.
  absl::StatusOr<ListPage> List(const ListQuery& query);

  // Every topic with pending messages or groups, in name order; or only
  // `topic` (NOT_FOUND if it has neither). Reads no table: the counts are
  // the store's non-zero counters, kept in memory
  // (MessageStore::NonZeroCounters), so a call costs the topics and groups
  // that hold messages plus the groups, however many topics ever existed.
  absl::StatusOr<std::vector<TopicStats>> Stats(
      std::optional<std::string_view> topic);

  // The schedule histogram of `query` (Broker::GetSchedule), from the
  // schedule counts: reads storage::ScheduleCountReads counters, never the
  // messages. REQUIRES: `query` is as ScheduleQuery says.
  absl::StatusOr<std::vector<ScheduleBucket>> Schedule(
      const ScheduleQuery& query);

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
