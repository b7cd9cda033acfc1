#include "broker/lifecycle.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "broker/lifecycle_reads.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/keys.h"
#include "storage/memory_store.h"
#include "storage/message_store.h"
#include "storage/records.pb.h"
#include "tests/testing/seed.h"

// A randomised test of the message lifecycle (broker/lifecycle.h): it
// applies random legal transitions to a MemoryStore and to a reference
// model written from storage/README.md ("Which keys exist in each state"),
// not from lifecycle.cc. After every step each table holds exactly the keys
// and values the model says exist, and every counter equals the count of
// the keys it counts.

namespace hourglass::broker {
namespace {

using storage::DueKey;
using storage::Table;
using ::testing::IsEmpty;

constexpr int64_t kAckTimeoutMs = 30'000;

// A table's contents: key -> value.
using Contents = std::map<std::string, std::string>;
using AllTables = std::array<Contents, storage::kNumTables>;

Contents& At(AllTables& tables, Table table) {
  return tables[static_cast<int>(table)];
}
const Contents& At(const AllTables& tables, Table table) {
  return tables[static_cast<int>(table)];
}

// `value` in `bytes` big-endian bytes: storage/README.md's u64 and u32.
std::string BigEndian(uint64_t value, int bytes) {
  std::string out(bytes, '\0');
  for (int i = bytes - 1; i >= 0; --i) {
    out[i] = static_cast<char>(value & 0xff);
    value >>= 8;
  }
  return out;
}

// `bytes` with C escapes, for messages.
std::string Hex(std::string_view bytes) {
  return absl::CHexEscape(std::string(bytes));
}

// Names, each in quotes ("" is a waiting area).
std::string Quoted(const std::vector<std::string>& names) {
  return absl::StrJoin(names, ",", [](std::string* out, const std::string& n) {
    absl::StrAppend(out, "\"", n, "\"");
  });
}

std::string Show(const DueKey& key) {
  return absl::StrCat("{", key.deliver_at_ms, ", ", key.sequence, "}");
}
std::string Show(const std::optional<DueKey>& key) {
  return key.has_value() ? Show(*key) : "none";
}

// ---- The reference model.

// A stored message and the keys it has: scheduled; or ready under some
// names (a group's, or "" for its topic's waiting area) and in flight in
// some groups. A message that is gone is not in the model.
struct ModelMessage {
  uint64_t sequence = 0;
  storage::MessageRecord record;  // As stored: topic, id, deliver_at_ms...
  bool scheduled = true;
  std::set<std::string> ready;
  std::map<std::string, storage::InFlightRecord> in_flight;  // By group.

  DueKey key() const { return {record.deliver_at_ms(), sequence}; }
  const std::string& topic() const { return record.topic(); }
  const std::string& id() const { return record.id(); }
  // Whether some group holds it other than by an in-flight entry in
  // `group`: the question an ack or a dead letter asks (last_holder).
  bool HeldBesides(std::string_view group) const {
    if (!ready.empty()) return true;
    for (const auto& [name, entry] : in_flight) {
      if (name != group) return true;
    }
    return false;
  }
};

struct ModelGroup {
  storage::GroupRecord record;
  // Its deletion has begun: no consumer takes or acks its entries any more;
  // only the deletion removes them.
  bool deleting = false;
};

struct Model {
  std::map<uint64_t, ModelMessage> messages;  // By sequence.
  // Registered groups by topic, then name.
  std::map<std::string, std::map<std::string, ModelGroup>> groups;
  std::optional<DueKey> loader_cursor;
  std::optional<uint64_t> sequence_reserved;
  // The next publish sequence; publishes use only reserved ones.
  uint64_t next_sequence = 1;

  // The stored message of `topic` with `id`, or null.
  const ModelMessage* Find(std::string_view topic, std::string_view id) const {
    for (const auto& [sequence, m] : messages) {
      if (m.topic() == topic && m.id() == id) return &m;
    }
    return nullptr;
  }

  // The group that consumes `topic`'s waiting area, or null.
  const std::string* WaitingAreaOwner(const std::string& topic) const {
    auto t = groups.find(topic);
    if (t == groups.end()) return nullptr;
    for (const auto& [name, group] : t->second) {
      if (group.record.owns_waiting_area()) return &name;
    }
    return nullptr;
  }

  // The messages of `topic` in due order.
  std::vector<const ModelMessage*> InDueOrder(std::string_view topic) const {
    std::vector<const ModelMessage*> out;
    for (const auto& [sequence, m] : messages) {
      if (m.topic() == topic) out.push_back(&m);
    }
    std::sort(out.begin(), out.end(),
              [](const ModelMessage* a, const ModelMessage* b) {
                return a->key() < b->key();
              });
    return out;
  }

  // What ReadNextSequence returns: past every stored message and the
  // reserved sequences.
  uint64_t NextSequenceAfterRestart() const {
    uint64_t next = messages.empty() ? 1 : messages.rbegin()->first + 1;
    if (sequence_reserved.has_value()) {
      next = std::max(next, *sequence_reserved);
    }
    return next;
  }

  // Every key and value the store should hold, by table, as
  // storage/README.md describes them (the counters table is checked
  // against the other tables instead).
  AllTables Tables() const {
    AllTables t;
    for (const auto& [sequence, m] : messages) {
      const DueKey key = m.key();
      At(t, Table::kMessages)[storage::MessageKey(sequence)] =
          m.record.SerializeAsString();
      // No ids entry for an id the broker assigned from this sequence.
      if (m.id() != storage::AssignedId(sequence)) {
        At(t, Table::kIds)[storage::IdKey(m.topic(), m.id())] =
            BigEndian(sequence, 8) + BigEndian(key.deliver_at_ms, 8);
      }
      At(t, Table::kTopicDue)[storage::TopicDueKey(m.topic(), key)] = m.id();
      if (m.scheduled) {
        At(t, Table::kSchedule)[storage::ScheduleKey(key)] = m.topic();
      }
      for (const std::string& under : m.ready) {
        At(t, Table::kReady)[storage::ReadyKey(m.topic(), under, key)] =
            BigEndian(0, 4);
      }
      for (const auto& [group, entry] : m.in_flight) {
        At(t,
           Table::kInFlight)[storage::InFlightKey(m.topic(), group, sequence)] =
            entry.SerializeAsString();
      }
    }
    Contents& meta = At(t, Table::kMeta);
    for (const auto& [topic, names] : groups) {
      for (const auto& [name, group] : names) {
        meta[storage::GroupKey(topic, name)] = group.record.SerializeAsString();
      }
    }
    if (loader_cursor.has_value()) {
      meta[std::string(storage::kLoaderCursorKey)] =
          BigEndian(loader_cursor->deliver_at_ms, 8) +
          BigEndian(loader_cursor->sequence, 8);
    }
    if (sequence_reserved.has_value()) {
      meta[std::string(storage::kSequenceReservedKey)] =
          BigEndian(*sequence_reserved, 8);
    }
    return t;
  }

  // The model's own invariants: a message is scheduled or held, never
  // both; at most one message per topic and id; a group holds a message
  // once at most.
  void CheckInvariants(std::vector<std::string>& problems) const {
    std::set<std::pair<std::string, std::string>> ids;
    for (const auto& [sequence, m] : messages) {
      const bool held = !m.ready.empty() || !m.in_flight.empty();
      if (m.scheduled == held) {
        problems.push_back(absl::StrCat("model: message ", sequence,
                                        " is scheduled: ", m.scheduled,
                                        ", held: ", held));
      }
      if (!ids.emplace(m.topic(), m.id()).second) {
        problems.push_back(absl::StrCat("model: two messages of ", m.topic(),
                                        " with id ", m.id()));
      }
      for (const auto& [group, entry] : m.in_flight) {
        if (m.ready.contains(group)) {
          problems.push_back(absl::StrCat("model: message ", sequence,
                                          " ready and in flight in ", group));
        }
      }
    }
  }
};

// ---- Reading and checking the store.

AllTables ReadTables(storage::MessageStore& store) {
  AllTables tables;
  for (int i = 0; i < storage::kNumTables; ++i) {
    const absl::Status s =
        store.Scan(static_cast<Table>(i), "", "",
                   [&](std::string_view key, std::string_view value) {
                     // In key order: each goes at the end.
                     tables[i].emplace_hint(tables[i].end(), std::string(key),
                                            std::string(value));
                     return true;
                   });
    EXPECT_TRUE(s.ok()) << s;
  }
  return tables;
}

std::string Describe(Table table, std::string_view key) {
  return absl::StrCat(std::string(storage::TableName(table)), "[\"", Hex(key),
                      "\"]");
}

// Adds a line to `problems` for each key of `table` that `got` and `want`
// disagree on.
void DiffTable(Table table, const Contents& got, const Contents& want,
               std::vector<std::string>& problems) {
  auto g = got.begin();
  auto w = want.begin();
  while (g != got.end() || w != want.end()) {
    if (w == want.end() || (g != got.end() && g->first < w->first)) {
      problems.push_back(absl::StrCat(Describe(table, g->first),
                                      " is stored, but the model has no such "
                                      "key"));
      ++g;
    } else if (g == got.end() || w->first < g->first) {
      problems.push_back(absl::StrCat(Describe(table, w->first),
                                      " is missing from the store"));
      ++w;
    } else {
      if (g->second != w->second) {
        problems.push_back(absl::StrCat(Describe(table, g->first), " holds \"",
                                        Hex(g->second), "\", the model says \"",
                                        Hex(w->second), "\""));
      }
      ++g;
      ++w;
    }
  }
}

std::string CounterName(std::string_view key) {
  std::optional<storage::CounterKeyParts> parts =
      storage::DecodeCounterKey(key);
  if (!parts.has_value()) return Hex(key);
  switch (parts->kind) {
    case storage::CounterKeyParts::Kind::kScheduled:
      return absl::StrCat("scheduled/", parts->topic);
    case storage::CounterKeyParts::Kind::kMessages:
      return absl::StrCat("messages/", parts->topic);
    case storage::CounterKeyParts::Kind::kReady:
      return absl::StrCat("ready/", parts->topic, "/", parts->group);
  }
  return Hex(key);
}

// The name before the first 0 byte of `key`, and the rest after it.
std::pair<std::string, std::string_view> SplitName(std::string_view key) {
  const size_t end = key.find('\0');
  if (end == std::string_view::npos) return {std::string(key), ""};
  return {std::string(key.substr(0, end)), key.substr(end + 1)};
}

// Checks every counter against a count of the keys of its table, read
// raw from the counters table and through lifecycle::ReadCounts:
//   scheduled/<topic>        schedule keys whose value is the topic
//   messages/<topic>         messages records of the topic, and also
//                            topic_due keys of the topic
//   ready/<topic>/<group>    ready keys under the topic and group
void CheckCounters(storage::MessageStore& store, const AllTables& stored,
                   std::vector<std::string>& problems) {
  std::map<std::string, int64_t> scheduled, messages, topic_due;
  std::map<std::pair<std::string, std::string>, int64_t> ready;
  for (const auto& [key, topic] : At(stored, Table::kSchedule)) {
    ++scheduled[topic];
  }
  for (const auto& [key, value] : At(stored, Table::kMessages)) {
    storage::MessageRecord record;
    if (!record.ParseFromString(value)) {
      problems.push_back(absl::StrCat(Describe(Table::kMessages, key),
                                      " holds no MessageRecord"));
      continue;
    }
    ++messages[record.topic()];
  }
  for (const auto& [key, id] : At(stored, Table::kTopicDue)) {
    ++topic_due[SplitName(key).first];
  }
  for (const auto& [key, attempt] : At(stored, Table::kReady)) {
    auto [topic, rest] = SplitName(key);
    ++ready[{topic, SplitName(rest).first}];
  }
  std::set<std::string> topics;
  for (const auto& [topic, n] : messages) topics.insert(topic);
  for (const auto& [topic, n] : topic_due) topics.insert(topic);
  for (const std::string& topic : topics) {
    if (messages[topic] != topic_due[topic]) {
      problems.push_back(absl::StrCat("topic ", topic, " has ", messages[topic],
                                      " messages records but ",
                                      topic_due[topic], " topic_due keys"));
    }
  }

  // What each counter should read: the keys counted, where there are any.
  std::map<std::string, int64_t> want;
  std::map<std::string, lifecycle::TopicCounts> want_counts;
  for (const auto& [topic, n] : scheduled) {
    want[storage::ScheduledCounter(topic)] = n;
    want_counts[topic].scheduled = n;
  }
  for (const auto& [topic, n] : messages) {
    if (n == 0) continue;
    want[storage::MessagesCounter(topic)] = n;
    want_counts[topic].messages = n;
  }
  for (const auto& [place, n] : ready) {
    want[storage::ReadyCounter(place.first, place.second)] = n;
    want_counts[place.first].ready[place.second] = n;
  }

  // Raw: every key of the counters table, 0 where nothing is counted.
  const Contents& counters = At(stored, Table::kCounters);
  for (const auto& [key, value] : counters) {
    if (!storage::DecodeCounterKey(key).has_value()) {
      problems.push_back(absl::StrCat(Describe(Table::kCounters, key),
                                      " is no counter's key"));
      continue;
    }
    if (value.size() != 8) {
      problems.push_back(absl::StrCat("counter ", CounterName(key), " holds ",
                                      value.size(), " bytes"));
      continue;
    }
    auto it = want.find(key);
    const int64_t expected = it == want.end() ? 0 : it->second;
    const int64_t got = storage::DecodeCounter(value);
    if (got != expected) {
      problems.push_back(absl::StrCat("counter ", CounterName(key), " is ", got,
                                      ", but its table holds ", expected,
                                      " keys"));
    }
  }
  for (const auto& [key, n] : want) {
    if (!counters.contains(key)) {
      problems.push_back(absl::StrCat("counter ", CounterName(key),
                                      " is absent, but its table holds ", n,
                                      " keys"));
    }
  }

  // Through the reader the broker uses.
  const std::map<std::string, lifecycle::TopicCounts> got_counts =
      lifecycle::ReadCounts(store);
  std::set<std::string> count_topics;
  for (const auto& [topic, c] : got_counts) count_topics.insert(topic);
  for (const auto& [topic, c] : want_counts) count_topics.insert(topic);
  for (const std::string& topic : count_topics) {
    const lifecycle::TopicCounts empty;
    auto g = got_counts.find(topic);
    auto w = want_counts.find(topic);
    const lifecycle::TopicCounts& got =
        g == got_counts.end() ? empty : g->second;
    const lifecycle::TopicCounts& expected =
        w == want_counts.end() ? empty : w->second;
    if (got.scheduled != expected.scheduled ||
        got.messages != expected.messages || got.ready != expected.ready) {
      problems.push_back(absl::StrCat(
          "ReadCounts of ", topic, ": scheduled ", got.scheduled, " messages ",
          got.messages, " ready {",
          absl::StrJoin(got.ready, ", ", absl::PairFormatter("=")),
          "}; the tables hold scheduled ", expected.scheduled, " messages ",
          expected.messages, " ready {",
          absl::StrJoin(expected.ready, ", ", absl::PairFormatter("=")), "}"));
    }
  }
}

// Checks the schedule counts against the schedule keys: every key of the
// schedule_counts table holds the number of schedule keys of its topic due
// in its minute, hour or day (0 where none is), every bucket that holds
// one has a key, and lifecycle::ReadScheduleCounts of each topic by the
// hour over the model's whole range adds up the same.
void CheckScheduleCounts(storage::MessageStore& store, const AllTables& stored,
                         std::vector<std::string>& problems) {
  constexpr std::array<std::pair<storage::Granularity, int64_t>, 3> kLevels = {
      {{storage::Granularity::kMinute, 60'000},
       {storage::Granularity::kHour, 3'600'000},
       {storage::Granularity::kDay, 86'400'000}}};
  std::map<std::string, int64_t> want;  // By schedule_counts key.
  std::map<std::string, std::map<int64_t, int64_t>> by_hour;  // Topic, hour.
  for (const auto& [key, topic] : At(stored, Table::kSchedule)) {
    const std::optional<DueKey> due = storage::DecodeScheduleKey(key);
    if (!due.has_value()) continue;
    for (const auto& [granularity, length] : kLevels) {
      ++want[storage::ScheduleCountKey(topic, granularity,
                                       due->deliver_at_ms / length * length)];
    }
    ++by_hour[topic][due->deliver_at_ms / 3'600'000 * 3'600'000];
  }
  const Contents& counts = At(stored, Table::kScheduleCounts);
  for (const auto& [key, value] : counts) {
    auto it = want.find(key);
    const int64_t expected = it == want.end() ? 0 : it->second;
    if (storage::DecodeCounter(value) != expected) {
      problems.push_back(absl::StrCat("schedule count ", Hex(key), " is ",
                                      storage::DecodeCounter(value),
                                      ", but the schedule holds ", expected));
    }
  }
  for (const auto& [key, n] : want) {
    if (!counts.contains(key)) {
      problems.push_back(absl::StrCat("schedule count ", Hex(key),
                                      " is absent, but the schedule holds ",
                                      n));
    }
  }
  for (const auto& [topic, hours] : by_hour) {
    const int64_t first = hours.begin()->first;
    const size_t n =
        static_cast<size_t>((hours.rbegin()->first - first) / 3'600'000 + 1);
    absl::StatusOr<std::vector<uint64_t>> read =
        lifecycle::ReadScheduleCounts(store, topic, {first, 3'600'000, n});
    if (!read.ok()) {
      problems.push_back(absl::StrCat("ReadScheduleCounts of ", topic, ": ",
                                      read.status().ToString()));
      continue;
    }
    std::vector<uint64_t> expected(n, 0);
    for (const auto& [hour, count] : hours) {
      expected[static_cast<size_t>((hour - first) / 3'600'000)] =
          static_cast<uint64_t>(count);
    }
    if (*read != expected) {
      problems.push_back(
          absl::StrCat("ReadScheduleCounts of ", topic,
                       " by the hour: ", absl::StrJoin(*read, ","),
                       "; the schedule holds ", absl::StrJoin(expected, ",")));
    }
  }
}

// ---- The driver: random legal transitions, applied to the model and
// appended to a Changes.

class Driver {
 public:
  explicit Driver(uint64_t seed) : rng_(seed) {}

  enum class Kind {
    kPublish,
    kCancel,
    kReschedule,
    kComeDue,
    kRegisterGroup,
    kDeliver,
    kRedeliver,
    kNack,
    kAck,
    kDeadLetter,
    kExpire,
    kPurge,
    kRedrive,
    kDeleteGroup,
    kMoveCursor,
    kReserve,
  };

  Model& model() { return model_; }
  void AdvanceTime() { now_ += Uniform(0, 40); }
  // Descriptions of the transitions of the current step.
  std::vector<std::string>& done() { return done_; }

  int64_t Uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  bool OneIn(int n) { return Uniform(1, n) == 1; }
  template <typename T>
  const T& Pick(const std::vector<T>& v) {
    return v[static_cast<size_t>(
        Uniform(0, static_cast<int64_t>(v.size()) - 1))];
  }

  // Appends one random legal transition to `changes` and applies it to the
  // model. Returns false if the transition of the kind drawn has no legal
  // instance now.
  bool RandomTransition(Changes& changes) {
    const bool crowded = model_.messages.size() >= 40;
    const std::vector<std::pair<Kind, int>> weights = {
        {Kind::kPublish, crowded ? 4 : 24},
        {Kind::kCancel, 3},
        {Kind::kReschedule, 4},
        {Kind::kComeDue, 18},
        {Kind::kRegisterGroup, 3},
        {Kind::kDeliver, 18},
        {Kind::kRedeliver, 5},
        {Kind::kNack, 5},
        {Kind::kAck, 14},
        {Kind::kDeadLetter, 4},
        {Kind::kExpire, 4},
        {Kind::kPurge, 2},
        {Kind::kRedrive, 3},
        {Kind::kDeleteGroup, 2},
        {Kind::kMoveCursor, 3},
        {Kind::kReserve, 3},
    };
    int total = 0;
    for (const auto& [kind, weight] : weights) total += weight;
    int draw = static_cast<int>(Uniform(0, total - 1));
    Kind kind = weights.front().first;
    for (const auto& [k, weight] : weights) {
      if (draw < weight) {
        kind = k;
        break;
      }
      draw -= weight;
    }
    switch (kind) {
      case Kind::kPublish:
        return Publish(changes);
      case Kind::kCancel:
        return Cancel(changes);
      case Kind::kReschedule:
        return Reschedule(changes);
      case Kind::kComeDue:
        return ComeDue(changes);
      case Kind::kRegisterGroup:
        return RegisterGroup(changes);
      case Kind::kDeliver:
        return Deliver(changes);
      case Kind::kRedeliver:
        return Redeliver(changes);
      case Kind::kNack:
        return Nack(changes);
      case Kind::kAck:
        return Ack(changes, /*dead_letter=*/false);
      case Kind::kDeadLetter:
        return Ack(changes, /*dead_letter=*/true);
      case Kind::kExpire:
        return Expire(changes);
      case Kind::kPurge:
        return Purge(changes);
      case Kind::kRedrive:
        return Redrive(changes);
      case Kind::kDeleteGroup:
        return DeleteGroup(changes);
      case Kind::kMoveCursor:
        return MoveCursor(changes);
      case Kind::kReserve:
        return Reserve(changes);
    }
    return false;
  }

  // Checks the reads of lifecycle_reads.h against the model, on a few
  // random questions.
  void CheckReads(storage::MessageStore& store,
                  std::vector<std::string>& problems);

 private:
  static constexpr std::array<std::string_view, 3> kTopics = {"t", "t2", "u"};
  static constexpr std::array<std::string_view, 3> kGroups = {"g", "g2", "h"};
  // Ids a producer may choose; "hg-short" looks like, but is not, of the
  // form the broker assigns.
  static constexpr std::array<std::string_view, 6> kProducerIds = {
      "p0", "p1", "p2", "p3", "p4", "hg-short"};

  template <size_t N>
  std::string PickName(const std::array<std::string_view, N>& names) {
    return std::string(names[static_cast<size_t>(Uniform(0, N - 1))]);
  }

  // Every topic the model knows of, and one it does not.
  std::vector<std::string> AllTopics() const {
    std::set<std::string> topics = {"t.d", "t2.dlq"};
    for (std::string_view t : kTopics) topics.emplace(t);
    for (const auto& [sequence, m] : model_.messages) topics.insert(m.topic());
    for (const auto& [topic, groups] : model_.groups) topics.insert(topic);
    return {topics.begin(), topics.end()};
  }

  // The messages `keep` accepts.
  template <typename Keep>
  std::vector<ModelMessage*> Messages(Keep keep) {
    std::vector<ModelMessage*> out;
    for (auto& [sequence, m] : model_.messages) {
      if (keep(m)) out.push_back(&m);
    }
    return out;
  }

  ModelGroup* FindGroup(const std::string& topic, const std::string& name) {
    auto t = model_.groups.find(topic);
    if (t == model_.groups.end()) return nullptr;
    auto g = t->second.find(name);
    return g == t->second.end() ? nullptr : &g->second;
  }

  // A due time near now: often equal to others', sometimes past.
  int64_t RandomDue() {
    switch (Uniform(0, 3)) {
      case 0:
        return now_ + Uniform(-50, 0);
      case 1:
        return now_ - now_ % 100 + 100 * Uniform(0, 3);
      default:
        return now_ + Uniform(0, 2000);
    }
  }

  // Publishes `record` under the next sequence, due at its deliver_at_ms.
  void PublishRecord(Changes& changes, storage::MessageRecord record) {
    const DueKey key{record.deliver_at_ms(), model_.next_sequence++};
    lifecycle::Publish(changes, record, key);
    done_.push_back(absl::StrCat("Publish ", record.topic(), "/", record.id(),
                                 " at ", Show(key)));
    ModelMessage& m = model_.messages[key.sequence];
    m.sequence = key.sequence;
    m.record = std::move(record);
  }

  // The message leaves the model (its keys the store).
  void Forget(const ModelMessage& m) {
    gone_.push_back({m.topic(), m.id(), m.key()});
    if (gone_.size() > 200) {
      gone_[static_cast<size_t>(Uniform(0, 199))] = gone_.back();
      gone_.pop_back();
    }
    model_.messages.erase(m.sequence);
  }

  // Whether a publish may take a sequence: publishers use reserved ones
  // only, so no run reuses one.
  bool HaveSequence() const {
    return model_.sequence_reserved.has_value() &&
           model_.next_sequence < *model_.sequence_reserved;
  }

  bool Publish(Changes& changes) {
    if (!HaveSequence()) return false;
    storage::MessageRecord record;
    record.set_topic(PickName(kTopics));
    if (OneIn(2)) {
      const std::string id = PickName(kProducerIds);
      if (model_.Find(record.topic(), id) != nullptr) {
        return false;  // A duplicate: the publisher writes nothing.
      }
      record.set_id(id);
    } else {
      record.set_id(storage::AssignedId(model_.next_sequence));
    }
    record.set_payload(absl::StrCat("payload ", model_.next_sequence));
    if (OneIn(3)) (*record.mutable_headers())["k"] = "v";
    record.set_deliver_at_ms(RandomDue());
    record.set_published_at_ms(now_);
    PublishRecord(changes, std::move(record));
    return true;
  }

  bool Cancel(Changes& changes) {
    std::vector<ModelMessage*> scheduled =
        Messages([](const ModelMessage& m) { return m.scheduled; });
    if (scheduled.empty()) return false;
    const ModelMessage& m = *Pick(scheduled);
    lifecycle::Cancel(changes, m.topic(), m.key(), m.id());
    done_.push_back(absl::StrCat("Cancel ", m.topic(), " ", Show(m.key())));
    Forget(m);
    return true;
  }

  bool Reschedule(Changes& changes) {
    std::vector<ModelMessage*> scheduled =
        Messages([](const ModelMessage& m) { return m.scheduled; });
    if (scheduled.empty()) return false;
    ModelMessage& m = *Pick(scheduled);
    const DueKey old_key = m.key();
    // Sometimes to the same time, which the engine skips but the
    // transition allows.
    const int64_t due = OneIn(10) ? old_key.deliver_at_ms : RandomDue();
    m.record.set_deliver_at_ms(due);
    lifecycle::Reschedule(changes, m.record, old_key, m.key());
    done_.push_back(absl::StrCat("Reschedule ", m.topic(), " ", Show(old_key),
                                 " to ", Show(m.key())));
    return true;
  }

  bool ComeDue(Changes& changes) {
    std::vector<ModelMessage*> scheduled =
        Messages([](const ModelMessage& m) { return m.scheduled; });
    if (scheduled.empty()) return false;
    // Mostly the earliest, as the loader goes; sometimes any.
    ModelMessage* m = Pick(scheduled);
    if (!OneIn(4)) {
      m = *std::min_element(scheduled.begin(), scheduled.end(),
                            [](const ModelMessage* a, const ModelMessage* b) {
                              return a->key() < b->key();
                            });
    }
    std::vector<std::string> names;
    if (auto t = model_.groups.find(m->topic()); t != model_.groups.end()) {
      for (const auto& [name, group] : t->second) names.push_back(name);
    }
    std::vector<std::string_view> views(names.begin(), names.end());
    lifecycle::ComeDue(changes, m->topic(), m->key(), views);
    done_.push_back(absl::StrCat("ComeDue ", m->topic(), " ", Show(m->key()),
                                 " into {", Quoted(names), "}"));
    m->scheduled = false;
    if (names.empty()) {
      m->ready.insert("");  // The waiting area.
    } else {
      m->ready.insert(names.begin(), names.end());
    }
    return true;
  }

  bool RegisterGroup(Changes& changes) {
    // The plain topics, and their dead-letter topics.
    std::string topic = PickName(kTopics);
    if (OneIn(3)) absl::StrAppend(&topic, ".dlq");
    const std::string name = PickName(kGroups);
    if (FindGroup(topic, name) != nullptr) return false;
    ModelGroup group;
    group.record.set_created_at_ms(now_);
    // The topic's first group takes its waiting area.
    auto t = model_.groups.find(topic);
    group.record.set_owns_waiting_area(t == model_.groups.end() ||
                                       t->second.empty());
    lifecycle::RegisterGroup(changes, topic, name, group.record);
    done_.push_back(absl::StrCat(
        "RegisterGroup ", topic, "/", name,
        group.record.owns_waiting_area() ? " (owns the waiting area)" : ""));
    model_.groups[topic][name] = std::move(group);
    return true;
  }

  // The group that takes a ready entry stored under `under`, or "" if none
  // may (no owner of the waiting area, or a group being deleted).
  std::string Taker(const ModelMessage& m, const std::string& under) {
    std::string group = under;
    if (under.empty()) {
      const std::string* owner = model_.WaitingAreaOwner(m.topic());
      if (owner == nullptr) return "";
      group = *owner;
    }
    const ModelGroup* g = FindGroup(m.topic(), group);
    if (g == nullptr || g->deleting) return "";
    return group;
  }

  bool Deliver(Changes& changes) {
    struct Candidate {
      ModelMessage* m;
      std::string under;
      std::string group;
    };
    std::vector<Candidate> candidates;
    for (auto& [sequence, m] : model_.messages) {
      for (const std::string& under : m.ready) {
        std::string group = Taker(m, under);
        if (!group.empty()) candidates.push_back({&m, under, group});
      }
    }
    if (candidates.empty()) return false;
    const Candidate& c = Pick(candidates);
    ModelMessage& m = *c.m;
    storage::InFlightRecord record;
    record.set_attempt(1);
    record.set_deliver_at_ms(m.record.deliver_at_ms());
    record.set_redeliver_at_ms(now_ + kAckTimeoutMs);
    record.set_waiting(false);
    lifecycle::Deliver(changes, m.topic(), c.group,
                       ReadyPlace{c.under, m.key()}, record);
    done_.push_back(absl::StrCat("Deliver ", m.topic(), "/", c.group, " ",
                                 Show(m.key()), " from \"", c.under, "\""));
    m.ready.erase(c.under);
    m.in_flight[c.group] = record;
    return true;
  }

  struct InFlightChoice {
    ModelMessage* m = nullptr;
    std::string group;
  };
  // A random in-flight entry of a group not being deleted, that a consumer
  // holds (`held`) or that waits out a nack's delay (`waiting`).
  std::optional<InFlightChoice> PickInFlight(bool held, bool waiting) {
    std::vector<InFlightChoice> candidates;
    for (auto& [sequence, m] : model_.messages) {
      for (const auto& [group, entry] : m.in_flight) {
        const ModelGroup* g = FindGroup(m.topic(), group);
        if (g == nullptr || g->deleting) continue;
        if (entry.waiting() ? waiting : held) {
          candidates.push_back({&m, group});
        }
      }
    }
    if (candidates.empty()) return std::nullopt;
    return Pick(candidates);
  }

  // After an ack timeout (held) or a nack's delay (waiting), or a restart.
  bool Redeliver(Changes& changes) {
    std::optional<InFlightChoice> c = PickInFlight(true, true);
    if (!c.has_value()) return false;
    ModelMessage& m = *c->m;
    storage::InFlightRecord& entry = m.in_flight[c->group];
    storage::InFlightRecord record;
    record.set_attempt(entry.attempt() + 1);
    record.set_deliver_at_ms(m.record.deliver_at_ms());
    record.set_redeliver_at_ms(now_ + kAckTimeoutMs);
    record.set_waiting(false);
    lifecycle::Redeliver(changes, m.topic(), c->group, m.sequence, record);
    done_.push_back(absl::StrCat("Redeliver ", m.topic(), "/", c->group, " ",
                                 Show(m.key()), " attempt ", record.attempt()));
    entry = record;
    return true;
  }

  bool Nack(Changes& changes) {
    std::optional<InFlightChoice> c = PickInFlight(true, false);
    if (!c.has_value()) return false;
    ModelMessage& m = *c->m;
    storage::InFlightRecord& entry = m.in_flight[c->group];
    storage::InFlightRecord record = entry;
    record.set_waiting(true);
    record.set_redeliver_at_ms(now_ + Uniform(1, 5000));
    lifecycle::Nack(changes, m.topic(), c->group, m.sequence, record);
    done_.push_back(
        absl::StrCat("Nack ", m.topic(), "/", c->group, " ", Show(m.key())));
    entry = record;
    return true;
  }

  // A delivery or redelivery that found the message past its deadline:
  // the ready entry it took, or the in-flight entry (held or waiting),
  // leaves the group, and the message with it if no other group holds it.
  bool Expire(Changes& changes) {
    ModelMessage* m = nullptr;
    std::string group;
    std::string under;  // From ready: where the entry is stored.
    std::optional<ReadyPlace> from;
    if (OneIn(2)) {
      std::vector<std::pair<ModelMessage*, std::string>> ready;
      for (auto& [sequence, message] : model_.messages) {
        for (const std::string& stored_under : message.ready) {
          if (!Taker(message, stored_under).empty()) {
            ready.push_back({&message, stored_under});
          }
        }
      }
      if (ready.empty()) return false;
      const std::pair<ModelMessage*, std::string>& picked = Pick(ready);
      m = picked.first;
      under = picked.second;
      group = Taker(*m, under);
      m->ready.erase(under);
      from = ReadyPlace{under, m->key()};
    } else {
      std::optional<InFlightChoice> c = PickInFlight(true, true);
      if (!c.has_value()) return false;
      m = c->m;
      group = c->group;
      m->in_flight.erase(group);
    }
    const bool last_holder = !m->HeldBesides(group);
    lifecycle::Expire(changes, m->topic(), group, m->key(), m->id(),
                      from ? &*from : nullptr, last_holder);
    done_.push_back(absl::StrCat("Expire ", m->topic(), "/", group, " ",
                                 Show(m->key()), from ? " from ready" : "",
                                 last_holder ? " (last holder)" : ""));
    if (last_holder) Forget(*m);
    return true;
  }

  // An ack of a delivery a consumer holds; or a dead letter of any
  // in-flight entry (due again past --max_attempts), with the letter's
  // publish to <topic>.dlq in the same write, as the dispatcher does.
  bool Ack(Changes& changes, bool dead_letter) {
    if (dead_letter && !HaveSequence()) return false;
    std::optional<InFlightChoice> c = PickInFlight(true, dead_letter);
    if (!c.has_value()) return false;
    ModelMessage& m = *c->m;
    const std::string group = c->group;
    const storage::InFlightRecord entry = m.in_flight[group];
    const bool last_holder = !m.HeldBesides(group);
    const storage::MessageRecord original = m.record;
    if (dead_letter) {
      lifecycle::DeadLetter(changes, m.topic(), group, m.key(), m.id(),
                            last_holder);
    } else {
      lifecycle::Ack(changes, m.topic(), group, m.key(), m.id(), last_holder);
    }
    done_.push_back(absl::StrCat(dead_letter ? "DeadLetter " : "Ack ",
                                 m.topic(), "/", group, " ", Show(m.key()),
                                 last_holder ? " (last holder)" : ""));
    m.in_flight.erase(group);
    if (last_holder) Forget(m);
    if (!dead_letter) return true;

    storage::MessageRecord letter;
    letter.set_topic(absl::StrCat(original.topic(), ".dlq"));
    letter.set_id(original.id());
    // Another group's letter of the message is there already: a duplicate.
    if (model_.Find(letter.topic(), letter.id()) != nullptr) return true;
    letter.set_payload(original.payload());
    *letter.mutable_headers() = original.headers();
    letter.set_deliver_at_ms(now_);
    letter.set_published_at_ms(now_);
    letter.set_dead_letter_attempts(original.dead_letter_attempts() +
                                    entry.attempt());
    letter.set_dead_letter_group(group);
    PublishRecord(changes, std::move(letter));
    return true;
  }

  // Messages of `topic` among `touched` that no group holds any more go
  // (DeleteUnheld), in due order.
  void DeleteUnheld(Changes& changes, std::vector<DueKey> touched) {
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (const DueKey& key : touched) {
      const ModelMessage& m = model_.messages.at(key.sequence);
      if (!m.ready.empty() || !m.in_flight.empty()) continue;
      lifecycle::DeleteUnheld(changes, m.topic(), key, m.id());
      done_.push_back(absl::StrCat("DeleteUnheld ", m.topic(), " ", Show(key)));
      Forget(m);
    }
  }

  // One chunk of a purge of a topic: some of its ready entries, then the
  // messages left unheld; or some of its scheduled messages (cancelled).
  bool Purge(Changes& changes) {
    const std::string topic = Pick(AllTopics());
    const size_t chunk = static_cast<size_t>(Uniform(1, 8));
    if (OneIn(3)) {
      size_t n = 0;
      for (const ModelMessage* m : model_.InDueOrder(topic)) {
        if (!m->scheduled) continue;
        lifecycle::Cancel(changes, topic, m->key(), m->id());
        done_.push_back(
            absl::StrCat("Cancel (purge) ", topic, " ", Show(m->key())));
        Forget(*m);
        if (++n == chunk) break;
      }
      return n > 0;
    }
    std::vector<std::pair<std::string, DueKey>> entries;
    for (const ModelMessage* m : model_.InDueOrder(topic)) {
      for (const std::string& under : m->ready) {
        entries.emplace_back(under, m->key());
      }
    }
    if (entries.empty()) return false;
    std::shuffle(entries.begin(), entries.end(), rng_);
    entries.resize(std::min(entries.size(), chunk));
    std::vector<DueKey> touched;
    for (const auto& [under, key] : entries) {
      lifecycle::PurgeReady(changes, topic, ReadyPlace{under, key});
      done_.push_back(
          absl::StrCat("PurgeReady ", topic, " \"", under, "\" ", Show(key)));
      model_.messages.at(key.sequence).ready.erase(under);
      touched.push_back(key);
    }
    DeleteUnheld(changes, std::move(touched));
    return true;
  }

  // A dead letter not scheduled, whose id is not pending in the original
  // topic, goes back there (Publish) and leaves the dead-letter topic.
  bool Redrive(Changes& changes) {
    if (!HaveSequence()) return false;
    constexpr std::string_view kSuffix = ".dlq";
    std::vector<ModelMessage*> letters = Messages([&](const ModelMessage& m) {
      if (!m.topic().ends_with(kSuffix) || m.scheduled) return false;
      const std::string_view original = std::string_view(m.topic()).substr(
          0, m.topic().size() - kSuffix.size());
      return model_.Find(original, m.id()) == nullptr;
    });
    if (letters.empty()) return false;
    const ModelMessage& m = *Pick(letters);
    const std::string dead_topic = m.topic();
    storage::MessageRecord message;
    message.set_topic(dead_topic.substr(0, dead_topic.size() - kSuffix.size()));
    message.set_id(m.id());
    message.set_payload(m.record.payload());
    *message.mutable_headers() = m.record.headers();
    message.set_deliver_at_ms(now_);
    message.set_published_at_ms(now_);
    PublishRecord(changes, std::move(message));
    // Every group of the dead-letter topic, and the ready entries present.
    std::vector<std::string> groups;
    if (auto t = model_.groups.find(dead_topic); t != model_.groups.end()) {
      for (const auto& [name, group] : t->second) groups.push_back(name);
    }
    const std::vector<std::string> ready(m.ready.begin(), m.ready.end());
    std::vector<std::string_view> group_views(groups.begin(), groups.end());
    std::vector<std::string_view> ready_views(ready.begin(), ready.end());
    lifecycle::Redrive(changes, dead_topic, m.key(), m.id(), ready_views,
                       group_views);
    done_.push_back(absl::StrCat("Redrive ", dead_topic, " ", Show(m.key()),
                                 " ready under {", Quoted(ready), "} groups {",
                                 Quoted(groups), "}"));
    Forget(m);
    return true;
  }

  // One chunk of a group's deletion: some of its in-flight entries, then
  // ready ones (its own, and the waiting area's if it owns it), then the
  // messages left unheld; once it has none, it is unregistered. A
  // deletion begun goes on; a new one begins now and then.
  bool DeleteGroup(Changes& changes) {
    std::vector<std::pair<std::string, std::string>> candidates;
    for (const bool deleting : {true, false}) {
      for (auto& [topic, names] : model_.groups) {
        for (auto& [name, group] : names) {
          if (group.deleting == deleting) candidates.emplace_back(topic, name);
        }
      }
      if (!candidates.empty() || !OneIn(4)) break;
    }
    if (candidates.empty()) return false;
    const auto [topic, name] = Pick(candidates);
    ModelGroup& group = model_.groups[topic][name];
    group.deleting = true;
    const size_t chunk = static_cast<size_t>(Uniform(1, 8));
    std::vector<DueKey> touched;
    for (auto& [sequence, m] : model_.messages) {
      if (touched.size() == chunk) break;
      if (m.topic() != topic || !m.in_flight.contains(name)) continue;
      lifecycle::DropInFlight(changes, topic, name, sequence);
      done_.push_back(
          absl::StrCat("DropInFlight ", topic, "/", name, " ", Show(m.key())));
      m.in_flight.erase(name);
      touched.push_back(m.key());
    }
    std::vector<std::string> queues = {name};
    if (group.record.owns_waiting_area()) queues.push_back("");
    for (const std::string& under : queues) {
      for (const ModelMessage* in_order : model_.InDueOrder(topic)) {
        if (touched.size() == chunk) break;
        ModelMessage& m = model_.messages.at(in_order->sequence);
        if (!m.ready.contains(under)) continue;
        lifecycle::PurgeReady(changes, topic, ReadyPlace{under, m.key()});
        done_.push_back(absl::StrCat("PurgeReady ", topic, " \"", under, "\" ",
                                     Show(m.key())));
        m.ready.erase(under);
        touched.push_back(m.key());
      }
    }
    if (!touched.empty()) {
      DeleteUnheld(changes, std::move(touched));
      return true;
    }
    lifecycle::UnregisterGroup(changes, topic, name);
    done_.push_back(absl::StrCat("UnregisterGroup ", topic, "/", name));
    model_.groups[topic].erase(name);
    if (model_.groups[topic].empty()) model_.groups.erase(topic);
    return true;
  }

  // The loader cursor moves to the earliest scheduled message, or to a key
  // before it (never past a message not yet come due).
  bool MoveCursor(Changes& changes) {
    std::optional<DueKey> least;
    for (const auto& [sequence, m] : model_.messages) {
      if (m.scheduled && (!least.has_value() || m.key() < *least)) {
        least = m.key();
      }
    }
    DueKey cursor = least.value_or(DueKey{now_, model_.next_sequence});
    if (OneIn(3)) {
      cursor.deliver_at_ms =
          std::max<int64_t>(0, cursor.deliver_at_ms - Uniform(1, 100));
    }
    lifecycle::MoveLoaderCursor(changes, cursor);
    done_.push_back(absl::StrCat("MoveLoaderCursor ", Show(cursor)));
    model_.loader_cursor = cursor;
    return true;
  }

  bool Reserve(Changes& changes) {
    if (model_.sequence_reserved.has_value() &&
        *model_.sequence_reserved > model_.next_sequence + 8) {
      return false;  // The publisher reserves when a block runs low.
    }
    const uint64_t until =
        std::max(model_.next_sequence, model_.sequence_reserved.value_or(0)) +
        static_cast<uint64_t>(Uniform(1, 40));
    lifecycle::ReserveSequences(changes, until);
    done_.push_back(absl::StrCat("ReserveSequences until ", until));
    model_.sequence_reserved = until;
    return true;
  }

  std::mt19937_64 rng_;
  Model model_;
  int64_t now_ = 1'000'000;
  struct Gone {
    std::string topic;
    std::string id;
    DueKey key;
  };
  std::vector<Gone> gone_;  // Some messages that were deleted.
  std::vector<std::string> done_;
};

void Driver::CheckReads(storage::MessageStore& store,
                        std::vector<std::string>& problems) {
  const std::vector<std::string> topics = AllTopics();
  std::vector<const ModelMessage*> live;
  for (const auto& [sequence, m] : model_.messages) live.push_back(&m);
  auto fail = [&](const absl::Status& s, std::string_view what) {
    problems.push_back(
        absl::StrCat(std::string(what), " failed: ", s.ToString()));
  };

  // FindId: a pending message's id, a gone one's, an assigned id of any
  // sequence in any topic, a producer's id in any topic.
  std::vector<std::pair<std::string, std::string>> ids;
  if (!live.empty()) {
    const ModelMessage* m = Pick(live);
    ids.emplace_back(m->topic(), m->id());
  }
  if (!gone_.empty()) {
    const Gone& g = Pick(gone_);
    ids.emplace_back(g.topic, g.id);
  }
  ids.emplace_back(Pick(topics), storage::AssignedId(static_cast<uint64_t>(
                                     Uniform(1, model_.next_sequence))));
  ids.emplace_back(Pick(topics), PickName(kProducerIds));
  for (const auto& [topic, id] : ids) {
    absl::StatusOr<std::optional<DueKey>> got =
        lifecycle::FindId(store, topic, id);
    if (!got.ok()) {
      fail(got.status(), "FindId");
      continue;
    }
    const ModelMessage* m = model_.Find(topic, id);
    const std::optional<DueKey> want =
        m == nullptr ? std::nullopt : std::optional(m->key());
    if (*got != want) {
      problems.push_back(absl::StrCat("FindId(", topic, ", ", id, ") is ",
                                      Show(*got), ", the model says ",
                                      Show(want)));
    }
  }

  // A key to ask about: a pending message's or a gone one's.
  std::optional<DueKey> key;
  if (!live.empty() && (gone_.empty() || OneIn(2))) {
    key = Pick(live)->key();
  } else if (!gone_.empty()) {
    key = Pick(gone_).key;
  }
  if (key.has_value()) {
    auto it = model_.messages.find(key->sequence);
    const ModelMessage* m = it == model_.messages.end() ? nullptr : &it->second;
    // IsScheduled.
    absl::StatusOr<bool> scheduled = lifecycle::IsScheduled(store, *key);
    if (!scheduled.ok()) {
      fail(scheduled.status(), "IsScheduled");
    } else if (*scheduled != (m != nullptr && m->scheduled)) {
      problems.push_back(
          absl::StrCat("IsScheduled(", Show(*key), ") is ", *scheduled));
    }
    // ReadMessage.
    absl::StatusOr<std::optional<storage::MessageRecord>> record =
        lifecycle::ReadMessage(store, key->sequence);
    if (!record.ok()) {
      fail(record.status(), "ReadMessage");
    } else if (record->has_value() != (m != nullptr) ||
               (m != nullptr && (*record)->SerializeAsString() !=
                                    m->record.SerializeAsString())) {
      problems.push_back(
          absl::StrCat("ReadMessage(", key->sequence, ") disagrees"));
    }
    // IdAt, in the message's topic or another.
    const std::string topic =
        m != nullptr && !OneIn(4) ? m->topic() : Pick(topics);
    absl::StatusOr<std::optional<std::string>> id =
        lifecycle::IdAt(store, topic, *key);
    const std::optional<std::string> want_id =
        m != nullptr && m->topic() == topic ? std::optional(m->id())
                                            : std::nullopt;
    if (!id.ok()) {
      fail(id.status(), "IdAt");
    } else if (*id != want_id) {
      problems.push_back(absl::StrCat("IdAt(", topic, ", ", Show(*key), ") is ",
                                      id->value_or("none"), ", the model says ",
                                      want_id.value_or("none")));
    }
    // ReadReady and ReadInFlight, under names the topic has or not.
    std::vector<std::string> names = {"", PickName(kGroups)};
    if (m != nullptr) {
      names.insert(names.end(), m->ready.begin(), m->ready.end());
      for (const auto& [group, entry] : m->in_flight) names.push_back(group);
    }
    const std::string name = Pick(names);
    absl::StatusOr<std::optional<uint32_t>> ready =
        lifecycle::ReadReady(store, topic, ReadyPlace{name, *key});
    const bool want_ready =
        m != nullptr && m->topic() == topic && m->ready.contains(name);
    if (!ready.ok()) {
      fail(ready.status(), "ReadReady");
    } else if (*ready !=
               (want_ready ? std::optional<uint32_t>(0) : std::nullopt)) {
      problems.push_back(absl::StrCat("ReadReady(", topic, ", \"", name, "\", ",
                                      Show(*key), ") disagrees"));
    }
    absl::StatusOr<std::optional<storage::InFlightRecord>> in_flight =
        lifecycle::ReadInFlight(store, topic, name, key->sequence);
    const storage::InFlightRecord* want_in_flight = nullptr;
    if (m != nullptr && m->topic() == topic) {
      if (auto e = m->in_flight.find(name); e != m->in_flight.end()) {
        want_in_flight = &e->second;
      }
    }
    if (!in_flight.ok()) {
      fail(in_flight.status(), "ReadInFlight");
    } else if (in_flight->has_value() != (want_in_flight != nullptr) ||
               (want_in_flight != nullptr &&
                (*in_flight)->SerializeAsString() !=
                    want_in_flight->SerializeAsString())) {
      problems.push_back(absl::StrCat("ReadInFlight(", topic, ", \"", name,
                                      "\", ", key->sequence, ") disagrees"));
    }
  }

  // ScanTopic from a random key, stopping after a random count: the
  // topic's messages in due order.
  {
    const std::string topic = Pick(topics);
    const std::vector<const ModelMessage*> all = model_.InDueOrder(topic);
    DueKey from{0, 0};
    if (!all.empty() && OneIn(2)) {
      from = Pick(all)->key();
      if (OneIn(2)) ++from.sequence;
    }
    const size_t limit =
        static_cast<size_t>(Uniform(1, static_cast<int64_t>(all.size()) + 1));
    std::vector<std::pair<DueKey, std::string>> want;
    for (const ModelMessage* m : all) {
      if (m->key() >= from && want.size() < limit) {
        want.emplace_back(m->key(), m->id());
      }
    }
    std::vector<std::pair<DueKey, std::string>> got;
    const absl::Status s = lifecycle::ScanTopic(
        store, topic, from, [&](const DueKey& due, std::string_view id) {
          got.emplace_back(due, std::string(id));
          return got.size() < limit;
        });
    if (!s.ok()) {
      fail(s, "ScanTopic");
    } else if (got != want) {
      auto show = [](const std::vector<std::pair<DueKey, std::string>>& v) {
        return absl::StrJoin(v, " ", [](std::string* out, const auto& e) {
          absl::StrAppend(out, Show(e.first), "=", e.second);
        });
      };
      problems.push_back(absl::StrCat("ScanTopic(", topic, ", ", Show(from),
                                      ") gives [", show(got), "], want [",
                                      show(want), "]"));
    }
  }

  // ScanReady and ScanInFlight of a random queue, in full.
  {
    const std::string topic = Pick(topics);
    const std::string name = OneIn(3) ? "" : PickName(kGroups);
    std::vector<DueKey> want_ready;
    std::vector<std::string> want_in_flight;
    for (const ModelMessage* m : model_.InDueOrder(topic)) {
      if (m->ready.contains(name)) want_ready.push_back(m->key());
    }
    for (const auto& [sequence, m] : model_.messages) {
      if (m.topic() != topic) continue;
      if (auto e = m.in_flight.find(name); e != m.in_flight.end()) {
        want_in_flight.push_back(
            absl::StrCat(sequence, ":", e->second.SerializeAsString()));
      }
    }
    std::vector<DueKey> got_ready;
    absl::Status s = lifecycle::ScanReady(
        store, topic, name, DueKey{0, 0}, [&](const DueKey& due, uint32_t a) {
          if (a != 0) {
            problems.push_back(
                absl::StrCat("ready entry ", Show(due), " has attempt ", a));
          }
          got_ready.push_back(due);
          return true;
        });
    if (!s.ok()) {
      fail(s, "ScanReady");
    } else if (got_ready != want_ready) {
      problems.push_back(
          absl::StrCat("ScanReady(", topic, ", \"", name, "\") disagrees"));
    }
    std::vector<std::string> got_in_flight;
    s = lifecycle::ScanInFlight(
        store, topic, name, [&](lifecycle::StoredInFlight&& e) {
          if (e.topic != topic || e.group != name) {
            problems.push_back("ScanInFlight left its topic and group");
          }
          got_in_flight.push_back(
              absl::StrCat(e.sequence, ":", e.record.SerializeAsString()));
          return true;
        });
    if (!s.ok()) {
      fail(s, "ScanInFlight");
    } else if (got_in_flight != want_in_flight) {
      problems.push_back(
          absl::StrCat("ScanInFlight(", topic, ", \"", name, "\") disagrees"));
    }
  }

  // ReadSchedule of a random range and limit.
  {
    std::vector<DueKey> scheduled;
    for (const auto& [sequence, m] : model_.messages) {
      if (m.scheduled) scheduled.push_back(m.key());
    }
    std::sort(scheduled.begin(), scheduled.end());
    DueKey from{now_ - Uniform(0, 500), 0};
    DueKey until{now_ + Uniform(0, 2500), 0};
    if (!scheduled.empty() && OneIn(2)) from = Pick(scheduled);
    const size_t limit = static_cast<size_t>(Uniform(0, 20));
    std::vector<std::string> want;
    for (const DueKey& k : scheduled) {
      if (k >= from && k < until && want.size() < limit) {
        want.push_back(
            absl::StrCat(Show(k), model_.messages.at(k.sequence).topic()));
      }
    }
    absl::StatusOr<std::vector<ScheduledEntry>> got =
        lifecycle::ReadSchedule(store, from, until, limit);
    if (!got.ok()) {
      fail(got.status(), "ReadSchedule");
    } else {
      std::vector<std::string> got_strings;
      for (const ScheduledEntry& e : *got) {
        got_strings.push_back(absl::StrCat(Show(e.key), e.topic));
      }
      if (got_strings != want) {
        problems.push_back(absl::StrCat("ReadSchedule(", Show(from), ", ",
                                        Show(until), ", ", limit,
                                        ") disagrees"));
      }
    }
  }

  // ReadGroups and ReadLoaderCursor.
  {
    std::vector<std::string> want;
    for (const auto& [topic, names] : model_.groups) {
      for (const auto& [name, group] : names) {
        want.push_back(absl::StrCat(topic, "/", name, ":",
                                    group.record.SerializeAsString()));
      }
    }
    absl::StatusOr<std::vector<lifecycle::StoredGroup>> got =
        lifecycle::ReadGroups(store);
    if (!got.ok()) {
      fail(got.status(), "ReadGroups");
    } else {
      std::vector<std::string> got_strings;
      for (const lifecycle::StoredGroup& g : *got) {
        got_strings.push_back(absl::StrCat(g.topic, "/", g.group, ":",
                                           g.record.SerializeAsString()));
      }
      if (got_strings != want) problems.push_back("ReadGroups disagrees");
    }
    absl::StatusOr<DueKey> cursor = lifecycle::ReadLoaderCursor(store);
    const DueKey want_cursor = model_.loader_cursor.value_or(DueKey{0, 0});
    if (!cursor.ok()) {
      fail(cursor.status(), "ReadLoaderCursor");
    } else if (*cursor != want_cursor) {
      problems.push_back(absl::StrCat("ReadLoaderCursor is ", Show(*cursor),
                                      ", the model says ", Show(want_cursor)));
    }
  }
}

// Each step writes one Changes of one to four random transitions (built in
// it directly, or in parts joined by Changes::Append) to the store, then
// compares every table with the model and every counter with the keys it
// counts, and asks a few lifecycle_reads questions. Now and then a
// "restart" checks ReadNextSequence and carries on from it, as a new run
// of the broker would. Set HOURGLASS_SEED to replay a run.
TEST(LifecycleRandomTest, CountersAndKeysMatchReferenceModel) {
  const uint64_t seed = testing::SeedFromEnvironment();
  std::printf("HOURGLASS_SEED=%llu\n", static_cast<unsigned long long>(seed));
  RecordProperty("seed", std::to_string(seed));
  Driver driver(seed);
  std::unique_ptr<storage::MessageStore> store = storage::MemoryStore::Open();
  constexpr int kSteps = 2500;
  std::map<std::string, int> transitions;  // By name, for the log.

  for (int step = 0; step < kSteps; ++step) {
    driver.AdvanceTime();
    driver.done().clear();
    Model& model = driver.model();
    if (driver.OneIn(100)) {
      // A restart: the next run continues after every stored message and
      // every reserved sequence.
      absl::StatusOr<uint64_t> next = lifecycle::ReadNextSequence(*store);
      ASSERT_TRUE(next.ok()) << next.status();
      ASSERT_EQ(*next, model.NextSequenceAfterRestart()) << "step " << step;
      ASSERT_GE(*next, model.next_sequence) << "step " << step;
      model.next_sequence = *next;
      continue;
    }
    Changes changes;
    changes.set_needs_sync(driver.OneIn(2));
    const bool needs_sync = changes.batch().needs_sync();
    const int count =
        driver.OneIn(2) ? 1 : static_cast<int>(driver.Uniform(2, 4));
    for (int i = 0; i < count; ++i) {
      if (driver.OneIn(2)) {
        while (!driver.RandomTransition(changes)) {
        }
      } else {
        // With the step's sync need: Append joins the two (either needs
        // it, the result does).
        Changes part;
        part.set_needs_sync(needs_sync);
        while (!driver.RandomTransition(part)) {
        }
        changes.Append(std::move(part));
      }
    }
    for (const std::string& d : driver.done()) {
      ++transitions[d.substr(0, d.find(' '))];
    }
    const std::string trace =
        absl::StrCat("step ", step, ": ", absl::StrJoin(driver.done(), "; "));
    storage::WriteBatch batch = changes.Take();
    ASSERT_TRUE(changes.empty()) << trace;
    ASSERT_EQ(changes.batch().needs_sync(), needs_sync) << trace;
    ASSERT_EQ(batch.needs_sync(), needs_sync) << trace;
    const absl::Status written = store->Write(batch);
    ASSERT_TRUE(written.ok()) << written << "\n" << trace;

    std::vector<std::string> problems;
    model.CheckInvariants(problems);
    const AllTables stored = ReadTables(*store);
    const AllTables want = model.Tables();
    for (int t = 0; t < storage::kNumTables; ++t) {
      const Table table = static_cast<Table>(t);
      if (storage::IsCounterTable(table)) continue;
      DiffTable(table, At(stored, table), At(want, table), problems);
    }
    CheckCounters(*store, stored, problems);
    CheckScheduleCounts(*store, stored, problems);
    driver.CheckReads(*store, problems);
    ASSERT_THAT(problems, IsEmpty()) << trace;
  }
  std::printf(
      "transitions: %s\n",
      absl::StrJoin(transitions, " ", absl::PairFormatter("=")).c_str());
}

}  // namespace
}  // namespace hourglass::broker
