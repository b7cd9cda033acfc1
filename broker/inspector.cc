#include "broker/inspector.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "broker/lifecycle_reads.h"
#include "broker/publisher.h"
#include "storage/records.pb.h"

namespace hourglass::broker {
namespace {

using storage::DueKey;

// The first whole millisecond at or after `t`: due times are whole
// milliseconds, so one is at or after `t` exactly when it is at or after
// this, and before `t` exactly when it is before this.
int64_t CeilMillis(absl::Time t) {
  const int64_t ms = absl::ToUnixMillis(t);  // Floored.
  return absl::FromUnixMillis(ms) < t ? ms + 1 : ms;
}

// The first due key a listing may show: past `after`, at or after `from`.
DueKey StartKey(const Inspector::ListQuery& query, int64_t floor_ms) {
  DueKey start{std::max<int64_t>(floor_ms, 0), 0};
  if (query.from.has_value()) {
    start = std::max(start,
                     DueKey{std::max<int64_t>(CeilMillis(*query.from), 0), 0});
  }
  if (query.after.has_value()) {
    const DueKey& a = query.after->key;
    start = std::max(start, DueKey{a.deliver_at_ms, a.sequence + 1});
  }
  return start;
}

bool BeforeEnd(const Inspector::ListQuery& query, const DueKey& key) {
  return !query.to.has_value() || key.deliver_at_ms < CeilMillis(*query.to);
}

}  // namespace

absl::StatusOr<bool> Inspector::ReadMessage(uint64_t sequence,
                                            size_t preview_bytes,
                                            MessageView& view) {
  absl::StatusOr<std::optional<storage::MessageRecord>> stored =
      lifecycle::ReadMessage(*store_, sequence);
  if (!stored.ok()) return stored.status();
  if (!stored->has_value()) return false;
  const storage::MessageRecord& record = **stored;
  view.id = record.id();
  view.topic = record.topic();
  view.deliver_at = absl::FromUnixMillis(record.deliver_at_ms());
  view.published_at = absl::FromUnixMillis(record.published_at_ms());
  if (record.expire_at_ms() != 0) {
    view.expire_at = absl::FromUnixMillis(record.expire_at_ms());
    view.dead_letter_on_expire = record.dead_letter_on_expire();
  }
  view.payload_size = record.payload().size();
  view.headers.insert(record.headers().begin(), record.headers().end());
  view.payload_preview = record.payload().substr(0, preview_bytes);
  // A dead letter keeps the attempts made in its original topic.
  view.attempt = record.dead_letter_attempts();
  return true;
}

absl::StatusOr<Inspector::MessageView> Inspector::GetMessage(
    std::string_view topic, std::string_view id, size_t preview_bytes) {
  const absl::Status not_found = absl::NotFoundError(absl::StrCat(
      "no message with id ", Quoted(id), " in topic ", Quoted(topic)));
  absl::StatusOr<std::optional<DueKey>> stored =
      lifecycle::FindId(*store_, topic, id);
  if (!stored.ok()) return stored.status();
  if (!stored->has_value()) return not_found;
  const DueKey key = **stored;
  MessageView view;
  absl::StatusOr<bool> found = ReadMessage(key.sequence, preview_bytes, view);
  if (!found.ok()) return found.status();
  if (!*found) return not_found;

  absl::StatusOr<bool> scheduled = lifecycle::IsScheduled(*store_, key);
  if (!scheduled.ok()) return scheduled.status();
  if (*scheduled) {
    view.state = MessageState::kScheduled;
    return view;
  }
  // Due: where it stands in each group, and in the waiting area.
  std::vector<std::string> groups = {""};
  for (const Dispatcher::GroupInfo& g : dispatcher_->Groups()) {
    if (g.topic == topic) groups.push_back(g.group);
  }
  bool any_ready = false;
  for (const std::string& group : groups) {
    absl::StatusOr<std::optional<uint32_t>> ready =
        lifecycle::ReadReady(*store_, topic, ReadyPlace{group, key});
    if (!ready.ok()) return ready.status();
    if (ready->has_value()) {
      view.groups.push_back({group, MessageState::kReady, **ready});
      any_ready = true;
      continue;
    }
    absl::StatusOr<std::optional<storage::InFlightRecord>> in_flight =
        lifecycle::ReadInFlight(*store_, topic, group, key.sequence);
    if (!in_flight.ok()) return in_flight.status();
    if (!in_flight->has_value()) continue;
    const storage::InFlightRecord& record = **in_flight;
    view.groups.push_back({group, MessageState::kInFlight, record.attempt(),
                           absl::FromUnixMillis(record.redeliver_at_ms())});
  }
  uint32_t highest = 0;
  for (const GroupView& g : view.groups) highest = std::max(highest, g.attempt);
  view.attempt += highest;
  if (topic.ends_with(".dlq")) {
    view.state = MessageState::kDead;
  } else {
    view.state = any_ready || view.groups.empty() ? MessageState::kReady
                                                  : MessageState::kInFlight;
  }
  return view;
}

absl::StatusOr<Inspector::ListPage> Inspector::List(const ListQuery& query) {
  switch (query.state) {
    case MessageState::kScheduled:
    case MessageState::kDead:
      return ListScheduledOrDead(query);
    case MessageState::kReady:
      return ListReady(query);
    case MessageState::kInFlight:
      return ListInFlight(query);
  }
  return absl::InvalidArgumentError("unknown state");
}

// Both read topic_due in due order: SCHEDULED keeps the entries whose
// schedule key still exists, from the loader cursor on (every message due
// before it has been dispatched); DEAD shows every pending message of
// `<topic>.dlq`.
absl::StatusOr<Inspector::ListPage> Inspector::ListScheduledOrDead(
    const ListQuery& query) {
  const bool dead = query.state == MessageState::kDead;
  const std::string topic =
      dead ? absl::StrCat(query.topic, ".dlq") : query.topic;
  int64_t floor_ms = 0;
  if (!dead) {
    absl::StatusOr<DueKey> cursor = lifecycle::ReadLoaderCursor(*store_);
    if (!cursor.ok()) return cursor.status();
    floor_ms = cursor->deliver_at_ms;
  }
  ListPage page;
  std::vector<DueKey> keys;
  absl::Status failed;
  absl::Status scanned = lifecycle::ScanTopic(
      *store_, topic, StartKey(query, floor_ms),
      [&](const DueKey& due, std::string_view) {
        if (!BeforeEnd(query, due)) return false;
        if (!dead) {
          absl::StatusOr<bool> scheduled = lifecycle::IsScheduled(*store_, due);
          if (!scheduled.ok()) {
            failed = scheduled.status();
            return false;
          }
          if (!*scheduled) return true;  // Came due since.
        }
        keys.push_back(due);
        return keys.size() <= query.limit;
      });
  if (!scanned.ok()) return scanned;
  if (!failed.ok()) return failed;
  if (keys.size() > query.limit) {
    keys.pop_back();
    page.next = Position{"", keys.back()};
  }
  for (const DueKey& key : keys) {
    MessageView view;
    absl::StatusOr<bool> found = ReadMessage(key.sequence, 0, view);
    if (!found.ok()) return found.status();
    if (!*found) continue;  // Deleted meanwhile.
    view.state = query.state;
    page.messages.push_back(std::move(view));
  }
  return page;
}

absl::StatusOr<Inspector::ListPage> Inspector::ListReady(
    const ListQuery& query) {
  // Groups in name order; the waiting area ("") first, or merged into the
  // group that owns it.
  std::map<std::string, bool> groups;  // Name -> owns the waiting area.
  bool area_owned = false;
  for (const Dispatcher::GroupInfo& g : dispatcher_->Groups()) {
    if (g.topic != query.topic) continue;
    groups[g.group] = g.owns_waiting_area;
    area_owned = area_owned || g.owns_waiting_area;
  }
  if (!area_owned) groups[""] = true;
  if (query.group.has_value()) {
    auto it = groups.find(*query.group);
    if (it == groups.end()) return ListPage();
    const bool owns = it->second;
    groups = {{*query.group, owns}};
  }
  ListPage page;
  struct Item {
    std::string group;
    DueKey key;
    uint32_t attempt;
  };
  std::vector<Item> items;
  for (const auto& [group, owns_area] : groups) {
    if (query.after.has_value() && group < query.after->group) continue;
    ListQuery q = query;
    if (!query.after.has_value() || query.after->group != group) {
      q.after.reset();
    }
    const DueKey start = StartKey(q, 0);
    std::vector<Item> found;
    const size_t want = query.limit + 1 - items.size();
    // `group` by an explicit capture: clang 14 cannot capture a structured
    // binding implicitly.
    auto scan = [&, &group =
                        group](std::string_view stored_under) -> absl::Status {
      size_t n = 0;
      return lifecycle::ScanReady(*store_, query.topic, stored_under, start,
                                  [&](const DueKey& due, uint32_t attempt) {
                                    if (!BeforeEnd(query, due)) return false;
                                    found.push_back({group, due, attempt});
                                    return ++n < want;
                                  });
    };
    if (absl::Status s = scan(group); !s.ok()) return s;
    if (owns_area && !group.empty()) {
      if (absl::Status s = scan(""); !s.ok()) return s;
    }
    std::sort(found.begin(), found.end(),
              [](const Item& a, const Item& b) { return a.key < b.key; });
    if (found.size() > want) found.resize(want);
    items.insert(items.end(), found.begin(), found.end());
    if (items.size() > query.limit) break;
  }
  if (items.size() > query.limit) {
    items.resize(query.limit);
    page.next = Position{items.back().group, items.back().key};
  }
  for (const Item& item : items) {
    MessageView view;
    absl::StatusOr<bool> found = ReadMessage(item.key.sequence, 0, view);
    if (!found.ok()) return found.status();
    if (!*found) continue;
    view.state = MessageState::kReady;
    view.attempt += item.attempt;
    view.groups.push_back({item.group, MessageState::kReady, item.attempt});
    page.messages.push_back(std::move(view));
  }
  return page;
}

absl::StatusOr<Inspector::ListPage> Inspector::ListInFlight(
    const ListQuery& query) {
  std::set<std::string> groups;
  for (const Dispatcher::GroupInfo& g : dispatcher_->Groups()) {
    if (g.topic != query.topic) continue;
    if (query.group.has_value() && g.group != *query.group) continue;
    groups.insert(g.group);
  }
  struct Item {
    std::string group;
    DueKey key;
    uint32_t attempt;
    absl::Time redeliver_at;
  };
  std::vector<Item> items;
  for (const std::string& group : groups) {
    if (query.after.has_value() && group < query.after->group) continue;
    ListQuery q = query;
    if (!query.after.has_value() || query.after->group != group) {
      q.after.reset();
    }
    const DueKey start = StartKey(q, 0);
    // In-flight entries are few (consumer credit bounds them) and keyed by
    // sequence: read the group's, then order them by due time.
    std::vector<Item> found;
    absl::Status s = lifecycle::ScanInFlight(
        *store_, query.topic, group, [&](lifecycle::StoredInFlight&& entry) {
          const DueKey due{entry.record.deliver_at_ms(), entry.sequence};
          if (due < start || !BeforeEnd(query, due)) return true;
          found.push_back(
              {group, due, entry.record.attempt(),
               absl::FromUnixMillis(entry.record.redeliver_at_ms())});
          return true;
        });
    if (!s.ok()) return s;
    std::sort(found.begin(), found.end(),
              [](const Item& a, const Item& b) { return a.key < b.key; });
    items.insert(items.end(), found.begin(), found.end());
    if (items.size() > query.limit) break;
  }
  ListPage page;
  if (items.size() > query.limit) {
    items.resize(query.limit);
    page.next = Position{items.back().group, items.back().key};
  }
  for (const Item& item : items) {
    MessageView view;
    absl::StatusOr<bool> found = ReadMessage(item.key.sequence, 0, view);
    if (!found.ok()) return found.status();
    if (!*found) continue;
    view.state = MessageState::kInFlight;
    view.attempt += item.attempt;
    view.groups.push_back(
        {item.group, MessageState::kInFlight, item.attempt, item.redeliver_at});
    page.messages.push_back(std::move(view));
  }
  return page;
}

absl::StatusOr<std::vector<Inspector::TopicStats>> Inspector::Stats(
    std::optional<std::string_view> only) {
  // Every count, from the counters that are not 0 (kept in memory by the
  // store: reading them reads no table).
  std::map<std::string, lifecycle::TopicCounts> counts =
      lifecycle::ReadCounts(*store_);
  std::map<std::string, TopicStats> topics;
  // Topics: those with pending messages, and those with groups.
  for (const auto& [topic, c] : counts) {
    if (c.messages > 0) topics[topic].topic = topic;
  }
  auto counts_of = [&](const std::string& topic) -> lifecycle::TopicCounts* {
    auto it = counts.find(topic);
    return it == counts.end() ? nullptr : &it->second;
  };
  auto ready_of = [&](const std::string& topic, const std::string& group) {
    lifecycle::TopicCounts* c = counts_of(topic);
    if (c == nullptr) return uint64_t{0};
    auto it = c->ready.find(group);
    return it == c->ready.end() ? 0 : it->second;
  };
  // Groups come by topic and name, so each topic's list is in name order.
  for (Dispatcher::GroupInfo& g : dispatcher_->Groups()) {
    if (only.has_value() && g.topic != *only) continue;
    TopicStats& stats = topics[g.topic];
    stats.topic = g.topic;
    GroupStats group;
    group.ready = ready_of(g.topic, g.group);
    group.ack_rate = activity_->AckRate(g.topic, g.group);
    group.group = std::move(g.group);
    group.created_at = g.created_at;
    group.in_flight = g.in_flight;
    group.consumers = static_cast<uint32_t>(g.consumers);
    stats.groups.push_back(std::move(group));
  }
  if (only.has_value()) {
    auto it = topics.find(std::string(*only));
    if (it == topics.end()) {
      return absl::NotFoundError(absl::StrCat(
          "no topic ", Quoted(*only), " (no pending messages and no groups)"));
    }
    TopicStats one = std::move(it->second);
    topics = {{one.topic, std::move(one)}};
  }

  std::vector<TopicStats> out;
  out.reserve(topics.size());
  for (auto& [name, stats] : topics) {
    if (const lifecycle::TopicCounts* c = counts_of(name)) {
      stats.scheduled = c->scheduled;
      stats.messages = c->messages;
    }
    if (const lifecycle::TopicCounts* c =
            counts_of(absl::StrCat(name, ".dlq"))) {
      stats.dead_lettered = c->messages;
    }
    stats.ready = ready_of(name, "");
    for (const GroupStats& group : stats.groups) {
      stats.ready += group.ready;
      stats.in_flight += group.in_flight;
    }
    stats.activity = activity_->Topic(name);
    out.push_back(std::move(stats));
  }
  return out;
}

absl::StatusOr<std::vector<Inspector::ScheduleBucket>> Inspector::Schedule(
    const ScheduleQuery& query) {
  const int64_t first_ms = absl::ToUnixMillis(query.first);
  const int64_t bucket_ms = absl::ToInt64Milliseconds(query.bucket);
  absl::StatusOr<std::vector<uint64_t>> counts = lifecycle::ReadScheduleCounts(
      *store_, query.topic, {first_ms, bucket_ms, query.count});
  if (!counts.ok()) return counts.status();
  std::vector<ScheduleBucket> buckets;
  buckets.reserve(counts->size());
  for (size_t i = 0; i < counts->size(); ++i) {
    buckets.push_back(
        {query.first + static_cast<int64_t>(i) * query.bucket, (*counts)[i]});
  }
  return buckets;
}

}  // namespace hourglass::broker
