// The schedule histogram (storage/schedule_counts.h) under random
// publishes, cancels, reschedules and messages coming due, written through
// the lifecycle (broker/lifecycle.h) to each store, against a reference
// model: a sorted map of due time -> scheduled messages per topic, summed
// over each bucket by hand. The RocksDB store is closed and reopened now and
// then, so the counts must survive restarts. HOURGLASS_SEED replays a run.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "broker/lifecycle.h"
#include "broker/lifecycle_reads.h"
#include "gtest/gtest.h"
#include "storage/keys.h"
#include "storage/memory_store.h"
#include "storage/records.pb.h"
#include "storage/rocksdb_store.h"
#include "storage/schedule_counts.h"
#include "tests/testing/temp_dir.h"

namespace hourglass::broker {
namespace {

using storage::DueKey;

constexpr int64_t kMinute = 60'000;
constexpr int64_t kHour = 60 * kMinute;
constexpr int64_t kDay = 24 * kHour;
// 2036-01-01T00:00:00Z: the start of the year the messages are due in.
constexpr int64_t kYearStart = 2'082'758'400'000;

uint64_t SeedFromEnvironment() {
  if (const char* s = std::getenv("HOURGLASS_SEED"); s != nullptr && *s) {
    return std::strtoull(s, nullptr, 10);
  }
  return std::random_device{}();
}

// What is scheduled, by topic and due time: the model.
struct Scheduled {
  std::string topic;
  DueKey key;
};

class ScheduleHistogramTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { Reopen(); }

  // Closes and opens the store again: RocksDB from its files; the memory
  // store keeps its object.
  void Reopen() {
    if (GetParam() == "memory") {
      if (store_ == nullptr) store_ = storage::MemoryStore::Open();
      return;
    }
    store_.reset();
    auto store = storage::RocksDbStore::Open(
        {.path = dir_.path() + "/data", .sync = false});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }

  testing::TempDir dir_;
  std::unique_ptr<storage::MessageStore> store_;
};

// Each step writes one batch of one to three random transitions; after
// each, a random histogram query (bucket 1m to 7d, any aligned start) is
// compared with the model's sums, and every 50 steps the store restarts.
TEST_P(ScheduleHistogramTest, CountsMatchASortedMapUnderRandomTransitions) {
  const uint64_t seed = SeedFromEnvironment();
  std::printf("HOURGLASS_SEED=%llu\n", static_cast<unsigned long long>(seed));
  RecordProperty("seed", std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto uniform = [&](int64_t lo, int64_t hi) {  // [lo, hi]
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const std::vector<std::string> topics = {"orders", "orders.dlq", "mail"};
  // A due time: clustered on a few minutes, hours and days, or anywhere
  // in the year, so buckets hold several messages and counts meet 0.
  auto random_due = [&] {
    switch (uniform(0, 3)) {
      case 0:
        return kYearStart + uniform(0, 4) * kMinute + uniform(0, 59'999);
      case 1:
        return kYearStart + uniform(0, 30) * kHour + uniform(0, kHour - 1);
      case 2:
        return kYearStart + uniform(0, 10) * kDay + uniform(0, kDay - 1);
      default:
        return kYearStart + uniform(0, 365 * kDay - 1);
    }
  };
  std::map<uint64_t, Scheduled> scheduled;  // By sequence.
  uint64_t next_sequence = 1;
  std::map<std::string, int> done;
  constexpr int kSteps = 1500;

  for (int step = 0; step < kSteps; ++step) {
    Changes changes;
    std::vector<std::string> trace;
    const int transitions = static_cast<int>(uniform(1, 3));
    for (int t = 0; t < transitions; ++t) {
      const int64_t kind = scheduled.empty() ? 0 : uniform(0, 5);
      if (kind <= 2) {  // Publish, the most frequent.
        storage::MessageRecord record;
        record.set_topic(topics[uniform(0, 2)]);
        const uint64_t sequence = next_sequence++;
        record.set_id(storage::AssignedId(sequence));
        record.set_deliver_at_ms(random_due());
        const DueKey key{record.deliver_at_ms(), sequence};
        lifecycle::Publish(changes, record, key);
        scheduled[sequence] = {record.topic(), key};
        trace.push_back(absl::StrCat("publish ", sequence));
        ++done["publish"];
        continue;
      }
      auto it = scheduled.begin();
      std::advance(it, uniform(0, static_cast<int64_t>(scheduled.size()) - 1));
      const Scheduled m = it->second;
      if (kind == 3) {
        lifecycle::Cancel(changes, m.topic, m.key,
                          storage::AssignedId(m.key.sequence));
        scheduled.erase(it);
        trace.push_back(absl::StrCat("cancel ", m.key.sequence));
        ++done["cancel"];
      } else if (kind == 4) {
        storage::MessageRecord record;
        record.set_topic(m.topic);
        record.set_id(storage::AssignedId(m.key.sequence));
        record.set_deliver_at_ms(random_due());
        const DueKey new_key{record.deliver_at_ms(), m.key.sequence};
        // A message's schedule key is written once: a reschedule within
        // one batch of its publish would overwrite it, which the broker
        // never does (a publish is durable before it can be rescheduled).
        if (new_key == m.key) continue;
        lifecycle::Reschedule(changes, record, m.key, new_key);
        it->second.key = new_key;
        trace.push_back(absl::StrCat("reschedule ", m.key.sequence));
        ++done["reschedule"];
      } else {
        const std::vector<std::string_view> groups =
            uniform(0, 1) == 0 ? std::vector<std::string_view>{}
                               : std::vector<std::string_view>{"g"};
        lifecycle::ComeDue(changes, m.topic, m.key, groups);
        scheduled.erase(it);
        trace.push_back(absl::StrCat("come due ", m.key.sequence));
        ++done["come due"];
      }
    }
    const std::string where =
        absl::StrCat("step ", step, ": ", absl::StrJoin(trace, ", "));
    const absl::Status written = store_->Write(changes.Take());
    ASSERT_TRUE(written.ok()) << written << "\n" << where;
    if (step % 50 == 49) ASSERT_NO_FATAL_FAILURE(Reopen());

    // A random query: buckets of 1m, 7m, 15m, 1h, 90m, 1d or 7d from a
    // random aligned start, up to 400 of them.
    const std::string topic = topics[uniform(0, 2)];
    const std::vector<int64_t> lengths = {kMinute, 7 * kMinute,  15 * kMinute,
                                          kHour,   90 * kMinute, kDay,
                                          7 * kDay};
    const int64_t bucket = lengths[uniform(0, 6)];
    const int64_t first =
        (kYearStart + uniform(-2 * kDay, 30 * kDay)) / bucket * bucket;
    const size_t count = static_cast<size_t>(uniform(1, 400));
    std::vector<uint64_t> want(count, 0);
    for (const auto& [sequence, m] : scheduled) {
      if (m.topic != topic || m.key.deliver_at_ms < first) continue;
      const int64_t i = (m.key.deliver_at_ms - first) / bucket;
      if (i < static_cast<int64_t>(count)) ++want[i];
    }
    absl::StatusOr<std::vector<uint64_t>> got =
        lifecycle::ReadScheduleCounts(*store_, topic, {first, bucket, count});
    ASSERT_TRUE(got.ok()) << got.status() << "\n" << where;
    ASSERT_EQ(*got, want) << where << "\nquery: " << topic << " from " << first
                          << ", " << count << " buckets of " << bucket << " ms";
  }
  // Everything, by the day over the whole year, once more after a restart.
  ASSERT_NO_FATAL_FAILURE(Reopen());
  for (const std::string& topic : topics) {
    std::vector<uint64_t> want(366, 0);
    for (const auto& [sequence, m] : scheduled) {
      if (m.topic == topic) ++want[(m.key.deliver_at_ms - kYearStart) / kDay];
    }
    absl::StatusOr<std::vector<uint64_t>> got =
        lifecycle::ReadScheduleCounts(*store_, topic, {kYearStart, kDay, 366});
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, want) << topic;
  }
  std::printf("transitions: %s\n",
              absl::StrJoin(done, " ", absl::PairFormatter("=")).c_str());
}

TEST_P(ScheduleHistogramTest, ABucketReadsWholeDaysHoursAndMinutesAtItsEdges) {
  // One message in each of the pieces a 2-day bucket starting at 23:59 is
  // read in: a minute, a day, hours and minutes of the last day.
  Changes changes;
  const int64_t start = kYearStart - kMinute;  // 2035-12-31T23:59.
  const std::vector<int64_t> dues = {start, start + kMinute,
                                     start + kMinute + kDay + 5 * kHour,
                                     start + 2 * kDay - 1};
  uint64_t sequence = 1;
  for (int64_t due : dues) {
    storage::MessageRecord record;
    record.set_topic("t");
    record.set_id(storage::AssignedId(sequence));
    record.set_deliver_at_ms(due);
    lifecycle::Publish(changes, record, {due, sequence++});
  }
  ASSERT_TRUE(store_->Write(changes.Take()).ok());
  EXPECT_EQ(storage::ScheduleCountReads({start, 2 * kDay, 1}),
            1u + 1 + 23 + 59u);
  absl::StatusOr<std::vector<uint64_t>> got =
      lifecycle::ReadScheduleCounts(*store_, "t", {start, 2 * kDay, 2});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, (std::vector<uint64_t>{4, 0}));
  // Aligned whole days and hours read one counter each.
  EXPECT_EQ(storage::ScheduleCountReads({kYearStart, kDay, 365}), 365u);
  EXPECT_EQ(storage::ScheduleCountReads({kYearStart, kHour, 24}), 24u);
}

INSTANTIATE_TEST_SUITE_P(Stores, ScheduleHistogramTest,
                         ::testing::Values("memory", "rocksdb"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace hourglass::broker
