// What does a /metrics scrape cost, and does it grow with topics that are
// gone? Opens an engine with a metrics registry on a RocksDB store holding
// `live` topics (one scheduled message and one group each) and `gone`
// topics that once held a message and hold none now (each got one message,
// which was cancelled), then times
// Registry::Render, which runs the engine's collector as a scrape does.
// Counters per scrape: the store reads it made (keys read by Get and
// MultiGet, keys visited by Scan) and the counters it took from the store's
// memory (NonZeroCounters).
//
//   build/dev/tests/bench/metrics_scrape_bench

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "benchmark/benchmark.h"
#include "broker/clock.h"
#include "broker/engine.h"
#include "broker/metrics.h"
#include "storage/keys.h"
#include "storage/message_store.h"
#include "storage/rocksdb_store.h"
#include "tests/testing/temp_dir.h"

namespace hourglass {
namespace {

using storage::Table;

// Forwards to a store and counts its reads.
class CountingStore final : public storage::MessageStore {
 public:
  explicit CountingStore(std::unique_ptr<storage::MessageStore> inner)
      : inner_(std::move(inner)) {}

  absl::Status Write(const storage::WriteBatch& batch) override {
    return inner_->Write(batch);
  }
  absl::Status SyncLog() override { return inner_->SyncLog(); }
  absl::StatusOr<std::optional<std::string>> Get(
      Table table, std::string_view key) override {
    gets_.fetch_add(1, std::memory_order_relaxed);
    return inner_->Get(table, key);
  }
  absl::StatusOr<std::vector<std::optional<std::string>>> MultiGet(
      Table table, const std::vector<std::string>& keys) override {
    gets_.fetch_add(keys.size(), std::memory_order_relaxed);
    return inner_->MultiGet(table, keys);
  }
  absl::Status Scan(Table table, std::string_view from, std::string_view to,
                    absl::FunctionRef<bool(std::string_view, std::string_view)>
                        visit) override {
    return inner_->Scan(table, from, to,
                        [&](std::string_view key, std::string_view value) {
                          scanned_.fetch_add(1, std::memory_order_relaxed);
                          return visit(key, value);
                        });
  }
  absl::StatusOr<std::optional<std::string>> LastKey(Table table) override {
    return inner_->LastKey(table);
  }
  std::vector<std::pair<std::string, int64_t>> NonZeroCounters() override {
    std::vector<std::pair<std::string, int64_t>> counters =
        inner_->NonZeroCounters();
    from_memory_.fetch_add(counters.size(), std::memory_order_relaxed);
    return counters;
  }
  storage::StoreStats Stats() override { return inner_->Stats(); }
  absl::StatusOr<storage::CheckpointInfo> Checkpoint(
      const std::string& dir) override {
    return inner_->Checkpoint(dir);
  }

  uint64_t gets() const { return gets_.load(std::memory_order_relaxed); }
  uint64_t scanned() const { return scanned_.load(std::memory_order_relaxed); }
  uint64_t from_memory() const {
    return from_memory_.load(std::memory_order_relaxed);
  }

 private:
  const std::unique_ptr<storage::MessageStore> inner_;
  std::atomic<uint64_t> gets_{0};
  std::atomic<uint64_t> scanned_{0};
  std::atomic<uint64_t> from_memory_{0};
};

struct Fixture {
  testing::TempDir dir;
  std::unique_ptr<CountingStore> store;
  broker::SystemClock clock;
  metrics::Registry registry;
  std::unique_ptr<broker::Engine> engine;
};

std::unique_ptr<Fixture> Build(int64_t live, int64_t gone) {
  auto f = std::make_unique<Fixture>();
  f->store = std::make_unique<CountingStore>(
      *storage::RocksDbStore::Open({.path = f->dir.path(), .sync = false}));
  broker::Engine::Options options;
  options.metrics = &f->registry;
  f->engine = *broker::Engine::Open(f->store.get(), &f->clock, options);
  // Gone topics: each got one message, which was cancelled.
  constexpr int64_t kBatch = 1000;
  const absl::Time later = f->clock.Now() + absl::Hours(1);
  for (int64_t i = 0; i < gone; i += kBatch) {
    std::vector<broker::NewMessage> messages;
    for (int64_t j = i; j < i + kBatch && j < gone; ++j) {
      messages.push_back({absl::StrCat("gone-", j), "m", "payload", {}, later});
    }
    const size_t n = messages.size();
    absl::Notification published;
    f->engine->Publish(std::move(messages), [&](auto) { published.Notify(); });
    published.WaitForNotification();
    absl::Mutex mu;
    size_t cancelled = 0;
    for (int64_t j = i; j < i + static_cast<int64_t>(n); ++j) {
      f->engine->Cancel(absl::StrCat("gone-", j), "m", [&](absl::Status) {
        absl::MutexLock lock(&mu);
        ++cancelled;
      });
    }
    absl::MutexLock lock(&mu);
    auto all = [&] { return cancelled == n; };
    mu.Await(absl::Condition(&all));
  }
  for (int64_t i = 0; i < live; ++i) {
    const std::string topic = absl::StrCat("live-", i);
    (void)f->engine->RegisterGroup(topic, "g");
    absl::Notification done;
    f->engine->Publish(
        {broker::NewMessage{
            topic, "", "payload", {}, f->clock.Now() + absl::Hours(1)}},
        [&](auto) { done.Notify(); });
    done.WaitForNotification();
  }
  return f;
}

void BM_Scrape(benchmark::State& state) {
  auto f = Build(state.range(0), state.range(1));
  const uint64_t gets = f->store->gets();
  const uint64_t scanned = f->store->scanned();
  const uint64_t from_memory = f->store->from_memory();
  size_t bytes = 0;
  for (auto _ : state) bytes = f->registry.Render().size();
  const double scrapes = static_cast<double>(state.iterations());
  state.counters["gets"] = (f->store->gets() - gets) / scrapes;
  state.counters["scanned"] = (f->store->scanned() - scanned) / scrapes;
  state.counters["from_memory"] =
      (f->store->from_memory() - from_memory) / scrapes;
  state.counters["bytes"] = static_cast<double>(bytes);
  f->engine.reset();  // Stops collecting before the registry goes.
}

BENCHMARK(BM_Scrape)
    ->ArgNames({"live", "gone"})
    ->Args({100, 0})
    ->Args({100, 10'000})
    ->Args({100, 100'000})
    ->Args({1'000, 0})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace hourglass

BENCHMARK_MAIN();
