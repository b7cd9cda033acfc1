// StoreHealth: refusing after a failed write, taking writes after a
// successful one, listeners told each change in order, and the probe that
// finds out when the store recovers though nobody writes.

#include "broker/store_health.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/eventually.h"

namespace hourglass::broker {
namespace {

using ::hourglass::testing::Eventually;
using ::testing::ElementsAre;

constexpr absl::Duration kWait = absl::Seconds(30);

absl::Status DiskFull() {
  return absl::ResourceExhaustedError("write /data: disk full");
}

// A probe whose outcome the test sets, counting its runs.
class FakeProbe {
 public:
  StoreHealth::Probe AsProbe() {
    return [this] {
      absl::MutexLock lock(&mu_);
      ++runs_;
      return outcome_;
    };
  }
  void Set(absl::Status outcome) {
    absl::MutexLock lock(&mu_);
    outcome_ = std::move(outcome);
  }
  int runs() {
    absl::MutexLock lock(&mu_);
    return runs_;
  }

 private:
  absl::Mutex mu_;
  absl::Status outcome_ ABSL_GUARDED_BY(mu_);
  int runs_ ABSL_GUARDED_BY(mu_) = 0;
};

// What listeners heard, as "ok" or the status.
class Heard {
 public:
  StoreHealth::Listener AsListener() {
    return [this](const absl::Status& s) {
      absl::MutexLock lock(&mu_);
      heard_.push_back(s.ok() ? "ok" : s.ToString());
    };
  }
  std::vector<std::string> Get() {
    absl::MutexLock lock(&mu_);
    return heard_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> heard_ ABSL_GUARDED_BY(mu_);
};

TEST(StoreHealthTest, AFailedWriteRefusesAndTheNextSuccessfulOneTakesWrites) {
  FakeProbe probe;
  probe.Set(DiskFull());
  StoreHealth health(probe.AsProbe(), {.probe_every = absl::Hours(1)});
  Heard heard;
  health.Watch(heard.AsListener());
  EXPECT_TRUE(health.status().ok());

  health.Record(absl::OkStatus());
  health.Record(DiskFull());
  EXPECT_EQ(health.status(), DiskFull());
  // Further failures change the reason, not the state: no new news.
  const absl::Status io = absl::UnavailableError("IO error");
  health.Record(io);
  EXPECT_EQ(health.status(), io);
  health.Record(absl::OkStatus());
  EXPECT_TRUE(health.status().ok());
  health.Record(absl::OkStatus());

  EXPECT_THAT(heard.Get(), ElementsAre("ok", DiskFull().ToString(), "ok"));
  EXPECT_EQ(probe.runs(), 0);  // Never due within the hour.
}

TEST(StoreHealthTest, TheProbeRunsOnlyWhileRefusingAndFindsTheRecovery) {
  FakeProbe probe;
  probe.Set(DiskFull());
  StoreHealth health(probe.AsProbe(), {.probe_every = absl::Milliseconds(5)});
  Heard heard;
  health.Watch(heard.AsListener());
  EXPECT_EQ(probe.runs(), 0);

  health.Record(DiskFull());
  // It probes, and keeps refusing while the probe fails.
  ASSERT_TRUE(Eventually([&] { return probe.runs() >= 3; }, kWait));
  EXPECT_EQ(health.status(), DiskFull());

  probe.Set(absl::OkStatus());
  ASSERT_TRUE(Eventually([&] { return health.status().ok(); }, kWait));
  EXPECT_THAT(heard.Get(), ElementsAre("ok", DiskFull().ToString(), "ok"));
  // Taking writes again, it stops probing.
  const int runs = probe.runs();
  health.Stop();
  EXPECT_EQ(probe.runs(), runs);
}

TEST(StoreHealthTest, AListenerHearsTheStateAtOnceAndNothingAfterUnwatch) {
  FakeProbe probe;
  StoreHealth health(probe.AsProbe(), {.probe_every = absl::Hours(1)});
  health.Record(DiskFull());
  Heard heard;
  health.Watch(heard.AsListener());
  EXPECT_THAT(heard.Get(), ElementsAre(DiskFull().ToString()));
  health.Unwatch();
  health.Record(absl::OkStatus());
  EXPECT_THAT(heard.Get(), ElementsAre(DiskFull().ToString()));
}

}  // namespace
}  // namespace hourglass::broker
