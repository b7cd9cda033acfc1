// The Recurrences service over loopback gRPC: PreviewRecurrence of inline
// rules (exact fire times around DST, defaults, limits, every error the
// .proto documents) and who may call it. The fire-time computation itself
// is tested against a brute-force reference in tests/recurrence.

#include "api/recurrence_service.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "api/auth.h"
#include "api/proto_time.h"
#include "api/server.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "hourglass/v1/recurrences.grpc.pb.h"
#include "tests/testing/fake_clock.h"

namespace hourglass::api {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::SizeIs;

constexpr absl::Duration kWait = absl::Seconds(10);

absl::Time Utc(const std::string& rfc3339) {
  absl::Time t;
  std::string error;
  EXPECT_TRUE(absl::ParseTime(absl::RFC3339_full, rfc3339, &t, &error))
      << rfc3339 << ": " << error;
  return t;
}

google::protobuf::Timestamp Stamp(const std::string& rfc3339) {
  google::protobuf::Timestamp stamp;
  ToProto(Utc(rfc3339), &stamp);
  return stamp;
}

v1::RecurrenceRule Cron(const std::string& cron, const std::string& zone) {
  v1::RecurrenceRule rule;
  rule.set_cron(cron);
  rule.set_time_zone(zone);
  return rule;
}

class RecurrenceServiceTest : public ::testing::Test {
 protected:
  // Serves the service with `tokens` (a tokens file's text; empty: no
  // authentication).
  void Serve(const std::string& tokens) {
    if (!tokens.empty()) {
      absl::StatusOr<std::unique_ptr<Authorizer>> authorizer =
          Authorizer::FromText(tokens, "tokens.txt");
      ASSERT_TRUE(authorizer.ok()) << authorizer.status();
      authorizer_ = *std::move(authorizer);
    }
    service_ = std::make_unique<RecurrenceService>(&clock_, authorizer_.get());
    auto server = Server::Start(
        {.listen_address = "127.0.0.1:0", .services = {service_.get()}});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = v1::Recurrences::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                            grpc::InsecureChannelCredentials()));
  }

  // The fire times the service previews for `request`, in RFC 3339.
  absl::StatusOr<std::vector<std::string>> Preview(
      const v1::PreviewRecurrenceRequest& request,
      const std::string& token = "") {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + kWait));
    if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
    v1::PreviewRecurrenceResponse response;
    const grpc::Status status =
        stub_->PreviewRecurrence(&context, request, &response);
    if (!status.ok()) {
      return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                          status.error_message());
    }
    std::vector<std::string> times;
    for (const google::protobuf::Timestamp& t : response.fire_times()) {
      times.push_back(absl::FormatTime("%Y-%m-%d%ET%H:%M:%E*SZ", FromProto(t),
                                       absl::UTCTimeZone()));
    }
    return times;
  }

  absl::StatusOr<std::vector<std::string>> Preview(
      const v1::RecurrenceRule& rule, const std::string& from, uint32_t count) {
    v1::PreviewRecurrenceRequest request;
    *request.mutable_rule() = rule;
    *request.mutable_from() = Stamp(from);
    request.set_count(count);
    return Preview(request);
  }

  // Preview's fire times, expecting it to succeed.
  std::vector<std::string> FireTimes(const v1::RecurrenceRule& rule,
                                     const std::string& from, uint32_t count) {
    absl::StatusOr<std::vector<std::string>> times = Preview(rule, from, count);
    EXPECT_TRUE(times.ok()) << times.status();
    return times.value_or(std::vector<std::string>());
  }

  testing::FakeClock clock_{Utc("2027-01-01T00:00:00Z")};
  std::unique_ptr<Authorizer> authorizer_;
  std::unique_ptr<RecurrenceService> service_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<v1::Recurrences::Stub> stub_;
};

TEST_F(RecurrenceServiceTest, PreviewFollowsTheZoneAcrossTheSpringGap) {
  Serve("");
  // 2027-03-14 02:30 does not exist in New York: it fires at the end of the
  // gap, 03:00 EDT.
  EXPECT_THAT(FireTimes(Cron("30 2 * * *", "America/New_York"),
                        "2027-03-13T00:00:00Z", 3),
              ElementsAre("2027-03-13T07:30:00Z", "2027-03-14T07:00:00Z",
                          "2027-03-15T06:30:00Z"));
  v1::RecurrenceRule skip = Cron("30 2 * * *", "America/New_York");
  skip.set_on_gap("skip");
  EXPECT_THAT(FireTimes(skip, "2027-03-13T00:00:00Z", 2),
              ElementsAre("2027-03-13T07:30:00Z", "2027-03-15T06:30:00Z"));
}

TEST_F(RecurrenceServiceTest, PreviewFiresARepeatedFixedHourOnceUnlessBoth) {
  Serve("");
  // 2027-11-07 01:30 happens at 05:30Z (EDT) and again at 06:30Z (EST).
  EXPECT_THAT(FireTimes(Cron("30 1 * * *", "America/New_York"),
                        "2027-11-06T12:00:00Z", 2),
              ElementsAre("2027-11-07T05:30:00Z", "2027-11-08T06:30:00Z"));
  v1::RecurrenceRule both = Cron("30 1 * * *", "America/New_York");
  both.set_on_overlap("both");
  EXPECT_THAT(FireTimes(both, "2027-11-06T12:00:00Z", 3),
              ElementsAre("2027-11-07T05:30:00Z", "2027-11-07T06:30:00Z",
                          "2027-11-08T06:30:00Z"));
}

TEST_F(RecurrenceServiceTest, PreviewOfAnEveryRuleCountsFromItsStart) {
  Serve("");
  v1::RecurrenceRule rule;
  rule.mutable_every()->set_seconds(15 * 60);
  *rule.mutable_start_at() = Stamp("2027-01-01T00:05:00Z");
  *rule.mutable_end_at() = Stamp("2027-01-01T00:50:00Z");
  // Bounded by end_at: three fire times, not the five asked for.
  EXPECT_THAT(FireTimes(rule, "2027-01-01T00:00:00Z", 5),
              ElementsAre("2027-01-01T00:05:00Z", "2027-01-01T00:20:00Z",
                          "2027-01-01T00:35:00Z"));
}

TEST_F(RecurrenceServiceTest, PreviewDefaultsToTenFireTimesFromNow) {
  Serve("");
  clock_.Set(Utc("2027-06-01T10:00:30Z"));
  v1::PreviewRecurrenceRequest request;
  *request.mutable_rule() = Cron("* * * * *", "");
  absl::StatusOr<std::vector<std::string>> times = Preview(request);
  ASSERT_TRUE(times.ok()) << times.status();
  ASSERT_THAT(*times, SizeIs(10));
  EXPECT_EQ(times->front(), "2027-06-01T10:01:00Z");
  EXPECT_EQ(times->back(), "2027-06-01T10:10:00Z");
}

TEST_F(RecurrenceServiceTest, PreviewOfARuleThatNeverFiresIsEmpty) {
  Serve("");
  EXPECT_THAT(FireTimes(Cron("0 0 30 2 *", ""), "2027-01-01T00:00:00Z", 3),
              IsEmpty());
}

TEST_F(RecurrenceServiceTest, BadRequestsAreInvalidArgumentNamingTheField) {
  Serve("");
  const std::string from = "2027-01-01T00:00:00Z";
  EXPECT_EQ(Preview(Cron("0 24 * * *", ""), from, 1).status(),
            absl::InvalidArgumentError(
                "rule: cron field 2 (hour): 24 is out of range 0-23"));
  EXPECT_EQ(
      Preview(Cron("0 0 * * *", "Mars/Olympus"), from, 1).status(),
      absl::InvalidArgumentError("rule: unknown time zone \"Mars/Olympus\""));
  EXPECT_EQ(Preview(v1::RecurrenceRule(), from, 1).status(),
            absl::InvalidArgumentError(
                "rule: a rule needs exactly one of cron and every"));
  v1::RecurrenceRule gap = Cron("0 0 * * *", "");
  gap.set_on_gap("later");
  EXPECT_EQ(Preview(gap, from, 1).status(),
            absl::InvalidArgumentError(
                "rule: on_gap \"later\": want \"fire\" or \"skip\""));
  v1::RecurrenceRule zero;
  zero.mutable_every();  // Set, to 0 s.
  EXPECT_EQ(Preview(zero, from, 1).status(),
            absl::InvalidArgumentError("rule: every 0 is shorter than 1s"));
  EXPECT_EQ(Preview(Cron("", ""), from, 1).status(),
            absl::InvalidArgumentError("rule: cron expression is empty"));
  v1::RecurrenceRule fast;
  fast.mutable_every()->set_nanos(500'000'000);
  EXPECT_EQ(Preview(fast, from, 1).status(),
            absl::InvalidArgumentError("rule: every 500ms is shorter than 1s"));
  v1::RecurrenceRule ends = Cron("0 0 * * *", "");
  ends.mutable_end_at()->set_nanos(-1);
  EXPECT_THAT(std::string(Preview(ends, from, 1).status().message()),
              ::testing::StartsWith("rule.end_at is not a valid Timestamp"));
  EXPECT_EQ(
      Preview(Cron("0 0 * * *", ""), from, 1001).status(),
      absl::InvalidArgumentError("count 1001 is above the limit of 1000"));
  EXPECT_THAT(FireTimes(Cron("0 0 * * *", ""), from, 1000), SizeIs(1000));
}

TEST_F(RecurrenceServiceTest, AnyValidTokenMayPreviewAndNoTokenMayNot) {
  Serve("consumer-only-000001 consume orders\n");
  v1::PreviewRecurrenceRequest request;
  *request.mutable_rule() = Cron("@daily", "");
  request.set_count(1);
  EXPECT_EQ(Preview(request).status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(Preview(request, "not-a-token-00000001").status().code(),
            absl::StatusCode::kUnauthenticated);
  absl::StatusOr<std::vector<std::string>> times =
      Preview(request, "consumer-only-000001");
  ASSERT_TRUE(times.ok()) << times.status();
  EXPECT_THAT(*times, ElementsAre("2027-01-02T00:00:00Z"));
}

}  // namespace
}  // namespace hourglass::api
