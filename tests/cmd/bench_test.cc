// The parts of hourglass-bench that need no broker: the latency
// histogram and the --delay syntax.

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "absl/time/time.h"
#include "cmd/hourglass-bench/histogram.h"
#include "cmd/hourglass-bench/workload.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hourglass::bench {
namespace {

TEST(LatencyHistogramTest, EmptyReportsZero) {
  LatencyHistogram h;
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.Percentile(50), absl::ZeroDuration());
  EXPECT_EQ(h.min(), absl::ZeroDuration());
  EXPECT_EQ(h.max(), absl::ZeroDuration());
}

TEST(LatencyHistogramTest, SmallValuesAreExact) {
  LatencyHistogram h;
  for (int i = 1; i <= 100; ++i) h.Record(absl::Nanoseconds(i));
  EXPECT_EQ(h.Percentile(50), absl::Nanoseconds(50));
  EXPECT_EQ(h.Percentile(99), absl::Nanoseconds(99));
  EXPECT_EQ(h.Percentile(100), absl::Nanoseconds(100));
  EXPECT_EQ(h.min(), absl::Nanoseconds(1));
}

TEST(LatencyHistogramTest, NegativeCountsAsZero) {
  LatencyHistogram h;
  h.Record(absl::Milliseconds(-3));
  EXPECT_EQ(h.count(), 1u);
  EXPECT_EQ(h.max(), absl::ZeroDuration());
}

// Percentiles of log-normal samples from 1 us to minutes are within 0.5%
// of the exact ones (the nearest-rank sample of the sorted list); max is
// exact.
TEST(LatencyHistogramTest, PercentilesWithinHalfAPercent) {
  std::mt19937_64 random(20261122);
  std::lognormal_distribution<double> micros(7.0, 2.5);
  LatencyHistogram a, b;
  std::vector<int64_t> exact;
  for (int i = 0; i < 200000; ++i) {
    const int64_t nanos = static_cast<int64_t>(micros(random) * 1000) + 1000;
    exact.push_back(nanos);
    (i % 2 == 0 ? a : b).Record(absl::Nanoseconds(nanos));
  }
  a.Merge(b);
  std::sort(exact.begin(), exact.end());
  EXPECT_EQ(a.count(), exact.size());
  EXPECT_EQ(a.max(), absl::Nanoseconds(exact.back()));
  EXPECT_EQ(a.min(), absl::Nanoseconds(exact.front()));
  for (const double p : {1.0, 50.0, 90.0, 99.0, 99.9, 99.99}) {
    const size_t rank = static_cast<size_t>(std::ceil(p / 100 * exact.size()));
    const double want = static_cast<double>(exact[rank - 1]);
    const double got = absl::ToDoubleNanoseconds(a.Percentile(p));
    EXPECT_NEAR(got, want, want * 0.005) << "p" << p;
  }
}

TEST(DelaySpecTest, ParsesFixedUniformAndHot) {
  absl::StatusOr<DelaySpec> fixed = ParseDelaySpec("5s");
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  EXPECT_EQ(fixed->kind, DelaySpec::Kind::kFixed);
  EXPECT_EQ(fixed->min, absl::Seconds(5));
  EXPECT_EQ(fixed->ToString(), "5s");

  absl::StatusOr<DelaySpec> uniform = ParseDelaySpec("1s..10s");
  ASSERT_TRUE(uniform.ok()) << uniform.status();
  EXPECT_EQ(uniform->kind, DelaySpec::Kind::kUniform);
  EXPECT_EQ(uniform->min, absl::Seconds(1));
  EXPECT_EQ(uniform->max, absl::Seconds(10));
  EXPECT_EQ(uniform->longest(), absl::Seconds(10));
  EXPECT_EQ(uniform->ToString(), "1s..10s");

  absl::StatusOr<DelaySpec> hot = ParseDelaySpec("hot:30s");
  ASSERT_TRUE(hot.ok()) << hot.status();
  EXPECT_EQ(hot->kind, DelaySpec::Kind::kHot);
  EXPECT_EQ(hot->min, absl::Seconds(30));
  EXPECT_EQ(hot->ToString(), "hot:30s");

  EXPECT_EQ(ParseDelaySpec("0")->ToString(), "0");
}

TEST(DelaySpecTest, RefusesBadSpecs) {
  EXPECT_EQ(ParseDelaySpec("soon").status().message(),
            "\"soon\" is not a delay (use a duration such as 5s, a range "
            "such as 1s..10s, or hot:30s)");
  EXPECT_EQ(ParseDelaySpec("1s..").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseDelaySpec("10s..1s").status().message(),
            "\"10s..1s\": the range ends before it starts");
}

TEST(PublishPlanTest, HandsOutBatchesUpToTheCount) {
  PublishPlan::Options options;
  options.topics = {"t"};
  options.batch = 4;
  options.count = 10;
  options.payload_bytes = 12;
  PublishPlan plan(options, absl::Now());
  std::vector<uint32_t> sizes;
  for (PublishPlan::Claim c = plan.Next(); c.size > 0; c = plan.Next()) {
    sizes.push_back(c.size);
  }
  EXPECT_THAT(sizes, ::testing::ElementsAre(4, 4, 2));
}

TEST(PublishPlanTest, SendsEachBatchToTheNextTopicInTurn) {
  PublishPlan::Options options;
  options.topics = {"t-0", "t-1", "t-2"};
  options.batch = 2;
  options.count = 9;
  options.payload_bytes = 8;
  PublishPlan plan(options, absl::Now());
  absl::BitGen random;
  std::vector<client::Message> messages;
  std::vector<std::string> topics;
  for (PublishPlan::Claim c = plan.Next(); c.size > 0; c = plan.Next()) {
    plan.Fill(c, random, messages);
    for (const client::Message& m : messages) topics.push_back(m.topic);
  }
  EXPECT_THAT(topics, ::testing::ElementsAre("t-0", "t-0", "t-1", "t-1", "t-2",
                                             "t-2", "t-0", "t-0", "t-1"));
}

TEST(PublishPlanTest, PacesToTheRateAndCarriesTheSequence) {
  PublishPlan::Options options;
  options.topics = {"t"};
  options.batch = 10;
  options.count = 100;
  options.rate = 1000;
  options.payload_bytes = 10;
  options.delay = *ParseDelaySpec("hot:1s");
  const absl::Time start = absl::FromUnixMillis(1'000'000);
  PublishPlan plan(options, start);
  plan.Next();
  const PublishPlan::Claim second = plan.Next();
  EXPECT_EQ(second.first, 10u);
  EXPECT_EQ(second.send_at, start + absl::Milliseconds(10));

  absl::BitGen random;
  std::vector<client::Message> messages;
  plan.Fill(second, random, messages);
  ASSERT_EQ(messages.size(), 10u);
  uint64_t sequence = 0;
  ASSERT_TRUE(ReadSequence(messages[3].payload, sequence));
  EXPECT_EQ(sequence, 13u);
  EXPECT_EQ(messages[3].payload.size(), 10u);
  EXPECT_EQ(messages[3].deliver_at, absl::FromUnixSeconds(1001));
  EXPECT_EQ(messages[3].topic, "t");
  EXPECT_EQ(plan.hot_instant(), start + absl::Seconds(1));
}

}  // namespace
}  // namespace hourglass::bench
