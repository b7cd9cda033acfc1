// The chaos harness's checker: each violation it must catch, and what it
// must excuse.

#include "tests/cluster/ledger.h"

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hourglass::testing {
namespace {

using ::testing::ElementsAre;

const absl::Time kDue = absl::FromUnixSeconds(1000);

TEST(LedgerTest, AMessageDeliveredOnceAtItsTimeHolds) {
  Ledger ledger;
  ledger.Published("m1", kDue);
  EXPECT_EQ(ledger.Outstanding(), 1);
  ledger.Delivered("m1", kDue, kDue);
  EXPECT_EQ(ledger.Outstanding(), 0);
  const Ledger::Report r = ledger.Check();
  EXPECT_TRUE(r.Holds()) << r.ToString();
  EXPECT_EQ(r.acknowledged, 1);
  EXPECT_EQ(r.delivered, 1);
  EXPECT_EQ(r.deliveries, 1);
  EXPECT_EQ(r.duplicates, 0);
  EXPECT_EQ(ledger.LastDue(), kDue);
}

TEST(LedgerTest, AnAcknowledgedMessageNeverDeliveredIsLost) {
  Ledger ledger;
  ledger.Published("m1", kDue);
  ledger.Published("m2", kDue);
  ledger.Delivered("m2", kDue, kDue);
  const Ledger::Report r = ledger.Check();
  EXPECT_FALSE(r.Holds());
  EXPECT_EQ(r.lost, 1);
  EXPECT_THAT(r.examples, ElementsAre("lost m1"));
}

TEST(LedgerTest, AnUncertainPublishOrCancelIsNotOwed) {
  Ledger ledger;
  ledger.PublishUncertain("maybe");
  ledger.Published("cancelled-maybe", kDue);
  ledger.CancelUncertain("cancelled-maybe");
  ledger.Delivered("cancelled-maybe", kDue,
                   kDue);  // Allowed: the cancel may have failed.
  const Ledger::Report r = ledger.Check();
  EXPECT_TRUE(r.Holds()) << r.ToString();
  EXPECT_EQ(r.uncertain, 1);
  EXPECT_EQ(ledger.Outstanding(), 0);
}

TEST(LedgerTest, ADeliveryBeforeItsDeliverAtIsEarly) {
  Ledger ledger;
  ledger.Published("m1", kDue);
  ledger.Delivered("m1", kDue - absl::Milliseconds(1), kDue);
  const Ledger::Report r = ledger.Check();
  EXPECT_EQ(r.early, 1);
  EXPECT_THAT(r.examples, ElementsAre("early m1"));
}

// A publish whose answer was lost in a failover, retried once its first copy
// had been delivered and acked: the retry stored a second copy, due later,
// which the receipt names. The first copy's delivery, on time for itself,
// is neither early nor a delivery after the second copy's cancel.
TEST(LedgerTest, ACopyStoredByARetryIsReportedNotFailed) {
  const absl::Time first_due = kDue - absl::Seconds(3);
  Ledger ledger;
  ledger.Published("m1", kDue);
  ledger.Delivered("m1", first_due + absl::Milliseconds(2), first_due);
  ledger.Cancelled("m1");
  const Ledger::Report r = ledger.Check();
  EXPECT_TRUE(r.Holds()) << r.ToString();
  EXPECT_EQ(r.other_copies, 1);
  EXPECT_EQ(r.early, 0);
  EXPECT_EQ(r.after_cancel, 0);
  // The acknowledged copy delivered after its cancel is still caught.
  ledger.Delivered("m1", kDue, kDue);
  EXPECT_EQ(ledger.Check().after_cancel, 1);
}

TEST(LedgerTest, ADeliveryOfAnAcknowledgedCancelIsAViolation) {
  Ledger ledger;
  ledger.Published("m1", kDue);
  ledger.Cancelled("m1");
  EXPECT_EQ(ledger.Outstanding(), 0);  // Not owed any more.
  ledger.Delivered("m1", kDue + absl::Seconds(1), kDue);
  const Ledger::Report r = ledger.Check();
  EXPECT_EQ(r.after_cancel, 1);
  EXPECT_EQ(r.lost, 0);
  EXPECT_EQ(r.cancelled, 1);
}

TEST(LedgerTest, NotFoundIsAViolationOnlyBeforeTheMessageCameDue) {
  Ledger ledger;
  ledger.Published("gone", kDue);
  ledger.Published("due", kDue);
  ledger.CancelNotFound("gone", kDue - absl::Seconds(1));
  ledger.CancelNotFound("due", kDue);
  ledger.Delivered("gone", kDue, kDue);
  ledger.Delivered("due", kDue, kDue);
  const Ledger::Report r = ledger.Check();
  EXPECT_EQ(r.cancel_missing, 1);
  EXPECT_THAT(r.examples, ElementsAre("cancel-not-found gone"));
}

TEST(LedgerTest, DuplicatesAreCountedNotFailed) {
  Ledger ledger;
  ledger.Published("m1", kDue);
  ledger.Delivered("m1", kDue, kDue);
  ledger.Delivered("m1", kDue + absl::Seconds(2), kDue);
  ledger.Delivered("m1", kDue + absl::Seconds(4), kDue);
  const Ledger::Report r = ledger.Check();
  EXPECT_TRUE(r.Holds()) << r.ToString();
  EXPECT_EQ(r.delivered, 1);
  EXPECT_EQ(r.deliveries, 3);
  EXPECT_EQ(r.duplicates, 2);
}

}  // namespace
}  // namespace hourglass::testing
