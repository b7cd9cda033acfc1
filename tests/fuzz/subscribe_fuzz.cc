// Fuzzes consumers against the engine: an input is a sequence of
// operations (publish, open a consumer, ack, ack unknown ids, nack with a
// delay, disconnect, move the clock) run on the API the Subscribe stream
// uses (api/subscribe_stream.cc: Dispatcher::Subscribe, Ack, Nack,
// Written, Unsubscribe), on an in-memory store and a fake clock. Timer and
// dispatcher steps (Engine::Tick, Dispatcher::Step) run on this thread
// until neither has work at the clock's time, so each input replays
// exactly; only the commit queue has a thread, and every call that goes
// through it is waited for.
//
// Checked on every delivery: a consumer never holds more than its credit;
// nothing is delivered before its deliver_at (nor before a nack's delay
// ran out); a message is in flight at most once per group; a message acked
// by a group never comes to that group again; attempts count up by one;
// a message goes only to the groups registered when it came due (or, if
// there were none, to the topic's first group). Acks and nacks of ids not
// in flight on the consumer are counted and change nothing. At the end,
// every group is drained: each message reaches every group it should, and
// once all is acked the store holds no message, key or count.
//
// Small windows, chunks and horizons make the inputs reach the paths that
// a large backlog reaches in production: refills from disk, the loader,
// dispatch in chunks, dead letters.

#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "broker/dispatcher.h"
#include "broker/engine.h"
#include "storage/memory_store.h"
#include "storage/message_store.h"
#include "storage/records.pb.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/testing/fake_clock.h"

namespace hourglass::broker {
namespace {

using storage::Table;
using ConsumerId = Dispatcher::ConsumerId;

constexpr int64_t kStartMs = 1'795'305'600'000;  // 2026-11-22T00:00:00Z
constexpr char kTopic[] = "t";
constexpr char kDeadLetters[] = "t.dlq";
constexpr uint32_t kMaxAttempts = 3;
constexpr uint32_t kDefaultCredit = 3;
constexpr int64_t kDefaultAckTimeoutMs = 50;
constexpr int kMaxOperations = 48;
constexpr int kMaxConsumers = 6;
// Steps in a row without quiescence before the input counts as a hang.
constexpr int kMaxSteps = 2000;

Engine::Options FuzzOptions() {
  Engine::Options options;
  options.scheduler.horizon = absl::Milliseconds(3);
  options.scheduler.load_ahead = absl::Milliseconds(1);
  options.scheduler.load_chunk = 2;
  options.dispatch_batch = 2;
  options.dispatcher.max_attempts = kMaxAttempts;
  options.dispatcher.default_max_in_flight = kDefaultCredit;
  options.dispatcher.default_ack_timeout =
      absl::Milliseconds(kDefaultAckTimeoutMs);
  options.dispatcher.ready_window = 2;
  options.dispatcher.step_limit = 4;
  return options;
}

// A consumer stream that keeps what it is sent for the driver to check.
class Inbox final : public Consumer {
 public:
  void Send(std::vector<Delivery> deliveries) override {
    absl::MutexLock lock(&mu_);
    for (Delivery& d : deliveries) received_.push_back(std::move(d));
  }
  void End(absl::Status status) override {
    absl::MutexLock lock(&mu_);
    ended_ = true;
  }
  std::vector<Delivery> Take() {
    absl::MutexLock lock(&mu_);
    return std::exchange(received_, {});
  }
  bool ended() {
    absl::MutexLock lock(&mu_);
    return ended_;
  }

 private:
  absl::Mutex mu_;
  std::vector<Delivery> received_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
};

// ---- The model.

struct ConsumerModel {
  ConsumerId id = 0;
  std::shared_ptr<Inbox> inbox;
  std::string topic;
  std::string group;
  uint32_t credit = 0;
  int64_t ack_timeout_ms = 0;
  bool connected = true;
  bool drain = false;  // Added by the drain; acks everything.
  // Deliveries it holds: message id -> when its ack timeout runs out.
  std::map<std::string, int64_t> held;
};

struct MessageModel {
  int64_t deliver_at_ms = 0;
  std::string payload;
  bool due = false;
  // The groups registered when it came due; empty: it came due before the
  // topic had any, so it belongs to the topic's first group.
  std::set<std::string> groups;
};

// A message as one group has seen it.
struct GroupCopy {
  uint32_t deliveries = 0;
  bool acked = false;
  int64_t not_before_ms = 0;  // A nack's delay runs until then.
};

class SubscribeFuzzer {
 public:
  SubscribeFuzzer() {
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        Engine::Open(store_.get(), &clock_, FuzzOptions());
    FUZZ_CHECK(engine.ok(), "Engine::Open: %s",
               engine.status().ToString().c_str());
    engine_ = *std::move(engine);
  }

  void Run(FuzzedDataProvider& in) {
    for (int op = 0; op < kMaxOperations && in.remaining_bytes() > 0; ++op) {
      switch (in.ConsumeIntegralInRange(0, 9)) {
        case 0:
        case 1:
          Publish(in);
          break;
        case 2:
          Open(in);
          break;
        case 3:
        case 4:
          Ack(in);
          break;
        case 5:
          Nack(in);
          break;
        case 6:
          Disconnect(in);
          break;
        default:
          clock_.Advance(absl::Milliseconds(
              in.ConsumeBool() ? in.ConsumeIntegralInRange(0, 8)
                               : in.ConsumeIntegralInRange(0, 120)));
          break;
      }
      Settle();
    }
    Drain();
  }

 private:
  int64_t NowMs() { return absl::ToUnixMillis(clock_.Now()); }

  Dispatcher& dispatcher() { return engine_->dispatcher(); }

  // ---- Operations.

  void Publish(FuzzedDataProvider& in) {
    const int n = in.ConsumeIntegralInRange(1, 3);
    const int64_t now = NowMs();
    std::vector<NewMessage> batch;
    std::vector<int64_t> due;
    for (int i = 0; i < n; ++i) {
      const int64_t delay = in.ConsumeBool()
                                ? in.ConsumeIntegralInRange(0, 12)
                                : in.ConsumeIntegralInRange(0, 200);
      due.push_back(now + delay);
      batch.push_back(NewMessage{kTopic,
                                 "",
                                 absl::StrCat("payload ", i),
                                 {},
                                 absl::FromUnixMillis(now + delay)});
    }
    absl::Notification done;
    absl::StatusOr<std::vector<PublishReceipt>> receipts;
    engine_->Publish(std::move(batch),
                     [&](absl::StatusOr<std::vector<PublishReceipt>> r) {
                       receipts = std::move(r);
                       done.Notify();
                     });
    done.WaitForNotification();
    FUZZ_CHECK(receipts.ok() && receipts->size() == static_cast<size_t>(n),
               "publish: %s", receipts.status().ToString().c_str());
    for (int i = 0; i < n; ++i) {
      const PublishReceipt& r = (*receipts)[i];
      TRACE("%lld publish %s due %lld\n", static_cast<long long>(now),
            r.id.c_str(), static_cast<long long>(due[i]));
      FUZZ_CHECK(!r.duplicate && absl::ToUnixMillis(r.deliver_at) == due[i],
                 "receipt of \"%s\"", r.id.c_str());
      const bool is_new =
          messages_
              .try_emplace(r.id,
                           MessageModel{due[i], absl::StrCat("payload ", i)})
              .second;
      FUZZ_CHECK(is_new, "the broker assigned \"%s\" twice", r.id.c_str());
    }
  }

  void Open(FuzzedDataProvider& in) {
    if (Connected().size() >= kMaxConsumers) return;
    const std::string topic =
        in.ConsumeIntegralInRange(0, 4) == 0 ? kDeadLetters : kTopic;
    const std::string group =
        absl::StrCat("g", in.ConsumeIntegralInRange(0, 2));
    const uint32_t credit = in.ConsumeIntegralInRange<uint32_t>(0, 4);
    const int64_t timeout_ms =
        in.ConsumeBool() ? 0 : in.ConsumeIntegralInRange<int64_t>(1, 30);
    Subscribe(topic, group, credit, timeout_ms, /*drain=*/false);
  }

  void Subscribe(const std::string& topic, const std::string& group,
                 uint32_t credit, int64_t timeout_ms, bool drain) {
    auto inbox = std::make_shared<Inbox>();
    absl::Notification done;
    absl::StatusOr<ConsumerId> id;
    dispatcher().Subscribe(
        {topic, group, credit, absl::Milliseconds(timeout_ms)}, inbox,
        [&](absl::StatusOr<ConsumerId> r) {
          id = std::move(r);
          done.Notify();
        });
    // The consumer joins its group in a dispatcher step, once the group's
    // registration (on the commit queue's thread) is written. What those
    // steps deliver is checked by the next Settle, at this same time.
    while (!done.WaitForNotificationWithTimeout(absl::Milliseconds(1))) {
      const absl::StatusOr<absl::Time> step = dispatcher().Step();
      FUZZ_CHECK(step.ok(), "Step: %s", step.status().ToString().c_str());
    }
    FUZZ_CHECK(id.ok(), "subscribe: %s", id.status().ToString().c_str());
    std::vector<std::string>& groups = groups_[topic];
    if (std::find(groups.begin(), groups.end(), group) == groups.end()) {
      groups.push_back(group);
    }
    TRACE("%lld open consumer %llu on %s/%s credit %u timeout %lld\n",
          static_cast<long long>(NowMs()), static_cast<unsigned long long>(*id),
          topic.c_str(), group.c_str(), credit,
          static_cast<long long>(timeout_ms));
    ConsumerModel c;
    c.id = *id;
    c.inbox = std::move(inbox);
    c.topic = topic;
    c.group = group;
    c.credit = credit == 0 ? kDefaultCredit : credit;
    c.ack_timeout_ms = timeout_ms == 0 ? kDefaultAckTimeoutMs : timeout_ms;
    c.drain = drain;
    consumers_.push_back(std::move(c));
  }

  // An id for an ack or nack: mostly one the consumer holds, else one it
  // does not (unknown, acked, or held by another consumer).
  std::string PickId(FuzzedDataProvider& in, const ConsumerModel& c) {
    const int kind = in.ConsumeIntegralInRange(0, 5);
    if (kind <= 2 && !c.held.empty()) {
      auto it = c.held.begin();
      std::advance(it, in.ConsumeIntegralInRange<size_t>(0, c.held.size() - 1));
      return it->first;
    }
    if (kind == 3 && !messages_.empty()) {
      auto it = messages_.begin();
      std::advance(it,
                   in.ConsumeIntegralInRange<size_t>(0, messages_.size() - 1));
      return it->first;
    }
    return kind == 4 ? "" : "no-such-id";
  }

  ConsumerModel* PickConsumer(FuzzedDataProvider& in) {
    if (consumers_.empty()) return nullptr;
    return &consumers_[in.ConsumeIntegralInRange<size_t>(
        0, consumers_.size() - 1)];
  }

  void Ack(FuzzedDataProvider& in) {
    ConsumerModel* c = PickConsumer(in);
    if (c == nullptr) return;
    std::vector<std::string> ids;
    if (in.ConsumeIntegralInRange(0, 3) == 0) {
      for (const auto& [id, deadline] : c->held) ids.push_back(id);
    } else {
      const int n = in.ConsumeIntegralInRange(1, 3);
      for (int i = 0; i < n; ++i) ids.push_back(PickId(in, *c));
    }
    AckIds(*c, ids);
  }

  void AckIds(ConsumerModel& c, const std::vector<std::string>& ids) {
    size_t expected_unknown = 0;
    for (const std::string& id : ids) {
      if (!c.connected || c.held.erase(id) == 0) {
        ++expected_unknown;
        continue;
      }
      copies_[{c.topic, c.group, id}].acked = true;
    }
    TRACE("%lld ack consumer %llu: %zu ids, %zu unknown\n",
          static_cast<long long>(NowMs()),
          static_cast<unsigned long long>(c.id), ids.size(), expected_unknown);
    const std::vector<std::string_view> views(ids.begin(), ids.end());
    // Taken by the next step; Settle checks the count of unknown ones.
    dispatcher().Ack(c.id, views);
    unknown_acks_ += expected_unknown;
  }

  void Nack(FuzzedDataProvider& in) {
    ConsumerModel* c = PickConsumer(in);
    if (c == nullptr) return;
    const std::string id = PickId(in, *c);
    const int64_t delay_ms = in.ConsumeIntegralInRange<int64_t>(0, 10);
    const bool expected = c->connected && c->held.erase(id) == 1;
    if (expected) {
      copies_[{c->topic, c->group, id}].not_before_ms = NowMs() + delay_ms;
    } else {
      ++unknown_acks_;
    }
    TRACE("%lld nack consumer %llu: %s delay %lld (%s)\n",
          static_cast<long long>(NowMs()),
          static_cast<unsigned long long>(c->id), id.c_str(),
          static_cast<long long>(delay_ms), expected ? "held" : "unknown");
    // Taken by the next step; Settle checks the count of unknown ones.
    dispatcher().Nack(c->id, id, absl::Milliseconds(delay_ms));
  }

  void Disconnect(FuzzedDataProvider& in) {
    ConsumerModel* c = PickConsumer(in);
    if (c == nullptr || !c->connected) return;
    Disconnect(*c);
  }

  void Disconnect(ConsumerModel& c) {
    TRACE("%lld disconnect consumer %llu\n", static_cast<long long>(NowMs()),
          static_cast<unsigned long long>(c.id));
    dispatcher().Unsubscribe(c.id);
    c.connected = false;
    c.held.clear();  // Handed back to the group at once.
  }

  std::vector<ConsumerModel*> Connected() {
    std::vector<ConsumerModel*> out;
    for (ConsumerModel& c : consumers_) {
      if (c.connected) out.push_back(&c);
    }
    return out;
  }

  // ---- Steps.

  // Runs timer and dispatcher steps at the clock's time until neither has
  // work, checking every delivery. Returns when either wants to run next.
  absl::Time Settle() {
    const int64_t now = NowMs();
    // Ack timeouts that ran out hand deliveries back.
    for (ConsumerModel& c : consumers_) {
      std::erase_if(c.held, [&](const auto& h) {
        if (h.second > now) return false;
        TRACE("%lld   ack timeout of %s on consumer %llu\n",
              static_cast<long long>(now), h.first.c_str(),
              static_cast<unsigned long long>(c.id));
        return true;
      });
    }
    // Messages due by now come due in this settle, to the groups there are.
    for (auto& [id, m] : messages_) {
      if (m.due || m.deliver_at_ms > now) continue;
      m.due = true;
      const std::vector<std::string>& groups = groups_[kTopic];
      m.groups = std::set<std::string>(groups.begin(), groups.end());
    }
    for (int i = 0;; ++i) {
      FUZZ_CHECK(i < kMaxSteps, "no quiescence at %lld",
                 static_cast<long long>(now));
      const absl::StatusOr<absl::Time> tick = engine_->Tick();
      FUZZ_CHECK(tick.ok(), "Tick: %s", tick.status().ToString().c_str());
      const absl::StatusOr<absl::Time> step = dispatcher().Step();
      FUZZ_CHECK(step.ok(), "Step: %s", step.status().ToString().c_str());
      for (ConsumerModel& c : consumers_) {
        for (Delivery& d : c.inbox->Take()) {
          CheckDelivery(c, d, now);
          // The stream wrote it (its ack timeout ran from the hand-over).
          dispatcher().Written(c.id, 1, DeliveryBytes(d));
        }
      }
      FUZZ_CHECK(dispatcher().unknown_acks() == unknown_acks_,
                 "unknown acks and nacks %llu, expected %llu",
                 static_cast<unsigned long long>(dispatcher().unknown_acks()),
                 static_cast<unsigned long long>(unknown_acks_));
      if (*tick > clock_.Now() && *step > clock_.Now()) {
        return std::min(*tick, *step);
      }
    }
  }

  void CheckDelivery(ConsumerModel& c, const Delivery& d, int64_t now) {
    const char* id = d.id.c_str();
    FUZZ_CHECK(c.connected, "\"%s\" sent to disconnected consumer %llu", id,
               static_cast<unsigned long long>(c.id));
    FUZZ_CHECK(d.topic == c.topic, "\"%s\" of topic \"%s\" sent to \"%s\"", id,
               d.topic.c_str(), c.topic.c_str());
    FUZZ_CHECK(absl::ToUnixMillis(d.deliver_at) <= now,
               "\"%s\" delivered early: due %lld, now %lld", id,
               static_cast<long long>(absl::ToUnixMillis(d.deliver_at)),
               static_cast<long long>(now));
    GroupCopy& copy = copies_[{c.topic, c.group, d.id}];
    // (A dead letter's id may come back as a new dead letter once the first
    // is acked and gone, so only messages of kTopic are held to this.)
    FUZZ_CHECK(c.topic != kTopic || !copy.acked,
               "\"%s\" delivered to group %s after its ack", id,
               c.group.c_str());
    FUZZ_CHECK(now >= copy.not_before_ms,
               "\"%s\" delivered at %lld, before its nack delay ran out at "
               "%lld",
               id, static_cast<long long>(now),
               static_cast<long long>(copy.not_before_ms));
    for (const ConsumerModel& other : consumers_) {
      FUZZ_CHECK(other.topic != c.topic || other.group != c.group ||
                     !other.held.contains(d.id),
                 "\"%s\" in flight twice in group %s", id, c.group.c_str());
    }
    ++copy.deliveries;
    TRACE("%lld   delivered %s@%u to consumer %llu (%s/%s)\n",
          static_cast<long long>(now), id, d.attempt,
          static_cast<unsigned long long>(c.id), c.topic.c_str(),
          c.group.c_str());
    if (c.topic == kTopic) {
      auto m = messages_.find(d.id);
      FUZZ_CHECK(m != messages_.end(), "unknown message \"%s\"", id);
      FUZZ_CHECK(m->second.due, "\"%s\" delivered before it came due", id);
      FUZZ_CHECK(absl::ToUnixMillis(d.deliver_at) == m->second.deliver_at_ms &&
                     d.payload == m->second.payload,
                 "\"%s\" delivered with other contents", id);
      FUZZ_CHECK(GroupsOf(m->second).contains(c.group),
                 "\"%s\" went to group %s, not registered when it came due", id,
                 c.group.c_str());
      FUZZ_CHECK(d.attempt == copy.deliveries && d.attempt <= kMaxAttempts,
                 "\"%s\" delivery %u to group %s says attempt %u", id,
                 copy.deliveries, c.group.c_str(), d.attempt);
    } else {
      // A dead letter counts on from the attempts made in its topic.
      FUZZ_CHECK(d.attempt > kMaxAttempts, "dead letter \"%s\" attempt %u", id,
                 d.attempt);
      dead_letters_delivered_.insert(d.id);
    }
    c.held[d.id] = now + c.ack_timeout_ms;
    FUZZ_CHECK(c.held.size() <= c.credit,
               "consumer %llu holds %zu deliveries, credit %u",
               static_cast<unsigned long long>(c.id), c.held.size(), c.credit);
  }

  // The groups `m` goes to.
  std::set<std::string> GroupsOf(const MessageModel& m) {
    if (!m.groups.empty()) return m.groups;
    const std::vector<std::string>& groups = groups_[kTopic];
    if (groups.empty()) return {};
    return {groups.front()};  // The first group takes the waiting area.
  }

  // ---- The end: consume everything, then check nothing was lost or left.

  void Drain() {
    TRACE("%lld drain\n", static_cast<long long>(NowMs()));
    for (ConsumerModel* c : Connected()) Disconnect(*c);
    for (int round = 0;; ++round) {
      AddDrainConsumers();
      Settle();
      for (ConsumerModel* c : Connected()) {
        const std::vector<std::string> ids = HeldIds(*c);
        if (!ids.empty()) AckIds(*c, ids);
      }
      const absl::Time next = Settle();
      if (Drained()) break;
      FUZZ_CHECK(round < 400, "not drained: %s", Leftovers().c_str());
      // Straight to the next due time, nack delay or load.
      clock_.Set(std::clamp(next, clock_.Now() + absl::Milliseconds(1),
                            clock_.Now() + absl::Milliseconds(50)));
    }
    for (const auto& [id, m] : messages_) {
      for (const std::string& group : GroupsOf(m)) {
        const GroupCopy& copy = copies_[{kTopic, group, id}];
        FUZZ_CHECK(copy.acked || (copy.deliveries == kMaxAttempts &&
                                  dead_letters_delivered_.contains(id)),
                   "\"%s\" never finished in group %s (%u deliveries)",
                   id.c_str(), group.c_str(), copy.deliveries);
      }
    }
    for (Table table : {Table::kMessages, Table::kIds, Table::kSchedule,
                        Table::kReady, Table::kInFlight, Table::kTopicDue}) {
      FUZZ_CHECK(Count(table) == 0, "table %s holds %zu keys after the drain",
                 std::string(storage::TableName(table)).c_str(), Count(table));
    }
    absl::Status s = store_->Scan(
        Table::kCounters, "", "", [&](std::string_view k, std::string_view v) {
          FUZZ_CHECK(storage::DecodeCounter(v) == 0,
                     "counter %s is %lld after the drain",
                     std::string(k).c_str(),
                     static_cast<long long>(storage::DecodeCounter(v)));
          return true;
        });
    FUZZ_CHECK(s.ok(), "scan: %s", s.ToString().c_str());
  }

  // A consumer that acks everything for every group of every topic that
  // holds messages (dead letters of dead letters too), and a group "drain"
  // on such a topic without one: it takes the topic's waiting area.
  void AddDrainConsumers() {
    std::set<std::string> topics = {kTopic};
    for (const auto& [topic, groups] : groups_) topics.insert(topic);
    absl::Status s = store_->Scan(
        Table::kMessages, "", "", [&](std::string_view, std::string_view v) {
          storage::MessageRecord record;
          FUZZ_CHECK(record.ParseFromString(std::string(v)), "bad record");
          topics.insert(record.topic());
          return true;
        });
    FUZZ_CHECK(s.ok(), "scan: %s", s.ToString().c_str());
    for (const std::string& topic : topics) {
      if (groups_[topic].empty()) {
        Subscribe(topic, "drain", 1000, 10'000, /*drain=*/true);
      }
      for (const std::string& group : std::vector(groups_[topic])) {
        const bool draining = std::any_of(
            consumers_.begin(), consumers_.end(), [&](const ConsumerModel& c) {
              return c.drain && c.connected && c.topic == topic &&
                     c.group == group;
            });
        if (!draining) Subscribe(topic, group, 1000, 10'000, /*drain=*/true);
      }
    }
  }

  static std::vector<std::string> HeldIds(const ConsumerModel& c) {
    std::vector<std::string> ids;
    for (const auto& [id, deadline] : c.held) ids.push_back(id);
    return ids;
  }

  bool Drained() {
    for (const auto& [id, m] : messages_) {
      if (!m.due) return false;
    }
    return StoredCount() == 0;
  }

  size_t StoredCount() { return Count(Table::kMessages); }

  // What the store still holds, for the report of a failed drain.
  std::string Leftovers() {
    std::string out;
    absl::Status s = store_->Scan(
        Table::kMessages, "", "", [&](std::string_view, std::string_view v) {
          storage::MessageRecord record;
          if (record.ParseFromString(std::string(v))) {
            absl::StrAppend(&out, record.topic(), "/", record.id(), " ");
          }
          return true;
        });
    FUZZ_CHECK(s.ok(), "scan: %s", s.ToString().c_str());
    absl::StrAppend(&out, "; ready keys ", Count(Table::kReady),
                    ", inflight keys ", Count(Table::kInFlight),
                    ", schedule keys ", Count(Table::kSchedule));
    return out;
  }

  size_t Count(Table table) {
    size_t n = 0;
    absl::Status s =
        store_->Scan(table, "", "", [&](std::string_view, std::string_view) {
          ++n;
          return true;
        });
    FUZZ_CHECK(s.ok(), "scan: %s", s.ToString().c_str());
    return n;
  }

  std::unique_ptr<storage::MessageStore> store_ = storage::MemoryStore::Open();
  testing::FakeClock clock_{absl::FromUnixMillis(kStartMs)};
  std::unique_ptr<Engine> engine_;

  std::vector<ConsumerModel> consumers_;
  // Registered groups of each topic, in registration order.
  std::map<std::string, std::vector<std::string>> groups_;
  // Messages of kTopic by id.
  std::map<std::string, MessageModel> messages_;
  // (topic, group, id) -> what that group has seen of the message.
  std::map<std::tuple<std::string, std::string, std::string>, GroupCopy>
      copies_;
  std::set<std::string> dead_letters_delivered_;
  uint64_t unknown_acks_ = 0;
};

void TestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  SubscribeFuzzer fuzzer;
  fuzzer.Run(in);
}

}  // namespace
}  // namespace hourglass::broker

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hourglass::broker::TestOneInput(data, size);
  return 0;
}
