// Do tombstones slow the loader? Writes `total` schedule entries to a
// RocksDB store, deletes the first `deleted` percent in due order (as
// dispatch does), then times reading the next 1000 live entries two ways:
//   FromCursor  Scan from the persisted low-water mark (what the loader
//               does): a seek lands on the first live key.
//   FromStart   Scan from the table's start, wading through every
//               tombstone (what a loader without a cursor would do).
//
//   build/bench/tests/bench/schedule_scan_bench

#include <cstdint>
#include <memory>
#include <string>

#include "benchmark/benchmark.h"
#include "storage/keys.h"
#include "storage/rocksdb_store.h"
#include "tests/testing/temp_dir.h"

namespace hourglass::storage {
namespace {

constexpr int64_t kBatch = 1000;

struct Fixture {
  testing::TempDir dir;
  std::unique_ptr<MessageStore> store;
  DueKey cursor;
};

std::unique_ptr<Fixture> Build(int64_t total, int64_t deleted_percent) {
  auto f = std::make_unique<Fixture>();
  f->store = *RocksDbStore::Open({.path = f->dir.path(), .sync = false});
  for (int64_t i = 0; i < total; i += kBatch) {
    WriteBatch batch;
    for (int64_t j = i; j < i + kBatch; ++j) {
      batch.Put(Table::kSchedule, ScheduleKey({j, static_cast<uint64_t>(j)}),
                "orders");
    }
    (void)f->store->Write(batch);
  }
  const int64_t deleted = total * deleted_percent / 100;
  for (int64_t i = 0; i < deleted; i += kBatch) {
    WriteBatch batch;
    for (int64_t j = i; j < i + kBatch && j < deleted; ++j) {
      batch.Delete(Table::kSchedule,
                   ScheduleKey({j, static_cast<uint64_t>(j)}));
    }
    (void)f->store->Write(batch);
  }
  f->cursor = {deleted, static_cast<uint64_t>(deleted)};
  return f;
}

void Scan1000(MessageStore& store, const std::string& from) {
  int n = 0;
  (void)store.Scan(Table::kSchedule, from, "",
                   [&](std::string_view key, std::string_view) {
                     benchmark::DoNotOptimize(key.data());
                     return ++n < 1000;
                   });
}

void BM_ScanFromCursor(benchmark::State& state) {
  auto f = Build(state.range(0), state.range(1));
  const std::string from = ScheduleKey(f->cursor);
  for (auto _ : state) Scan1000(*f->store, from);
}

void BM_ScanFromStart(benchmark::State& state) {
  auto f = Build(state.range(0), state.range(1));
  for (auto _ : state) Scan1000(*f->store, "");
}

void Args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"entries", "deleted_pct"})
      ->Args({1'000'000, 0})
      ->Args({1'000'000, 90})
      ->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_ScanFromCursor)->Apply(Args);
BENCHMARK(BM_ScanFromStart)->Apply(Args);

}  // namespace
}  // namespace hourglass::storage

BENCHMARK_MAIN();
