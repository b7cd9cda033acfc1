#include "api/validation.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hourglass::api {
namespace {

using hourglass::v1::Message;
using hourglass::v1::PublishRequest;

const absl::Time kNow = absl::FromUnixMillis(1'795'305'600'000);

// Expects INVALID_ARGUMENT with exactly `message`.
void ExpectInvalid(const absl::Status& status, const std::string& message) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_EQ(std::string(status.message()), message);
}

PublishRequest OneMessage(const std::string& topic) {
  PublishRequest request;
  request.add_messages()->set_topic(topic);
  return request;
}

absl::Status Validate(const PublishRequest& request) {
  return ValidatePublish(request, Limits(), kNow);
}

TEST(ValidateNameTest, AcceptsEveryAllowedCharacterUpTo200Bytes) {
  EXPECT_TRUE(ValidateName("topic", "Orders.v2_eu-west").ok());
  EXPECT_TRUE(ValidateName("topic", std::string(200, 'a')).ok());
}

TEST(ValidateNameTest, NamesTheFieldAndTheValue) {
  ExpectInvalid(ValidateName("topic", ""), "topic is empty");
  ExpectInvalid(ValidateName("topic", "a b"), "topic \"a b\" has a space");
  ExpectInvalid(ValidateName("group", "a/b"),
                "group \"a/b\" has '/'; names may use only A-Z a-z 0-9 . _ -");
  ExpectInvalid(ValidateName("topic", std::string("a\0b", 3)),
                "topic \"a\\x00b\" has byte 0x00; names may use only A-Z a-z "
                "0-9 . _ -");
  ExpectInvalid(ValidateName("topic", std::string(201, 'x')),
                "topic \"" + std::string(64, 'x') +
                    "...\" is 201 bytes long; the limit is 200");
}

TEST(ValidatePublishTest, AcceptsAWellFormedBatch) {
  PublishRequest request;
  Message* now = request.add_messages();
  now->set_topic("orders");
  Message* later = request.add_messages();
  later->set_topic("orders");
  later->mutable_delay()->set_seconds(30);
  later->set_id(std::string(128, 'k'));
  later->set_payload(std::string(1 << 20, 'p'));
  Message* at = request.add_messages();
  at->set_topic("orders");
  at->mutable_deliver_at()->set_seconds(absl::ToUnixSeconds(kNow) + 3600);
  EXPECT_TRUE(Validate(request).ok()) << Validate(request);
}

TEST(ValidatePublishTest, RejectsAnEmptyRequest) {
  ExpectInvalid(Validate(PublishRequest()), "the request has no messages");
}

TEST(ValidatePublishTest, RejectsMoreThanMaxBatch) {
  PublishRequest request;
  for (int i = 0; i < 4; ++i) request.add_messages()->set_topic("t");
  ExpectInvalid(ValidatePublish(request, Limits{.max_batch = 3}, kNow),
                "the request has 4 messages; the limit is 3 (--max_batch)");
}

TEST(ValidatePublishTest, NamesTheIndexOfTheBadMessage) {
  PublishRequest request;
  request.add_messages()->set_topic("good");
  request.add_messages()->set_topic("good");
  request.add_messages()->set_topic("bad topic");
  ExpectInvalid(Validate(request),
                "message 2: topic \"bad topic\" has a space");
}

TEST(ValidatePublishTest, RejectsAPayloadOverTheLimit) {
  PublishRequest request = OneMessage("t");
  request.mutable_messages(0)->set_payload(std::string((1 << 20) + 1, 'p'));
  ExpectInvalid(Validate(request),
                "message 0: payload is 1048577 bytes; the limit is 1048576 "
                "(--max_payload_bytes)");
}

TEST(ValidatePublishTest, RejectsAnIdOver128Bytes) {
  PublishRequest request = OneMessage("t");
  request.mutable_messages(0)->set_id(std::string(129, 'k'));
  ExpectInvalid(Validate(request),
                "message 0: id \"" + std::string(64, 'k') +
                    "...\" is 129 bytes long; the limit is 128");
}

// Found by tests/fuzz/validation_fuzz: a producer id such as
// "hg-0000000000000001" was stored as given, and the broker later assigned
// the same id to another message of the topic, so two pending messages
// shared one id.
TEST(ValidatePublishTest, RejectsIdsOfTheFormTheBrokerAssigns) {
  PublishRequest request = OneMessage("t");
  request.mutable_messages(0)->set_id("order-1");
  request.add_messages()->set_topic("t");
  request.mutable_messages(1)->set_id("hg-00000000000f4a2c");
  ExpectInvalid(Validate(request),
                "message 1: id \"hg-00000000000f4a2c\" has the form of the ids "
                "the broker assigns (hg- and 16 hex digits)");
  // Close to the form is fine: other lengths, uppercase, other prefixes.
  for (const char* id :
       {"hg-0000000000000001a", "hg-000000000000001", "hg-00000000000F4A2C",
        "HG-0000000000000001", "hg-000000000000000g", "hg-"}) {
    request.mutable_messages(1)->set_id(id);
    EXPECT_TRUE(Validate(request).ok()) << id << ": " << Validate(request);
  }
}

TEST(ValidatePublishTest, RejectsANegativeDelay) {
  PublishRequest request = OneMessage("t");
  request.mutable_messages(0)->mutable_delay()->set_seconds(-5);
  ExpectInvalid(Validate(request), "message 0: delay -5s is negative");
}

TEST(ValidatePublishTest, RejectsADelayOverMaxDelay) {
  PublishRequest request = OneMessage("t");
  request.mutable_messages(0)->mutable_delay()->set_seconds(3651LL * 86400);
  ExpectInvalid(Validate(request),
                "message 0: delay 87624h is over the limit of 87600h "
                "(--max_delay)");
}

TEST(ValidatePublishTest, RejectsADeliverAtBeyondMaxDelay) {
  PublishRequest request = OneMessage("t");
  request.mutable_messages(0)->mutable_deliver_at()->set_seconds(
      absl::ToUnixSeconds(kNow) + 3651LL * 86400);
  ExpectInvalid(Validate(request),
                "message 0: deliver_at 2036-11-20T00:00:00+00:00 is more than "
                "87600h ahead (--max_delay)");
}

TEST(ValidatePublishTest, RejectsOutOfRangeDurationsAndTimestamps) {
  PublishRequest request = OneMessage("t");
  request.mutable_messages(0)->mutable_delay()->set_nanos(1'000'000'000);
  ExpectInvalid(Validate(request),
                "message 0: delay is not a valid Duration (seconds 0, nanos "
                "1000000000)");
  request.mutable_messages(0)->mutable_delay()->set_seconds(1);
  request.mutable_messages(0)->mutable_delay()->set_nanos(-1);
  ExpectInvalid(
      Validate(request),
      "message 0: delay is not a valid Duration (seconds 1, nanos -1)");
  request.mutable_messages(0)->mutable_delay()->set_seconds(315'576'000'001);
  request.mutable_messages(0)->mutable_delay()->set_nanos(0);
  ExpectInvalid(Validate(request),
                "message 0: delay is not a valid Duration (seconds "
                "315576000001, nanos 0)");

  PublishRequest at = OneMessage("t");
  at.mutable_messages(0)->mutable_deliver_at()->set_nanos(-1);
  ExpectInvalid(Validate(at),
                "message 0: deliver_at is not a valid Timestamp (seconds 0, "
                "nanos -1)");
  at.mutable_messages(0)->mutable_deliver_at()->set_nanos(0);
  at.mutable_messages(0)->mutable_deliver_at()->set_seconds(253'402'300'800);
  ExpectInvalid(Validate(at),
                "message 0: deliver_at is not a valid Timestamp (seconds "
                "253402300800, nanos 0)");
}

TEST(ValidatePublishTest, TopicsLeaveRoomForTheirDeadLetterTopic) {
  EXPECT_TRUE(Validate(OneMessage(std::string(196, 't'))).ok());
  ExpectInvalid(Validate(OneMessage(std::string(197, 't'))),
                "message 0: topic \"" + std::string(64, 't') +
                    "...\" is 197 bytes long; the limit is 196 (room for the "
                    ".dlq of its dead-letter topic)");
  // A dead-letter topic of a 196-byte topic is a valid name.
  EXPECT_TRUE(Validate(OneMessage(std::string(196, 't') + ".dlq")).ok());
}

TEST(ValidatePublishTest, HeadersAreBoundedInCountAndBytes) {
  PublishRequest request = OneMessage("t");
  auto& headers = *request.mutable_messages(0)->mutable_headers();
  for (int i = 0; i < 64; ++i) headers[absl::StrCat("k", i)] = "v";
  EXPECT_TRUE(Validate(request).ok()) << Validate(request);
  headers["k64"] = "v";
  ExpectInvalid(Validate(request),
                "message 0: 65 headers; the limit is 64 (--max_headers)");

  PublishRequest large = OneMessage("t");
  auto& big = *large.mutable_messages(0)->mutable_headers();
  big["a"] = std::string(32 << 10, 'v');
  big["b"] = std::string((32 << 10) - 2, 'v');
  EXPECT_TRUE(Validate(large).ok()) << Validate(large);  // 65,536 bytes.
  big["b"].push_back('v');
  ExpectInvalid(Validate(large),
                "message 0: headers are 65537 bytes (keys and values); the "
                "limit is 65536 (--max_header_bytes)");
}

TEST(ValidatePublishTest, HeaderKeysAreNamesAndTheLeastBadOneIsNamed) {
  PublishRequest request = OneMessage("t");
  request.add_messages()->set_topic("t");
  auto& headers = *request.mutable_messages(1)->mutable_headers();
  headers["content-type"] = "any value, even with spaces: ok";
  headers["z z"] = "v";
  headers["x/y"] = "v";
  ExpectInvalid(Validate(request),
                "message 1: header \"x/y\" has '/'; names may use only A-Z "
                "a-z 0-9 . _ -");
  headers.erase("x/y");
  ExpectInvalid(Validate(request), "message 1: header \"z z\" has a space");
  headers.erase("z z");
  headers[""] = "v";
  ExpectInvalid(Validate(request), "message 1: header is empty");
}

TEST(ValidateIdTest, NamesTheFieldAndTheLimit) {
  const Limits limits;
  EXPECT_TRUE(ValidateId("id", std::string(128, 'k'), limits).ok());
  ExpectInvalid(ValidateId("nack.id", "", limits), "nack.id is empty");
  ExpectInvalid(ValidateId("ids[2]", std::string(129, 'k'), limits),
                "ids[2] \"" + std::string(64, 'k') +
                    "...\" is 129 bytes long; the limit is 128");
}

TEST(ValidateOpenTest, TheAckTimeoutIsBounded) {
  hourglass::v1::Open open;
  open.set_topic("t");
  open.set_group("g");
  open.mutable_ack_timeout()->set_seconds(24 * 3600);
  EXPECT_TRUE(ValidateOpen(open, Limits()).ok());
  open.mutable_ack_timeout()->set_seconds(24 * 3600 + 1);
  ExpectInvalid(ValidateOpen(open, Limits()),
                "open.ack_timeout 24h1s is over the limit of 24h "
                "(--max_ack_timeout)");
  open.clear_ack_timeout();
  open.set_topic(std::string(197, 't'));
  ExpectInvalid(ValidateOpen(open, Limits()),
                "open.topic \"" + std::string(64, 't') +
                    "...\" is 197 bytes long; the limit is 196 (room for the "
                    ".dlq of its dead-letter topic)");
}

TEST(ValidateAckTest, BoundsTheIdsAndEachId) {
  hourglass::v1::Ack ack;
  ack.add_ids("a");
  ack.add_ids("b");
  EXPECT_TRUE(ValidateAck(ack, Limits{.max_credit = 2}).ok());
  ack.add_ids("c");
  ExpectInvalid(ValidateAck(ack, Limits{.max_credit = 2}),
                "ack has 3 ids; the limit is 2 (--max_credit: a stream never "
                "holds more deliveries)");
  ack.set_ids(1, "");
  ExpectInvalid(ValidateAck(ack, Limits()), "ack.ids[1] is empty");
  ack.set_ids(1, std::string(129, 'k'));
  ExpectInvalid(ValidateAck(ack, Limits()),
                "ack.ids[1] \"" + std::string(64, 'k') +
                    "...\" is 129 bytes long; the limit is 128");
}

TEST(ValidateNackTest, TheDelayIsBoundedByMaxDelay) {
  hourglass::v1::Nack nack;
  ExpectInvalid(ValidateNack(nack, Limits()), "nack.id is empty");
  nack.set_id("m1");
  nack.mutable_delay()->set_seconds(3650LL * 86400);
  EXPECT_TRUE(ValidateNack(nack, Limits()).ok());
  nack.mutable_delay()->set_seconds(3650LL * 86400 + 1);
  ExpectInvalid(ValidateNack(nack, Limits()),
                "nack.delay 87600h1s is over the limit of 87600h "
                "(--max_delay)");
  nack.mutable_delay()->set_seconds(-1);
  ExpectInvalid(ValidateNack(nack, Limits()), "nack.delay -1s is negative");
}

TEST(DeliverAtTest, DelayDeliverAtOrNowToTheMillisecond) {
  Message m;
  EXPECT_EQ(DeliverAt(m, kNow + absl::Microseconds(1500)),
            kNow + absl::Milliseconds(1));
  m.mutable_delay()->set_seconds(30);
  m.mutable_delay()->set_nanos(2'500'000);
  EXPECT_EQ(DeliverAt(m, kNow), kNow + absl::Milliseconds(30'002));
  Message past;
  past.mutable_deliver_at()->set_seconds(absl::ToUnixSeconds(kNow) - 60);
  EXPECT_EQ(DeliverAt(past, kNow), kNow);  // A past time means now.
  Message future;
  future.mutable_deliver_at()->set_seconds(absl::ToUnixSeconds(kNow) + 60);
  EXPECT_EQ(DeliverAt(future, kNow), kNow + absl::Seconds(60));
}

TEST(ValidateDeadlineTest, AcceptsATtlOrExpireAtAfterTheDueTime) {
  PublishRequest request = OneMessage("t");
  Message* m = request.mutable_messages(0);
  m->mutable_delay()->set_seconds(10);
  m->mutable_ttl()->set_seconds(11);
  m->set_on_expire(hourglass::v1::ON_EXPIRE_DEAD_LETTER);
  Message* at = request.add_messages();
  at->set_topic("t");
  at->mutable_expire_at()->set_seconds(absl::ToUnixSeconds(kNow) + 1);
  EXPECT_TRUE(Validate(request).ok()) << Validate(request);
}

TEST(ValidateDeadlineTest, RejectsBothExpireAtAndTtl) {
  PublishRequest request = OneMessage("t");
  request.mutable_messages(0)->mutable_ttl()->set_seconds(60);
  request.mutable_messages(0)->mutable_expire_at()->set_seconds(
      absl::ToUnixSeconds(kNow) + 60);
  ExpectInvalid(Validate(request),
                "message 0: expire_at and ttl are both set; set at most one");
}

TEST(ValidateDeadlineTest, RejectsATtlNotLongerThanTheDelay) {
  PublishRequest request = OneMessage("t");
  request.mutable_messages(0)->mutable_delay()->set_seconds(10);
  request.mutable_messages(0)->mutable_ttl()->set_seconds(5);
  ExpectInvalid(Validate(request),
                "message 0: ttl 5s is not longer than the message's delay "
                "10s: it would expire before it comes due");
  request.mutable_messages(0)->mutable_ttl()->set_seconds(10);
  ExpectInvalid(Validate(request),
                "message 0: ttl 10s is not longer than the message's delay "
                "10s: it would expire before it comes due");
  // Due now: a ttl of 0 (or less) expires at once.
  PublishRequest now = OneMessage("t");
  now.mutable_messages(0)->mutable_ttl()->set_seconds(0);
  ExpectInvalid(Validate(now),
                "message 0: ttl 0 is not longer than the message's delay 0: "
                "it would expire before it comes due");
}

TEST(ValidateDeadlineTest, RejectsAnExpireAtAtOrBeforeTheDueTime) {
  PublishRequest request = OneMessage("t");
  request.mutable_messages(0)->mutable_deliver_at()->set_seconds(
      absl::ToUnixSeconds(kNow) + 60);
  request.mutable_messages(0)->mutable_expire_at()->set_seconds(
      absl::ToUnixSeconds(kNow) + 30);
  ExpectInvalid(Validate(request),
                "message 0: expire_at 2026-11-22T00:00:30+00:00 is not after "
                "the message's due time 2026-11-22T00:01:00+00:00: it would "
                "expire before it comes due");
  // No delay: due now, so a past deadline is refused too.
  PublishRequest past = OneMessage("t");
  past.mutable_messages(0)->mutable_expire_at()->set_seconds(
      absl::ToUnixSeconds(kNow) - 1);
  ExpectInvalid(Validate(past),
                "message 0: expire_at 2026-11-21T23:59:59+00:00 is not after "
                "the message's due time 2026-11-22T00:00:00+00:00: it would "
                "expire before it comes due");
}

TEST(ValidateDeadlineTest, BoundsTheDeadlineByMaxDelay) {
  PublishRequest ttl = OneMessage("t");
  ttl.mutable_messages(0)->mutable_ttl()->set_seconds(3651LL * 86400);
  ExpectInvalid(Validate(ttl),
                "message 0: ttl 87624h is over the limit of 87600h "
                "(--max_delay)");
  PublishRequest at = OneMessage("t");
  at.mutable_messages(0)->mutable_expire_at()->set_seconds(
      absl::ToUnixSeconds(kNow) + 3651LL * 86400);
  ExpectInvalid(Validate(at),
                "message 0: expire_at 2036-11-20T00:00:00+00:00 is more than "
                "87600h ahead (--max_delay)");
  PublishRequest bad = OneMessage("t");
  bad.mutable_messages(0)->mutable_ttl()->set_nanos(-5);
  bad.mutable_messages(0)->mutable_ttl()->set_seconds(1);
  ExpectInvalid(Validate(bad),
                "message 0: ttl is not a valid Duration (seconds 1, nanos -5)");
}

TEST(ValidateDeadlineTest, RejectsAnUnknownOnExpire) {
  PublishRequest request = OneMessage("t");
  request.mutable_messages(0)->mutable_ttl()->set_seconds(60);
  request.mutable_messages(0)->set_on_expire(
      static_cast<hourglass::v1::OnExpire>(7));
  ExpectInvalid(Validate(request),
                "message 0: on_expire 7 is not a known value (ON_EXPIRE_DROP, "
                "ON_EXPIRE_DEAD_LETTER)");
}

TEST(ExpireAtTest, TtlFromNowOrExpireAtToTheMillisecond) {
  Message m;
  EXPECT_EQ(ExpireAt(m, kNow), absl::InfiniteFuture());
  m.mutable_ttl()->set_seconds(30);
  m.mutable_ttl()->set_nanos(2'500'000);
  EXPECT_EQ(ExpireAt(m, kNow + absl::Microseconds(100)),
            kNow + absl::Milliseconds(30'002));
  Message at;
  at.mutable_expire_at()->set_seconds(absl::ToUnixSeconds(kNow) + 60);
  at.mutable_expire_at()->set_nanos(1'500'000);
  EXPECT_EQ(ExpireAt(at, kNow), kNow + absl::Milliseconds(60'001));
}

}  // namespace
}  // namespace hourglass::api
