// Fuzzes hourglass.v1.Admin (api/admin_service.h): every RPC, served by the
// real AdminService through gRPC in process (a server built without a
// listening port, called over its in-process channel), so that the handlers
// run as in production, on an engine over the in-memory store and a fake
// clock.
//
// An input is a sequence of operations: Admin calls, whose requests are
// either parsed from the input's bytes (what any client can send) or built
// field by field near every limit (names valid and not, ids empty, 128 and
// 129 bytes, page sizes, page tokens of this listing, of another or
// garbage, preview sizes, times and durations at their types' limits and at
// --max_delay, states out of range); ListMessages walks that follow
// next_page_token to the end; Broker.Publish calls (over gRPC too, to
// topics and to their dead-letter topics); consumers that subscribe, ack,
// nack and disconnect (on the dispatcher, as api/subscribe_stream.cc does);
// and moves of the clock. The engine's timer and dispatcher steps run on
// this thread, also while a call waits for them (DeleteGroup,
// RedriveDeadLetters and PurgeTopic run as dispatcher tasks), until neither
// has work at the clock's time.
//
// Checked against a model of the broker written from admin.proto and
// broker.proto, not from the code (it learns from the store only each
// message's publish sequence, to order messages due in one millisecond):
//   - every call ends, within a deadline, with a code admin.proto documents
//     for it;
//   - a request the model finds malformed is INVALID_ARGUMENT naming one of
//     its bad fields; a well-formed one gets the model's answer (NOT_FOUND,
//     ALREADY_EXISTS, RESOURCE_EXHAUSTED, or OK with the model's stats,
//     topics, groups, message views, counts or receipt);
//   - a refused call, and every read (GetStats, ListTopics, ListGroups,
//     ListMessages, GetMessage), leaves every table of the store as it was;
//   - a ListMessages page is exactly the model's listing after the token's
//     position, so a walk yields each message of the listing once, in due
//     order; a token of another listing is INVALID_ARGUMENT, and a foreign
//     one INVALID_ARGUMENT or a contiguous run of the listing;
//   - after each operation the store's schedule, ready, inflight, topic_due
//     and messages tables hold exactly the model's messages and entries,
//     and consumers got exactly the deliveries the model expects, and the
//     dispatcher counted as unknown exactly the acks the model finds
//     unknown.
//
// HOURGLASS_FUZZ_TRACE=1 prints each operation and each call's answer.
//
// The gRPC rig is in admin_fuzz_rig.h, the model's types and the codes
// admin.proto documents in admin_fuzz_model.h.

#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "api/admin_service.h"
#include "api/broker_service.h"
#include "api/validation.h"
#include "broker/dispatcher.h"
#include "broker/engine.h"
#include "broker/lifecycle_reads.h"
#include "broker/publisher.h"
#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/client_context.h"
#include "hourglass/v1/admin.grpc.pb.h"
#include "hourglass/v1/broker.grpc.pb.h"
#include "storage/keys.h"
#include "storage/memory_store.h"
#include "storage/message_store.h"
#include "tests/fuzz/admin_fuzz_model.h"
#include "tests/fuzz/admin_fuzz_rig.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/testing/fake_clock.h"

namespace hourglass::api::admin_fuzz {
namespace {

using storage::Table;

constexpr int64_t kStartMs = 1'795'305'600'000;  // 2026-11-22T00:00:00Z

// Small limits, so that inputs reach them.
constexpr int64_t kMaxDelayMs = 3'600'000;  // --max_delay
constexpr size_t kMaxBatch = 4;             // --max_batch
constexpr uint32_t kMaxAttempts = 2;        // --max_attempts
constexpr size_t kMaxGroupsPerTopic = 3;    // --max_groups_per_topic

constexpr int kMaxOperations = 32;
constexpr size_t kMaxConsumers = 5;
// The clock moves at most this far in one input: less than the dispatcher's
// 60 s before it reports a stuck consumer (which only logs).
constexpr int64_t kMaxClockMoveMs = 50'000;
// Steps in a row without quiescence before the input counts as a hang, and
// how long (real time) a call may take.
constexpr int kMaxSteps = 5000;
constexpr absl::Duration kCallTimeout = absl::Seconds(20);
constexpr int kMaxPages = 64;

Limits FuzzLimits() {
  Limits limits;
  limits.max_delay = absl::Milliseconds(kMaxDelayMs);
  limits.max_batch = kMaxBatch;
  limits.max_id_bytes = kMaxIdBytes;
  limits.max_payload_bytes = 512;
  return limits;
}

broker::Engine::Options FuzzOptions() {
  broker::Engine::Options options;
  options.scheduler.horizon = absl::Milliseconds(3);
  options.scheduler.load_ahead = absl::Milliseconds(1);
  options.scheduler.load_chunk = 2;
  options.dispatch_batch = 2;
  options.dispatcher.max_attempts = kMaxAttempts;
  options.dispatcher.default_max_in_flight = 2;
  options.dispatcher.default_ack_timeout = absl::Milliseconds(50);
  options.dispatcher.ready_window = 2;
  options.dispatcher.step_limit = 4;
  options.dispatcher.max_groups_per_topic = kMaxGroupsPerTopic;
  return options;
}

class AdminFuzzer {
 public:
  AdminFuzzer() : rig_(TheRig()) {
    absl::StatusOr<std::unique_ptr<broker::Engine>> engine =
        broker::Engine::Open(store_.get(), &clock_, FuzzOptions());
    FUZZ_CHECK(engine.ok(), "Engine::Open: %s",
               engine.status().ToString().c_str());
    engine_ = *std::move(engine);
    broker_service_ =
        std::make_unique<BrokerService>(engine_.get(), &clock_, FuzzLimits());
    admin_service_ = std::make_unique<AdminService>(
        engine_.get(), &clock_, FuzzLimits(), absl::FromUnixMillis(kStartMs));
    rig_.admin.Set(admin_service_.get());
    rig_.broker.Set(broker_service_.get());
  }

  ~AdminFuzzer() {
    rig_.admin.Set(nullptr);
    rig_.broker.Set(nullptr);
    admin_service_.reset();
    broker_service_.reset();
    engine_.reset();
  }

  void Run(FuzzedDataProvider& in) {
    for (int op = 0; op < kMaxOperations && in.remaining_bytes() > 0; ++op) {
      switch (in.ConsumeIntegralInRange(0, 15)) {
        case 0:
        case 1:
          Publish(in);
          break;
        case 2:
          MoveClock(in);
          break;
        case 3:
          Open(in);
          break;
        case 4:
          Ack(in);
          break;
        case 5:
          Nack(in);
          break;
        case 6:
          Disconnect(in);
          break;
        case 7:
          Walk(in);
          break;
        default:
          AdminCall(in);
          break;
      }
      Settle();
    }
    // The end: every topic's stats, and a walk of each listing of the
    // consumers' topics that the model finds not empty (each call costs a
    // few thread switches: inputs stay fast).
    CallGetStats(v1::GetStatsRequest());
    for (const char* topic : {"t", "u"}) {
      for (int state = 1; state <= 4; ++state) {
        v1::ListMessagesRequest request;
        request.set_topic(topic);
        request.set_state(static_cast<v1::MessageState>(state));
        if (!Listing(request).empty()) WalkListing(request, {2});
      }
    }
  }

 private:
  int64_t NowMs() { return absl::ToUnixMillis(clock_.Now()); }
  broker::Dispatcher& dispatcher() { return engine_->dispatcher(); }

  // ---- Steps.

  // One timer step and one dispatcher step at the clock's time; takes what
  // consumers were sent (their streams write it at once). True if either
  // wants to run again now.
  bool StepOnce() {
    const absl::StatusOr<absl::Time> tick = engine_->Tick();
    FUZZ_CHECK(tick.ok(), "Tick: %s", tick.status().ToString().c_str());
    const absl::StatusOr<absl::Time> step = dispatcher().Step();
    FUZZ_CHECK(step.ok(), "Step: %s", step.status().ToString().c_str());
    for (ConsumerModel& c : consumers_) {
      for (Delivery& d : c.inbox->Take()) {
        dispatcher().Written(c.id, 1, broker::DeliveryBytes(d));
        observed_.emplace_back(c.id, std::move(d));
      }
    }
    const absl::Time now = clock_.Now();
    return *tick <= now || *step <= now;
  }

  // Steps until neither the timer nor the dispatcher has work, then brings
  // the model to the same point and compares.
  void Settle() {
    for (int i = 0; StepOnce(); ++i) {
      FUZZ_CHECK(i < kMaxSteps, "no quiescence at %lld",
                 static_cast<long long>(NowMs()));
    }
    SettleModel();
    CheckStore();
    FUZZ_CHECK(dispatcher().unknown_acks() == unknown_acks_,
               "%llu unknown acks counted, expected %llu",
               static_cast<unsigned long long>(dispatcher().unknown_acks()),
               static_cast<unsigned long long>(unknown_acks_));
  }

  // Waits for a call to end, running steps meanwhile (a call may wait for
  // the dispatcher's tasks). When no step has work, waits a moment for the
  // answer before stepping again: the call's handler runs on gRPC's
  // threads and may hand the dispatcher work at any time.
  void Pump(absl::Notification& done) {
    const absl::Time give_up = absl::Now() + kCallTimeout;
    while (!done.HasBeenNotified()) {
      if (!StepOnce()) {
        done.WaitForNotificationWithTimeout(absl::Microseconds(100));
      }
      FUZZ_CHECK(absl::Now() < give_up, "a call did not end within %s",
                 absl::FormatDuration(kCallTimeout).c_str());
    }
  }

  // Starts a call with `start(context, callback)` and waits for its status.
  template <typename Start>
  grpc::Status Invoke(Start start) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + kCallTimeout));
    absl::Notification done;
    grpc::Status status;
    start(&context, [&](grpc::Status s) {
      status = std::move(s);
      done.Notify();
    });
    Pump(done);
    return status;
  }

  Snapshot TakeSnapshot() {
    Snapshot snapshot;
    for (int t = 0; t < storage::kNumTables; ++t) {
      absl::Status s =
          store_->Scan(static_cast<Table>(t), "", "",
                       [&](std::string_view k, std::string_view v) {
                         snapshot[{t, std::string(k)}] = v;
                         return true;
                       });
      FUZZ_CHECK(s.ok(), "scan: %s", s.ToString().c_str());
    }
    return snapshot;
  }

  // Checks a call's status against what the model expected, and that a
  // refused call or a read changed nothing. True if the call succeeded.
  bool CheckStatus(Rpc rpc, const grpc::Status& status, const Expect& expect,
                   const Snapshot& before) {
    const grpc::StatusCode code = status.error_code();
    const std::string& message = status.error_message();
    TRACE("%lld   %s -> %d %s\n", static_cast<long long>(NowMs()), RpcName(rpc),
          static_cast<int>(code), message.c_str());
    FUZZ_CHECK(code != grpc::StatusCode::DEADLINE_EXCEEDED,
               "%s did not end within %s: %s", RpcName(rpc),
               absl::FormatDuration(kCallTimeout).c_str(), message.c_str());
    FUZZ_CHECK(Documented(rpc, code),
               "%s answered code %d, which admin.proto does not document "
               "for it: %s",
               RpcName(rpc), static_cast<int>(code), message.c_str());
    if (!expect.bad.empty()) {
      FUZZ_CHECK(code == grpc::StatusCode::INVALID_ARGUMENT,
                 "%s of a request with bad %s answered code %d: %s",
                 RpcName(rpc), expect.bad[0].c_str(), static_cast<int>(code),
                 message.c_str());
    } else if (expect.foreign_token && code != expect.code) {
      FUZZ_CHECK(code == grpc::StatusCode::INVALID_ARGUMENT &&
                     absl::StrContains(message, "page_token"),
                 "%s with a foreign page token answered code %d: %s",
                 RpcName(rpc), static_cast<int>(code), message.c_str());
    } else {
      FUZZ_CHECK(code == expect.code, "%s answered code %d, expected %d: %s",
                 RpcName(rpc), static_cast<int>(code),
                 static_cast<int>(expect.code), message.c_str());
    }
    if (code == grpc::StatusCode::INVALID_ARGUMENT && !expect.bad.empty()) {
      const bool named = std::any_of(expect.bad.begin(), expect.bad.end(),
                                     [&](const std::string& field) {
                                       return absl::StrContains(message, field);
                                     });
      FUZZ_CHECK(named, "%s: \"%s\" names none of the bad fields (%s ...)",
                 RpcName(rpc), message.c_str(), expect.bad[0].c_str());
    }
    if (code != grpc::StatusCode::OK || ReadOnly(rpc)) {
      FUZZ_CHECK(TakeSnapshot() == before, "%s changed the store, answering %d",
                 RpcName(rpc), static_cast<int>(code));
    }
    return code == grpc::StatusCode::OK;
  }

  // ---- Model upkeep.

  std::vector<ConsumerModel*> ConsumersOf(const std::string& topic,
                                          const std::string& group) {
    std::vector<ConsumerModel*> out;
    for (ConsumerModel& c : consumers_) {
      if (c.connected && c.topic == topic && c.group == group) {
        out.push_back(&c);
      }
    }
    return out;
  }

  size_t Held(const ConsumerModel& c) {
    size_t n = 0;
    for (const auto& [key, m] : messages_) {
      if (m.topic != c.topic) continue;
      auto copy = m.copies.find(c.group);
      if (copy != m.copies.end() && copy->second.in_flight &&
          copy->second.owner == c.id) {
        ++n;
      }
    }
    return n;
  }

  bool TopicExists(const std::string& topic) {
    if (groups_.contains(topic)) return true;
    for (const auto& [key, m] : messages_) {
      if (m.topic == topic) return true;
    }
    return false;
  }

  // The group of `topic` that owns its waiting area, or "".
  std::string AreaOwner(const std::string& topic) {
    auto t = groups_.find(topic);
    if (t == groups_.end()) return "";
    for (const auto& [name, g] : t->second) {
      if (g.owns_area) return name;
    }
    return "";
  }

  void Forget(const TopicId& key) {
    auto it = messages_.find(key);
    if (it != messages_.end() && !it->second.held()) messages_.erase(it);
  }

  void Register(const std::string& topic, const std::string& group) {
    auto t = groups_.find(topic);
    const bool first = t == groups_.end() || t->second.empty();
    groups_[topic][group] = GroupModel{NowMs(), first};
  }

  size_t GroupCount(const std::string& topic) {
    auto t = groups_.find(topic);
    return t == groups_.end() ? 0 : t->second.size();
  }

  // Reads the sequence of every message that has none yet, and checks
  // that the store has it due when the model says.
  void LearnSequences() {
    for (auto& [key, m] : messages_) {
      if (m.sequence.has_value()) continue;
      absl::StatusOr<std::optional<DueKey>> found =
          broker::lifecycle::FindId(*store_, m.topic, m.id);
      FUZZ_CHECK(found.ok() && found->has_value(),
                 "\"%s\" of topic \"%s\" is not stored", m.id.c_str(),
                 m.topic.c_str());
      FUZZ_CHECK((*found)->deliver_at_ms == m.deliver_at_ms,
                 "\"%s\" of topic \"%s\" is stored due at %lld, not %lld",
                 m.id.c_str(), m.topic.c_str(),
                 static_cast<long long>((*found)->deliver_at_ms),
                 static_cast<long long>(m.deliver_at_ms));
      m.sequence = (*found)->sequence;
    }
  }

  // A new message, as a publish, a dead-lettering or a redrive stores it.
  void Store(Msg m) {
    m.published_at_ms = NowMs();
    TRACE("%lld   stored %s in %s due %lld\n", static_cast<long long>(NowMs()),
          m.id.c_str(), m.topic.c_str(),
          static_cast<long long>(m.deliver_at_ms));
    const TopicId key{m.topic, m.id};
    const bool is_new = messages_.emplace(key, std::move(m)).second;
    FUZZ_CHECK(is_new, "the model stored \"%s\" twice", key.second.c_str());
  }

  // Messages due by now come due: ready in every group of their topic, or
  // in its waiting area if it has none.
  void ComeDue(int64_t now) {
    for (auto& [key, m] : messages_) {
      if (!m.scheduled || m.deliver_at_ms > now) continue;
      m.scheduled = false;
      auto t = groups_.find(m.topic);
      if (t == groups_.end() || t->second.empty()) {
        m.in_area = true;
        continue;
      }
      for (const auto& [name, g] : t->second) m.copies[name] = Copy();
    }
  }

  // Messages of `topic` that a consumer of `group` may get next, in the
  // order it gets them: ready ones (the waiting area's too, for its owner)
  // and handed-back ones whose delay ran out, by due key.
  std::vector<TopicId> Candidates(const std::string& topic,
                                  const std::string& group, int64_t now) {
    const bool owner = AreaOwner(topic) == group;
    std::vector<std::pair<DueKey, TopicId>> found;
    for (const auto& [key, m] : messages_) {
      if (m.topic != topic || m.scheduled) continue;
      auto copy = m.copies.find(group);
      bool take = owner && m.in_area;
      if (copy != m.copies.end()) {
        const Copy& c = copy->second;
        take = !c.in_flight || (c.owner == 0 && c.due_again_ms <= now);
      }
      if (take) found.emplace_back(m.key(), key);
    }
    std::sort(found.begin(), found.end());
    std::vector<TopicId> out;
    for (auto& [due, key] : found) out.push_back(std::move(key));
    return out;
  }

  // A group gave up on `key` after kMaxAttempts: it goes to the topic's
  // dead-letter topic (unless its id is pending there already), due now.
  void DeadLetter(const TopicId& key, const std::string& group, int64_t now) {
    Msg& m = messages_.at(key);
    const uint32_t attempts = m.copies.at(group).attempts;
    m.copies.erase(group);
    TRACE("%lld   dead letter %s from %s/%s\n", static_cast<long long>(now),
          m.id.c_str(), m.topic.c_str(), group.c_str());
    const TopicId letter{DeadLetterTopic(m.topic), m.id};
    if (!messages_.contains(letter)) {
      Msg l;
      l.topic = letter.first;
      l.id = m.id;
      l.payload = m.payload;
      l.headers = m.headers;
      l.deliver_at_ms = now;
      l.dead_letter_attempts = m.dead_letter_attempts + attempts;
      Store(std::move(l));
    }
    Forget(key);
  }

  // After the steps: what the model expects them to have done, compared
  // with what consumers were sent.
  void SettleModel() {
    const int64_t now = NowMs();
    LearnSequences();
    // Ack timeouts that ran out hand deliveries back.
    for (auto& [key, m] : messages_) {
      for (auto& [group, c] : m.copies) {
        if (c.in_flight && c.owner != 0 && c.due_again_ms <= now) {
          c.owner = 0;
          c.due_again_ms = now;
        }
      }
    }
    ComeDue(now);
    // Each group's consumers take candidates while they have credit; a
    // handed-back delivery that has had its attempts is dead-lettered
    // instead, when its turn comes.
    std::map<TopicId, std::set<std::string>> expected;  // (topic, group)
    for (const auto& [topic, groups] : groups_) {
      for (const auto& [group, g] : groups) {
        size_t room = 0;
        for (ConsumerModel* c : ConsumersOf(topic, group)) {
          room += c->credit - std::min<size_t>(c->credit, Held(*c));
        }
        if (room == 0) continue;
        for (const TopicId& key : Candidates(topic, group, now)) {
          if (room == 0) break;
          const Msg& m = messages_.at(key);
          auto copy = m.copies.find(group);
          if (copy != m.copies.end() && copy->second.in_flight &&
              copy->second.attempts >= kMaxAttempts) {
            DeadLetter(key, group, now);
            continue;
          }
          expected[{topic, group}].insert(key.second);
          --room;
        }
      }
    }
    ComeDue(now);  // The dead letters.
    LearnSequences();

    // What consumers were sent, by group.
    std::map<TopicId, std::set<std::string>> sent;
    for (const auto& [id, d] : observed_) {
      const ConsumerModel& c = Consumer(id);
      sent[{c.topic, c.group}].insert(d.id);
    }
    for (const auto& [group, ids] : expected) {
      FUZZ_CHECK(sent[group] == ids,
                 "group %s/%s was sent %zu messages (%s...), expected %zu "
                 "(%s...)",
                 group.first.c_str(), group.second.c_str(), sent[group].size(),
                 sent[group].empty() ? "" : sent[group].begin()->c_str(),
                 ids.size(), ids.empty() ? "" : ids.begin()->c_str());
    }
    for (const auto& [group, ids] : sent) {
      FUZZ_CHECK(ids.empty() || expected.contains(group),
                 "group %s/%s was sent \"%s\", expected nothing",
                 group.first.c_str(), group.second.c_str(),
                 ids.begin()->c_str());
    }
    for (auto& [id, d] : observed_) Deliver(Consumer(id), d, now);
    observed_.clear();
    for (ConsumerModel& c : consumers_) {
      if (!c.connected) continue;
      FUZZ_CHECK(Held(c) <= c.credit, "consumer %llu holds %zu, credit %u",
                 static_cast<unsigned long long>(c.id), Held(c), c.credit);
    }
  }

  ConsumerModel& Consumer(ConsumerId id) {
    for (ConsumerModel& c : consumers_) {
      if (c.id == id) return c;
    }
    FUZZ_CHECK(false, "unknown consumer %llu",
               static_cast<unsigned long long>(id));
    std::abort();
  }

  void Deliver(ConsumerModel& c, const Delivery& d, int64_t now) {
    TRACE("%lld   delivered %s@%u to consumer %llu (%s/%s)\n",
          static_cast<long long>(now), d.id.c_str(), d.attempt,
          static_cast<unsigned long long>(c.id), c.topic.c_str(),
          c.group.c_str());
    FUZZ_CHECK(c.connected, "\"%s\" sent to a closed consumer", d.id.c_str());
    FUZZ_CHECK(d.topic == c.topic, "\"%s\" of \"%s\" sent to a consumer of %s",
               d.id.c_str(), d.topic.c_str(), c.topic.c_str());
    auto it = messages_.find({c.topic, d.id});
    FUZZ_CHECK(it != messages_.end(), "unknown message \"%s\" delivered",
               d.id.c_str());
    Msg& m = it->second;
    Copy& copy = m.copies[c.group];  // From the waiting area: new.
    m.in_area = false;
    copy.in_flight = true;
    copy.attempts += 1;
    copy.owner = c.id;
    copy.due_again_ms = now + c.ack_timeout_ms;
    FUZZ_CHECK(d.attempt == m.dead_letter_attempts + copy.attempts &&
                   absl::ToUnixMillis(d.deliver_at) == m.deliver_at_ms &&
                   absl::ToUnixMillis(d.published_at) == m.published_at_ms &&
                   d.payload == m.payload && d.headers == m.headers,
               "\"%s\" delivered as attempt %u, expected %u, or with other "
               "contents",
               d.id.c_str(), d.attempt, m.dead_letter_attempts + copy.attempts);
  }

  // The store holds exactly the model's messages and entries.
  void CheckStore() {
    using Keys = std::set<std::string>;
    Keys messages, schedule, topic_due, ready, in_flight;
    for (const auto& [key, m] : messages_) {
      const DueKey due = m.key();
      messages.insert(storage::MessageKey(due.sequence));
      topic_due.insert(storage::TopicDueKey(m.topic, due));
      if (m.scheduled) schedule.insert(storage::ScheduleKey(due));
      if (m.in_area) ready.insert(storage::ReadyKey(m.topic, "", due));
      for (const auto& [group, c] : m.copies) {
        if (c.in_flight) {
          in_flight.insert(storage::InFlightKey(m.topic, group, due.sequence));
        } else {
          ready.insert(storage::ReadyKey(m.topic, group, due));
        }
      }
    }
    auto check = [&](Table table, const Keys& expected, const char* name) {
      Keys stored;
      absl::Status s = store_->Scan(table, "", "",
                                    [&](std::string_view k, std::string_view) {
                                      stored.emplace(k);
                                      return true;
                                    });
      FUZZ_CHECK(s.ok(), "scan: %s", s.ToString().c_str());
      if (stored == expected) return;
      std::vector<std::string> extra, missing;
      std::set_difference(stored.begin(), stored.end(), expected.begin(),
                          expected.end(), std::back_inserter(extra));
      std::set_difference(expected.begin(), expected.end(), stored.begin(),
                          stored.end(), std::back_inserter(missing));
      FUZZ_CHECK(
          false, "table %s: %zu keys the model lacks (%s), %zu missing (%s)",
          name, extra.size(),
          extra.empty() ? "" : absl::CEscape(extra[0]).c_str(), missing.size(),
          missing.empty() ? "" : absl::CEscape(missing[0]).c_str());
    };
    check(Table::kMessages, messages, "messages");
    check(Table::kSchedule, schedule, "schedule");
    check(Table::kTopicDue, topic_due, "topic_due");
    check(Table::kReady, ready, "ready");
    check(Table::kInFlight, in_flight, "inflight");
  }

  // ---- Building requests.

  std::string PickKnownId(FuzzedDataProvider& in) {
    if (messages_.empty()) return "a";
    auto it = messages_.begin();
    std::advance(it,
                 in.ConsumeIntegralInRange<size_t>(0, messages_.size() - 1));
    return it->second.id;
  }

  // A topic and an id: mostly those of a message the model holds.
  std::pair<std::string, std::string> ConsumeTarget(FuzzedDataProvider& in) {
    if (!messages_.empty() && in.ConsumeIntegralInRange(0, 2) != 0) {
      auto it = messages_.begin();
      std::advance(it,
                   in.ConsumeIntegralInRange<size_t>(0, messages_.size() - 1));
      return it->first;
    }
    std::string topic = ConsumeTopic(in);
    return {std::move(topic), ConsumeId(in)};
  }

  std::string ConsumeTopic(FuzzedDataProvider& in) {
    switch (in.ConsumeIntegralInRange(0, 12)) {
      case 0:
      case 1:
      case 2:
        return "t";
      case 3:
      case 4:
        return "u";
      case 5:
        return "t.dlq";
      case 6:
        return "u.dlq";
      case 7:
        return "nope";
      case 8:  // The longest name, and one byte more.
        return std::string(in.ConsumeBool() ? 200 : 201, 'y');
      case 9:
        return "";
      case 10:
        return in.ConsumeBool() ? "t " : "t/u";
      default:
        return Utf8(in.ConsumeRandomLengthString(8));
    }
  }

  std::string ConsumeGroup(FuzzedDataProvider& in) {
    switch (in.ConsumeIntegralInRange(0, 9)) {
      case 0:
      case 1:
      case 2:
      case 3:
        return absl::StrCat("g", in.ConsumeIntegralInRange(0, 3));
      case 4:
        return "";
      case 5:
        return std::string(in.ConsumeBool() ? 200 : 201, 'h');
      case 6:
        return "g 0";
      default:
        return Utf8(in.ConsumeRandomLengthString(6));
    }
  }

  std::string ConsumeId(FuzzedDataProvider& in) {
    switch (in.ConsumeIntegralInRange(0, 9)) {
      case 0:
      case 1:
      case 2:
      case 3:
        return PickKnownId(in);
      case 4:
        return "";
      case 5:
        return std::string(kMaxIdBytes + in.ConsumeIntegralInRange(0, 1), 'i');
      case 6:
        return "a";
      case 7:
        return "hg-0000000000000000";
      default:
        return Utf8(in.ConsumeRandomLengthString(10));
    }
  }

  int32_t ConsumeNanos(FuzzedDataProvider& in) {
    switch (in.ConsumeIntegralInRange(0, 6)) {
      case 0:
        return 0;
      case 1:
        return 1;
      case 2:
        return kNanosPerMilli - 1;
      case 3:
        return kMaxNanos;
      case 4:
        return kMaxNanos + 1;
      case 5:
        return -1;
      default:
        return in.ConsumeIntegral<int32_t>();
    }
  }

  Timestamp ConsumeTimestamp(FuzzedDataProvider& in) {
    Timestamp t;
    int64_t ms = NowMs();
    switch (in.ConsumeIntegralInRange(0, 6)) {
      case 0:  // Near now.
        ms += in.ConsumeIntegralInRange(-3, 3);
        break;
      case 1:
      case 2:  // Near a message's due time.
        if (!messages_.empty()) {
          auto it = messages_.begin();
          std::advance(
              it, in.ConsumeIntegralInRange<size_t>(0, messages_.size() - 1));
          ms = it->second.deliver_at_ms;
        }
        ms += in.ConsumeIntegralInRange(-1, 1);
        break;
      case 3:  // At --max_delay ahead.
        ms += kMaxDelayMs + in.ConsumeIntegralInRange(-1, 1);
        break;
      case 4: {  // At the type's limits.
        t.set_seconds(
            in.ConsumeBool()
                ? kMinTimestampSeconds - in.ConsumeIntegralInRange(0, 1)
                : kMaxTimestampSeconds + in.ConsumeIntegralInRange(0, 1));
        t.set_nanos(ConsumeNanos(in));
        return t;
      }
      default:
        t.set_seconds(in.ConsumeIntegral<int64_t>());
        t.set_nanos(ConsumeNanos(in));
        return t;
    }
    t = MillisToProto(ms);
    // A nanosecond past the millisecond, or one before it.
    switch (in.ConsumeIntegralInRange(0, 3)) {
      case 0:
        t.set_nanos(t.nanos() + 1);
        break;
      case 1:
        if (t.nanos() > 0) {
          t.set_nanos(t.nanos() - 1);
        } else {
          t.set_seconds(t.seconds() - 1);
          t.set_nanos(kMaxNanos);
        }
        break;
      default:
        break;
    }
    return t;
  }

  Duration ConsumeDuration(FuzzedDataProvider& in) {
    Duration d;
    switch (in.ConsumeIntegralInRange(0, 7)) {
      case 0:
        break;
      case 1:
      case 2: {  // A few milliseconds or seconds.
        const int64_t ms = in.ConsumeBool()
                               ? in.ConsumeIntegralInRange(0, 20)
                               : in.ConsumeIntegralInRange(0, 5000);
        d.set_seconds(ms / 1000);
        d.set_nanos(static_cast<int32_t>(ms % 1000 * kNanosPerMilli));
        break;
      }
      case 3: {  // --max_delay, and a nanosecond more or less.
        const int extra = in.ConsumeIntegralInRange(-1, 1);
        d.set_seconds(kMaxDelayMs / 1000 + (extra < 0 ? -1 : 0));
        d.set_nanos(extra < 0 ? kMaxNanos : extra);
        break;
      }
      case 4:  // Negative.
        d.set_seconds(-in.ConsumeIntegralInRange(0, 2));
        d.set_nanos(-in.ConsumeIntegralInRange(0, 1));
        break;
      case 5:  // At the type's limits.
        d.set_seconds((in.ConsumeBool() ? 1 : -1) *
                      (kMaxDurationSeconds + in.ConsumeIntegralInRange(0, 1)));
        d.set_nanos(ConsumeNanos(in));
        break;
      case 6:  // Seconds and nanos of different signs.
        d.set_seconds(1);
        d.set_nanos(-1);
        break;
      default:
        d.set_seconds(in.ConsumeIntegral<int64_t>());
        d.set_nanos(ConsumeNanos(in));
        break;
    }
    return d;
  }

  uint32_t ConsumePageSize(FuzzedDataProvider& in) {
    switch (in.ConsumeIntegralInRange(0, 7)) {
      case 0:
        return 0;
      case 1:
        return kMaxPageSize;
      case 2:
        return kMaxPageSize + 1;
      case 3:
        return in.ConsumeIntegral<uint32_t>();
      default:
        return in.ConsumeIntegralInRange<uint32_t>(1, 3);
    }
  }

  std::string ConsumePageToken(FuzzedDataProvider& in) {
    switch (in.ConsumeIntegralInRange(0, 7)) {
      case 0:
      case 1:
      case 2:
        return "";
      case 3:
      case 4:
      case 5:
        if (!tokens_.empty()) {
          return tokens_[in.ConsumeIntegralInRange<size_t>(0,
                                                           tokens_.size() - 1)]
              .token;
        }
        return "";
      case 6:
        if (!tokens_.empty()) {  // One character changed.
          std::string t = tokens_.back().token;
          const size_t at = in.ConsumeIntegralInRange<size_t>(0, t.size() - 1);
          t[at] = static_cast<char>(in.ConsumeIntegral<uint8_t>() & 0x7f);
          return t;
        }
        return "x";
      default:
        return Utf8(in.ConsumeRandomLengthString(40));
    }
  }

  // Parses a request from the input's bytes; false if they are not one.
  template <typename Request>
  bool ParseRequest(FuzzedDataProvider& in, Request& request) {
    return request.ParseFromString(in.ConsumeRandomLengthString(96));
  }

  // ---- Operations other than Admin calls.

  void Publish(FuzzedDataProvider& in) {
    v1::PublishRequest request;
    const int n = in.ConsumeIntegralInRange(1, 3);
    const int64_t now = NowMs();
    std::vector<int64_t> due;
    for (int i = 0; i < n; ++i) {
      v1::Message* m = request.add_messages();
      switch (in.ConsumeIntegralInRange(0, 7)) {
        case 0:
          m->set_topic("t.dlq");  // A producer may plant dead letters.
          break;
        case 1:
        case 2:
          m->set_topic("u");
          break;
        default:
          m->set_topic("t");
          break;
      }
      switch (in.ConsumeIntegralInRange(0, 7)) {
        case 0:
          m->set_id(std::string(kMaxIdBytes, 'i'));
          break;
        case 1:
        case 2:
          m->set_id(std::string(
              1, static_cast<char>('a' + in.ConsumeIntegralInRange(0, 3))));
          break;
        default:
          break;  // The broker assigns one.
      }
      const size_t size = in.ConsumeBool()
                              ? in.ConsumeIntegralInRange<size_t>(0, 4)
                              : in.ConsumeIntegralInRange<size_t>(255, 258);
      std::string payload(size, 'p');
      for (size_t j = 0; j < size; j += 7) payload[j] = static_cast<char>(j);
      m->set_payload(payload);
      if (in.ConsumeIntegralInRange(0, 3) == 0) {
        (*m->mutable_headers())["k"] = absl::StrCat("v", i);
      }
      int64_t delay_ms = 0;
      switch (in.ConsumeIntegralInRange(0, 3)) {
        case 0:
          break;
        case 1:
          delay_ms = in.ConsumeIntegralInRange(1, 20);
          break;
        case 2:
          delay_ms = in.ConsumeIntegralInRange(21, 3000);
          break;
        default:
          delay_ms = in.ConsumeIntegralInRange(kMaxDelayMs - 5, kMaxDelayMs);
          break;
      }
      m->mutable_delay()->set_seconds(delay_ms / 1000);
      m->mutable_delay()->set_nanos(
          static_cast<int32_t>(delay_ms % 1000 * kNanosPerMilli));
      due.push_back(now + delay_ms);
    }
    TRACE("%lld publish %s\n", static_cast<long long>(now),
          Show(request).c_str());
    v1::PublishResponse response;
    const grpc::Status status =
        Invoke([&](grpc::ClientContext* context,
                   std::function<void(grpc::Status)> done) {
          rig_.broker_stub->async()->Publish(context, &request, &response,
                                             std::move(done));
        });
    FUZZ_CHECK(status.ok(), "Publish: %d %s",
               static_cast<int>(status.error_code()),
               status.error_message().c_str());
    FUZZ_CHECK(response.receipts_size() == n, "%d receipts for %d messages",
               response.receipts_size(), n);
    for (int i = 0; i < n; ++i) {
      const v1::Message& m = request.messages(i);
      const v1::Receipt& r = response.receipts(i);
      const int64_t receipt_ms = FloorMillis(Nanos(r.deliver_at()));
      auto pending = m.id().empty() ? messages_.end()
                                    : messages_.find({m.topic(), m.id()});
      if (pending != messages_.end()) {
        FUZZ_CHECK(r.duplicate() && r.id() == m.id() &&
                       receipt_ms == pending->second.deliver_at_ms,
                   "receipt %d: not the first receipt of \"%s\"", i,
                   m.id().c_str());
        continue;
      }
      FUZZ_CHECK(!r.duplicate() && (m.id().empty() || r.id() == m.id()) &&
                     receipt_ms == due[i],
                 "receipt %d: %s", i, Show(r).c_str());
      Msg model;
      model.topic = m.topic();
      model.id = r.id();
      model.payload = m.payload();
      model.headers = Headers(m.headers().begin(), m.headers().end());
      model.deliver_at_ms = due[i];
      Store(std::move(model));
    }
    LearnSequences();
  }

  void MoveClock(FuzzedDataProvider& in) {
    int64_t ms = 0;
    switch (in.ConsumeIntegralInRange(0, 3)) {
      case 0:
        ms = in.ConsumeIntegralInRange(0, 5);
        break;
      case 1:
        ms = in.ConsumeIntegralInRange(0, 60);
        break;
      case 2: {  // To the next due time.
        std::optional<int64_t> next;
        for (const auto& [key, m] : messages_) {
          if (m.scheduled && (!next || m.deliver_at_ms < *next)) {
            next = m.deliver_at_ms;
          }
        }
        if (next.has_value()) ms = std::max<int64_t>(0, *next - NowMs());
        break;
      }
      default:
        ms = in.ConsumeIntegralInRange(0, 3000);
        break;
    }
    ms = std::min(ms, kMaxClockMoveMs - moved_ms_);
    moved_ms_ += ms;
    TRACE("%lld move clock by %lld\n", static_cast<long long>(NowMs()),
          static_cast<long long>(ms));
    clock_.Advance(absl::Milliseconds(ms));
  }

  size_t Connected() {
    return std::count_if(consumers_.begin(), consumers_.end(),
                         [](const ConsumerModel& c) { return c.connected; });
  }

  void Open(FuzzedDataProvider& in) {
    if (Connected() >= kMaxConsumers) return;
    ConsumerModel c;
    c.topic = in.ConsumeIntegralInRange(0, 3) == 0 ? "u" : "t";
    c.group = absl::StrCat("g", in.ConsumeIntegralInRange(0, 3));
    c.credit = in.ConsumeIntegralInRange<uint32_t>(1, 3);
    switch (in.ConsumeIntegralInRange(0, 2)) {
      case 0:
        c.ack_timeout_ms = in.ConsumeIntegralInRange(1, 30);
        break;
      default:
        c.ack_timeout_ms = 3'600'000;
        break;
    }
    const bool exists =
        groups_.contains(c.topic) && groups_[c.topic].contains(c.group);
    const bool refused = !exists && GroupCount(c.topic) >= kMaxGroupsPerTopic;
    c.inbox = std::make_shared<Inbox>();
    absl::Notification done;
    absl::StatusOr<ConsumerId> id;
    dispatcher().Subscribe(
        {c.topic, c.group, c.credit, absl::Milliseconds(c.ack_timeout_ms)},
        c.inbox, [&](absl::StatusOr<ConsumerId> r) {
          id = std::move(r);
          done.Notify();
        });
    // The consumer joins its group in a dispatcher step (once the group is
    // registered). What that step sends it waits in its inbox until the
    // next Settle, which takes it.
    Pump(done);
    TRACE("%lld open %s/%s credit %u timeout %lld: %s\n",
          static_cast<long long>(NowMs()), c.topic.c_str(), c.group.c_str(),
          c.credit, static_cast<long long>(c.ack_timeout_ms),
          id.ok() ? absl::StrCat(*id).c_str() : id.status().ToString().c_str());
    if (refused) {
      FUZZ_CHECK(id.status().code() == absl::StatusCode::kResourceExhausted,
                 "subscribing a group past the limit: %s",
                 id.status().ToString().c_str());
      return;
    }
    FUZZ_CHECK(id.ok(), "subscribe: %s", id.status().ToString().c_str());
    if (!exists) Register(c.topic, c.group);
    c.id = *id;
    consumers_.push_back(std::move(c));
  }

  ConsumerModel* PickConnected(FuzzedDataProvider& in) {
    std::vector<ConsumerModel*> open;
    for (ConsumerModel& c : consumers_) {
      if (c.connected) open.push_back(&c);
    }
    if (open.empty()) return nullptr;
    return open[in.ConsumeIntegralInRange<size_t>(0, open.size() - 1)];
  }

  std::vector<std::string> HeldIds(const ConsumerModel& c) {
    std::vector<std::string> ids;
    for (const auto& [key, m] : messages_) {
      if (m.topic != c.topic) continue;
      auto copy = m.copies.find(c.group);
      if (copy != m.copies.end() && copy->second.in_flight &&
          copy->second.owner == c.id) {
        ids.push_back(m.id);
      }
    }
    return ids;
  }

  void Ack(FuzzedDataProvider& in) {
    ConsumerModel* c = PickConnected(in);
    if (c == nullptr) return;
    std::vector<std::string> ids = HeldIds(*c);
    if (!ids.empty() && in.ConsumeBool()) {
      ids = {ids[in.ConsumeIntegralInRange<size_t>(0, ids.size() - 1)]};
    }
    if (in.ConsumeIntegralInRange(0, 3) == 0) ids.push_back(PickKnownId(in));
    size_t unknown = 0;
    for (const std::string& id : ids) {
      auto it = messages_.find({c->topic, id});
      if (it == messages_.end()) {
        ++unknown;
        continue;
      }
      auto copy = it->second.copies.find(c->group);
      if (copy == it->second.copies.end() || !copy->second.in_flight ||
          copy->second.owner != c->id) {
        ++unknown;
        continue;
      }
      it->second.copies.erase(copy);
      Forget(it->first);
    }
    TRACE("%lld ack consumer %llu: %zu ids, %zu unknown\n",
          static_cast<long long>(NowMs()),
          static_cast<unsigned long long>(c->id), ids.size(), unknown);
    const std::vector<std::string_view> views(ids.begin(), ids.end());
    dispatcher().Ack(c->id, views);
    // The next step takes the acks; Settle compares the count.
    unknown_acks_ += unknown;
  }

  void Nack(FuzzedDataProvider& in) {
    ConsumerModel* c = PickConnected(in);
    if (c == nullptr) return;
    const std::vector<std::string> ids = HeldIds(*c);
    if (ids.empty()) return;
    const std::string& id =
        ids[in.ConsumeIntegralInRange<size_t>(0, ids.size() - 1)];
    const int64_t delay_ms =
        in.ConsumeBool() ? 0 : in.ConsumeIntegralInRange(1, 20);
    TRACE("%lld nack consumer %llu: %s delay %lld\n",
          static_cast<long long>(NowMs()),
          static_cast<unsigned long long>(c->id), id.c_str(),
          static_cast<long long>(delay_ms));
    Copy& copy = messages_.at({c->topic, id}).copies.at(c->group);
    copy.owner = 0;
    copy.due_again_ms = NowMs() + delay_ms;
    dispatcher().Nack(c->id, id, absl::Milliseconds(delay_ms));
  }

  void Disconnect(FuzzedDataProvider& in) {
    ConsumerModel* c = PickConnected(in);
    if (c == nullptr) return;
    TRACE("%lld disconnect consumer %llu\n", static_cast<long long>(NowMs()),
          static_cast<unsigned long long>(c->id));
    for (const std::string& id : HeldIds(*c)) {
      Copy& copy = messages_.at({c->topic, id}).copies.at(c->group);
      copy.owner = 0;
      copy.due_again_ms = NowMs();
    }
    c->connected = false;
    dispatcher().Unsubscribe(c->id);
  }

  // ---- Admin calls.

  void AdminCall(FuzzedDataProvider& in) {
    const auto rpc =
        static_cast<Rpc>(in.ConsumeIntegralInRange(0, kNumRpcs - 1));
    const bool raw = in.ConsumeIntegralInRange(0, 4) == 0;
    switch (rpc) {
      case Rpc::kGetStats: {
        v1::GetStatsRequest r;
        if (raw && !ParseRequest(in, r)) return;
        if (!raw && in.ConsumeBool()) r.set_topic(ConsumeTopic(in));
        CallGetStats(r);
        break;
      }
      case Rpc::kListTopics: {
        v1::ListTopicsRequest r;
        if (raw && !ParseRequest(in, r)) return;
        CallListTopics(r);
        break;
      }
      case Rpc::kListGroups: {
        v1::ListGroupsRequest r;
        if (raw && !ParseRequest(in, r)) return;
        if (!raw) r.set_topic(ConsumeTopic(in));
        CallListGroups(r);
        break;
      }
      case Rpc::kCreateGroup: {
        v1::CreateGroupRequest r;
        if (raw && !ParseRequest(in, r)) return;
        if (!raw) {
          r.set_topic(ConsumeTopic(in));
          r.set_group(ConsumeGroup(in));
        }
        CallCreateGroup(r);
        break;
      }
      case Rpc::kDeleteGroup: {
        v1::DeleteGroupRequest r;
        if (raw && !ParseRequest(in, r)) return;
        if (!raw) {
          r.set_topic(ConsumeTopic(in));
          r.set_group(ConsumeGroup(in));
        }
        CallDeleteGroup(r);
        break;
      }
      case Rpc::kListMessages: {
        v1::ListMessagesRequest r;
        if (raw && !ParseRequest(in, r)) return;
        if (!raw) BuildListMessages(in, r);
        CallListMessages(r);
        break;
      }
      case Rpc::kGetMessage: {
        v1::GetMessageRequest r;
        if (raw && !ParseRequest(in, r)) return;
        if (!raw) {
          auto [topic, id] = ConsumeTarget(in);
          r.set_topic(topic);
          r.set_id(id);
          switch (in.ConsumeIntegralInRange(0, 5)) {
            case 0:
              break;
            case 1:
              r.set_preview_bytes(in.ConsumeIntegralInRange(1, 3));
              break;
            case 2:
              r.set_preview_bytes(kDefaultPreviewBytes +
                                  in.ConsumeIntegralInRange(-1, 1));
              break;
            case 3:
              r.set_preview_bytes(kMaxPreviewBytes +
                                  in.ConsumeIntegralInRange(0, 1));
              break;
            default:
              r.set_preview_bytes(in.ConsumeIntegral<uint32_t>());
              break;
          }
        }
        CallGetMessage(r);
        break;
      }
      case Rpc::kCancelMessage: {
        v1::CancelRequest r;
        if (raw && !ParseRequest(in, r)) return;
        if (!raw) {
          auto [topic, id] = ConsumeTarget(in);
          r.set_topic(topic);
          r.set_id(id);
        }
        CallCancelMessage(r);
        break;
      }
      case Rpc::kReschedule: {
        v1::RescheduleRequest r;
        if (raw && !ParseRequest(in, r)) return;
        if (!raw) {
          auto [topic, id] = ConsumeTarget(in);
          r.set_topic(topic);
          r.set_id(id);
          switch (in.ConsumeIntegralInRange(0, 4)) {
            case 0:
              break;  // Neither.
            case 1:
            case 2:
              *r.mutable_delay() = ConsumeDuration(in);
              break;
            default:
              *r.mutable_deliver_at() = ConsumeTimestamp(in);
              break;
          }
        }
        CallReschedule(r);
        break;
      }
      case Rpc::kRedriveDeadLetters: {
        v1::RedriveDeadLettersRequest r;
        if (raw && !ParseRequest(in, r)) return;
        if (!raw) {
          // Mostly the topic of a dead letter, and ids of its letters.
          const auto [letter_topic, letter_id] = ConsumeTarget(in);
          const bool letter = absl::EndsWith(letter_topic, ".dlq");
          r.set_topic(letter ? letter_topic.substr(0, letter_topic.size() - 4)
                             : ConsumeTopic(in));
          const int n = in.ConsumeBool()
                            ? 0
                            : in.ConsumeIntegralInRange(
                                  1, static_cast<int>(kMaxBatch) + 1);
          for (int i = 0; i < n; ++i) {
            r.add_ids(letter && in.ConsumeBool() ? letter_id : ConsumeId(in));
          }
        }
        CallRedrive(r);
        break;
      }
      case Rpc::kPurgeTopic: {
        v1::PurgeTopicRequest r;
        if (raw && !ParseRequest(in, r)) return;
        if (!raw) {
          r.set_topic(ConsumeTopic(in));
          const int what = in.ConsumeIntegralInRange(0, 3);
          r.set_scheduled((what & 1) != 0);
          r.set_ready((what & 2) != 0);
        }
        CallPurgeTopic(r);
        break;
      }
    }
  }

  // -- GetStats, ListTopics, ListGroups.

  // Counts of a topic as the model sees them.
  struct TopicCounts {
    uint64_t scheduled = 0;
    uint64_t ready = 0;  // In groups and in the waiting area.
    uint64_t in_flight = 0;
    uint64_t dead_lettered = 0;
    // By group: ready (own entries: not the waiting area's), in flight.
    std::map<std::string, std::pair<uint64_t, uint64_t>> groups;
  };

  TopicCounts Count(const std::string& topic) {
    TopicCounts counts;
    if (auto t = groups_.find(topic); t != groups_.end()) {
      for (const auto& [name, g] : t->second) counts.groups[name] = {0, 0};
    }
    const std::string dead = DeadLetterTopic(topic);
    for (const auto& [key, m] : messages_) {
      if (m.topic == dead) ++counts.dead_lettered;
      if (m.topic != topic) continue;
      if (m.scheduled) ++counts.scheduled;
      if (m.in_area) ++counts.ready;
      for (const auto& [group, c] : m.copies) {
        if (c.in_flight) {
          ++counts.in_flight;
          ++counts.groups[group].second;
        } else {
          ++counts.ready;
          ++counts.groups[group].first;
        }
      }
    }
    return counts;
  }

  std::set<std::string> Topics() {
    std::set<std::string> topics;
    for (const auto& [key, m] : messages_) topics.insert(m.topic);
    for (const auto& [topic, groups] : groups_) topics.insert(topic);
    return topics;
  }

  uint32_t Consumers(const std::string& topic, const std::string& group) {
    return static_cast<uint32_t>(ConsumersOf(topic, group).size());
  }

  void CallGetStats(const v1::GetStatsRequest& request) {
    TRACE("%lld GetStats %s\n", static_cast<long long>(NowMs()),
          Show(request).c_str());
    Expect expect;
    const std::string& topic = request.topic();
    if (!topic.empty() && !ValidName(topic)) expect.bad.push_back("topic");
    if (expect.bad.empty() && !topic.empty() && !TopicExists(topic)) {
      expect.code = grpc::StatusCode::NOT_FOUND;
    }
    const Snapshot before = TakeSnapshot();
    v1::GetStatsResponse response;
    const grpc::Status status = Invoke([&](auto* context, auto done) {
      rig_.admin_stub->async()->GetStats(context, &request, &response,
                                         std::move(done));
    });
    if (!CheckStatus(Rpc::kGetStats, status, expect, before)) return;
    std::vector<std::string> topics;
    if (topic.empty()) {
      const std::set<std::string> all = Topics();
      topics.assign(all.begin(), all.end());
    } else {
      topics = {topic};
    }
    FUZZ_CHECK(response.topics_size() == static_cast<int>(topics.size()),
               "GetStats: %d topics, expected %zu", response.topics_size(),
               topics.size());
    for (size_t i = 0; i < topics.size(); ++i) {
      const v1::TopicStats& s = response.topics(static_cast<int>(i));
      const TopicCounts counts = Count(topics[i]);
      FUZZ_CHECK(s.topic() == topics[i] && s.scheduled() == counts.scheduled &&
                     s.ready() == counts.ready &&
                     s.in_flight() == counts.in_flight &&
                     s.dead_lettered() == counts.dead_lettered &&
                     s.groups_size() == static_cast<int>(counts.groups.size()),
                 "GetStats of %s: %s; expected scheduled %llu ready %llu in "
                 "flight %llu dead %llu, %zu groups",
                 topics[i].c_str(), Show(s).c_str(),
                 static_cast<unsigned long long>(counts.scheduled),
                 static_cast<unsigned long long>(counts.ready),
                 static_cast<unsigned long long>(counts.in_flight),
                 static_cast<unsigned long long>(counts.dead_lettered),
                 counts.groups.size());
      FUZZ_CHECK(s.publish_rate() >= 0 && s.delivery_rate() >= 0,
                 "GetStats: negative rates");
      int g = 0;
      for (const auto& [name, ready_and_in_flight] : counts.groups) {
        const v1::GroupStats& gs = s.groups(g++);
        FUZZ_CHECK(gs.group() == name &&
                       gs.ready() == ready_and_in_flight.first &&
                       gs.in_flight() == ready_and_in_flight.second &&
                       gs.consumers() == Consumers(topics[i], name) &&
                       gs.ack_rate() >= 0,
                   "GetStats of %s, group %s: %s", topics[i].c_str(),
                   name.c_str(), Show(gs).c_str());
      }
    }
    FUZZ_CHECK(FloorMillis(Nanos(response.started_at())) == kStartMs,
               "GetStats: started_at %s", Show(response.started_at()).c_str());
  }

  void CallListTopics(const v1::ListTopicsRequest& request) {
    TRACE("%lld ListTopics\n", static_cast<long long>(NowMs()));
    const Snapshot before = TakeSnapshot();
    v1::ListTopicsResponse response;
    const grpc::Status status = Invoke([&](auto* context, auto done) {
      rig_.admin_stub->async()->ListTopics(context, &request, &response,
                                           std::move(done));
    });
    if (!CheckStatus(Rpc::kListTopics, status, Expect(), before)) return;
    const std::set<std::string> topics = Topics();
    FUZZ_CHECK(response.topics_size() == static_cast<int>(topics.size()),
               "ListTopics: %d topics, expected %zu", response.topics_size(),
               topics.size());
    int i = 0;
    for (const std::string& topic : topics) {
      const v1::Topic& t = response.topics(i++);
      const TopicCounts counts = Count(topic);
      FUZZ_CHECK(t.name() == topic && t.scheduled() == counts.scheduled &&
                     t.groups() == counts.groups.size() &&
                     t.ready() == counts.ready &&
                     t.in_flight() == counts.in_flight &&
                     t.dead_lettered() == counts.dead_lettered,
                 "ListTopics: %s for %s", Show(t).c_str(), topic.c_str());
    }
  }

  void CallListGroups(const v1::ListGroupsRequest& request) {
    TRACE("%lld ListGroups %s\n", static_cast<long long>(NowMs()),
          Show(request).c_str());
    Expect expect;
    if (!ValidName(request.topic())) expect.bad.push_back("topic");
    if (expect.bad.empty() && !TopicExists(request.topic())) {
      expect.code = grpc::StatusCode::NOT_FOUND;
    }
    const Snapshot before = TakeSnapshot();
    v1::ListGroupsResponse response;
    const grpc::Status status = Invoke([&](auto* context, auto done) {
      rig_.admin_stub->async()->ListGroups(context, &request, &response,
                                           std::move(done));
    });
    if (!CheckStatus(Rpc::kListGroups, status, expect, before)) return;
    const TopicCounts counts = Count(request.topic());
    FUZZ_CHECK(response.groups_size() == static_cast<int>(counts.groups.size()),
               "ListGroups: %d groups, expected %zu", response.groups_size(),
               counts.groups.size());
    int i = 0;
    for (const auto& [name, ready_and_in_flight] : counts.groups) {
      const v1::Group& g = response.groups(i++);
      FUZZ_CHECK(g.topic() == request.topic() && g.name() == name &&
                     Nanos(g.created_at()) ==
                         static_cast<__int128>(
                             groups_[request.topic()][name].created_at_ms) *
                             kNanosPerMilli &&
                     g.ready() == ready_and_in_flight.first &&
                     g.in_flight() == ready_and_in_flight.second &&
                     g.consumers() == Consumers(request.topic(), name),
                 "ListGroups of %s: %s", request.topic().c_str(),
                 Show(g).c_str());
    }
  }

  // -- CreateGroup, DeleteGroup.

  void CallCreateGroup(const v1::CreateGroupRequest& request) {
    TRACE("%lld CreateGroup %s\n", static_cast<long long>(NowMs()),
          Show(request).c_str());
    Expect expect;
    if (!ValidName(request.topic())) expect.bad.push_back("topic");
    if (!ValidName(request.group())) expect.bad.push_back("group");
    auto t = groups_.find(request.topic());
    if (t != groups_.end() && t->second.contains(request.group())) {
      expect.code = grpc::StatusCode::ALREADY_EXISTS;
    } else if (GroupCount(request.topic()) >= kMaxGroupsPerTopic) {
      expect.code = grpc::StatusCode::RESOURCE_EXHAUSTED;
    }
    const Snapshot before = TakeSnapshot();
    v1::Group response;
    const grpc::Status status = Invoke([&](auto* context, auto done) {
      rig_.admin_stub->async()->CreateGroup(context, &request, &response,
                                            std::move(done));
    });
    if (!CheckStatus(Rpc::kCreateGroup, status, expect, before)) return;
    Register(request.topic(), request.group());
    FUZZ_CHECK(response.topic() == request.topic() &&
                   response.name() == request.group() &&
                   Nanos(response.created_at()) ==
                       static_cast<__int128>(NowMs()) * kNanosPerMilli &&
                   response.ready() == 0 && response.in_flight() == 0 &&
                   response.consumers() == 0,
               "CreateGroup: %s", Show(response).c_str());
  }

  void CallDeleteGroup(const v1::DeleteGroupRequest& request) {
    TRACE("%lld DeleteGroup %s\n", static_cast<long long>(NowMs()),
          Show(request).c_str());
    Expect expect;
    const std::string& topic = request.topic();
    const std::string& group = request.group();
    if (!ValidName(topic)) expect.bad.push_back("topic");
    if (!ValidName(group)) expect.bad.push_back("group");
    auto t = groups_.find(topic);
    if (t == groups_.end() || !t->second.contains(group)) {
      expect.code = grpc::StatusCode::NOT_FOUND;
    }
    const Snapshot before = TakeSnapshot();
    v1::DeleteGroupResponse response;
    const grpc::Status status = Invoke([&](auto* context, auto done) {
      rig_.admin_stub->async()->DeleteGroup(context, &request, &response,
                                            std::move(done));
    });
    if (!CheckStatus(Rpc::kDeleteGroup, status, expect, before)) return;
    // Its entries go, and the messages no other group holds.
    const bool owner = AreaOwner(topic) == group;
    uint64_t removed = 0;
    std::vector<TopicId> touched;
    for (auto& [key, m] : messages_) {
      if (m.topic != topic) continue;
      if (m.copies.erase(group) > 0) {
        ++removed;
        touched.push_back(key);
      }
      if (owner && m.in_area) {
        m.in_area = false;
        ++removed;
        touched.push_back(key);
      }
    }
    for (const TopicId& key : touched) Forget(key);
    groups_[topic].erase(group);
    if (groups_[topic].empty()) groups_.erase(topic);
    // Its streams end with NOT_FOUND.
    for (ConsumerModel* c : ConsumersOf(topic, group)) {
      c->connected = false;
      const std::optional<absl::Status> ended = c->inbox->ended();
      FUZZ_CHECK(
          ended.has_value() && ended->code() == absl::StatusCode::kNotFound,
          "a consumer of a deleted group %s",
          ended.has_value() ? ended->ToString().c_str() : "was not ended");
    }
    FUZZ_CHECK(response.removed() == removed,
               "DeleteGroup removed %llu entries, expected %llu",
               static_cast<unsigned long long>(response.removed()),
               static_cast<unsigned long long>(removed));
  }

  // -- ListMessages.

  void BuildListMessages(FuzzedDataProvider& in, v1::ListMessagesRequest& r) {
    r.set_topic(ConsumeTopic(in));
    switch (in.ConsumeIntegralInRange(0, 9)) {
      case 0:
        r.set_state(v1::MESSAGE_STATE_UNSPECIFIED);
        break;
      case 1:  // Out of the enum's range.
        r.set_state(static_cast<v1::MessageState>(
            in.ConsumeBool() ? 5 : in.ConsumeIntegral<int32_t>()));
        break;
      default:
        r.set_state(
            static_cast<v1::MessageState>(in.ConsumeIntegralInRange(1, 4)));
        break;
    }
    if (in.ConsumeIntegralInRange(0, 2) == 0) r.set_group(ConsumeGroup(in));
    if (in.ConsumeIntegralInRange(0, 3) == 0) {
      *r.mutable_due_from() = ConsumeTimestamp(in);
    }
    if (in.ConsumeIntegralInRange(0, 3) == 0) {
      *r.mutable_due_to() = ConsumeTimestamp(in);
    }
    r.set_page_size(ConsumePageSize(in));
    r.set_page_token(ConsumePageToken(in));
  }

  // The fields of a ListMessages request that the model finds bad, but the
  // page token.
  std::vector<std::string> BadListFields(const v1::ListMessagesRequest& r) {
    std::vector<std::string> bad;
    if (!ValidName(r.topic())) bad.push_back("topic");
    const int state = static_cast<int>(r.state());
    const bool state_ok = state >= 1 && state <= 4;
    if (!state_ok) bad.push_back("state");
    if (!r.group().empty()) {
      const bool per_group = state == v1::MESSAGE_STATE_READY ||
                             state == v1::MESSAGE_STATE_IN_FLIGHT;
      if (!ValidName(r.group()) || (state_ok && !per_group)) {
        bad.push_back("group");
      }
    }
    if (r.has_due_from() && !ValidTimestamp(r.due_from())) {
      bad.push_back("due_from");
    }
    if (r.has_due_to() && !ValidTimestamp(r.due_to())) bad.push_back("due_to");
    if (r.page_size() > kMaxPageSize) bad.push_back("page_size");
    return bad;
  }

  // The whole listing of a well-formed request, in order.
  std::vector<Item> Listing(const v1::ListMessagesRequest& r) {
    const int state = static_cast<int>(r.state());
    auto in_range = [&](const Msg& m) {
      const __int128 at =
          static_cast<__int128>(m.deliver_at_ms) * kNanosPerMilli;
      if (r.has_due_from() && at < Nanos(r.due_from())) return false;
      if (r.has_due_to() && at >= Nanos(r.due_to())) return false;
      return true;
    };
    std::vector<std::pair<std::pair<std::string, DueKey>, Item>> items;
    if (state == v1::MESSAGE_STATE_SCHEDULED ||
        state == v1::MESSAGE_STATE_DEAD) {
      const std::string topic = state == v1::MESSAGE_STATE_DEAD
                                    ? DeadLetterTopic(r.topic())
                                    : r.topic();
      for (const auto& [key, m] : messages_) {
        if (m.topic != topic || !in_range(m)) continue;
        if (state == v1::MESSAGE_STATE_SCHEDULED && !m.scheduled) continue;
        items.push_back({{"", m.key()}, Item{&m, ""}});
      }
    } else {
      const bool ready = state == v1::MESSAGE_STATE_READY;
      const std::string owner = AreaOwner(r.topic());
      for (const auto& [key, m] : messages_) {
        if (m.topic != r.topic() || !in_range(m)) continue;
        // The waiting area is listed as its owner's, or as "" while it has
        // none.
        if (ready && m.in_area) {
          if (r.group().empty() || r.group() == owner) {
            items.push_back({{owner, m.key()}, Item{&m, owner}});
          }
        }
        for (const auto& [group, c] : m.copies) {
          if (c.in_flight == ready) continue;
          if (!r.group().empty() && r.group() != group) continue;
          items.push_back({{group, m.key()}, Item{&m, group}});
        }
      }
    }
    std::sort(items.begin(), items.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<Item> out;
    for (auto& [order, item] : items) out.push_back(std::move(item));
    return out;
  }

  // Whether `item` comes after `position` in its listing.
  static bool After(const Item& item, const Position& position) {
    return std::make_pair(item.group, item.m->key()) >
           std::make_pair(position.group, position.key);
  }

  // A message as a listing shows it.
  v1::MessageInfo ListedInfo(const Item& item, int state) {
    const Msg& m = *item.m;
    v1::MessageInfo info = BaseInfo(m);
    info.set_state(static_cast<v1::MessageState>(state));
    if (state == v1::MESSAGE_STATE_READY ||
        state == v1::MESSAGE_STATE_IN_FLIGHT) {
      v1::GroupDelivery* g = info.add_groups();
      g->set_group(item.group);
      g->set_state(static_cast<v1::MessageState>(state));
      if (state == v1::MESSAGE_STATE_IN_FLIGHT) {
        g->set_attempt(m.copies.at(item.group).attempts);
      }
      info.set_attempt(m.dead_letter_attempts + g->attempt());
    }
    return info;
  }

  // The fields of a message's view that do not depend on its groups.
  v1::MessageInfo BaseInfo(const Msg& m) {
    v1::MessageInfo info;
    info.set_id(m.id);
    info.set_topic(m.topic);
    *info.mutable_deliver_at() = MillisToProto(m.deliver_at_ms);
    *info.mutable_published_at() = MillisToProto(m.published_at_ms);
    info.set_payload_size(static_cast<uint32_t>(m.payload.size()));
    for (const auto& [k, v] : m.headers) (*info.mutable_headers())[k] = v;
    info.set_attempt(m.dead_letter_attempts);
    return info;
  }

  // Compares views, but for redeliver_at, which must be set exactly for
  // deliveries in flight.
  static void CheckInfo(const char* what, v1::MessageInfo actual,
                        const v1::MessageInfo& expected) {
    for (v1::GroupDelivery& g : *actual.mutable_groups()) {
      FUZZ_CHECK(
          g.has_redeliver_at() == (g.state() == v1::MESSAGE_STATE_IN_FLIGHT),
          "%s: redeliver_at of a delivery %s", what, Show(g).c_str());
      g.clear_redeliver_at();
    }
    FUZZ_CHECK(
        google::protobuf::util::MessageDifferencer::Equals(actual, expected),
        "%s: %s, expected %s", what, Show(actual).c_str(),
        Show(expected).c_str());
  }

  // What a request's page token is to the model: none, one the broker gave
  // for this listing (with where it points), one of another listing, or
  // foreign.
  enum class TokenKind { kNone, kOurs, kOtherListing, kForeign };
  TokenKind JudgeToken(const v1::ListMessagesRequest& r, Position& after) {
    if (r.page_token().empty()) return TokenKind::kNone;
    const ListingKey listing = KeyOf(r);
    bool other = false;
    for (const StashedToken& t : tokens_) {
      if (t.token != r.page_token()) continue;
      if (t.listing == listing) {
        after = t.after;
        return TokenKind::kOurs;
      }
      other = true;
    }
    return other ? TokenKind::kOtherListing : TokenKind::kForeign;
  }

  // One ListMessages call, checked; returns the response if it succeeded.
  std::optional<v1::ListMessagesResponse> CallListMessages(
      const v1::ListMessagesRequest& request) {
    TRACE("%lld ListMessages %s\n", static_cast<long long>(NowMs()),
          Show(request).c_str());
    Expect expect;
    expect.bad = BadListFields(request);
    Position after;
    const TokenKind token = JudgeToken(request, after);
    if (token == TokenKind::kOtherListing) expect.bad.push_back("page_token");
    if (token == TokenKind::kForeign) {
      if (expect.bad.empty()) {
        expect.foreign_token = true;
      } else {
        expect.bad.push_back("page_token");  // It may be judged first.
      }
    }
    const Snapshot before = TakeSnapshot();
    v1::ListMessagesResponse response;
    const grpc::Status status = Invoke([&](auto* context, auto done) {
      rig_.admin_stub->async()->ListMessages(context, &request, &response,
                                             std::move(done));
    });
    if (!CheckStatus(Rpc::kListMessages, status, expect, before)) {
      return std::nullopt;
    }
    const int state = static_cast<int>(request.state());
    const std::vector<Item> listing = Listing(request);
    const size_t limit =
        request.page_size() == 0 ? kDefaultPageSize : request.page_size();
    const int n = response.messages_size();
    size_t first = 0;  // Where the page starts in the listing.
    if (token == TokenKind::kForeign) {
      // A token this broker could have made: the page is a run of the
      // listing.
      first = listing.size();
      if (n > 0) {
        for (size_t i = 0; i < listing.size(); ++i) {
          if (listing[i].m->id == response.messages(0).id() &&
              listing[i].m->topic == response.messages(0).topic() &&
              (response.messages(0).groups_size() == 0 ||
               response.messages(0).groups(0).group() == listing[i].group)) {
            first = i;
            break;
          }
        }
      }
    } else if (token == TokenKind::kOurs) {
      while (first < listing.size() && !After(listing[first], after)) ++first;
    }
    const size_t rest = listing.size() - std::min(first, listing.size());
    const size_t expected = std::min(rest, limit);
    FUZZ_CHECK(static_cast<size_t>(n) == expected ||
                   (token == TokenKind::kForeign && n == 0),
               "ListMessages: a page of %d, expected %zu of the %zu left", n,
               expected, rest);
    for (int i = 0; i < n; ++i) {
      const Item& item = listing[first + i];
      CheckInfo("ListMessages", response.messages(i), ListedInfo(item, state));
    }
    const bool more = static_cast<size_t>(n) < rest;
    FUZZ_CHECK(response.next_page_token().empty() != more ||
                   (token == TokenKind::kForeign && n == 0),
               "ListMessages: next_page_token \"%s\" after %d of %zu",
               response.next_page_token().c_str(), n, rest);
    if (!response.next_page_token().empty() && n > 0) {
      const Item& last = listing[first + n - 1];
      if (tokens_.size() >= 8) tokens_.erase(tokens_.begin());
      tokens_.push_back({KeyOf(request), response.next_page_token(),
                         Position{last.group, last.m->key()}});
    }
    return response;
  }

  // Lists `request` page by page (sizes taken in turn from `sizes`) to the
  // end; the pages together are the whole listing, each message once.
  void WalkListing(v1::ListMessagesRequest request,
                   const std::vector<uint32_t>& sizes) {
    const std::vector<Item> listing = Listing(request);
    size_t seen = 0;
    for (int page = 0;; ++page) {
      FUZZ_CHECK(page < kMaxPages, "ListMessages: more than %d pages",
                 kMaxPages);
      request.set_page_size(sizes[page % sizes.size()]);
      std::optional<v1::ListMessagesResponse> response =
          CallListMessages(request);
      FUZZ_CHECK(response.has_value(), "a walk's page was refused");
      seen += response->messages_size();
      if (response->next_page_token().empty()) break;
      request.set_page_token(response->next_page_token());
    }
    FUZZ_CHECK(seen == listing.size(), "a walk listed %zu of %zu messages",
               seen, listing.size());
  }

  void Walk(FuzzedDataProvider& in) {
    v1::ListMessagesRequest request;
    static const char* const kTopics[] = {"t", "u", "t.dlq", "nope"};
    request.set_topic(kTopics[in.ConsumeIntegralInRange(0, 3)]);
    const int state = in.ConsumeIntegralInRange(1, 4);
    request.set_state(static_cast<v1::MessageState>(state));
    if ((state == v1::MESSAGE_STATE_READY ||
         state == v1::MESSAGE_STATE_IN_FLIGHT) &&
        in.ConsumeBool()) {
      request.set_group(absl::StrCat("g", in.ConsumeIntegralInRange(0, 3)));
    }
    // A valid due range, or none.
    if (in.ConsumeIntegralInRange(0, 3) == 0) {
      const Timestamp t = ConsumeTimestamp(in);
      *request.mutable_due_from() = ValidTimestamp(t) ? t : MillisToProto(0);
    }
    if (in.ConsumeIntegralInRange(0, 3) == 0) {
      const Timestamp t = ConsumeTimestamp(in);
      *request.mutable_due_to() =
          ValidTimestamp(t) ? t : MillisToProto(NowMs() + kMaxDelayMs);
    }
    std::vector<uint32_t> sizes;
    const int n = in.ConsumeIntegralInRange(1, 3);
    for (int i = 0; i < n; ++i) {
      sizes.push_back(in.ConsumeIntegralInRange(0, 4) == 0
                          ? 0
                          : in.ConsumeIntegralInRange<uint32_t>(1, 3));
    }
    TRACE("%lld walk %s\n", static_cast<long long>(NowMs()),
          Show(request).c_str());
    WalkListing(request, sizes);
  }

  // -- GetMessage.

  void CallGetMessage(const v1::GetMessageRequest& request) {
    TRACE("%lld GetMessage %s\n", static_cast<long long>(NowMs()),
          Show(request).c_str());
    Expect expect;
    if (!ValidName(request.topic())) expect.bad.push_back("topic");
    if (!ValidId(request.id())) expect.bad.push_back("id");
    if (request.preview_bytes() > kMaxPreviewBytes) {
      expect.bad.push_back("preview_bytes");
    }
    auto it = messages_.find({request.topic(), request.id()});
    if (it == messages_.end()) expect.code = grpc::StatusCode::NOT_FOUND;
    const Snapshot before = TakeSnapshot();
    v1::MessageInfo response;
    const grpc::Status status = Invoke([&](auto* context, auto done) {
      rig_.admin_stub->async()->GetMessage(context, &request, &response,
                                           std::move(done));
    });
    if (!CheckStatus(Rpc::kGetMessage, status, expect, before)) return;
    const Msg& m = it->second;
    v1::MessageInfo expected = BaseInfo(m);
    const uint32_t preview = request.preview_bytes() == 0
                                 ? kDefaultPreviewBytes
                                 : request.preview_bytes();
    expected.set_payload_preview(m.payload.substr(0, preview));
    if (m.scheduled) {
      expected.set_state(v1::MESSAGE_STATE_SCHEDULED);
    } else {
      // The waiting area first (as group ""), then the groups by name.
      bool any_ready = false;
      uint32_t highest = 0;
      if (m.in_area) {
        v1::GroupDelivery* g = expected.add_groups();
        g->set_state(v1::MESSAGE_STATE_READY);
        any_ready = true;
      }
      for (const auto& [group, c] : m.copies) {
        v1::GroupDelivery* g = expected.add_groups();
        g->set_group(group);
        g->set_state(c.in_flight ? v1::MESSAGE_STATE_IN_FLIGHT
                                 : v1::MESSAGE_STATE_READY);
        g->set_attempt(c.in_flight ? c.attempts : 0);
        highest = std::max(highest, g->attempt());
        any_ready = any_ready || !c.in_flight;
      }
      expected.set_attempt(m.dead_letter_attempts + highest);
      if (absl::EndsWith(m.topic, ".dlq")) {
        expected.set_state(v1::MESSAGE_STATE_DEAD);
      } else {
        expected.set_state(any_ready || expected.groups_size() == 0
                               ? v1::MESSAGE_STATE_READY
                               : v1::MESSAGE_STATE_IN_FLIGHT);
      }
    }
    CheckInfo("GetMessage", response, expected);
  }

  // -- CancelMessage, Reschedule.

  void CallCancelMessage(const v1::CancelRequest& request) {
    TRACE("%lld CancelMessage %s\n", static_cast<long long>(NowMs()),
          Show(request).c_str());
    Expect expect;
    if (!ValidName(request.topic())) expect.bad.push_back("topic");
    if (!ValidId(request.id())) expect.bad.push_back("id");
    const TopicId key{request.topic(), request.id()};
    auto it = messages_.find(key);
    if (it == messages_.end() || !it->second.scheduled) {
      expect.code = grpc::StatusCode::NOT_FOUND;
    }
    const Snapshot before = TakeSnapshot();
    v1::CancelResponse response;
    const grpc::Status status = Invoke([&](auto* context, auto done) {
      rig_.admin_stub->async()->CancelMessage(context, &request, &response,
                                              std::move(done));
    });
    if (!CheckStatus(Rpc::kCancelMessage, status, expect, before)) return;
    messages_.erase(key);
  }

  void CallReschedule(const v1::RescheduleRequest& request) {
    TRACE("%lld Reschedule %s\n", static_cast<long long>(NowMs()),
          Show(request).c_str());
    Expect expect;
    if (!ValidName(request.topic())) expect.bad.push_back("topic");
    if (!ValidId(request.id())) expect.bad.push_back("id");
    const int64_t now = NowMs();
    const __int128 now_ns = static_cast<__int128>(now) * kNanosPerMilli;
    const __int128 max_delay_ns =
        static_cast<__int128>(kMaxDelayMs) * kNanosPerMilli;
    int64_t due = now;
    if (request.has_delay()) {
      const Duration& d = request.delay();
      if (!ValidDuration(d) || Nanos(d) < 0 || Nanos(d) > max_delay_ns) {
        expect.bad.push_back("delay");
      } else {
        due = FloorMillis(now_ns + Nanos(d));
      }
    } else if (request.has_deliver_at()) {
      const Timestamp& t = request.deliver_at();
      if (!ValidTimestamp(t) || Nanos(t) - now_ns > max_delay_ns) {
        expect.bad.push_back("deliver_at");
      } else {
        due = std::max(now, FloorMillis(Nanos(t)));  // The past means now.
      }
    } else {
      expect.bad.push_back("delay");
      expect.bad.push_back("deliver_at");
    }
    const TopicId key{request.topic(), request.id()};
    auto it = messages_.find(key);
    if (it == messages_.end() || !it->second.scheduled) {
      expect.code = grpc::StatusCode::NOT_FOUND;
    }
    const Snapshot before = TakeSnapshot();
    v1::Receipt response;
    const grpc::Status status = Invoke([&](auto* context, auto done) {
      rig_.admin_stub->async()->Reschedule(context, &request, &response,
                                           std::move(done));
    });
    if (!CheckStatus(Rpc::kReschedule, status, expect, before)) return;
    it->second.deliver_at_ms = due;
    FUZZ_CHECK(response.id() == request.id() && !response.duplicate() &&
                   Nanos(response.deliver_at()) ==
                       static_cast<__int128>(due) * kNanosPerMilli,
               "Reschedule: %s, expected due %lld", Show(response).c_str(),
               static_cast<long long>(due));
  }

  // -- RedriveDeadLetters, PurgeTopic.

  void CallRedrive(const v1::RedriveDeadLettersRequest& request) {
    TRACE("%lld RedriveDeadLetters %s\n", static_cast<long long>(NowMs()),
          Show(request).c_str());
    Expect expect;
    const std::string& topic = request.topic();
    if (!ValidName(topic)) expect.bad.push_back("topic");
    if (static_cast<size_t>(request.ids_size()) > kMaxBatch) {
      expect.bad.push_back("ids");
    }
    for (int i = 0; i < request.ids_size(); ++i) {
      if (!ValidId(request.ids(i))) {
        expect.bad.push_back(absl::StrCat("ids[", i, "]"));
      }
    }
    // The letters to move: those named (each once), or every one. A
    // message of the dead-letter topic that is not yet due (a producer's,
    // scheduled) is not a dead letter yet.
    const std::string dead = DeadLetterTopic(topic);
    std::vector<TopicId> letters;
    if (request.ids_size() > 0) {
      std::set<std::string> named;
      for (const std::string& id : request.ids()) {
        if (!named.insert(id).second) continue;
        auto it = messages_.find({dead, id});
        if (it == messages_.end() || it->second.scheduled) {
          expect.code = grpc::StatusCode::NOT_FOUND;
        }
        letters.push_back({dead, id});
      }
    } else {
      std::vector<std::pair<DueKey, TopicId>> all;
      for (const auto& [key, m] : messages_) {
        if (m.topic == dead && !m.scheduled) all.emplace_back(m.key(), key);
      }
      std::sort(all.begin(), all.end());
      for (auto& [due, key] : all) letters.push_back(std::move(key));
    }
    const Snapshot before = TakeSnapshot();
    v1::RedriveDeadLettersResponse response;
    const grpc::Status status = Invoke([&](auto* context, auto done) {
      rig_.admin_stub->async()->RedriveDeadLetters(context, &request, &response,
                                                   std::move(done));
    });
    if (!CheckStatus(Rpc::kRedriveDeadLetters, status, expect, before)) return;
    // Each goes back to the topic, due now, unless its id is pending there.
    uint64_t moved = 0;
    for (const TopicId& key : letters) {
      if (messages_.contains({topic, key.second})) continue;
      Msg& letter = messages_.at(key);
      Msg m;
      m.topic = topic;
      m.id = letter.id;
      m.payload = letter.payload;
      m.headers = letter.headers;
      m.deliver_at_ms = NowMs();
      messages_.erase(key);
      Store(std::move(m));
      ++moved;
    }
    FUZZ_CHECK(response.redriven() == moved,
               "RedriveDeadLetters moved %llu, expected %llu",
               static_cast<unsigned long long>(response.redriven()),
               static_cast<unsigned long long>(moved));
  }

  void CallPurgeTopic(const v1::PurgeTopicRequest& request) {
    TRACE("%lld PurgeTopic %s\n", static_cast<long long>(NowMs()),
          Show(request).c_str());
    Expect expect;
    const std::string& topic = request.topic();
    if (!ValidName(topic)) expect.bad.push_back("topic");
    if (!request.scheduled() && !request.ready()) {
      expect.bad.push_back("scheduled");
      expect.bad.push_back("ready");
    }
    const Snapshot before = TakeSnapshot();
    v1::PurgeTopicResponse response;
    const grpc::Status status = Invoke([&](auto* context, auto done) {
      rig_.admin_stub->async()->PurgeTopic(context, &request, &response,
                                           std::move(done));
    });
    if (!CheckStatus(Rpc::kPurgeTopic, status, expect, before)) return;
    uint64_t purged = 0;
    std::vector<TopicId> gone;
    for (auto& [key, m] : messages_) {
      if (m.topic != topic) continue;
      if (m.scheduled) {
        if (request.scheduled()) gone.push_back(key);
        continue;
      }
      if (!request.ready()) continue;
      m.in_area = false;
      std::erase_if(m.copies,
                    [](const auto& c) { return !c.second.in_flight; });
      if (!m.held()) gone.push_back(key);
    }
    for (const TopicId& key : gone) {
      messages_.erase(key);
      ++purged;
    }
    FUZZ_CHECK(response.purged() == purged,
               "PurgeTopic purged %llu, expected %llu",
               static_cast<unsigned long long>(response.purged()),
               static_cast<unsigned long long>(purged));
  }

  Rig& rig_;
  std::unique_ptr<storage::MessageStore> store_ = storage::MemoryStore::Open();
  testing::FakeClock clock_{absl::FromUnixMillis(kStartMs)};
  std::unique_ptr<broker::Engine> engine_;
  std::unique_ptr<BrokerService> broker_service_;
  std::unique_ptr<AdminService> admin_service_;

  // The model.
  std::map<TopicId, Msg> messages_;
  std::map<std::string, std::map<std::string, GroupModel>> groups_;
  std::vector<ConsumerModel> consumers_;
  // Deliveries taken from consumers since the model last settled.
  std::vector<std::pair<ConsumerId, Delivery>> observed_;
  // Page tokens the broker gave, newest last.
  std::vector<StashedToken> tokens_;
  int64_t moved_ms_ = 0;
  // Ack and nack ids the dispatcher should have found not in flight on
  // their consumer (Dispatcher::unknown_acks), since the engine opened.
  uint64_t unknown_acks_ = 0;
};

void TestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  AdminFuzzer fuzzer;
  fuzzer.Run(in);
}

}  // namespace
}  // namespace hourglass::api::admin_fuzz

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  // Parsing the input as a request logs every string that is not UTF-8;
  // such requests are simply skipped.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hourglass::api::admin_fuzz::TestOneInput(data, size);
  return 0;
}
