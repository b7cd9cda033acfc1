#include "tests/soak/ledger.h"

#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hourglass::soak {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A fixed instant on a whole millisecond, as the broker's times are.
const absl::Time kT0 = absl::FromUnixMillis(1'800'000'000'000);

client::Receipt Receipt(const std::string& id, absl::Time deliver_at,
                        bool duplicate = false) {
  return client::Receipt{
      .id = id, .deliver_at = deliver_at, .duplicate = duplicate};
}

client::Delivery Delivery(const std::string& id, absl::Time deliver_at,
                          uint32_t attempt = 1, size_t payload_size = 10) {
  client::Delivery d;
  d.id = id;
  d.topic = "soak";
  d.payload = Ledger::Payload(id, payload_size);
  d.headers["soak-id"] = id;
  d.deliver_at = deliver_at;
  d.attempt = attempt;
  return d;
}

class LedgerTest : public ::testing::Test {
 protected:
  // Publishes `id` (10-byte payload) successfully, due at `due`.
  void Publish(const std::string& id, absl::Time due) {
    ledger_.NewMessage(id, 10, due, /*refusable=*/false);
    ledger_.PublishSucceeded(id, Receipt(id, due));
  }
  // Delivers `id` to every group, on time, and acks it.
  void DeliverAndAck(const std::string& id, absl::Time due) {
    for (int g = 0; g < 2; ++g) {
      ledger_.Delivered(g, Delivery(id, due), due + absl::Milliseconds(3));
      ledger_.Acked(g, id);
    }
  }

  Ledger ledger_{"soak", /*groups=*/2, /*max_attempts=*/16};
};

TEST_F(LedgerTest, DeliveredAndAckedByEveryGroupIsClean) {
  Publish("p0-0", kT0);
  EXPECT_EQ(ledger_.counts().owed, 2u);
  DeliverAndAck("p0-0", kT0);
  EXPECT_TRUE(ledger_.AwaitSettled(absl::Now()));
  EXPECT_THAT(ledger_.Verify(), IsEmpty());
  const Ledger::Counts counts = ledger_.counts();
  EXPECT_EQ(counts.published, 1u);
  EXPECT_EQ(counts.deliveries, 2u);
  EXPECT_EQ(counts.acks, 2u);
  EXPECT_EQ(counts.owed, 0u);
}

TEST_F(LedgerTest, AckedByOneGroupOnlyIsLost) {
  Publish("p0-0", kT0);
  ledger_.Delivered(0, Delivery("p0-0", kT0), kT0);
  ledger_.Acked(0, "p0-0");
  EXPECT_FALSE(ledger_.AwaitSettled(absl::Now() + absl::Milliseconds(1)));
  EXPECT_THAT(ledger_.Verify(),
              ElementsAre(HasSubstr("lost: p0-0 (publish succeeded, "
                                    "deliver_at 08:00:00.000) never acked "
                                    "by g2; delivered 0 time(s)")));
}

TEST_F(LedgerTest, AckBeforeThePublishAnswerCounts) {
  // A message due at once may reach a consumer before its producer reads
  // the receipt.
  ledger_.NewMessage("p0-0", 10, kT0, /*refusable=*/false);
  DeliverAndAck("p0-0", kT0);
  ledger_.PublishSucceeded("p0-0", Receipt("p0-0", kT0));
  EXPECT_EQ(ledger_.counts().owed, 0u);
  EXPECT_THAT(ledger_.Verify(), IsEmpty());
}

TEST_F(LedgerTest, UnknownIdIsReported) {
  ledger_.Delivered(1, Delivery("x-1", kT0), kT0);
  EXPECT_THAT(ledger_.Verify(),
              ElementsAre("unknown id x-1 (attempt 1) delivered to g2"));
}

TEST_F(LedgerTest, EarlyDeliveriesAreReported) {
  Publish("p0-0", kT0);
  // Arrived a millisecond before its deliver_at.
  ledger_.Delivered(0, Delivery("p0-0", kT0), kT0 - absl::Milliseconds(1));
  // Carries a deliver_at before the earliest the publish allowed.
  ledger_.Delivered(1, Delivery("p0-0", kT0 - absl::Seconds(1), 2), kT0);
  EXPECT_THAT(
      ledger_.Verify(),
      ElementsAre(HasSubstr("early: p0-0 (attempt 1) to g1 arrived at "
                            "07:59:59.999, before its deliver_at"),
                  HasSubstr("early: p0-0 (attempt 2) to g2 has deliver_at "
                            "07:59:59.000, before the earliest"),
                  HasSubstr("has deliver_at 07:59:59.000, its receipt said "
                            "08:00:00.000"),
                  HasSubstr("lost: p0-0"), HasSubstr("lost: p0-0")));
}

TEST_F(LedgerTest, CancelledMessageMustNeverBeDelivered) {
  const absl::Time answered = kT0 - absl::Seconds(1);
  Publish("p0-0", kT0);
  ledger_.CancelSucceeded("p0-0", answered);
  EXPECT_EQ(ledger_.counts().owed, 0u);
  ledger_.Delivered(0, Delivery("p0-0", kT0), kT0);
  Publish("p0-1", kT0);
  ledger_.Delivered(1, Delivery("p0-1", kT0), kT0);
  ledger_.CancelSucceeded("p0-1", answered);
  EXPECT_THAT(
      ledger_.Verify(),
      ElementsAre("p0-0 (attempt 1) to g1 was delivered at 08:00:00.000 "
                  "after its cancel succeeded",
                  "cancel of p0-1 (deliver_at 08:00:00.000) succeeded at "
                  "07:59:59.000, but g2 had received it as attempt 1 at "
                  "08:00:00.000"));
}

TEST_F(LedgerTest, CancelOfASecondCopyAllowsTheFirstsDeliveries) {
  // The first attempt's outcome is unknown, but it stored a copy due at
  // kT0, which both groups consumed; the retry stored a second copy, due
  // later, and the cancel removed that one.
  const absl::Time later = kT0 + absl::Seconds(2);
  ledger_.NewMessage("p0-0", 10, kT0, /*refusable=*/false);
  ledger_.PublishUnknown("p0-0");
  DeliverAndAck("p0-0", kT0);
  ledger_.PublishStarted("p0-0");
  ledger_.PublishSucceeded("p0-0", Receipt("p0-0", later));
  ledger_.CancelSucceeded("p0-0", later - absl::Seconds(1));
  EXPECT_THAT(ledger_.Verify(), IsEmpty());
  EXPECT_EQ(ledger_.counts().cancelled_second_copies, 1u);
  // A delivery of the cancelled copy is not.
  ledger_.Delivered(1, Delivery("p0-0", later), later);
  EXPECT_THAT(ledger_.Verify(),
              ElementsAre("p0-0 (attempt 1) to g2 was delivered at "
                          "08:00:02.000 after its cancel succeeded"));
}

TEST_F(LedgerTest, CancelNotFoundBeforeDueIsALostMessage) {
  Publish("p0-0", kT0);
  ledger_.CancelNotFound("p0-0", kT0 - absl::Milliseconds(1));
  Publish("p0-1", kT0);
  ledger_.CancelNotFound("p0-1", kT0);  // Due: the broker may say so.
  DeliverAndAck("p0-0", kT0);
  DeliverAndAck("p0-1", kT0);
  EXPECT_THAT(ledger_.Verify(),
              ElementsAre(HasSubstr("cancel of p0-0 answered NOT_FOUND at "
                                    "07:59:59.999, before its deliver_at")));
}

TEST_F(LedgerTest, CancelWithUnknownOutcomeOwesNothing) {
  Publish("p0-0", kT0);
  ledger_.CancelUnknown("p0-0");
  EXPECT_EQ(ledger_.counts().owed, 0u);
  EXPECT_THAT(ledger_.Verify(), IsEmpty());
}

TEST_F(LedgerTest, RefusedMessagesMustNeverBeDelivered) {
  // A bad batch's good message, refused as it must be, yet delivered.
  ledger_.NewMessage("p0-0", 10, kT0, /*refusable=*/true);
  ledger_.PublishRefused("p0-0");
  ledger_.Delivered(0, Delivery("p0-0", kT0), kT0);
  // A message refused for lack of room (RESOURCE_EXHAUSTED), yet delivered.
  ledger_.NewMessage("p0-1", 10, kT0, /*refusable=*/false);
  ledger_.PublishRefused("p0-1");
  ledger_.Delivered(1, Delivery("p0-1", kT0), kT0);
  EXPECT_THAT(
      ledger_.Verify(),
      ElementsAre("p0-0 (attempt 1) to g1 was delivered, but its batch held "
                  "a bad message and must have been refused",
                  "phantom: p0-1 delivered to g2 though every publish of it "
                  "was refused"));
}

TEST_F(LedgerTest, UnknownOutcomeMayOrMayNotBeDelivered) {
  ledger_.NewMessage("p0-0", 10, kT0, /*refusable=*/false);
  ledger_.PublishUnknown("p0-0");
  ledger_.Delivered(0, Delivery("p0-0", kT0), kT0);
  ledger_.NewMessage("p0-1", 10, kT0, /*refusable=*/false);
  ledger_.PublishUnknown("p0-1");
  EXPECT_EQ(ledger_.counts().owed, 0u);
  EXPECT_THAT(ledger_.Verify(), IsEmpty());
}

TEST_F(LedgerTest, RetryAfterUnknownOutcomeMayBeADuplicate) {
  ledger_.NewMessage("p0-0", 10, kT0, /*refusable=*/false);
  ledger_.PublishUnknown("p0-0");
  ledger_.PublishStarted("p0-0");
  ledger_.PublishSucceeded("p0-0", Receipt("p0-0", kT0, /*duplicate=*/true));
  DeliverAndAck("p0-0", kT0);
  EXPECT_THAT(ledger_.Verify(), IsEmpty());
  EXPECT_EQ(ledger_.counts().duplicates, 1u);
  EXPECT_EQ(ledger_.counts().retried, 1u);
}

TEST_F(LedgerTest, DuplicateWithoutAnEarlierAttemptIsReported) {
  ledger_.NewMessage("p0-0", 10, kT0, /*refusable=*/false);
  ledger_.PublishSucceeded("p0-0", Receipt("p0-0", kT0, /*duplicate=*/true));
  DeliverAndAck("p0-0", kT0);
  EXPECT_THAT(ledger_.Verify(),
              ElementsAre("publish of p0-0: receipt says duplicate, but no "
                          "earlier attempt can have stored it"));
}

TEST_F(LedgerTest, RepeatedAttemptNumberIsReported) {
  Publish("p0-0", kT0);
  ledger_.Delivered(0, Delivery("p0-0", kT0, 2), kT0);
  ledger_.Delivered(0, Delivery("p0-0", kT0, 2), kT0);
  ledger_.Delivered(1, Delivery("p0-0", kT0, 17), kT0);
  DeliverAndAck("p0-0", kT0);
  EXPECT_THAT(ledger_.Verify(),
              ElementsAre("p0-0 delivered to g1 twice as attempt 2, at "
                          "08:00:00.000 and 08:00:00.000",
                          "p0-0 (attempt 17) to g2: attempt out of [1, 16]"));
}

TEST_F(LedgerTest, ChangedPayloadOrHeadersAreReported) {
  Publish("p0-0", kT0);
  client::Delivery d = Delivery("p0-0", kT0);
  d.payload = "something else";
  d.headers.clear();
  ledger_.Delivered(0, d, kT0);
  DeliverAndAck("p0-0", kT0);
  EXPECT_THAT(ledger_.Verify(),
              ElementsAre("p0-0 (attempt 1) to g1 has a payload of 14 bytes "
                          "unlike the 10 published",
                          "p0-0 (attempt 1) to g1 lost or changed its "
                          "headers",
                          "p0-0 delivered to g1 twice as attempt 1, at "
                          "08:00:00.000 and 08:00:00.003"));
}

TEST(LedgerPayloadTest, RepeatsTheIdToTheSize) {
  EXPECT_EQ(Ledger::Payload("p1-2", 0), "");
  EXPECT_EQ(Ledger::Payload("p1-2", 12), "p1-2.p1-2.p1");
}

}  // namespace
}  // namespace hourglass::soak
