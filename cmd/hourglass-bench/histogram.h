#ifndef HOURGLASS_CMD_HOURGLASS_BENCH_HISTOGRAM_H_
#define HOURGLASS_CMD_HOURGLASS_BENCH_HISTOGRAM_H_

#include <cstdint>
#include <vector>

#include "absl/time/time.h"

namespace hourglass::bench {

// A histogram of non-negative durations for hourglass-bench, in the manner
// of HdrHistogram: log-linear buckets of nanoseconds, each power of two cut
// into kSubBuckets equal parts. A percentile it reports is the midpoint of
// the bucket holding the sample, so within 1 / (2 * kSubBuckets) (0.4%) of
// the exact value; min and max are exact. Constant memory (about 60 KiB)
// whatever the number of samples.
//
// Not thread-safe: one writer at a time; merge per-thread histograms with
// Merge.
class LatencyHistogram {
 public:
  // Sub-buckets per power of two: 128 gives ≤ 0.4% error.
  static constexpr int kSubBucketBits = 7;
  static constexpr int kSubBuckets = 1 << kSubBucketBits;

  LatencyHistogram();

  // Adds one sample; negative durations count as zero.
  void Record(absl::Duration value);
  // Adds every sample of `other`.
  void Merge(const LatencyHistogram& other);

  uint64_t count() const { return count_; }
  // Zero when empty.
  absl::Duration min() const;
  absl::Duration max() const;
  // The smallest recorded value v such that at least `percent` % of the
  // samples are ≤ v, to the histogram's precision; 100 gives max(). Zero
  // when empty. REQUIRES: 0 <= percent <= 100.
  absl::Duration Percentile(double percent) const;

 private:
  static int BucketOf(uint64_t nanos);
  // The midpoint of bucket `index`, in nanoseconds.
  static uint64_t MidpointOf(int index);

  std::vector<uint64_t> buckets_;
  uint64_t count_ = 0;
  uint64_t min_nanos_ = UINT64_MAX;
  uint64_t max_nanos_ = 0;
};

}  // namespace hourglass::bench

#endif  // HOURGLASS_CMD_HOURGLASS_BENCH_HISTOGRAM_H_
