#ifndef HOURGLASS_TESTS_TESTING_TIMING_WHEEL_MODEL_H_
#define HOURGLASS_TESTS_TESTING_TIMING_WHEEL_MODEL_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

namespace hourglass::testing {

// The reference model of broker::TimingWheel, for the randomised test and
// the fuzz target: pending entries in a sorted map keyed by (due time,
// schedule order), so they come out in due order, ties in schedule order,
// with nothing clever to get wrong. The caller numbers its Schedule calls
// (`order`) and clamps due times as the wheel does. Not thread-safe.
class TimingWheelModel {
 public:
  // What comes out: (due time, value).
  using Due = std::pair<int64_t, uint64_t>;

  void Schedule(int64_t due, uint64_t order, uint64_t value) {
    entries_.emplace(std::pair(due, order), value);
  }
  // True if the entry was pending.
  bool Cancel(int64_t due, uint64_t order) {
    return entries_.erase(std::pair(due, order)) == 1;
  }
  // Removes and returns every entry due at or before `now`, in order.
  std::vector<Due> ExpireUntil(int64_t now) {
    std::vector<Due> out;
    while (!entries_.empty() && entries_.begin()->first.first <= now) {
      out.emplace_back(entries_.begin()->first.first, entries_.begin()->second);
      entries_.erase(entries_.begin());
    }
    return out;
  }
  std::optional<int64_t> MinDue() const {
    if (entries_.empty()) return std::nullopt;
    return entries_.begin()->first.first;
  }
  size_t size() const { return entries_.size(); }

 private:
  std::map<std::pair<int64_t, uint64_t>, uint64_t> entries_;
};

}  // namespace hourglass::testing

#endif  // HOURGLASS_TESTS_TESTING_TIMING_WHEEL_MODEL_H_
