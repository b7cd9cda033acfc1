// The web console over real HTTP on a metrics listener (MetricsServer with
// the Console mounted), on an engine with a memory store and real time:
// its pages, and every endpoint of its JSON API with good and bad input,
// checked for the exact status, reason and answer. Waits are conditions
// with deadlines, never sleeps.

#include "console/console.h"

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "api/admin_calls.h"
#include "api/broker_service.h"
#include "api/metrics_http.h"
#include "api/server.h"
#include "broker/engine.h"
#include "broker/metrics.h"
#include "console/assets.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "tests/console/console_fixture.h"
#include "tests/testing/broker_client.h"
#include "tests/testing/eventually.h"
#include "tests/testing/faulty_store.h"
#include "tests/testing/temp_dir.h"

namespace hourglass::console {
namespace {

namespace v1 = hourglass::v1;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Why a message that is not scheduled cannot be cancelled or rescheduled.
std::string NoScheduled(const std::string& id) {
  return absl::StrCat("no scheduled message with id \\\"", id,
                      "\\\" in topic \\\"orders\\\" (unknown, already due, or "
                      "cancelled)");
}

std::vector<std::string> Ids(const v1::ListMessagesResponse& response) {
  std::vector<std::string> ids;
  for (const v1::MessageInfo& m : response.messages()) ids.push_back(m.id());
  return ids;
}

TEST_F(ConsoleTest, ServesItsEmbeddedPagesAndChartJs) {
  for (const auto& [path, name, type] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"/", "index.html", "text/html; charset=utf-8"},
           {"/index.html", "index.html", "text/html; charset=utf-8"},
           {"/console.js", "console.js", "text/javascript; charset=utf-8"},
           {"/cluster.js", "cluster.js", "text/javascript; charset=utf-8"},
           {"/console.css", "console.css", "text/css; charset=utf-8"},
           {"/chart.min.js", "chart.min.js",
            "text/javascript; charset=utf-8"}}) {
    httplib::Result result = Get(path);
    ASSERT_TRUE(result) << path;
    EXPECT_EQ(result->status, 200) << path;
    EXPECT_EQ(result->get_header_value("Content-Type"), type) << path;
    EXPECT_EQ(result->get_header_value("Content-Security-Policy"),
              "default-src 'self'; img-src 'self' data:; frame-ancestors "
              "'none'");
    EXPECT_EQ(result->get_header_value("X-Content-Type-Options"), "nosniff");
    std::string expected;
    for (const Asset& asset : Assets()) {
      if (asset.name == name) expected = std::string(asset.bytes);
    }
    EXPECT_EQ(result->body, expected) << path;
  }
  // The embedded bytes are the files', Chart.js's from Debian's package.
  std::ifstream chart("/usr/share/javascript/chart.js/chart.min.js",
                      std::ios::binary);
  std::stringstream chart_bytes;
  chart_bytes << chart.rdbuf();
  ASSERT_EQ(Assets().size(), 5u);
  EXPECT_EQ(Assets()[4].name, "chart.min.js");
  EXPECT_EQ(Assets()[4].bytes, chart_bytes.str());

  EXPECT_ANSWER(Get("/nothing.js"), 404, "no such page: /nothing.js\n");
  EXPECT_ANSWER(Get("/console.js/x"), 404, "no such page: /console.js/x\n");
  httplib::Result post = Post("/", "{}");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 405);
  EXPECT_EQ(post->get_header_value("Allow"), "GET, HEAD");
  EXPECT_EQ(post->body, "POST is not allowed on /index.html; use GET\n");
  // /metrics stays the Prometheus endpoint.
  httplib::Result metrics = Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_EQ(metrics->get_header_value("Content-Type"),
            api::MetricsServer::kContentType);
}

TEST_F(ConsoleTest, StatsAndTopicsAnswerTheBrokersCounts) {
  std::unique_ptr<testing::Subscription> billing =
      client_->Subscribe("orders", "billing", /*max_in_flight=*/1);
  Publish("orders", "later-0", absl::Hours(1));
  Publish("orders", "later-1", absl::Hours(2));
  Publish("orders", "now-0", absl::ZeroDuration());
  Publish("orders", "now-1", absl::ZeroDuration());
  Publish("audit", "a-0", absl::Hours(1));
  ASSERT_EQ(billing->Take(1, kWait).size(), 1u);

  v1::GetStatsResponse stats;
  ASSERT_TRUE(testing::Eventually([&] {
    httplib::Result result = Get("/api/v1/stats?topic=orders");
    if (!result || result->status != 200) return false;
    stats = Parse<v1::GetStatsResponse>(result->body);
    return stats.topics_size() == 1 && stats.topics(0).ready() == 1;
  }));
  const v1::TopicStats& t = stats.topics(0);
  EXPECT_EQ(t.topic(), "orders");
  EXPECT_EQ(t.scheduled(), 2u);
  EXPECT_EQ(t.ready(), 1u);
  EXPECT_EQ(t.in_flight(), 1u);
  EXPECT_EQ(t.dead_lettered(), 0u);
  EXPECT_DOUBLE_EQ(t.publish_rate(), 4.0 / 60);
  ASSERT_EQ(t.groups_size(), 1);
  EXPECT_EQ(t.groups(0).group(), "billing");
  EXPECT_EQ(t.groups(0).consumers(), 1u);
  EXPECT_EQ(stats.started_at().seconds(), 1'795'305'600);
  EXPECT_TRUE(stats.serving());

  httplib::Result all = Get("/api/v1/stats");
  ASSERT_TRUE(all);
  EXPECT_EQ(all->status, 200);
  EXPECT_EQ(all->get_header_value("Content-Type"), kJson);
  const auto every = Parse<v1::GetStatsResponse>(all->body);
  ASSERT_EQ(every.topics_size(), 2);
  EXPECT_EQ(every.topics(0).topic(), "audit");
  EXPECT_EQ(every.topics(1).topic(), "orders");

  httplib::Result topics = Get("/api/v1/topics");
  ASSERT_TRUE(topics);
  EXPECT_EQ(topics->status, 200);
  // Every field printed, 64-bit counts as strings, lowerCamelCase names.
  EXPECT_EQ(topics->body,
            R"({"topics":[{"name":"audit","scheduled":"1","groups":0,)"
            R"("ready":"0","inFlight":"0","deadLettered":"0"},)"
            R"({"name":"orders","scheduled":"2","groups":1,"ready":"1",)"
            R"("inFlight":"1","deadLettered":"0"}]})");

  EXPECT_ANSWER(Get("/api/v1/stats?topic=nope"), 404,
                Error("NOT_FOUND",
                      "no topic \\\"nope\\\" (no pending messages and no "
                      "groups)"));
  EXPECT_ANSWER(Get("/api/v1/stats?topic=a%20b"), 400,
                Error("INVALID_ARGUMENT", "topic \\\"a b\\\" has a space"));
  EXPECT_ANSWER(Get("/api/v1/stats?topic=a&topic=b"), 400,
                Error("INVALID_ARGUMENT",
                      "query parameter \\\"topic\\\" is given twice"));
  EXPECT_ANSWER(
      Get("/api/v1/stats?color=red"), 400,
      Error("INVALID_ARGUMENT", "bad query: color: Cannot find field."));
}

TEST_F(ConsoleTest, GroupsAreListedCreatedAndDeleted) {
  Publish("orders", "o-1", absl::Hours(1));
  httplib::Result created =
      Post("/api/v1/topics/orders/groups", R"({"group":"audit"})");
  ASSERT_TRUE(created);
  EXPECT_EQ(created->status, 200) << created->body;
  const auto group = Parse<v1::Group>(created->body);
  EXPECT_EQ(group.topic(), "orders");
  EXPECT_EQ(group.name(), "audit");
  EXPECT_GT(group.created_at().seconds(), 0);

  httplib::Result listed = Get("/api/v1/topics/orders/groups");
  ASSERT_TRUE(listed);
  EXPECT_EQ(listed->status, 200);
  const auto groups = Parse<v1::ListGroupsResponse>(listed->body);
  ASSERT_EQ(groups.groups_size(), 1);
  EXPECT_EQ(groups.groups(0).name(), "audit");
  EXPECT_EQ(groups.groups(0).created_at().seconds(),
            group.created_at().seconds());

  EXPECT_ANSWER(
      Post("/api/v1/topics/orders/groups", R"({"group":"audit"})"), 409,
      Error("ALREADY_EXISTS",
            "group \\\"audit\\\" of topic \\\"orders\\\" already exists"));
  EXPECT_ANSWER(Post("/api/v1/topics/orders/groups", "{}"), 400,
                Error("INVALID_ARGUMENT", "group is empty"));
  EXPECT_ANSWER(Post("/api/v1/topics/orders/groups", R"({"group":)"), 400,
                Error("INVALID_ARGUMENT",
                      "bad JSON body: Unexpected end of string. Expected a "
                      "value.\\n\\n^"));
  EXPECT_ANSWER(
      Post("/api/v1/topics/orders/groups", R"({"topic":"other","group":"g"})"),
      400,
      Error("INVALID_ARGUMENT",
            "topic \\\"other\\\" in the JSON body differs from the "
            "path's \\\"orders\\\""));
  EXPECT_ANSWER(Post("/api/v1/topics/orders/groups?group=g", "{}"), 400,
                Error("INVALID_ARGUMENT",
                      "query parameter \\\"group\\\": a POST takes its "
                      "fields as a JSON body, not in the query"));
  EXPECT_ANSWER(Get("/api/v1/topics/nope/groups"), 404,
                Error("NOT_FOUND",
                      "no topic \\\"nope\\\" (no pending messages and no "
                      "groups)"));

  EXPECT_ANSWER(Delete("/api/v1/topics/orders/groups/audit"), 200,
                R"({"removed":"0"})");
  EXPECT_ANSWER(
      Delete("/api/v1/topics/orders/groups/audit"), 404,
      Error("NOT_FOUND", "no group \\\"audit\\\" in topic \\\"orders\\\""));
  EXPECT_ANSWER(Delete("/api/v1/topics/orders/groups/a%20b"), 400,
                Error("INVALID_ARGUMENT", "group \\\"a b\\\" has a space"));
}

TEST_F(ConsoleTest, MessagesAreListedByPageAndShownInFull) {
  for (int i = 0; i < 5; ++i) {
    Publish("orders", absl::StrCat("o-", i), absl::Hours(1 + i),
            absl::StrCat("payload ", i));
  }
  v1::ListMessagesResponse first;
  {
    httplib::Result result =
        Get("/api/v1/topics/orders/messages?state=MESSAGE_STATE_SCHEDULED&"
            "pageSize=2");
    ASSERT_TRUE(result);
    ASSERT_EQ(result->status, 200) << result->body;
    first = Parse<v1::ListMessagesResponse>(result->body);
  }
  EXPECT_THAT(Ids(first), ElementsAre("o-0", "o-1"));
  ASSERT_FALSE(first.next_page_token().empty());
  {
    httplib::Result result = Get(absl::StrCat(
        "/api/v1/topics/orders/messages?state=MESSAGE_STATE_SCHEDULED&"
        "pageSize=2&pageToken=",
        first.next_page_token()));
    ASSERT_TRUE(result);
    ASSERT_EQ(result->status, 200) << result->body;
    EXPECT_THAT(Ids(Parse<v1::ListMessagesResponse>(result->body)),
                ElementsAre("o-2", "o-3"));
  }
  // A due-time range, as RFC 3339 timestamps.
  const v1::ListMessagesResponse all = List("orders", "SCHEDULED");
  ASSERT_EQ(all.messages_size(), 5);
  {
    httplib::Result result = Get(absl::StrCat(
        "/api/v1/topics/orders/messages?state=MESSAGE_STATE_SCHEDULED&dueFrom=",
        absl::FormatTime(
            absl::RFC3339_full,
            absl::FromUnixSeconds(all.messages(1).deliver_at().seconds()) +
                absl::Nanoseconds(all.messages(1).deliver_at().nanos()),
            absl::UTCTimeZone()),
        "&dueTo=",
        absl::FormatTime(
            absl::RFC3339_full,
            absl::FromUnixSeconds(all.messages(3).deliver_at().seconds()) +
                absl::Nanoseconds(all.messages(3).deliver_at().nanos()),
            absl::UTCTimeZone())));
    ASSERT_TRUE(result);
    ASSERT_EQ(result->status, 200) << result->body;
    EXPECT_THAT(Ids(Parse<v1::ListMessagesResponse>(result->body)),
                ElementsAre("o-1", "o-2"));
  }

  httplib::Result shown = Get("/api/v1/topics/orders/messages/o-3");
  ASSERT_TRUE(shown);
  ASSERT_EQ(shown->status, 200) << shown->body;
  const auto message = Parse<v1::MessageInfo>(shown->body);
  EXPECT_EQ(message.id(), "o-3");
  EXPECT_EQ(message.topic(), "orders");
  EXPECT_EQ(message.state(), v1::MESSAGE_STATE_SCHEDULED);
  EXPECT_EQ(message.payload_preview(), "payload 3");
  EXPECT_EQ(message.payload_size(), 9u);
  EXPECT_EQ(message.deliver_at().seconds(),
            all.messages(3).deliver_at().seconds());
  httplib::Result preview =
      Get("/api/v1/topics/orders/messages/o-3?previewBytes=3");
  ASSERT_TRUE(preview);
  EXPECT_EQ(Parse<v1::MessageInfo>(preview->body).payload_preview(), "pay");

  EXPECT_ANSWER(Get("/api/v1/topics/orders/messages"), 400,
                Error("INVALID_ARGUMENT",
                      "state 0 is not SCHEDULED, READY, IN_FLIGHT or DEAD"));
  EXPECT_ANSWER(Get("/api/v1/topics/orders/messages?state=LATE"), 400,
                Error("INVALID_ARGUMENT",
                      "bad query: (state): invalid value \\\"LATE\\\" for type "
                      "type.googleapis.com/hourglass.v1.MessageState"));
  EXPECT_ANSWER(
      Get("/api/v1/topics/orders/"
          "messages?state=MESSAGE_STATE_SCHEDULED&pageSize=1001"),
      400,
      Error("INVALID_ARGUMENT", "page_size 1001 is over the limit of 1000"));
  EXPECT_ANSWER(
      Get("/api/v1/topics/orders/"
          "messages?state=MESSAGE_STATE_SCHEDULED&pageSize=ten"),
      400,
      Error("INVALID_ARGUMENT",
            "bad query: (page_size): invalid value \\\"ten\\\" for type "
            "TYPE_UINT32"));
  EXPECT_ANSWER(Get("/api/v1/topics/orders/"
                    "messages?state=MESSAGE_STATE_SCHEDULED&dueFrom=yesterday"),
                400,
                Error("INVALID_ARGUMENT",
                      "bad query: (due_from): invalid value Field 'dueFrom', "
                      "Invalid time format: yesterday for type "
                      "type.googleapis.com/google.protobuf.Timestamp"));
  EXPECT_ANSWER(
      Get("/api/v1/topics/orders/"
          "messages?state=MESSAGE_STATE_READY&pageToken=xyz"),
      400,
      Error("INVALID_ARGUMENT", "page_token is not a token this broker made"));
  EXPECT_ANSWER(Get("/api/v1/topics/orders/"
                    "messages?state=MESSAGE_STATE_SCHEDULED&group=g"),
                400,
                Error("INVALID_ARGUMENT",
                      "group narrows READY and IN_FLIGHT listings only"));
  EXPECT_ANSWER(
      Get("/api/v1/topics/orders/messages/nope"), 404,
      Error("NOT_FOUND",
            "no message with id \\\"nope\\\" in topic \\\"orders\\\""));
  EXPECT_ANSWER(Get("/api/v1/topics/orders/messages/o-3?previewBytes=1048577"),
                400,
                Error("INVALID_ARGUMENT",
                      "preview_bytes 1048577 is over the limit of 1048576"));
}

TEST_F(ConsoleTest, CancelAndRescheduleChangeTheBroker) {
  Publish("orders", "o-1", absl::Hours(1));
  Publish("orders", "o-2", absl::Hours(1));
  EXPECT_ANSWER(Post("/api/v1/topics/orders/messages/o-1/cancel", ""), 200,
                "{}");
  EXPECT_ANSWER(
      Get("/api/v1/topics/orders/messages/o-1"), 404,
      Error("NOT_FOUND",
            "no message with id \\\"o-1\\\" in topic \\\"orders\\\""));
  EXPECT_ANSWER(Post("/api/v1/topics/orders/messages/o-1/cancel", "{}"), 404,
                Error("NOT_FOUND", NoScheduled("o-1")));
  EXPECT_ANSWER(Get("/api/v1/topics/orders/messages/o-1/cancel"), 405,
                Error("METHOD_NOT_ALLOWED",
                      "GET is not allowed on "
                      "/api/v1/topics/orders/messages/o-1/cancel; use POST"));

  const absl::Time before = absl::Now();
  httplib::Result moved = Post("/api/v1/topics/orders/messages/o-2/reschedule",
                               R"({"delay":"7200s"})");
  const absl::Time after = absl::Now();
  ASSERT_TRUE(moved);
  ASSERT_EQ(moved->status, 200) << moved->body;
  const auto receipt = Parse<v1::Receipt>(moved->body);
  EXPECT_EQ(receipt.id(), "o-2");
  EXPECT_FALSE(receipt.duplicate());
  const absl::Time due = absl::FromUnixSeconds(receipt.deliver_at().seconds()) +
                         absl::Nanoseconds(receipt.deliver_at().nanos());
  EXPECT_GE(due,
            absl::FromUnixMillis(absl::ToUnixMillis(before)) + absl::Hours(2));
  EXPECT_LE(due, after + absl::Hours(2));
  EXPECT_EQ(
      Parse<v1::MessageInfo>(Get("/api/v1/topics/orders/messages/o-2")->body)
          .deliver_at()
          .seconds(),
      receipt.deliver_at().seconds());
  EXPECT_ANSWER(Post("/api/v1/topics/orders/messages/o-2/reschedule",
                     R"({"deliverAt":"2030-01-01T00:00:00Z"})"),
                200,
                R"({"id":"o-2","duplicate":false,)"
                R"("deliverAt":"2030-01-01T00:00:00Z"})");

  EXPECT_ANSWER(Post("/api/v1/topics/orders/messages/o-2/reschedule", "{}"),
                400,
                Error("INVALID_ARGUMENT",
                      "the new due time is missing: set delay or deliver_at"));
  EXPECT_ANSWER(Post("/api/v1/topics/orders/messages/o-2/reschedule",
                     R"({"delay":"-1s"})"),
                400, Error("INVALID_ARGUMENT", "delay -1s is negative"));
  EXPECT_ANSWER(Post("/api/v1/topics/orders/messages/o-2/reschedule",
                     R"({"delay":"soon"})"),
                400,
                Error("INVALID_ARGUMENT",
                      "bad JSON body: (delay): invalid value Field 'delay', "
                      "Illegal duration format; duration must end with 's' "
                      "for type type.googleapis.com/google.protobuf.Duration"));
  EXPECT_ANSWER(Post("/api/v1/topics/orders/messages/nope/reschedule",
                     R"({"delay":"1s"})"),
                404, Error("NOT_FOUND", NoScheduled("nope")));
}

TEST_F(ConsoleTest, DeadLettersAreRedrivenAndTopicsPurged) {
  broker::Engine::Options options;
  options.dispatcher.max_attempts = 1;
  Start(options);
  {
    std::unique_ptr<testing::Subscription> silent = client_->Subscribe(
        "pay", "g", /*max_in_flight=*/0, /*ack_timeout=*/absl::Seconds(1));
    Publish("pay", "p-1", absl::ZeroDuration());
    Publish("pay", "p-2", absl::ZeroDuration());
    ASSERT_EQ(silent->Take(2, kWait).size(), 2u);
    ASSERT_TRUE(testing::Eventually(
        [&] { return List("pay", "DEAD").messages_size() == 2; }));
    EXPECT_TRUE(silent->Close().ok());
  }
  EXPECT_THAT(Ids(List("pay", "DEAD")), ElementsAre("p-1", "p-2"));
  EXPECT_ANSWER(Post("/api/v1/topics/pay/redrive", R"({"ids":["p-2","nope"]})"),
                404,
                Error("NOT_FOUND",
                      "no dead letter with id \\\"nope\\\" of topic "
                      "\\\"pay\\\" (in \\\"pay.dlq\\\")"));
  EXPECT_ANSWER(Post("/api/v1/topics/pay/redrive", R"({"ids":[""]})"), 400,
                Error("INVALID_ARGUMENT", "ids[0] is empty"));
  EXPECT_ANSWER(Post("/api/v1/topics/pay/redrive", R"({"ids":["p-2"]})"), 200,
                R"({"redriven":"1"})");
  EXPECT_THAT(Ids(List("pay", "DEAD")), ElementsAre("p-1"));
  EXPECT_ANSWER(Post("/api/v1/topics/pay/redrive", ""), 200,
                R"({"redriven":"1"})");
  EXPECT_THAT(Ids(List("pay", "DEAD")), ElementsAre());
  ASSERT_TRUE(testing::Eventually(
      [&] { return List("pay", "READY").messages_size() == 2; }));

  Publish("pay", "later", absl::Hours(1));
  EXPECT_ANSWER(Post("/api/v1/topics/pay/purge", "{}"), 400,
                Error("INVALID_ARGUMENT",
                      "nothing to purge: set scheduled, ready, or both"));
  EXPECT_ANSWER(Post("/api/v1/topics/pay/purge", R"({"scheduled":true})"), 200,
                R"({"purged":"1"})");
  EXPECT_ANSWER(Post("/api/v1/topics/pay/purge", R"({"ready":true})"), 200,
                R"({"purged":"2"})");
  EXPECT_THAT(Ids(List("pay", "READY")), ElementsAre());
}

// The attack a web page can make on an operator's machine: a "simple"
// cross-site POST (text/plain, no preflight) to purge a topic, or the same
// from a name made to resolve here (DNS rebinding). Each is refused, and
// the topic keeps its messages; the console's own request purges.
TEST_F(ConsoleTest, OtherSitesPagesCannotDriveTheApi) {
  for (int i = 0; i < 10; ++i) {
    Publish("victim", absl::StrCat("m", i), absl::Hours(1));
  }
  const std::string own = absl::StrCat("http://127.0.0.1:", http_->port());
  const std::string purge = "/api/v1/topics/victim/purge";
  const std::string body = R"({"scheduled":true})";
  auto post = [&](httplib::Headers headers, const char* type) {
    return web_->Post(purge.c_str(), headers, body, type);
  };
  EXPECT_ANSWER(
      post({{"Origin", "https://evil.example"}}, "text/plain"), 403,
      Error("PERMISSION_DENIED",
            absl::StrCat("the console's API answers its own pages only (", own,
                         "), not a page of https://evil.example")));
  EXPECT_ANSWER(post({}, "text/plain"), 415,
                Error("INVALID_ARGUMENT",
                      "POST needs Content-Type: application/json, not "
                      "\\\"text/plain\\\""));
  EXPECT_ANSWER(post({}, "application/x-www-form-urlencoded"), 415,
                Error("INVALID_ARGUMENT",
                      "POST needs Content-Type: application/json, not "
                      "\\\"application/x-www-form-urlencoded\\\""));
  EXPECT_ANSWER(post({{"Sec-Fetch-Site", "cross-site"}}, kJson), 403,
                Error("PERMISSION_DENIED",
                      "the console's API does not answer other sites' pages "
                      "(Sec-Fetch-Site: cross-site)"));
  EXPECT_ANSWER(post({{"Origin", "null"}}, kJson), 403,
                Error("PERMISSION_DENIED",
                      absl::StrCat("the console's API answers its own pages "
                                   "only (",
                                   own, "), not a page of null")));
  // DNS rebinding: evil.example resolves here, and its page reads and
  // writes as a same-origin page of evil.example would.
  const std::string rebound = absl::StrCat("evil.example:", http_->port());
  EXPECT_ANSWER(
      post({{"Host", rebound}, {"Origin", "http://" + rebound}}, kJson), 403,
      Error("PERMISSION_DENIED",
            absl::StrCat("this console answers to its IP addresses, "
                         "localhost and --console_allowed_hosts, "
                         "not \\\"",
                         rebound, "\\\"")));
  httplib::Result page = web_->Get("/", {{"Host", rebound}});
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 403);
  EXPECT_EQ(List("victim", "SCHEDULED").messages_size(), 10);

  // The console's own pages: same origin, JSON; and a name it was given.
  EXPECT_ANSWER(
      post({{"Origin", own}, {"Sec-Fetch-Site", "same-origin"}}, kJson), 200,
      R"({"purged":"10"})");
  const std::string named = absl::StrCat("broker.example:", http_->port());
  httplib::Result stats = web_->Get(
      "/api/v1/stats", {{"Host", named}, {"Origin", "http://" + named}});
  ASSERT_TRUE(stats);
  EXPECT_EQ(stats->status, 200) << stats->body;
}

TEST_F(ConsoleTest, AnswersUnknownEndpointsAndMethods) {
  EXPECT_ANSWER(Get("/api/v1/nothing"), 404,
                Error("NOT_FOUND", "no API endpoint /api/v1/nothing"));
  EXPECT_ANSWER(Get("/api/v2/topics"), 404, "no such page: /api/v2/topics\n");
  httplib::Result wrong = Delete("/api/v1/topics/orders/messages");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 405);
  EXPECT_EQ(wrong->get_header_value("Allow"), "GET");
  httplib::Result groups =
      web_->Put("/api/v1/topics/orders/groups", "{}", kJson);
  ASSERT_TRUE(groups);
  EXPECT_EQ(groups->status, 405);
  EXPECT_EQ(groups->get_header_value("Allow"), "GET, POST");
  EXPECT_EQ(groups->body,
            Error("METHOD_NOT_ALLOWED",
                  "PUT is not allowed on /api/v1/topics/orders/groups; use "
                  "GET, POST"));
  // Snapshots are named, not placed: no path from a page.
  EXPECT_ANSWER(Post("/api/v1/snapshot", "{}"), 400,
                Error("INVALID_ARGUMENT",
                      "dir is empty: name the new snapshot (letters, digits, "
                      "'.', '_', '-'); it is written into the broker's "
                      "--snapshot_dir, " +
                          snapshots_.path()));
  httplib::Result absolute =
      Post("/api/v1/snapshot", R"({"dir":"/tmp/hourglass-x"})");
  ASSERT_TRUE(absolute);
  EXPECT_EQ(absolute->status, 400) << absolute->body;
  EXPECT_THAT(absolute->body, HasSubstr("is not a plain name"));
  EXPECT_ANSWER(Post("/api/v1/snapshot", R"({"dir":"x"})"), 501,
                Error("UNIMPLEMENTED",
                      "the memory store keeps no files to copy into a "
                      "snapshot"));
}

TEST_F(ConsoleTest, ScheduleCountsTheMessagesDueInEachBucket) {
  // Due in the hours 1, 1 (a minute later) and 3 after this one began.
  const absl::Time hour =
      absl::FromUnixSeconds(absl::ToUnixSeconds(absl::Now()) / 3600 * 3600);
  const absl::Duration since_hour = absl::Now() - hour;
  Publish("orders", "o-1", absl::Hours(1) + absl::Minutes(5) - since_hour);
  Publish("orders", "o-2", absl::Hours(1) + absl::Minutes(6) - since_hour);
  Publish("orders", "o-3", absl::Hours(3) + absl::Minutes(5) - since_hour);
  const std::string from =
      absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", hour, absl::UTCTimeZone());
  const std::string to = absl::FormatTime(
      "%Y-%m-%dT%H:%M:%SZ", hour + absl::Hours(5), absl::UTCTimeZone());
  httplib::Result result =
      Get(absl::StrCat("/api/v1/topics/orders/schedule?from=", from, "&to=", to,
                       "&bucket=3600s"));
  ASSERT_TRUE(result);
  ASSERT_EQ(result->status, 200) << result->body;
  const auto schedule = Parse<v1::GetScheduleResponse>(result->body);
  ASSERT_EQ(schedule.buckets_size(), 5);
  std::vector<uint64_t> counts;
  for (int i = 0; i < schedule.buckets_size(); ++i) {
    EXPECT_EQ(schedule.buckets(i).start().seconds(),
              absl::ToUnixSeconds(hour + absl::Hours(i)));
    counts.push_back(schedule.buckets(i).count());
  }
  EXPECT_THAT(counts, ElementsAre(0, 2, 0, 1, 0));
  EXPECT_EQ(schedule.total(), 3u);
  // A topic without messages: every bucket at 0.
  httplib::Result none = Get(absl::StrCat(
      "/api/v1/topics/none/schedule?from=", from, "&to=", to, "&bucket=3600s"));
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 200);
  EXPECT_EQ(Parse<v1::GetScheduleResponse>(none->body).total(), 0u);

  EXPECT_ANSWER(Get("/api/v1/topics/orders/schedule?to=2030-01-01T00:00:00Z"
                    "&bucket=60s"),
                400, Error("INVALID_ARGUMENT", "from is not set"));
  EXPECT_ANSWER(
      Get("/api/v1/topics/orders/schedule?from=2030-01-01T00:00:00Z"
          "&to=2030-01-02T00:00:00Z&bucket=90s"),
      400,
      Error("INVALID_ARGUMENT",
            "bucket 1m30s is not a positive whole number of minutes"));
  EXPECT_ANSWER(Get("/api/v1/topics/orders/schedule?from=2030-01-02T00:00:00Z"
                    "&to=2030-01-01T00:00:00Z&bucket=60s"),
                400,
                Error("INVALID_ARGUMENT",
                      "to 2030-01-01T00:00:00Z is not after from "
                      "2030-01-02T00:00:00Z"));
  EXPECT_ANSWER(Get("/api/v1/topics/orders/schedule?from=2030-01-01T00:00:00Z"
                    "&to=2031-01-01T00:00:00Z&bucket=60s"),
                400,
                Error("INVALID_ARGUMENT",
                      "from 2030-01-01T00:00:00Z to 2031-01-01T00:00:00Z in "
                      "buckets of 1m is 525600 buckets; the limit is 10000: "
                      "choose longer buckets or a shorter range"));
  EXPECT_ANSWER(Get("/api/v1/topics/orders/schedule?from=now"), 400,
                Error("INVALID_ARGUMENT",
                      "bad query: (from): invalid value Field 'from', Invalid "
                      "time format: now for type "
                      "type.googleapis.com/google.protobuf.Timestamp"));
  EXPECT_ANSWER(Post("/api/v1/topics/orders/schedule", "{}"), 405,
                Error("METHOD_NOT_ALLOWED",
                      "POST is not allowed on /api/v1/topics/orders/schedule; "
                      "use GET"));
}

TEST_F(ConsoleTest, WithTokensTheApiNeedsAnAdminToken) {
  auto authorizer = api::Authorizer::FromText(
      absl::StrCat(kAdminToken, " admin\n", kOrdersAdminToken,
                   " admin orders\n", kProduceToken, " produce\n"));
  ASSERT_TRUE(authorizer.ok()) << authorizer.status();
  Start(broker::Engine::Options(), authorizer->get());
  Publish("orders", "o-1", absl::Hours(1));

  httplib::Result anonymous = Get("/api/v1/topics");
  ASSERT_TRUE(anonymous);
  EXPECT_EQ(anonymous->status, 401);
  EXPECT_EQ(anonymous->get_header_value("WWW-Authenticate"),
            "Bearer realm=\"hourglass\"");
  EXPECT_EQ(anonymous->body,
            Error("UNAUTHENTICATED",
                  "missing \\\"authorization: Bearer \\u003ctoken\\u003e\\\" "
                  "metadata"));
  EXPECT_ANSWER(Get("/api/v1/topics", "not-a-token-0123456789"), 401,
                Error("UNAUTHENTICATED", "unknown token"));
  httplib::Result basic =
      web_->Get("/api/v1/topics", {{"Authorization", "Basic YTpi"}});
  ASSERT_TRUE(basic);
  EXPECT_EQ(basic->status, 401);
  EXPECT_ANSWER(Get("/api/v1/topics", kProduceToken), 403,
                Error("PERMISSION_DENIED", "token lacks role admin"));
  EXPECT_ANSWER(Get("/api/v1/topics/orders/groups", kProduceToken), 403,
                Error("PERMISSION_DENIED",
                      "token lacks role admin for topic \\\"orders\\\""));
  EXPECT_ANSWER(Get("/api/v1/topics", kOrdersAdminToken), 403,
                Error("PERMISSION_DENIED",
                      "token's admin role covers only topics orders; this "
                      "call is about every topic"));
  EXPECT_ANSWER(Get("/api/v1/topics/orders/groups", kOrdersAdminToken), 200,
                R"({"groups":[]})");
  EXPECT_ANSWER(
      Post("/api/v1/topics/orders/messages/o-1/cancel", "{}", kProduceToken),
      403,
      Error("PERMISSION_DENIED",
            "token lacks role admin for topic \\\"orders\\\""));
  EXPECT_ANSWER(
      Get("/api/v1/topics/orders/messages/o-1"), 401,
      Error("UNAUTHENTICATED",
            "missing \\\"authorization: Bearer \\u003ctoken\\u003e\\\" "
            "metadata"));
  httplib::Result topics = Get("/api/v1/topics", kAdminToken);
  ASSERT_TRUE(topics);
  EXPECT_EQ(topics->status, 200);
  EXPECT_EQ(Parse<v1::ListTopicsResponse>(topics->body).topics(0).name(),
            "orders");
  // The pages themselves and /metrics need no token.
  EXPECT_EQ(Get("/")->status, 200);
  EXPECT_EQ(Get("/console.js")->status, 200);
  EXPECT_EQ(Get("/metrics")->status, 200);
}

TEST(HttpStatusOfTest, MapsEachCanonicalCode) {
  using absl::StatusCode;
  const std::vector<std::pair<StatusCode, int>> expected = {
      {StatusCode::kOk, 200},
      {StatusCode::kCancelled, 499},
      {StatusCode::kUnknown, 500},
      {StatusCode::kInvalidArgument, 400},
      {StatusCode::kDeadlineExceeded, 504},
      {StatusCode::kNotFound, 404},
      {StatusCode::kAlreadyExists, 409},
      {StatusCode::kPermissionDenied, 403},
      {StatusCode::kResourceExhausted, 429},
      {StatusCode::kFailedPrecondition, 400},
      {StatusCode::kAborted, 409},
      {StatusCode::kOutOfRange, 400},
      {StatusCode::kUnimplemented, 501},
      {StatusCode::kInternal, 500},
      {StatusCode::kUnavailable, 503},
      {StatusCode::kDataLoss, 500},
      {StatusCode::kUnauthenticated, 401}};
  for (const auto& [code, status] : expected) {
    EXPECT_EQ(api::HttpStatusOf(code), status)
        << absl::StatusCodeToString(code);
  }
}

}  // namespace
}  // namespace hourglass::console
