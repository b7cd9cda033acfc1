// Cost of one schedule + expire in a timer queue holding N pending entries,
// for the timing wheel and a std::priority_queue baseline.
//
// Each benchmark simulates the broker's timer thread: advance to the next
// expiry (at least 1 ms on), hand out what is due, and schedule as many new
// entries as came out, so the queue stays at N pending. Delays are uniform
// in [1 ms, max delay]. Counters:
//   time_per_op      wall time per schedule + expire
//   bytes_per_entry  heap bytes held by the queue / N
//
//   build/bench/tests/bench/timing_wheel_bench

#include <algorithm>
#include <cstdint>
#include <functional>
#include <queue>
#include <random>
#include <utility>
#include <vector>

#include "benchmark/benchmark.h"
#include "broker/timing_wheel.h"

namespace hourglass::broker {
namespace {

// Precomputed delays so that random number generation stays out of the
// measured loop.
class Delays {
 public:
  explicit Delays(int64_t max_delay_ms) : delays_(1 << 20) {
    std::mt19937_64 rng(20261122);
    std::uniform_int_distribution<int64_t> delay(1, max_delay_ms);
    for (int64_t& d : delays_) d = delay(rng);
  }
  int64_t Next() { return delays_[next_++ & (delays_.size() - 1)]; }

 private:
  std::vector<int64_t> delays_;
  size_t next_ = 0;
};

class WheelQueue {
 public:
  void Schedule(int64_t due_ms, uint64_t value) {
    wheel_.Schedule(due_ms, value);
  }
  int64_t NextExpiry() const { return wheel_.NextExpiry().value_or(INT64_MAX); }
  size_t ExpireUntil(int64_t now_ms) {
    return wheel_.ExpireUntil(
        now_ms, [](const TimerEntry& e) { benchmark::DoNotOptimize(e.value); });
  }
  size_t MemoryUsage() const { return wheel_.MemoryUsage(); }

 private:
  TimingWheel wheel_{0};
};

class HeapQueue {
 public:
  void Schedule(int64_t due_ms, uint64_t value) {
    heap_.emplace(due_ms, value);
  }
  int64_t NextExpiry() const {
    return heap_.empty() ? INT64_MAX : heap_.top().first;
  }
  size_t ExpireUntil(int64_t now_ms) {
    size_t n = 0;
    while (!heap_.empty() && heap_.top().first <= now_ms) {
      benchmark::DoNotOptimize(heap_.top().second);
      heap_.pop();
      ++n;
    }
    return n;
  }
  size_t MemoryUsage() const { return heap_.capacity() * sizeof(Item); }

 private:
  using Item = std::pair<int64_t, uint64_t>;
  struct Heap : std::priority_queue<Item, std::vector<Item>, std::greater<>> {
    size_t capacity() const { return c.capacity(); }
  };
  Heap heap_;
};

template <typename Queue>
void BM_ScheduleExpire(benchmark::State& state) {
  const int64_t pending = state.range(0);
  const int64_t max_delay_ms = state.range(1);
  Delays delays(max_delay_ms);
  Queue queue;
  int64_t now = 0;
  for (int64_t i = 0; i < pending; ++i) {
    queue.Schedule(now + delays.Next(), static_cast<uint64_t>(i));
  }

  int64_t ops = 0;
  for (auto _ : state) {
    now = std::max(now + 1, queue.NextExpiry());
    const size_t expired = queue.ExpireUntil(now);
    for (size_t i = 0; i < expired; ++i) {
      queue.Schedule(now + delays.Next(), static_cast<uint64_t>(ops + i));
    }
    ops += static_cast<int64_t>(expired);
  }
  state.SetItemsProcessed(ops);
  // Seconds per operation; the report prints it with an SI prefix (n).
  state.counters["time_per_op"] = benchmark::Counter(
      static_cast<double>(ops),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["bytes_per_entry"] =
      static_cast<double>(queue.MemoryUsage()) / static_cast<double>(pending);
}

}  // namespace
}  // namespace hourglass::broker

int main(int argc, char** argv) {
  using hourglass::broker::BM_ScheduleExpire;
  using hourglass::broker::HeapQueue;
  using hourglass::broker::WheelQueue;
  for (int64_t pending : {1'000'000, 10'000'000}) {
    for (int64_t max_delay_ms : {60'000, 3'600'000}) {
      // One run of a fixed number of expiry instants: about 2N operations,
      // or one full delay range, whichever is fewer (the 10M prefill is too
      // slow to repeat for iteration-count estimation).
      const int64_t steps = std::min(2 * pending, max_delay_ms);
      for (auto [name, fn] :
           {std::pair{"TimingWheel", &BM_ScheduleExpire<WheelQueue>},
            std::pair{"PriorityQueue", &BM_ScheduleExpire<HeapQueue>}}) {
        benchmark::RegisterBenchmark(name, fn)
            ->Args({pending, max_delay_ms})
            ->ArgNames({"pending", "max_delay_ms"})
            ->Iterations(steps)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
      }
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
