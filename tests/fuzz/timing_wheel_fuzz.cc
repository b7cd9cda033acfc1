// Fuzzes broker/timing_wheel against its reference model
// (tests/testing/timing_wheel_model.h): the input is a stream of
// operations (schedule with due times on every level, at level boundaries,
// overdue and beyond the top level; cancel of pending, expired and
// cancelled handles; ExpireUntil with a time that jumps, creeps, follows
// NextExpiry or goes backwards), and every expiry must match the model
// exactly: the same entries, in due order, ties in schedule order, none
// early.

#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "broker/timing_wheel.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/testing/timing_wheel_model.h"

namespace hourglass::broker {
namespace {

using Model = ::hourglass::testing::TimingWheelModel;
constexpr int64_t kMax = TimingWheel::kMaxTimeMs;
constexpr int kMaxOperations = 2000;

// Span of a slot on `level`: 64^level ms.
int64_t LevelSpan(int level) {
  return int64_t{1} << (TimingWheel::kSlotBits * level);
}

// a + b, saturating at the int64 range (the wheel clamps at kMax itself).
int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t sum;
  if (__builtin_add_overflow(a, b, &sum)) {
    return b > 0 ? std::numeric_limits<int64_t>::max()
                 : std::numeric_limits<int64_t>::min();
  }
  return sum;
}

int64_t ConsumeStart(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange(0, 4)) {
    case 0:
      return 0;
    case 1:  // Just before a window boundary of some level.
      return LevelSpan(in.ConsumeIntegralInRange(1, TimingWheel::kLevels)) *
                 in.ConsumeIntegralInRange<int64_t>(1, 5) -
             in.ConsumeIntegralInRange<int64_t>(1, 3);
    case 2:  // Near the end of time.
      return kMax - in.ConsumeIntegralInRange<int64_t>(0, LevelSpan(5));
    case 3:  // Before time began: the wheel starts at -1.
      return -in.ConsumeIntegralInRange<int64_t>(1, 1000);
    default:
      return in.ConsumeIntegralInRange<int64_t>(0, int64_t{1} << 41);
  }
}

// A due time relative to `now` that reaches every part of the wheel.
int64_t ConsumeDue(FuzzedDataProvider& in, int64_t now) {
  switch (in.ConsumeIntegralInRange(0, 5)) {
    case 0:  // Overdue, or due now.
      return now - in.ConsumeIntegralInRange<int64_t>(0, 100'000);
    case 1: {  // Within a level's span (level 7: the overflow list).
      const int level = in.ConsumeIntegralInRange(0, TimingWheel::kLevels);
      return SaturatingAdd(
          now, in.ConsumeIntegralInRange<int64_t>(0, LevelSpan(level + 1)));
    }
    case 2: {  // At or next to a slot boundary of some level.
      const int level = in.ConsumeIntegralInRange(1, TimingWheel::kLevels);
      const int64_t span = LevelSpan(level);
      const int64_t boundary =
          SaturatingAdd((now / span) * span,
                        span * in.ConsumeIntegralInRange<int64_t>(0, 65));
      return SaturatingAdd(boundary, in.ConsumeIntegralInRange<int64_t>(-2, 2));
    }
    case 3:  // Far beyond the top level.
      return SaturatingAdd(now, in.ConsumeIntegralInRange<int64_t>(
                                    LevelSpan(TimingWheel::kLevels), kMax));
    case 4:  // At or past the end of time (clamped).
      return kMax + in.ConsumeIntegralInRange<int64_t>(-2, 2);
    default:  // Close by.
      return now + in.ConsumeIntegralInRange<int64_t>(0, 200);
  }
}

// The time of the next ExpireUntil.
int64_t ConsumeAdvance(FuzzedDataProvider& in, const TimingWheel& wheel,
                       int64_t now) {
  switch (in.ConsumeIntegralInRange(0, 5)) {
    case 0:  // To the next expiry (or a little before or after it).
      if (std::optional<int64_t> next = wheel.NextExpiry()) {
        return *next + in.ConsumeIntegralInRange<int64_t>(-1, 1);
      }
      return now;
    case 1:  // Backwards: treated as now.
      return now - in.ConsumeIntegralInRange<int64_t>(0, 1000);
    case 2: {  // Across coarse levels.
      const int level = in.ConsumeIntegralInRange(1, TimingWheel::kLevels + 1);
      return SaturatingAdd(
          now, in.ConsumeIntegralInRange<int64_t>(0, LevelSpan(level)));
    }
    case 3:  // To or past the end of time.
      return kMax + in.ConsumeIntegralInRange<int64_t>(-1, 1);
    default:
      return now + in.ConsumeIntegralInRange<int64_t>(0, 70);
  }
}

struct Live {
  TimerHandle handle;
  uint64_t order;
};

void CheckAgainstModel(const TimingWheel& wheel, const Model& model,
                       int64_t now, int op) {
  FUZZ_CHECK(wheel.size() == model.size(), "op %d: size %zu, model %zu", op,
             wheel.size(), model.size());
  FUZZ_CHECK(wheel.empty() == (model.size() == 0), "op %d: empty", op);
  FUZZ_CHECK(wheel.now() == now, "op %d: now %lld, expected %lld", op,
             static_cast<long long>(wheel.now()), static_cast<long long>(now));
  // NextExpiry is absent exactly when nothing is pending, and never later
  // than the true next due time.
  const std::optional<int64_t> next = wheel.NextExpiry();
  const std::optional<int64_t> min_due = model.MinDue();
  FUZZ_CHECK(next.has_value() == min_due.has_value(), "op %d: NextExpiry", op);
  if (next) {
    FUZZ_CHECK(*next <= *min_due, "op %d: NextExpiry %lld after %lld", op,
               static_cast<long long>(*next), static_cast<long long>(*min_due));
  }
}

std::vector<Model::Due> Expire(TimingWheel& wheel, int64_t now_ms) {
  std::vector<Model::Due> out;
  const size_t n = wheel.ExpireUntil(now_ms, [&](const TimerEntry& e) {
    out.emplace_back(e.due_ms, e.value);
  });
  FUZZ_CHECK(n == out.size(), "ExpireUntil returned %zu for %zu entries", n,
             out.size());
  return out;
}

void ExpireAndCompare(TimingWheel& wheel, Model& model, int64_t target,
                      int64_t& now, int op) {
  // The wheel's time never goes back and stops at the end of time.
  now = std::max(now, std::min(target, kMax));
  const std::vector<Model::Due> got = Expire(wheel, target);
  const std::vector<Model::Due> want = model.ExpireUntil(now);
  FUZZ_CHECK(got == want, "op %d: ExpireUntil(%lld) handed out %zu, want %zu",
             op, static_cast<long long>(target), got.size(), want.size());
}

void TestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const int64_t start = ConsumeStart(in);
  TimingWheel wheel(start);
  Model model;
  int64_t now = std::max<int64_t>(start, -1);
  std::vector<Live> live;  // Possibly expired since.
  std::vector<TimerHandle> dead;
  uint64_t order = 0;
  int op = 0;
  for (; op < kMaxOperations && in.remaining_bytes() > 0; ++op) {
    switch (in.ConsumeIntegralInRange(0, 9)) {
      case 0:
      case 1:
      case 2:
      case 3: {
        const int64_t due = ConsumeDue(in, now);
        const TimerHandle h = wheel.Schedule(due, order);
        const int64_t clamped = std::min(due, kMax);
        FUZZ_CHECK(h.due_ms == clamped, "op %d: handle due %lld for %lld", op,
                   static_cast<long long>(h.due_ms),
                   static_cast<long long>(due));
        model.Schedule(clamped, order, order);
        live.push_back({h, order++});
        break;
      }
      case 4:
      case 5: {
        if (live.empty()) break;
        const size_t i = in.ConsumeIntegralInRange<size_t>(0, live.size() - 1);
        const Live victim = live[i];
        live[i] = live.back();
        live.pop_back();
        const bool want = model.Cancel(victim.handle.due_ms, victim.order);
        FUZZ_CHECK(wheel.Cancel(victim.handle) == want,
                   "op %d: Cancel of entry %llu", op,
                   static_cast<unsigned long long>(victim.order));
        dead.push_back(victim.handle);
        break;
      }
      case 6: {
        if (dead.empty()) break;
        const size_t i = in.ConsumeIntegralInRange<size_t>(0, dead.size() - 1);
        FUZZ_CHECK(!wheel.Cancel(dead[i]), "op %d: a dead handle cancelled",
                   op);
        break;
      }
      default:
        ExpireAndCompare(wheel, model, ConsumeAdvance(in, wheel, now), now, op);
        break;
    }
    CheckAgainstModel(wheel, model, now, op);
  }
  (void)wheel.MemoryUsage();
  // Drain by following NextExpiry: each step reaches the next entries.
  while (std::optional<int64_t> next = wheel.NextExpiry()) {
    const size_t before = model.size();
    ExpireAndCompare(wheel, model, std::max(*next, now), now, op);
    FUZZ_CHECK(model.size() < before || wheel.NextExpiry() != next,
               "drain: NextExpiry %lld makes no progress",
               static_cast<long long>(*next));
    CheckAgainstModel(wheel, model, now, op);
  }
  FUZZ_CHECK(model.size() == 0, "drain left %zu in the model", model.size());
}

}  // namespace
}  // namespace hourglass::broker

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hourglass::broker::TestOneInput(data, size);
  return 0;
}
