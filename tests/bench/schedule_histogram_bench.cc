// How long does a schedule histogram (Admin.GetSchedule) take to read with
// many messages pending over a year? Builds a RocksDB store holding the
// schedule counts of `messages` messages due at random over 2036, written
// as the broker writes them (a batch per 10,000 publishes, each minute,
// hour and day a merge operand), then times the read of common queries
// through the broker's reader (lifecycle::ReadScheduleCounts):
//   YearByDay     366 buckets of 1d: 366 counters
//   YearByHour    8,784 buckets of 1h: 8,784 counters
//   DayByMinute   1,440 buckets of 1m: 1,440 counters
//   Week90m       112 buckets of 90m: 3,472 counters (hours and minutes)
// The counters read depend on the query, never on the messages: the table
// holds at most a key per minute, hour and day of the year per topic.
//
//   build/bench/tests/bench/schedule_histogram_bench

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "broker/lifecycle.h"
#include "broker/lifecycle_reads.h"
#include "storage/rocksdb_store.h"
#include "storage/schedule_counts.h"
#include "tests/testing/temp_dir.h"

namespace hourglass::broker {
namespace {

constexpr int64_t kMinute = 60'000;
constexpr int64_t kHour = 60 * kMinute;
constexpr int64_t kDay = 24 * kHour;
constexpr int64_t kYear = 2'082'758'400'000;  // 2036-01-01T00:00:00Z

struct Fixture {
  testing::TempDir dir;
  std::unique_ptr<storage::MessageStore> store;
};

// One store per message count, built once.
Fixture& Store(int64_t messages) {
  static auto* stores = new std::map<int64_t, std::unique_ptr<Fixture>>;
  std::unique_ptr<Fixture>& f = (*stores)[messages];
  if (f != nullptr) return *f;
  f = std::make_unique<Fixture>();
  f->store = *storage::RocksDbStore::Open(
      {.path = f->dir.path() + "/data", .sync = false});
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<int64_t> due(kYear, kYear + 366 * kDay - 1);
  for (int64_t i = 0; i < messages; i += 10'000) {
    storage::ScheduleCountDeltas deltas;
    for (int64_t j = i; j < i + 10'000 && j < messages; ++j) {
      deltas.Add("orders", due(rng), 1);
    }
    storage::WriteBatch batch;
    deltas.AppendTo(batch);
    (void)f->store->Write(batch);
  }
  return *f;
}

void Read(benchmark::State& state, int64_t bucket, size_t count) {
  Fixture& f = Store(state.range(0));
  const storage::ScheduleCountQuery query{kYear, bucket, count};
  uint64_t total = 0;
  for (auto _ : state) {
    absl::StatusOr<std::vector<uint64_t>> counts =
        lifecycle::ReadScheduleCounts(*f.store, "orders", query);
    total = 0;
    for (uint64_t n : *counts) total += n;
    benchmark::DoNotOptimize(total);
  }
  state.counters["counters_read"] =
      static_cast<double>(storage::ScheduleCountReads(query));
  state.counters["messages_counted"] = static_cast<double>(total);
}

void BM_YearByDay(benchmark::State& state) { Read(state, kDay, 366); }
void BM_YearByHour(benchmark::State& state) { Read(state, kHour, 366 * 24); }
void BM_DayByMinute(benchmark::State& state) { Read(state, kMinute, 1440); }
void BM_Week90m(benchmark::State& state) { Read(state, 90 * kMinute, 112); }

void Args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"messages"})
      ->Arg(1'000'000)
      ->Arg(10'000'000)
      ->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_YearByDay)->Apply(Args);
BENCHMARK(BM_YearByHour)->Apply(Args);
BENCHMARK(BM_DayByMinute)->Apply(Args);
BENCHMARK(BM_Week90m)->Apply(Args);

}  // namespace
}  // namespace hourglass::broker

BENCHMARK_MAIN();
