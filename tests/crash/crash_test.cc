// Crash test: a real hourglassd takes publishes and delivers to a consumer
// while it is killed with SIGKILL at random moments, again and again. A
// ledger of what each Publish answered is checked at the end:
//   - every message whose Publish succeeded is delivered, with the
//     deliver_at of its receipt, never before it;
//   - nothing is delivered that was never published;
//   - the store is consistent at the end: no message stored twice, every
//     index entry points at a message, every message left is in a state
//     (scheduled, ready or in flight: none is an orphan that nothing would
//     ever deliver or delete), and what is left is only messages whose acks
//     a kill or the final stop may have cut off.
// Publishes cut off by a kill have an unknown outcome: they may or may not
// be delivered, but at most as the one message they would have been.

#include <atomic>
#include <cstdint>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "hourglass/v1/admin.grpc.pb.h"
#include "storage/keys.h"
#include "storage/message_store.h"
#include "storage/records.pb.h"
#include "storage/rocksdb_store.h"
#include "tests/testing/broker_client.h"
#include "tests/testing/daemon.h"
#include "tests/testing/eventually.h"
#include "tests/testing/seed.h"
#include "tests/testing/temp_dir.h"

namespace hourglass {
namespace {

using testing::BrokerClient;
using testing::Received;

// SIGKILLs in a run: 20, or HOURGLASS_CRASH_KILLS (the long runs recorded
// in RELIABILITY.md use 1,000).
int Kills() {
  if (const char* s = std::getenv("HOURGLASS_CRASH_KILLS")) {
    return std::stoi(s);
  }
  return 20;
}
constexpr int kPublishers = 3;
constexpr int kBatch = 20;

// What the broker answered, and what the consumer saw. Thread-safe.
class Ledger {
 public:
  void Published(const std::string& id, absl::Time deliver_at) {
    absl::MutexLock lock(&mu_);
    if (published_.emplace(id, deliver_at).second && !delivered_.contains(id)) {
      ++missing_;
    }
    unknown_.erase(id);
  }
  void Unknown(const std::string& id) {
    absl::MutexLock lock(&mu_);
    if (!published_.contains(id)) unknown_.insert(id);
  }
  void Delivered(const Received& r) {
    absl::MutexLock lock(&mu_);
    const std::string& id = r.delivery.id();
    const absl::Time deliver_at = testing::ToTime(r.delivery.deliver_at());
    if (r.at < deliver_at) early_.push_back(id);
    auto published = published_.find(id);
    if (published != published_.end() && published->second != deliver_at) {
      wrong_time_.push_back(id);
    }
    if (delivered_.insert(id).second && published_.contains(id)) --missing_;
  }
  size_t published() {
    absl::MutexLock lock(&mu_);
    return published_.size();
  }
  // Waits until `n` publishes succeeded in all; false at the deadline.
  bool AwaitPublished(size_t n, absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return published_.size() >= n;
    };
    return mu_.AwaitWithDeadline(absl::Condition(&done), deadline);
  }
  // Waits until every published message was delivered; false at the
  // deadline.
  bool AwaitAllDelivered(absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return missing_ == 0;
    };
    return mu_.AwaitWithDeadline(absl::Condition(&done), deadline);
  }
  bool MayExist(const std::string& id) {
    absl::MutexLock lock(&mu_);
    return published_.contains(id) || unknown_.contains(id);
  }

  void Check() {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, at] : published_) {
      EXPECT_TRUE(delivered_.contains(id)) << id << " was never delivered";
    }
    for (const std::string& id : delivered_) {
      EXPECT_TRUE(published_.contains(id) || unknown_.contains(id))
          << id << " was delivered but never published";
    }
    EXPECT_TRUE(early_.empty())
        << early_.size() << " early, e.g. " << early_[0];
    EXPECT_TRUE(wrong_time_.empty())
        << wrong_time_.size() << " with another deliver_at, e.g. "
        << wrong_time_[0];
    std::cout << published_.size() << " published, " << unknown_.size()
              << " cut off by a kill, " << delivered_.size() << " delivered\n";
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, absl::Time> published_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> unknown_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> delivered_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> early_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> wrong_time_ ABSL_GUARDED_BY(mu_);
  // Published and not yet delivered. Kept as a count so that waiting on it
  // costs O(1) per change: the mutex evaluates a waiter's condition on every
  // unlock.
  size_t missing_ ABSL_GUARDED_BY(mu_) = 0;
};

// Consumes and acks until the stream ends or `stop` is set.
void Consume(testing::Subscription& subscription, Ledger& ledger,
             const std::atomic<bool>& stop) {
  while (!stop.load()) {
    std::vector<Received> got = subscription.Take(1, absl::Milliseconds(100));
    for (Received& r : subscription.TakeQueued()) got.push_back(std::move(r));
    if (got.empty()) {
      if (subscription.WaitEnd(absl::ZeroDuration()).has_value()) return;
      continue;
    }
    std::vector<std::string> ids;
    for (const Received& r : got) {
      ledger.Delivered(r);
      ids.push_back(r.delivery.id());
    }
    subscription.Ack(ids);
  }
}

TEST(CrashTest, NothingAcknowledgedIsLostAcrossKills) {
  const uint64_t seed = testing::SeedFromEnvironment();
  std::cout << "seed " << seed << " (HOURGLASS_SEED to replay)\n";
  std::mt19937_64 random(seed);
  testing::TempDir dir;
  const std::string data = dir.path() + "/data";
  Ledger ledger;
  const int kills = Kills();
  std::cout << kills << " kills (HOURGLASS_CRASH_KILLS to change)\n";

  for (int round = 0; round <= kills; ++round) {
    auto daemon =
        testing::Daemon::Start(HOURGLASSD_PATH, data, {"--ack_timeout=2s"});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    BrokerClient client((*daemon)->Channel());
    auto subscription = client.Subscribe("crash", "g", /*max_in_flight=*/500);
    std::atomic<bool> stop_consuming{false};
    std::thread consumer(
        [&] { Consume(*subscription, ledger, stop_consuming); });
    if (round == kills) {
      // The last run: no kill. Every published message comes (the last is
      // due at most 2 s after its publish).
      EXPECT_TRUE(ledger.AwaitAllDelivered(absl::Now() + absl::Seconds(60)))
          << "stream ended: "
          << (subscription->WaitEnd(absl::ZeroDuration()).has_value()
                  ? subscription->WaitEnd(absl::ZeroDuration())->error_message()
                  : "no")
          << "\n"
          << (*daemon)->process().output();
      // Publishes a kill cut off may still have been stored; they come due
      // too, and so the store ends empty only once the topic holds nothing
      // scheduled, ready or in flight (the consumer acks all it gets).
      auto admin = hourglass::v1::Admin::NewStub((*daemon)->Channel());
      auto drained = [&] {
        grpc::ClientContext context;
        hourglass::v1::GetStatsRequest request;
        request.set_topic("crash");
        hourglass::v1::GetStatsResponse stats;
        if (!admin->GetStats(&context, request, &stats).ok() ||
            stats.topics_size() != 1) {
          return false;
        }
        const hourglass::v1::TopicStats& t = stats.topics(0);
        return t.scheduled() == 0 && t.ready() == 0 && t.in_flight() == 0;
      };
      EXPECT_TRUE(testing::Eventually(drained, absl::Seconds(60)));
      stop_consuming = true;
      consumer.join();
      // Ending the stream hands its acks to the broker in order; the
      // graceful stop writes them.
      EXPECT_TRUE(subscription->Close().ok());
      EXPECT_EQ((*daemon)->Stop(), 0);
      break;
    }

    // Publishers run until the kill; the kill comes after a random number
    // of successful publishes.
    std::atomic<bool> stop{false};
    std::vector<std::thread> publishers;
    for (int p = 0; p < kPublishers; ++p) {
      publishers.emplace_back([&, p, seed_p = random()] {
        std::mt19937_64 r(seed_p);
        std::uniform_int_distribution<int64_t> delay_ms(0, 2000);
        for (int n = 0; !stop.load(); ++n) {
          hourglass::v1::PublishRequest request;
          std::vector<std::string> ids;
          for (int i = 0; i < kBatch; ++i) {
            ids.push_back(absl::StrCat("r", round, "-p", p, "-", n, "-", i));
            *request.add_messages() = testing::NewMessage(
                "crash", ids.back(), absl::Milliseconds(delay_ms(r)),
                ids.back());
          }
          hourglass::v1::PublishResponse response;
          const grpc::Status status = client.Publish(request, &response);
          if (!status.ok()) {
            for (const std::string& id : ids) ledger.Unknown(id);
            return;  // The broker is gone.
          }
          for (int i = 0; i < kBatch; ++i) {
            ledger.Published(
                ids[i], testing::ToTime(response.receipts(i).deliver_at()));
          }
        }
      });
    }
    const size_t target =
        ledger.published() +
        std::uniform_int_distribution<size_t>(100, 2000)(random);
    EXPECT_TRUE(ledger.AwaitPublished(target, absl::Now() + absl::Seconds(60)));
    (*daemon)->Kill();
    stop = true;
    for (std::thread& t : publishers) t.join();
    consumer.join();
  }
  ledger.Check();

  // The store: each message once, every index entry pointing at one, and
  // nothing left that was not published.
  auto store = storage::RocksDbStore::Open({.path = data});
  ASSERT_TRUE(store.ok()) << store.status();
  std::map<uint64_t, std::string> messages;  // sequence -> id
  std::set<std::string> ids;
  ASSERT_TRUE(
      (*store)
          ->Scan(storage::Table::kMessages, "", "",
                 [&](std::string_view key, std::string_view value) {
                   storage::MessageRecord record;
                   EXPECT_TRUE(record.ParseFromString(std::string(value)));
                   EXPECT_TRUE(ids.insert(record.id()).second)
                       << record.id() << " is stored twice";
                   EXPECT_TRUE(ledger.MayExist(record.id()))
                       << record.id() << " was never published";
                   messages[*storage::DecodeMessageKey(key)] = record.id();
                   return true;
                 })
          .ok());
  auto count = [&](storage::Table table) {
    size_t n = 0;
    EXPECT_TRUE((*store)
                    ->Scan(table, "", "",
                           [&](std::string_view, std::string_view) {
                             ++n;
                             return true;
                           })
                    .ok());
    return n;
  };
  EXPECT_EQ(count(storage::Table::kIds), messages.size());
  EXPECT_EQ(count(storage::Table::kTopicDue), messages.size());
  // The counters agree with what is stored, however the kills fell.
  auto counter = [&](const std::string& key) {
    auto value = (*store)->Get(storage::Table::kCounters, key);
    EXPECT_TRUE(value.ok());
    return value.ok() && value->has_value() ? storage::DecodeCounter(**value)
                                            : 0;
  };
  EXPECT_EQ(counter(storage::MessagesCounter("crash")),
            static_cast<int64_t>(messages.size()));
  EXPECT_EQ(counter(storage::ScheduledCounter("crash")), 0);
  // The consumer acks everything it gets: nothing may have been delivered
  // --max_attempts times without an ack.
  EXPECT_EQ(counter(storage::MessagesCounter("crash.dlq")), 0);
  EXPECT_EQ(counter(storage::ReadyCounter("crash", "g")) +
                counter(storage::ReadyCounter("crash", "")),
            static_cast<int64_t>(count(storage::Table::kReady)));
  // Each message left is in a state of its topic: scheduled, ready (in
  // group g, or in the waiting area) or in flight in g. One in none of them
  // is an orphan: nothing would ever deliver, ack or delete it.
  std::set<uint64_t> scheduled, ready, in_flight;
  ASSERT_TRUE((*store)
                  ->Scan(storage::Table::kSchedule, "", "",
                         [&](std::string_view key, std::string_view) {
                           scheduled.insert(
                               storage::DecodeScheduleKey(key)->sequence);
                           return true;
                         })
                  .ok());
  ASSERT_TRUE((*store)
                  ->Scan(storage::Table::kReady, "", "",
                         [&](std::string_view key, std::string_view) {
                           ready.insert(
                               storage::ReadU64(key.substr(key.size() - 8)));
                           return true;
                         })
                  .ok());
  ASSERT_TRUE((*store)
                  ->Scan(storage::Table::kInFlight, "", "",
                         [&](std::string_view key, std::string_view) {
                           in_flight.insert(
                               storage::DecodeInFlightKey(key)->sequence);
                           return true;
                         })
                  .ok());
  for (const std::set<uint64_t>* index : {&scheduled, &ready, &in_flight}) {
    for (uint64_t sequence : *index) {
      EXPECT_TRUE(messages.contains(sequence))
          << "an index entry points at sequence " << sequence
          << ", which is not stored";
    }
  }
  std::map<std::string, int> where;  // State -> how many, to diagnose.
  std::vector<std::string> orphans;
  for (const auto& [sequence, id] : messages) {
    std::string state;
    if (scheduled.contains(sequence)) state += "scheduled ";
    if (ready.contains(sequence)) state += "ready ";
    if (in_flight.contains(sequence)) state += "inflight ";
    if (state.empty()) {
      orphans.push_back(absl::StrCat(id, " (sequence ", sequence, ")"));
    } else {
      ++where[state];
    }
  }
  for (const auto& [state, n] : where) std::cout << n << " " << state << "\n";
  EXPECT_TRUE(orphans.empty())
      << orphans.size() << " of the " << messages.size()
      << " messages left in the store are in no state (not scheduled, ready "
         "or in flight), so they would never be delivered or deleted: "
      << absl::StrJoin(orphans, ", ");
  EXPECT_THAT(scheduled, ::testing::IsEmpty());  // All came due.
  if (!scheduled.empty()) {
    // What a message left scheduled was, against the persisted cursor:
    // below it, the loader will never read it again.
    auto cursor =
        (*store)->Get(storage::Table::kMeta, storage::kLoaderCursorKey);
    if (cursor.ok() && cursor->has_value()) {
      const std::optional<storage::DueKey> c =
          storage::DecodeScheduleKey(**cursor);
      if (c.has_value()) {
        std::cout << "loader cursor: due " << c->deliver_at_ms
                  << " ms, sequence " << c->sequence << "\n";
      }
    }
    ASSERT_TRUE((*store)
                    ->Scan(storage::Table::kSchedule, "", "",
                           [&](std::string_view key, std::string_view) {
                             const storage::DueKey k =
                                 *storage::DecodeScheduleKey(key);
                             std::cout
                                 << "left scheduled: " << messages[k.sequence]
                                 << " due " << k.deliver_at_ms
                                 << " ms, sequence " << k.sequence << "\n";
                             return true;
                           })
                    .ok());
  }
  std::cout << messages.size() << " left in the store, acks cut off\n";
}

}  // namespace
}  // namespace hourglass
