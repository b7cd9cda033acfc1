// The web console's own endpoints over real HTTP, on a single node: POST
// /api/v1/topics/{topic}/publish (good input stored as Broker.Publish
// stores it, bad input 400 naming the field, the guards and the roles) and
// GET /api/v1/cluster, which a single node answers {"mode":"single"}. The
// cluster's answers are tests/cluster/console_cluster_test.cc's.

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "api/auth.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/time_util.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "tests/console/console_fixture.h"
#include "tests/testing/eventually.h"

namespace hourglass::console {
namespace {

using ::testing::ElementsAre;
using ::testing::StartsWith;

absl::Time TimeOf(const google::protobuf::Timestamp& timestamp) {
  return absl::FromUnixSeconds(timestamp.seconds()) +
         absl::Nanoseconds(timestamp.nanos());
}

TEST_F(ConsoleTest, PublishStoresTheMessageAndAnswersItsReceipt) {
  const absl::Time before = absl::Now();
  httplib::Result published =
      Post("/api/v1/topics/orders/publish",
           R"({"payload":"hello ✓","delay":"10s","id":"p-1",)"
           R"("headers":{"customer":"c-7","source":"console"}})");
  const absl::Time after = absl::Now();
  ASSERT_TRUE(published);
  ASSERT_EQ(published->status, 200) << published->body;
  EXPECT_EQ(published->get_header_value("Content-Type"), kJson);
  const v1::Receipt receipt = Parse<v1::Receipt>(published->body);
  EXPECT_EQ(receipt.id(), "p-1");
  EXPECT_FALSE(receipt.duplicate());
  const absl::Time due = TimeOf(receipt.deliver_at());
  EXPECT_GE(due, absl::FromUnixMillis(absl::ToUnixMillis(before)) +
                     absl::Seconds(10));
  EXPECT_LE(due, after + absl::Seconds(10));
  // Every field, as the JSON mapping prints a Receipt.
  EXPECT_EQ(published->body,
            absl::StrCat(R"({"id":"p-1","duplicate":false,"deliverAt":")",
                         google::protobuf::util::TimeUtil::ToString(
                             receipt.deliver_at()),
                         R"("})"));

  // The broker holds it, as Admin.GetMessage shows.
  httplib::Result message = Get("/api/v1/topics/orders/messages/p-1");
  ASSERT_TRUE(message);
  ASSERT_EQ(message->status, 200) << message->body;
  const v1::MessageInfo info = Parse<v1::MessageInfo>(message->body);
  EXPECT_EQ(info.state(), v1::MESSAGE_STATE_SCHEDULED);
  EXPECT_EQ(info.payload_preview(), "hello ✓");
  EXPECT_EQ(info.headers().at("customer"), "c-7");
  EXPECT_EQ(info.headers().at("source"), "console");
  EXPECT_EQ(TimeOf(info.deliver_at()), due);

  // The same id again: the first receipt, marked a duplicate.
  httplib::Result again =
      Post("/api/v1/topics/orders/publish", R"({"payload":"x","id":"p-1"})");
  ASSERT_TRUE(again);
  ASSERT_EQ(again->status, 200) << again->body;
  const v1::Receipt duplicate = Parse<v1::Receipt>(again->body);
  EXPECT_EQ(duplicate.id(), "p-1");
  EXPECT_TRUE(duplicate.duplicate());
  EXPECT_EQ(TimeOf(duplicate.deliver_at()), due);
}

TEST_F(ConsoleTest, PublishTakesADelayInMillisecondsOrADeliveryTime) {
  // A number is milliseconds; no id: the broker assigns one.
  absl::Time before = absl::Now();
  httplib::Result millis =
      Post("/api/v1/topics/orders/publish", R"({"payload":"a","delay":1500})");
  ASSERT_TRUE(millis);
  ASSERT_EQ(millis->status, 200) << millis->body;
  v1::Receipt receipt = Parse<v1::Receipt>(millis->body);
  EXPECT_THAT(receipt.id(), StartsWith("hg-"));
  EXPECT_GE(TimeOf(receipt.deliver_at()),
            absl::FromUnixMillis(absl::ToUnixMillis(before)) +
                absl::Milliseconds(1500));
  EXPECT_LE(TimeOf(receipt.deliver_at()),
            absl::Now() + absl::Milliseconds(1500));

  // An RFC 3339 time.
  EXPECT_ANSWER(Post("/api/v1/topics/orders/publish",
                     R"({"id":"at-1","deliverAt":"2030-01-01T10:00:00.250Z"})"),
                200,
                R"({"id":"at-1","duplicate":false,)"
                R"("deliverAt":"2030-01-01T10:00:00.250Z"})");
  // Neither: due now, so ready at once (the empty body is an empty object).
  httplib::Result now = Post("/api/v1/topics/now/publish", "");
  ASSERT_TRUE(now);
  ASSERT_EQ(now->status, 200) << now->body;
  EXPECT_TRUE(testing::Eventually(
      [&] {
        httplib::Result stats = Get("/api/v1/stats?topic=now");
        return stats && stats->status == 200 &&
               Parse<v1::GetStatsResponse>(stats->body).topics(0).ready() == 1;
      },
      kWait));
}

TEST_F(ConsoleTest, PublishRefusesBadInputNamingTheField) {
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"not json", ""},  // protobuf's parser's words; checked below.
      {"[1]", "the JSON body must be an object, not an array"},
      {R"({"payload":5})",
       "payload must be a string (the payload as text), not a number"},
      {R"({"id":["a"]})", "id must be a string, not an array"},
      {R"({"headers":"a=b"})",
       "headers must be an object of strings, not a string"},
      {R"({"headers":{"a":1}})",
       R"(header \"a\" must be a string, not a number)"},
      {R"({"delay":"soon"})",
       R"(delay \"soon\" is not a duration such as \"250ms\", \"10s\" or )"
       R"(\"1h30m\")"},
      {R"({"delay":true})",
       R"(delay must be a duration (\"10s\") or a number of milliseconds, )"
       R"(not true or false)"},
      {R"({"deliverAt":"tomorrow"})",
       R"(deliverAt \"tomorrow\" is not an RFC 3339 time such as )"
       R"(\"2030-01-01T00:00:00Z\")"},
      {R"({"delay":"1s","deliverAt":"2030-01-01T00:00:00Z"})",
       "give delay or deliverAt, not both: one says when the message is due"},
      {R"({"colour":"red"})",
       R"(unknown field \"colour\" in the JSON body; a publish takes )"
       R"(payload, delay, deliverAt, id, headers)"},
      // The broker's own checks of a Publish, as Broker.Publish says them.
      {R"({"delay":"-5s"})", "message 0: delay -5s is negative"},
      {R"({"id":"hg-0123456789abcdef"})",
       R"(message 0: id \"hg-0123456789abcdef\" has the form of the ids )"
       R"(the broker assigns (hg- and 16 hex digits))"},
      {R"({"headers":{"a b":"x"}})",
       R"(message 0: header \"a b\" has a space)"},
  };
  for (const auto& [body, message] : refused) {
    httplib::Result result = Post("/api/v1/topics/orders/publish", body);
    ASSERT_TRUE(result) << body;
    EXPECT_EQ(result->status, 400) << body << ": " << result->body;
    if (message.empty()) {
      EXPECT_THAT(result->body,
                  StartsWith(R"({"code":"INVALID_ARGUMENT","message":"bad )"
                             R"(JSON body: )"))
          << body;
    } else {
      EXPECT_EQ(result->body, Error("INVALID_ARGUMENT", message)) << body;
    }
  }
  EXPECT_ANSWER(
      Post("/api/v1/topics/a%20b/publish", "{}"), 400,
      Error("INVALID_ARGUMENT", R"(message 0: topic \"a b\" has a space)"));
  EXPECT_ANSWER(Post("/api/v1/topics/orders/publish?delay=1s", "{}"), 400,
                Error("INVALID_ARGUMENT",
                      "query parameter \\\"delay\\\": a POST takes its fields "
                      "as a JSON body, not in the query"));
  // Nothing of them was stored.
  EXPECT_ANSWER(Get("/api/v1/topics"), 200, R"({"topics":[]})");
}

TEST_F(ConsoleTest, PublishIsGuardedAsEveryChange) {
  httplib::Result text = web_->Post("/api/v1/topics/orders/publish",
                                    R"({"payload":"x"})", "text/plain");
  ASSERT_TRUE(text);
  EXPECT_EQ(text->status, 415) << text->body;
  httplib::Result other_site = web_->Post("/api/v1/topics/orders/publish",
                                          {{"Origin", "http://evil.example"}},
                                          R"({"payload":"x"})", kJson);
  ASSERT_TRUE(other_site);
  EXPECT_EQ(other_site->status, 403) << other_site->body;
  EXPECT_ANSWER(Get("/api/v1/topics/orders/publish"), 405,
                Error("METHOD_NOT_ALLOWED",
                      "GET is not allowed on /api/v1/topics/orders/publish; "
                      "use POST"));
  EXPECT_ANSWER(Get("/api/v1/topics"), 200, R"({"topics":[]})");
}

TEST_F(ConsoleTest, WithTokensPublishNeedsRolesAdminAndProduce) {
  constexpr char kAdminProduceToken[] = "admin-produce-token-0123456";
  auto authorizer = api::Authorizer::FromText(
      absl::StrCat(kAdminToken, " admin\n", kProduceToken, " produce\n",
                   kAdminProduceToken, " admin,produce\n"));
  ASSERT_TRUE(authorizer.ok()) << authorizer.status();
  Start(broker::Engine::Options(), authorizer->get());
  const std::string body = R"({"payload":"x","id":"t-1"})";
  EXPECT_ANSWER(
      Post("/api/v1/topics/orders/publish", body), 401,
      Error("UNAUTHENTICATED",
            "missing \\\"authorization: Bearer \\u003ctoken\\u003e\\\" "
            "metadata"));
  EXPECT_ANSWER(Post("/api/v1/topics/orders/publish", body, kProduceToken), 403,
                Error("PERMISSION_DENIED",
                      "token lacks role admin for topic \\\"orders\\\""));
  EXPECT_ANSWER(Post("/api/v1/topics/orders/publish", body, kAdminToken), 403,
                Error("PERMISSION_DENIED",
                      "message 0: token lacks role produce for topic "
                      "\\\"orders\\\""));
  httplib::Result published =
      Post("/api/v1/topics/orders/publish", body, kAdminProduceToken);
  ASSERT_TRUE(published);
  ASSERT_EQ(published->status, 200) << published->body;
  EXPECT_EQ(Parse<v1::Receipt>(published->body).id(), "t-1");
}

TEST_F(ConsoleTest, ASingleNodeAnswersItsClusterAsSingle) {
  EXPECT_ANSWER(Get("/api/v1/cluster"), 200, R"({"mode":"single"})");
  EXPECT_ANSWER(Get("/api/v1/cluster?node=a"), 400,
                Error("INVALID_ARGUMENT",
                      "query parameter \\\"node\\\": /api/v1/cluster takes "
                      "none"));
  EXPECT_ANSWER(Post("/api/v1/cluster", "{}"), 405,
                Error("METHOD_NOT_ALLOWED",
                      "POST is not allowed on /api/v1/cluster; use GET"));

  auto authorizer = api::Authorizer::FromText(
      absl::StrCat(kAdminToken, " admin\n", kOrdersAdminToken,
                   " admin orders\n", kProduceToken, " produce\n"));
  ASSERT_TRUE(authorizer.ok()) << authorizer.status();
  Start(broker::Engine::Options(), authorizer->get());
  EXPECT_ANSWER(Get("/api/v1/cluster", kAdminToken), 200,
                R"({"mode":"single"})");
  EXPECT_ANSWER(Get("/api/v1/cluster", kProduceToken), 403,
                Error("PERMISSION_DENIED", "token lacks role admin"));
  EXPECT_ANSWER(Get("/api/v1/cluster", kOrdersAdminToken), 403,
                Error("PERMISSION_DENIED",
                      "token's admin role covers only topics orders; this "
                      "call is about every topic"));
}

}  // namespace
}  // namespace hourglass::console
