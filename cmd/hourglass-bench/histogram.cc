#include "cmd/hourglass-bench/histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace hourglass::bench {
namespace {

// Values below kSubBuckets nanoseconds have a bucket each; above, each power
// of two from 2^kSubBucketBits to 2^63 has kSubBuckets.
constexpr int kBuckets =
    LatencyHistogram::kSubBuckets * (64 - LatencyHistogram::kSubBucketBits + 1);

}  // namespace

LatencyHistogram::LatencyHistogram() : buckets_(kBuckets, 0) {}

int LatencyHistogram::BucketOf(uint64_t nanos) {
  if (nanos < static_cast<uint64_t>(kSubBuckets))
    return static_cast<int>(nanos);
  // The highest set bit is at `top` >= kSubBucketBits; the next
  // kSubBucketBits bits choose the sub-bucket.
  const int top = 63 - std::countl_zero(nanos);
  const int shift = top - kSubBucketBits;
  const int sub = static_cast<int>(nanos >> shift) - kSubBuckets;
  return (shift + 1) * kSubBuckets + sub;
}

uint64_t LatencyHistogram::MidpointOf(int index) {
  if (index < kSubBuckets) return static_cast<uint64_t>(index);
  const int shift = index / kSubBuckets - 1;
  const uint64_t sub = static_cast<uint64_t>(index % kSubBuckets);
  const uint64_t low = (kSubBuckets + sub) << shift;
  return low + ((uint64_t{1} << shift) >> 1);
}

void LatencyHistogram::Record(absl::Duration value) {
  const int64_t signed_nanos = absl::ToInt64Nanoseconds(value);
  const uint64_t nanos =
      signed_nanos < 0 ? 0 : static_cast<uint64_t>(signed_nanos);
  ++buckets_[BucketOf(nanos)];
  ++count_;
  min_nanos_ = std::min(min_nanos_, nanos);
  max_nanos_ = std::max(max_nanos_, nanos);
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  for (int i = 0; i < kBuckets; ++i) buckets_[i] += other.buckets_[i];
  count_ += other.count_;
  min_nanos_ = std::min(min_nanos_, other.min_nanos_);
  max_nanos_ = std::max(max_nanos_, other.max_nanos_);
}

absl::Duration LatencyHistogram::min() const {
  return count_ == 0 ? absl::ZeroDuration()
                     : absl::Nanoseconds(static_cast<int64_t>(min_nanos_));
}

absl::Duration LatencyHistogram::max() const {
  return absl::Nanoseconds(static_cast<int64_t>(max_nanos_));
}

absl::Duration LatencyHistogram::Percentile(double percent) const {
  if (count_ == 0) return absl::ZeroDuration();
  if (percent >= 100) return max();
  // The rank of the sample wanted, 1-based.
  const uint64_t rank = std::max<uint64_t>(
      1, static_cast<uint64_t>(std::ceil(percent / 100 * count_)));
  uint64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += buckets_[i];
    if (seen >= rank) {
      // The midpoint, but never outside what was recorded.
      const uint64_t nanos = std::clamp(MidpointOf(i), min_nanos_, max_nanos_);
      return absl::Nanoseconds(static_cast<int64_t>(nanos));
    }
  }
  return max();
}

}  // namespace hourglass::bench
