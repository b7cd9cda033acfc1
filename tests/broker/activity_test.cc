// Activity's Prometheus totals per topic, and their removal once a topic is
// gone.

#include "broker/activity.h"

#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "broker/metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_clock.h"

namespace hourglass::broker {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const absl::Time kStart = absl::FromUnixSeconds(1'795'305'600);

TEST(ActivityTest, ForgetTopicsExceptRemovesTheTotalsOfGoneTopicsOnly) {
  testing::FakeClock clock(kStart);
  metrics::Registry registry;
  Activity activity(&clock, &registry);
  activity.Published("live", 1);
  activity.Published("gone", 2);
  activity.Cancelled("gone", 2);
  activity.Published("idle", 1);
  // "idle" is forgotten by the next topic's first event a minute later; its
  // totals stay.
  clock.Set(kStart + absl::Seconds(61));
  const uint64_t mark = activity.EventMark();
  // The first event of "new" comes after the mark: the live set read after
  // it may have missed "new", which keeps its totals.
  activity.Published("new", 3);
  EXPECT_EQ(activity.ForgetTopicsExcept({"live", "idle"}, mark), 1u);

  const std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("hourglass_published_total{topic=\"live\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("hourglass_published_total{topic=\"idle\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("hourglass_published_total{topic=\"new\"} 3\n"));
  EXPECT_THAT(text, Not(HasSubstr("topic=\"gone\"")));
  EXPECT_EQ(activity.Topic("gone").publish_rate, 0);

  // Gone and back: it starts again from zero, rates included.
  activity.Published("gone", 1);
  EXPECT_THAT(registry.Render(),
              HasSubstr("hourglass_published_total{topic=\"gone\"} 1\n"));
  EXPECT_EQ(activity.Topic("gone").publish_rate, 1.0 / 60);

  // "new" had no event since the next mark: gone unless live.
  EXPECT_EQ(activity.ForgetTopicsExcept({"live", "idle", "gone"},
                                        activity.EventMark()),
            1u);
  EXPECT_THAT(registry.Render(), Not(HasSubstr("topic=\"new\"")));
}

TEST(ActivityTest, ForgetTopicsExceptWithoutARegistryForgetsRates) {
  testing::FakeClock clock(kStart);
  Activity activity(&clock);
  activity.Published("gone", 6);
  EXPECT_EQ(activity.Topic("gone").publish_rate, 0.1);
  EXPECT_EQ(activity.ForgetTopicsExcept({}, activity.EventMark()), 0u);
  EXPECT_EQ(activity.Topic("gone").publish_rate, 0);
}

}  // namespace
}  // namespace hourglass::broker
