// hourglass.v1.Admin over loopback gRPC, on an engine with a memory store
// and real time. Each RPC is checked for its exact answer; deliveries that
// a test waits for are waited for with deadlines, never sleeps.

#include "api/admin_service.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "api/broker_service.h"
#include "api/server.h"
#include "broker/engine.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "storage/keys.h"
#include "tests/testing/broker_client.h"
#include "tests/testing/eventually.h"
#include "tests/testing/faulty_store.h"

namespace hourglass::api {
namespace {

namespace v1 = hourglass::v1;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using testing::Received;

constexpr absl::Duration kWait = absl::Seconds(30);

std::vector<std::string> Ids(const v1::ListMessagesResponse& response) {
  std::vector<std::string> ids;
  for (const v1::MessageInfo& m : response.messages()) ids.push_back(m.id());
  return ids;
}

std::vector<std::string> Ids(const std::vector<Received>& received) {
  std::vector<std::string> ids;
  for (const Received& r : received) {
    ids.push_back(absl::StrCat(r.delivery.id(), "@", r.delivery.attempt()));
  }
  return ids;
}

class AdminServiceTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(broker::Engine::Options()); }

  void Start(broker::Engine::Options options,
             const Authorizer* authorizer = nullptr) {
    TearDown();
    auto engine = broker::Engine::Open(&store_, &clock_, options);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
    engine_->Start();
    broker_service_ =
        std::make_unique<BrokerService>(engine_.get(), &clock_, Limits());
    admin_service_ = std::make_unique<AdminService>(
        engine_.get(), &clock_, Limits(), kStartedAt, authorizer);
    auto server = Server::Start(
        {.listen_address = "127.0.0.1:0",
         .services = {broker_service_.get(), admin_service_.get()}});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    auto channel =
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                            grpc::InsecureChannelCredentials());
    admin_ = v1::Admin::NewStub(channel);
    client_ = std::make_unique<testing::BrokerClient>(channel);
  }

  void TearDown() override {
    subscriptions_.clear();
    server_.reset();
    admin_service_.reset();
    broker_service_.reset();
    engine_.reset();
  }

  // Calls an Admin RPC with a deadline.
  template <typename Request, typename Response>
  grpc::Status Call(grpc::Status (v1::Admin::Stub::*rpc)(grpc::ClientContext*,
                                                         const Request&,
                                                         Response*),
                    const Request& request, Response* response,
                    const std::string& token = "") {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + kWait));
    if (!token.empty()) {
      context.AddMetadata("authorization", "Bearer " + token);
    }
    return (admin_.get()->*rpc)(&context, request, response);
  }

  void Publish(const std::string& topic, const std::string& id,
               absl::Duration delay, const std::string& payload = "payload") {
    absl::StatusOr<v1::Receipt> receipt =
        client_->Publish(topic, payload, delay, id);
    ASSERT_TRUE(receipt.ok()) << receipt.status();
  }

  testing::Subscription& Subscribe(
      const std::string& topic, const std::string& group,
      uint32_t max_in_flight = 0,
      absl::Duration ack_timeout = absl::ZeroDuration()) {
    subscriptions_.push_back(
        client_->Subscribe(topic, group, max_in_flight, ack_timeout));
    return *subscriptions_.back();
  }

  size_t Stored(storage::Table table) {
    size_t n = 0;
    EXPECT_TRUE(store_
                    .Scan(table, "", "",
                          [&](std::string_view, std::string_view) {
                            ++n;
                            return true;
                          })
                    .ok());
    return n;
  }

  v1::ListMessagesResponse List(const std::string& topic,
                                v1::MessageState state, uint32_t page_size = 0,
                                const std::string& token = "",
                                const std::string& group = "") {
    v1::ListMessagesRequest request;
    request.set_topic(topic);
    request.set_state(state);
    request.set_page_size(page_size);
    request.set_page_token(token);
    request.set_group(group);
    v1::ListMessagesResponse response;
    const grpc::Status status =
        Call(&v1::Admin::Stub::ListMessages, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  const absl::Time kStartedAt = absl::FromUnixSeconds(1'795'305'600);
  testing::FaultyStore store_;
  broker::SystemClock clock_;
  std::unique_ptr<broker::Engine> engine_;
  std::unique_ptr<BrokerService> broker_service_;
  std::unique_ptr<AdminService> admin_service_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<v1::Admin::Stub> admin_;
  std::unique_ptr<testing::BrokerClient> client_;
  std::vector<std::unique_ptr<testing::Subscription>> subscriptions_;
};

TEST_F(AdminServiceTest, StatsCountEveryStateExactly) {
  testing::Subscription& billing = Subscribe("orders", "billing", 1);
  v1::CreateGroupRequest create;
  create.set_topic("orders");
  create.set_group("audit");
  v1::Group created;
  ASSERT_TRUE(Call(&v1::Admin::Stub::CreateGroup, create, &created).ok());
  for (int i = 0; i < 3; ++i) {
    Publish("orders", absl::StrCat("later-", i), absl::Hours(1));
  }
  Publish("orders", "now-0", absl::ZeroDuration());
  Publish("orders", "now-1", absl::ZeroDuration());
  // billing holds one (credit 1), the other waits; audit has no consumer.
  ASSERT_THAT(Ids(billing.Take(1, kWait)), ElementsAre("now-0@1"));

  v1::GetStatsRequest request;
  request.set_topic("orders");
  v1::GetStatsResponse stats;
  ASSERT_TRUE(testing::Eventually([&] {  // Until both due ones are ready.
    return Call(&v1::Admin::Stub::GetStats, request, &stats).ok() &&
           stats.topics(0).scheduled() == 3;
  }));
  ASSERT_EQ(stats.topics_size(), 1);
  const v1::TopicStats& t = stats.topics(0);
  EXPECT_EQ(t.topic(), "orders");
  EXPECT_EQ(t.scheduled(), 3u);
  EXPECT_EQ(t.ready(), 3u);  // billing 1, audit 2.
  EXPECT_EQ(t.in_flight(), 1u);
  EXPECT_EQ(t.dead_lettered(), 0u);
  EXPECT_DOUBLE_EQ(t.publish_rate(), 5.0 / 60);
  EXPECT_DOUBLE_EQ(t.delivery_rate(), 1.0 / 60);
  ASSERT_EQ(t.groups_size(), 2);
  EXPECT_EQ(t.groups(0).group(), "audit");
  EXPECT_EQ(t.groups(0).ready(), 2u);
  EXPECT_EQ(t.groups(0).in_flight(), 0u);
  EXPECT_EQ(t.groups(0).consumers(), 0u);
  EXPECT_EQ(t.groups(1).group(), "billing");
  EXPECT_EQ(t.groups(1).ready(), 1u);
  EXPECT_EQ(t.groups(1).in_flight(), 1u);
  EXPECT_EQ(t.groups(1).consumers(), 1u);
  EXPECT_EQ(stats.started_at().seconds(), 1'795'305'600);

  request.set_topic("nope");
  EXPECT_EQ(Call(&v1::Admin::Stub::GetStats, request, &stats).error_code(),
            grpc::StatusCode::NOT_FOUND);
  request.set_topic("bad topic");
  EXPECT_EQ(Call(&v1::Admin::Stub::GetStats, request, &stats).error_message(),
            "topic \"bad topic\" has a space");
}

TEST_F(AdminServiceTest, TopicsAndGroupsAreListedInNameOrder) {
  Publish("zeta", "z", absl::Hours(1));
  Publish("alpha", "a", absl::Hours(1));
  Publish("alpha", "b", absl::Hours(1));
  Subscribe("alpha", "g2");
  Subscribe("alpha", "g1");
  v1::ListTopicsResponse topics;
  ASSERT_TRUE(
      Call(&v1::Admin::Stub::ListTopics, v1::ListTopicsRequest(), &topics)
          .ok());
  ASSERT_EQ(topics.topics_size(), 2);
  EXPECT_EQ(topics.topics(0).name(), "alpha");
  EXPECT_EQ(topics.topics(0).scheduled(), 2u);
  EXPECT_EQ(topics.topics(0).groups(), 2u);
  EXPECT_EQ(topics.topics(1).name(), "zeta");
  EXPECT_EQ(topics.topics(1).scheduled(), 1u);
  EXPECT_EQ(topics.topics(1).groups(), 0u);

  v1::ListGroupsRequest request;
  request.set_topic("alpha");
  v1::ListGroupsResponse groups;
  ASSERT_TRUE(Call(&v1::Admin::Stub::ListGroups, request, &groups).ok());
  ASSERT_EQ(groups.groups_size(), 2);
  EXPECT_EQ(groups.groups(0).name(), "g1");
  EXPECT_EQ(groups.groups(0).topic(), "alpha");
  EXPECT_EQ(groups.groups(0).consumers(), 1u);
  EXPECT_EQ(groups.groups(1).name(), "g2");
  request.set_topic("unknown");
  const grpc::Status missing =
      Call(&v1::Admin::Stub::ListGroups, request, &groups);
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(missing.error_message(),
            "no topic \"unknown\" (no pending messages and no groups)");
}

TEST_F(AdminServiceTest, CreatingAGroupTwiceIsAlreadyExists) {
  v1::CreateGroupRequest request;
  request.set_topic("t");
  request.set_group("g");
  v1::Group group;
  const absl::Time before =
      absl::FromUnixMillis(absl::ToUnixMillis(absl::Now()));
  ASSERT_TRUE(Call(&v1::Admin::Stub::CreateGroup, request, &group).ok());
  EXPECT_EQ(group.topic(), "t");
  EXPECT_EQ(group.name(), "g");
  EXPECT_GE(testing::ToTime(group.created_at()), before);
  const grpc::Status again =
      Call(&v1::Admin::Stub::CreateGroup, request, &group);
  EXPECT_EQ(again.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_EQ(again.error_message(), "group \"g\" of topic \"t\" already exists");
  request.set_group("");
  EXPECT_EQ(
      Call(&v1::Admin::Stub::CreateGroup, request, &group).error_message(),
      "group is empty");
}

TEST_F(AdminServiceTest, CreatingAGroupPastTheLimitIsResourceExhausted) {
  broker::Engine::Options options;
  options.dispatcher.max_groups_per_topic = 1;
  Start(options);
  v1::CreateGroupRequest request;
  request.set_topic("t");
  request.set_group("g1");
  v1::Group group;
  ASSERT_TRUE(Call(&v1::Admin::Stub::CreateGroup, request, &group).ok());
  request.set_group("g2");
  const grpc::Status refused =
      Call(&v1::Admin::Stub::CreateGroup, request, &group);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(
      refused.error_message(),
      "topic \"t\" has 1 groups; the limit is 1 (--max_groups_per_topic)");
}

TEST_F(AdminServiceTest, DeletingAGroupEndsItsStreamsAndRemovesItsEntries) {
  testing::Subscription& doomed = Subscribe("t", "doomed", 1);
  testing::Subscription& kept = Subscribe("t", "kept");
  Publish("t", "a", absl::ZeroDuration());
  Publish("t", "b", absl::ZeroDuration());
  ASSERT_THAT(Ids(doomed.Take(1, kWait)), ElementsAre("a@1"));
  ASSERT_THAT(Ids(kept.Take(2, kWait)), ElementsAre("a@1", "b@1"));
  kept.Ack({"b"});  // b is now held only by "doomed" (ready there).
  ASSERT_TRUE(testing::Eventually([&] {
    return List("t", v1::MESSAGE_STATE_IN_FLIGHT, 0, "", "kept")
               .messages_size() == 1;
  }));

  v1::DeleteGroupRequest request;
  request.set_topic("t");
  request.set_group("doomed");
  v1::DeleteGroupResponse response;
  ASSERT_TRUE(Call(&v1::Admin::Stub::DeleteGroup, request, &response).ok());
  EXPECT_EQ(response.removed(), 2u);  // a in flight, b ready.
  std::optional<grpc::Status> ended = doomed.WaitEnd(kWait);
  ASSERT_TRUE(ended.has_value());
  EXPECT_EQ(ended->error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(ended->error_message(), "group \"doomed\" was deleted");
  // b was held by nobody else: gone; a is still in flight in "kept".
  EXPECT_EQ(Stored(storage::Table::kMessages), 1u);
  kept.Ack({"a"});
  v1::GetStatsRequest stats_request;
  v1::GetStatsResponse stats;
  EXPECT_TRUE(testing::Eventually(
      [&] { return Stored(storage::Table::kMessages) == 0; }));
  ASSERT_TRUE(Call(&v1::Admin::Stub::GetStats, stats_request, &stats).ok());
  ASSERT_EQ(stats.topics_size(), 1);
  ASSERT_EQ(stats.topics(0).groups_size(), 1);
  EXPECT_EQ(stats.topics(0).groups(0).group(), "kept");

  EXPECT_EQ(
      Call(&v1::Admin::Stub::DeleteGroup, request, &response).error_code(),
      grpc::StatusCode::NOT_FOUND);
}

TEST_F(AdminServiceTest, ScheduledMessagesPageInDueOrderWhilePublishesRun) {
  for (int i = 0; i < 25; ++i) {
    Publish("t", absl::StrCat("m", 100 + i), absl::Hours(1) + absl::Seconds(i));
  }
  v1::ListMessagesResponse first = List("t", v1::MESSAGE_STATE_SCHEDULED, 10);
  EXPECT_THAT(Ids(first), ElementsAre("m100", "m101", "m102", "m103", "m104",
                                      "m105", "m106", "m107", "m108", "m109"));
  ASSERT_FALSE(first.next_page_token().empty());
  EXPECT_EQ(first.messages(0).state(), v1::MESSAGE_STATE_SCHEDULED);
  EXPECT_EQ(first.messages(0).payload_size(), 7u);
  // Published between pages: one due before the page boundary (not shown),
  // one after it (shown in its place).
  Publish("t", "early",
          absl::Hours(1) + absl::Seconds(3) + absl::Milliseconds(1));
  Publish("t", "later",
          absl::Hours(1) + absl::Seconds(11) + absl::Milliseconds(500));
  v1::ListMessagesResponse second =
      List("t", v1::MESSAGE_STATE_SCHEDULED, 10, first.next_page_token());
  EXPECT_THAT(Ids(second), ElementsAre("m110", "m111", "later", "m112", "m113",
                                       "m114", "m115", "m116", "m117", "m118"));
  v1::ListMessagesResponse third =
      List("t", v1::MESSAGE_STATE_SCHEDULED, 10, second.next_page_token());
  EXPECT_THAT(Ids(third),
              ElementsAre("m119", "m120", "m121", "m122", "m123", "m124"));
  EXPECT_TRUE(third.next_page_token().empty());

  // A token is bound to its listing.
  v1::ListMessagesRequest other;
  other.set_topic("t");
  other.set_state(v1::MESSAGE_STATE_READY);
  other.set_page_token(first.next_page_token());
  v1::ListMessagesResponse ignored;
  const grpc::Status replayed =
      Call(&v1::Admin::Stub::ListMessages, other, &ignored);
  EXPECT_EQ(replayed.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(replayed.error_message(),
            "page_token belongs to a listing with other topic, state, group "
            "or due range");
  other.set_page_token("garbage!");
  EXPECT_EQ(
      Call(&v1::Admin::Stub::ListMessages, other, &ignored).error_message(),
      "page_token is not a token this broker made");
  other.set_page_token("");
  other.set_state(v1::MESSAGE_STATE_UNSPECIFIED);
  EXPECT_EQ(
      Call(&v1::Admin::Stub::ListMessages, other, &ignored).error_message(),
      "state 0 is not SCHEDULED, READY, IN_FLIGHT or DEAD");
  other.set_state(v1::MESSAGE_STATE_READY);
  other.set_page_size(1001);
  EXPECT_EQ(
      Call(&v1::Admin::Stub::ListMessages, other, &ignored).error_message(),
      "page_size 1001 is over the limit of 1000");
}

// Found by tests/fuzz/admin_fuzz: the due range was compared in whole
// milliseconds, rounded down, so a message due within the millisecond
// before due_from was listed, and one due before a due_to inside its own
// millisecond was not.
TEST_F(AdminServiceTest, TheDueRangeHoldsBelowAMillisecond) {
  absl::StatusOr<v1::Receipt> receipt =
      client_->Publish("t", "payload", absl::Hours(1), "x");
  ASSERT_TRUE(receipt.ok()) << receipt.status();
  const google::protobuf::Timestamp due = receipt->deliver_at();
  // The ids listed with due_from and due_to `from_ns` and `to_ns` after
  // the message's due time (unset: nullopt).
  auto list = [&](std::optional<int> from_ns, std::optional<int> to_ns) {
    v1::ListMessagesRequest request;
    request.set_topic("t");
    request.set_state(v1::MESSAGE_STATE_SCHEDULED);
    if (from_ns.has_value()) {
      *request.mutable_due_from() = due;
      request.mutable_due_from()->set_nanos(due.nanos() + *from_ns);
    }
    if (to_ns.has_value()) {
      *request.mutable_due_to() = due;
      request.mutable_due_to()->set_nanos(due.nanos() + *to_ns);
    }
    v1::ListMessagesResponse response;
    const grpc::Status status =
        Call(&v1::Admin::Stub::ListMessages, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return Ids(response);
  };
  EXPECT_THAT(list(0, std::nullopt), ElementsAre("x"));
  EXPECT_THAT(list(1, std::nullopt), IsEmpty());
  EXPECT_THAT(list(std::nullopt, 1), ElementsAre("x"));
  EXPECT_THAT(list(std::nullopt, 0), IsEmpty());
}

TEST_F(AdminServiceTest, ReadyAndInFlightAreListedPerGroup) {
  testing::Subscription& a = Subscribe("t", "a", 1);
  v1::CreateGroupRequest create;
  create.set_topic("t");
  create.set_group("b");
  v1::Group created;
  ASSERT_TRUE(Call(&v1::Admin::Stub::CreateGroup, create, &created).ok());
  Publish("t", "x", absl::ZeroDuration());
  Publish("t", "y", absl::ZeroDuration());
  ASSERT_THAT(Ids(a.Take(1, kWait)), ElementsAre("x@1"));
  // a: x in flight, y ready. b: x and y ready.
  ASSERT_TRUE(testing::Eventually(
      [&] { return List("t", v1::MESSAGE_STATE_READY).messages_size() == 3; }));
  v1::ListMessagesResponse ready = List("t", v1::MESSAGE_STATE_READY, 2);
  ASSERT_THAT(Ids(ready), ElementsAre("y", "x"));
  EXPECT_EQ(ready.messages(0).groups(0).group(), "a");
  EXPECT_EQ(ready.messages(1).groups(0).group(), "b");
  v1::ListMessagesResponse rest =
      List("t", v1::MESSAGE_STATE_READY, 2, ready.next_page_token());
  ASSERT_THAT(Ids(rest), ElementsAre("y"));
  EXPECT_EQ(rest.messages(0).groups(0).group(), "b");
  EXPECT_TRUE(rest.next_page_token().empty());
  EXPECT_THAT(Ids(List("t", v1::MESSAGE_STATE_READY, 0, "", "b")),
              ElementsAre("x", "y"));

  v1::ListMessagesResponse in_flight = List("t", v1::MESSAGE_STATE_IN_FLIGHT);
  ASSERT_THAT(Ids(in_flight), ElementsAre("x"));
  EXPECT_EQ(in_flight.messages(0).state(), v1::MESSAGE_STATE_IN_FLIGHT);
  EXPECT_EQ(in_flight.messages(0).attempt(), 1u);
  EXPECT_EQ(in_flight.messages(0).groups(0).group(), "a");
}

TEST_F(AdminServiceTest, GetMessageShowsItsStateInEveryGroup) {
  Publish("t", "later", absl::Hours(1), "0123456789");
  v1::GetMessageRequest request;
  request.set_topic("t");
  request.set_id("later");
  request.set_preview_bytes(4);
  v1::MessageInfo info;
  ASSERT_TRUE(Call(&v1::Admin::Stub::GetMessage, request, &info).ok());
  EXPECT_EQ(info.id(), "later");
  EXPECT_EQ(info.state(), v1::MESSAGE_STATE_SCHEDULED);
  EXPECT_EQ(info.payload_size(), 10u);
  EXPECT_EQ(info.payload_preview(), "0123");
  EXPECT_THAT(info.groups(), IsEmpty());

  testing::Subscription& a = Subscribe("t", "a", 0, absl::Seconds(60));
  v1::CreateGroupRequest create;
  create.set_topic("t");
  create.set_group("b");
  v1::Group created;
  ASSERT_TRUE(Call(&v1::Admin::Stub::CreateGroup, create, &created).ok());
  Publish("t", "now", absl::ZeroDuration());
  ASSERT_THAT(Ids(a.Take(1, kWait)), ElementsAre("now@1"));
  request.set_id("now");
  request.set_preview_bytes(0);  // The default, 256.
  ASSERT_TRUE(Call(&v1::Admin::Stub::GetMessage, request, &info).ok());
  EXPECT_EQ(info.state(), v1::MESSAGE_STATE_READY);  // Least advanced.
  EXPECT_EQ(info.payload_preview(), "payload");
  ASSERT_EQ(info.groups_size(), 2);
  EXPECT_EQ(info.groups(0).group(), "a");
  EXPECT_EQ(info.groups(0).state(), v1::MESSAGE_STATE_IN_FLIGHT);
  EXPECT_EQ(info.groups(0).attempt(), 1u);
  EXPECT_GT(testing::ToTime(info.groups(0).redeliver_at()), absl::Now());
  EXPECT_EQ(info.groups(1).group(), "b");
  EXPECT_EQ(info.groups(1).state(), v1::MESSAGE_STATE_READY);
  EXPECT_EQ(info.attempt(), 1u);

  request.set_id("nope");
  const grpc::Status missing =
      Call(&v1::Admin::Stub::GetMessage, request, &info);
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(missing.error_message(),
            "no message with id \"nope\" in topic \"t\"");
}

// 2036-01-01T00:00:00Z plus `offset`.
absl::Time In2036(absl::Duration offset = absl::ZeroDuration()) {
  return absl::FromUnixSeconds(2'082'758'400) + offset;
}

// "start=count" per bucket of `response`, start as RFC 3339.
std::vector<std::string> Buckets(const v1::GetScheduleResponse& response) {
  std::vector<std::string> out;
  for (const v1::ScheduleBucket& b : response.buckets()) {
    out.push_back(absl::StrCat(
        absl::FormatTime("%Y-%m-%dT%H:%M", testing::ToTime(b.start()),
                         absl::UTCTimeZone()),
        "=", b.count()));
  }
  return out;
}

v1::GetScheduleRequest ScheduleRequest(const std::string& topic,
                                       absl::Time from, absl::Time to,
                                       absl::Duration bucket) {
  v1::GetScheduleRequest request;
  request.set_topic(topic);
  request.mutable_from()->set_seconds(absl::ToUnixSeconds(from));
  request.mutable_from()->set_nanos(static_cast<int32_t>(
      (from - absl::FromUnixSeconds(absl::ToUnixSeconds(from))) /
      absl::Nanoseconds(1)));
  request.mutable_to()->set_seconds(absl::ToUnixSeconds(to));
  request.mutable_bucket()->set_seconds(absl::ToInt64Seconds(bucket));
  return request;
}

TEST_F(AdminServiceTest, GetScheduleCountsScheduledMessagesPerAlignedBucket) {
  // orders: 3 in 00:00-01:00, 1 at 01:30, 1 the next day; other: 1.
  v1::PublishRequest publish;
  auto add = [&](const std::string& topic, const std::string& id,
                 absl::Duration offset) {
    v1::Message& m = *publish.add_messages();
    m.set_topic(topic);
    m.set_id(id);
    m.mutable_deliver_at()->set_seconds(absl::ToUnixSeconds(In2036(offset)));
  };
  add("orders", "a", absl::Seconds(10));
  add("orders", "b", absl::Minutes(59));
  add("orders", "c", absl::Minutes(59) + absl::Seconds(59));
  add("orders", "d", absl::Minutes(90));
  add("orders", "e", absl::Hours(24 + 12));
  add("other", "o", absl::Minutes(5));
  v1::PublishResponse published;
  ASSERT_TRUE(client_->Publish(publish, &published).ok());

  v1::GetScheduleResponse response;
  v1::GetScheduleRequest request = ScheduleRequest(
      "orders", In2036(), In2036(absl::Hours(3)), absl::Hours(1));
  ASSERT_TRUE(Call(&v1::Admin::Stub::GetSchedule, request, &response).ok());
  EXPECT_THAT(Buckets(response),
              ElementsAre("2036-01-01T00:00=3", "2036-01-01T01:00=1",
                          "2036-01-01T02:00=0"));
  EXPECT_EQ(response.total(), 4u);

  // Days; `from` inside a bucket starts at the bucket, `to` reaching into
  // one takes it whole.
  request = ScheduleRequest("orders", In2036(absl::Hours(5)),
                            In2036(absl::Hours(25)), absl::Hours(24));
  ASSERT_TRUE(Call(&v1::Admin::Stub::GetSchedule, request, &response).ok());
  EXPECT_THAT(Buckets(response),
              ElementsAre("2036-01-01T00:00=4", "2036-01-02T00:00=1"));

  // 45-minute buckets from an unaligned instant: multiples of 45 minutes
  // since the epoch (2036-01-01T00:00 is one).
  request = ScheduleRequest("orders", In2036(absl::Minutes(50)),
                            In2036(absl::Minutes(136)), absl::Minutes(45));
  ASSERT_TRUE(Call(&v1::Admin::Stub::GetSchedule, request, &response).ok());
  EXPECT_THAT(Buckets(response),
              ElementsAre("2036-01-01T00:45=2", "2036-01-01T01:30=1",
                          "2036-01-01T02:15=0"));

  // Cancel, reschedule and purge move the counts with the messages.
  v1::CancelRequest cancel;
  cancel.set_topic("orders");
  cancel.set_id("a");
  v1::CancelResponse cancelled;
  ASSERT_TRUE(Call(&v1::Admin::Stub::CancelMessage, cancel, &cancelled).ok());
  v1::RescheduleRequest reschedule;
  reschedule.set_topic("orders");
  reschedule.set_id("e");
  reschedule.mutable_deliver_at()->set_seconds(
      absl::ToUnixSeconds(In2036(absl::Minutes(150))));
  v1::Receipt receipt;
  ASSERT_TRUE(Call(&v1::Admin::Stub::Reschedule, reschedule, &receipt).ok());
  request = ScheduleRequest("orders", In2036(), In2036(absl::Hours(48)),
                            absl::Hours(1));
  ASSERT_TRUE(Call(&v1::Admin::Stub::GetSchedule, request, &response).ok());
  ASSERT_EQ(response.buckets_size(), 48);
  EXPECT_EQ(response.buckets(0).count(), 2u);
  EXPECT_EQ(response.buckets(1).count(), 1u);
  EXPECT_EQ(response.buckets(2).count(), 1u);  // e, moved from day 2.
  EXPECT_EQ(response.total(), 4u);
  v1::PurgeTopicRequest purge;
  purge.set_topic("orders");
  purge.set_scheduled(true);
  v1::PurgeTopicResponse purged;
  ASSERT_TRUE(Call(&v1::Admin::Stub::PurgeTopic, purge, &purged).ok());
  ASSERT_EQ(purged.purged(), 4u);
  ASSERT_TRUE(Call(&v1::Admin::Stub::GetSchedule, request, &response).ok());
  EXPECT_EQ(response.total(), 0u);
  ASSERT_EQ(response.buckets_size(), 48);  // Every bucket, at 0.

  // The other topic is untouched; one that never existed reads as 0.
  request = ScheduleRequest("other", In2036(), In2036(absl::Hours(1)),
                            absl::Hours(1));
  ASSERT_TRUE(Call(&v1::Admin::Stub::GetSchedule, request, &response).ok());
  EXPECT_THAT(Buckets(response), ElementsAre("2036-01-01T00:00=1"));
  request.set_topic("never");
  ASSERT_TRUE(Call(&v1::Admin::Stub::GetSchedule, request, &response).ok());
  EXPECT_THAT(Buckets(response), ElementsAre("2036-01-01T00:00=0"));
}

TEST_F(AdminServiceTest, GetScheduleStopsCountingWhatCameDue) {
  Subscribe("t", "g");
  const absl::Time start = absl::Now();
  Publish("t", "now", absl::ZeroDuration());
  Publish("t", "later", absl::Hours(2));
  v1::GetScheduleRequest request = ScheduleRequest(
      "t", start - absl::Minutes(1), start + absl::Hours(3), absl::Hours(1));
  v1::GetScheduleResponse response;
  // "now" is counted until it comes due, which real time decides.
  ASSERT_TRUE(testing::Eventually([&] {
    return Call(&v1::Admin::Stub::GetSchedule, request, &response).ok() &&
           response.total() == 1;
  }));
  uint64_t later_bucket = 0;
  for (int i = 0; i < response.buckets_size(); ++i) {
    if (response.buckets(i).count() == 1) later_bucket = i;
  }
  EXPECT_GE(later_bucket, 2u);
}

TEST_F(AdminServiceTest, GetScheduleRefusesBadInputNamingIt) {
  struct Case {
    std::string what;
    v1::GetScheduleRequest request;
    std::string message;
  };
  const v1::GetScheduleRequest good = ScheduleRequest(
      "orders", In2036(), In2036(absl::Hours(24)), absl::Hours(1));
  std::vector<Case> cases;
  auto with = [&](std::string what, auto change, std::string message) {
    Case c{std::move(what), good, std::move(message)};
    change(c.request);
    cases.push_back(std::move(c));
  };
  with("bad topic", [](auto& r) { r.set_topic("a b"); },
       "topic \"a b\" has a space");
  with("no from", [](auto& r) { r.clear_from(); }, "from is not set");
  with("no to", [](auto& r) { r.clear_to(); }, "to is not set");
  with("no bucket", [](auto& r) { r.clear_bucket(); }, "bucket is not set");
  with("invalid from", [](auto& r) { r.mutable_from()->set_nanos(-1); },
       "from is not a valid Timestamp (seconds 2082758400, nanos -1)");
  with("before 1970", [](auto& r) { r.mutable_from()->set_seconds(-60); },
       "from 1969-12-31T23:59:00Z is before 1970-01-01T00:00:00Z");
  with("to at from",
       [](auto& r) { r.mutable_to()->set_seconds(r.from().seconds()); },
       "to 2036-01-01T00:00:00Z is not after from 2036-01-01T00:00:00Z");
  with("zero bucket", [](auto& r) { r.mutable_bucket()->set_seconds(0); },
       "bucket 0 is not a positive whole number of minutes");
  with("negative bucket",
       [](auto& r) { r.mutable_bucket()->set_seconds(-3600); },
       "bucket -1h is not a positive whole number of minutes");
  with("90 s bucket", [](auto& r) { r.mutable_bucket()->set_seconds(90); },
       "bucket 1m30s is not a positive whole number of minutes");
  with("too many buckets",
       [](auto& r) {
         r.mutable_bucket()->set_seconds(60);
         r.mutable_to()->set_seconds(r.from().seconds() + 10'001 * 60);
       },
       "from 2036-01-01T00:00:00Z to 2036-01-07T22:41:00Z in buckets of 1m "
       "is 10001 buckets; the limit is 10000: choose longer buckets or a "
       "shorter range");
  with("too many reads",
       [](auto& r) {
         r.mutable_bucket()->set_seconds(90 * 60);
         r.mutable_to()->set_seconds(r.from().seconds() + 86'400 * 300);
       },
       "from 2036-01-01T00:00:00Z to 2036-10-27T00:00:00Z in buckets of "
       "1h30m reads 148800 counters; the limit is 100000: choose buckets of "
       "whole hours or days, or a shorter range");
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    v1::GetScheduleResponse response;
    const grpc::Status status =
        Call(&v1::Admin::Stub::GetSchedule, c.request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(status.error_message(), c.message);
    EXPECT_EQ(response.buckets_size(), 0);
  }
  // At the limits: a leap year of hours, and of days.
  v1::GetScheduleResponse response;
  v1::GetScheduleRequest year = ScheduleRequest(
      "orders", In2036(), In2036(absl::Hours(24 * 366)), absl::Hours(1));
  ASSERT_TRUE(Call(&v1::Admin::Stub::GetSchedule, year, &response).ok());
  EXPECT_EQ(response.buckets_size(), 8784);
  year.mutable_bucket()->set_seconds(86'400);
  ASSERT_TRUE(Call(&v1::Admin::Stub::GetSchedule, year, &response).ok());
  EXPECT_EQ(response.buckets_size(), 366);
}

TEST_F(AdminServiceTest, CancelMessageAnswersLikeCancel) {
  Publish("t", "x", absl::Hours(1));
  v1::CancelRequest request;
  request.set_topic("t");
  request.set_id("x");
  v1::CancelResponse response;
  EXPECT_TRUE(Call(&v1::Admin::Stub::CancelMessage, request, &response).ok());
  EXPECT_EQ(
      Call(&v1::Admin::Stub::CancelMessage, request, &response).error_code(),
      grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Stored(storage::Table::kMessages), 0u);
}

TEST_F(AdminServiceTest, RescheduleMovesAScheduledMessage) {
  testing::Subscription& consumer = Subscribe("t", "g");
  Publish("t", "x", absl::Hours(1));
  v1::RescheduleRequest request;
  request.set_topic("t");
  request.set_id("x");
  request.mutable_delay()->set_nanos(200'000'000);
  v1::Receipt receipt;
  const absl::Time before = absl::Now();
  ASSERT_TRUE(Call(&v1::Admin::Stub::Reschedule, request, &receipt).ok());
  EXPECT_EQ(receipt.id(), "x");
  EXPECT_FALSE(receipt.duplicate());
  const absl::Time due = testing::ToTime(receipt.deliver_at());
  EXPECT_GE(due, absl::FromUnixMillis(
                     absl::ToUnixMillis(before + absl::Milliseconds(200))));
  EXPECT_LE(due, absl::Now() + absl::Milliseconds(200));
  std::vector<Received> got = consumer.Take(1, kWait);
  ASSERT_THAT(Ids(got), ElementsAre("x@1"));
  EXPECT_EQ(testing::ToTime(got[0].delivery.deliver_at()), due);
  EXPECT_GE(got[0].at, due);  // At the new time, never before.

  // It came due: NOT_FOUND, as for Cancel.
  const grpc::Status late =
      Call(&v1::Admin::Stub::Reschedule, request, &receipt);
  EXPECT_EQ(late.error_code(), grpc::StatusCode::NOT_FOUND);
  request.mutable_delay()->set_seconds(-1);
  request.mutable_delay()->set_nanos(0);
  EXPECT_EQ(
      Call(&v1::Admin::Stub::Reschedule, request, &receipt).error_message(),
      "delay -1s is negative");
  request.clear_delay();
  EXPECT_EQ(
      Call(&v1::Admin::Stub::Reschedule, request, &receipt).error_message(),
      "the new due time is missing: set delay or deliver_at");
}

TEST_F(AdminServiceTest, DeadLettersAreListedAndRedriven) {
  broker::Engine::Options options;
  options.dispatcher.max_attempts = 1;
  Start(options);
  testing::Subscription& silent = Subscribe("pay", "g", 0, absl::Seconds(1));
  Publish("pay", "p-1", absl::ZeroDuration());
  Publish("pay", "p-2", absl::ZeroDuration());
  ASSERT_THAT(Ids(silent.Take(2, kWait)), ElementsAre("p-1@1", "p-2@1"));
  // Not acked: after the timeout both are dead letters.
  v1::ListMessagesResponse dead;
  ASSERT_TRUE(testing::Eventually([&] {
    dead = List("pay", v1::MESSAGE_STATE_DEAD);
    return dead.messages_size() == 2;
  }));
  ASSERT_THAT(Ids(dead), ElementsAre("p-1", "p-2"));
  // What is redriven goes to a consumer with the default ack timeout (30
  // s), which acks in time however slow the test is, once the silent one
  // is gone from the group.
  EXPECT_TRUE(silent.Close().ok());
  testing::Subscription& consumer = Subscribe("pay", "g");
  ASSERT_TRUE(testing::Eventually([&] {
    v1::GetStatsRequest request;
    request.set_topic("pay");
    v1::GetStatsResponse stats;
    return Call(&v1::Admin::Stub::GetStats, request, &stats).ok() &&
           stats.topics_size() == 1 && stats.topics(0).groups_size() == 1 &&
           stats.topics(0).groups(0).consumers() == 1;
  }));
  EXPECT_EQ(dead.messages(0).topic(), "pay.dlq");
  EXPECT_EQ(dead.messages(0).state(), v1::MESSAGE_STATE_DEAD);

  v1::RedriveDeadLettersRequest request;
  request.set_topic("pay");
  request.add_ids("p-2");
  request.add_ids("nope");
  v1::RedriveDeadLettersResponse response;
  const grpc::Status missing =
      Call(&v1::Admin::Stub::RedriveDeadLetters, request, &response);
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(
      missing.error_message(),
      "no dead letter with id \"nope\" of topic \"pay\" (in \"pay.dlq\")");
  EXPECT_THAT(Ids(List("pay", v1::MESSAGE_STATE_DEAD)),
              ElementsAre("p-1", "p-2"));  // Nothing moved.

  request.clear_ids();
  request.add_ids("p-2");
  ASSERT_TRUE(
      Call(&v1::Admin::Stub::RedriveDeadLetters, request, &response).ok());
  EXPECT_EQ(response.redriven(), 1u);
  EXPECT_THAT(Ids(consumer.Take(1, kWait)), ElementsAre("p-2@1"));
  consumer.Ack({"p-2"});
  EXPECT_THAT(Ids(List("pay", v1::MESSAGE_STATE_DEAD)), ElementsAre("p-1"));

  request.clear_ids();  // All of them.
  ASSERT_TRUE(
      Call(&v1::Admin::Stub::RedriveDeadLetters, request, &response).ok());
  EXPECT_EQ(response.redriven(), 1u);
  EXPECT_THAT(Ids(consumer.Take(1, kWait)), ElementsAre("p-1@1"));
  EXPECT_THAT(Ids(List("pay", v1::MESSAGE_STATE_DEAD)), IsEmpty());
}

TEST_F(AdminServiceTest, PurgeDeletesScheduledAndReadyButNotInFlight) {
  testing::Subscription& consumer = Subscribe("t", "g", 1);
  Publish("t", "held", absl::ZeroDuration());
  ASSERT_THAT(Ids(consumer.Take(1, kWait)), ElementsAre("held@1"));
  Publish("t", "r1", absl::ZeroDuration());
  Publish("t", "r2", absl::ZeroDuration());
  for (int i = 0; i < 3; ++i)
    Publish("t", absl::StrCat("s", i), absl::Hours(1));
  Publish("other", "o", absl::Hours(1));
  // r1 and r2 are ready (no credit left) once dispatched.
  ASSERT_TRUE(testing::Eventually(
      [&] { return List("t", v1::MESSAGE_STATE_READY).messages_size() == 2; }));

  v1::PurgeTopicRequest request;
  request.set_topic("t");
  v1::PurgeTopicResponse response;
  EXPECT_EQ(
      Call(&v1::Admin::Stub::PurgeTopic, request, &response).error_message(),
      "nothing to purge: set scheduled, ready, or both");
  request.set_scheduled(true);
  ASSERT_TRUE(Call(&v1::Admin::Stub::PurgeTopic, request, &response).ok());
  EXPECT_EQ(response.purged(), 3u);
  request.set_scheduled(false);
  request.set_ready(true);
  ASSERT_TRUE(Call(&v1::Admin::Stub::PurgeTopic, request, &response).ok());
  EXPECT_EQ(response.purged(), 2u);
  // Left: the delivery in flight, and the other topic's message.
  EXPECT_EQ(Stored(storage::Table::kMessages), 2u);
  EXPECT_EQ(Stored(storage::Table::kIds), 2u);
  EXPECT_EQ(Stored(storage::Table::kTopicDue), 2u);
  v1::GetStatsRequest stats_request;
  stats_request.set_topic("t");
  v1::GetStatsResponse stats;
  ASSERT_TRUE(Call(&v1::Admin::Stub::GetStats, stats_request, &stats).ok());
  EXPECT_EQ(stats.topics(0).scheduled(), 0u);
  EXPECT_EQ(stats.topics(0).ready(), 0u);
  EXPECT_EQ(stats.topics(0).in_flight(), 1u);
  consumer.Ack({"held"});
  // r1 and r2 would come before a message published after them: it comes
  // next.
  Publish("t", "after", absl::ZeroDuration());
  EXPECT_THAT(Ids(consumer.Take(1, kWait)), ElementsAre("after@1"));
  // A purged id is free again.
  absl::StatusOr<v1::Receipt> again =
      client_->Publish("t", "payload", absl::Hours(1), "s0");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->duplicate());
}

// Every Admin call needs the admin role for its topic; calls about every
// topic need a token without topic patterns.
TEST_F(AdminServiceTest, CallsNeedTheAdminRoleForTheirTopic) {
  auto authorizer = Authorizer::FromText(
      "admin-everything-0001 admin\n"
      "admin-orders-only-0002 admin orders*\n"
      "producer-everything-03 produce\n");
  ASSERT_TRUE(authorizer.ok()) << authorizer.status();
  Start(broker::Engine::Options(), authorizer->get());
  v1::GetStatsRequest orders;
  orders.set_topic("orders");
  v1::GetStatsResponse stats;
  const grpc::Status anonymous =
      Call(&v1::Admin::Stub::GetStats, orders, &stats);
  EXPECT_EQ(anonymous.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  const grpc::Status producer = Call(&v1::Admin::Stub::GetStats, orders, &stats,
                                     "producer-everything-03");
  EXPECT_EQ(producer.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(producer.error_message(),
            "token lacks role admin for topic \"orders\"");
  // A topic the restricted admin covers (NOT_FOUND: it has nothing yet).
  EXPECT_EQ(
      Call(&v1::Admin::Stub::GetStats, orders, &stats, "admin-orders-only-0002")
          .error_code(),
      grpc::StatusCode::NOT_FOUND);
  v1::PurgeTopicRequest purge;
  purge.set_topic("payments");
  purge.set_scheduled(true);
  v1::PurgeTopicResponse purged;
  const grpc::Status elsewhere = Call(&v1::Admin::Stub::PurgeTopic, purge,
                                      &purged, "admin-orders-only-0002");
  EXPECT_EQ(elsewhere.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(elsewhere.error_message(),
            "token's admin role does not cover topic \"payments\"");
  v1::ListTopicsResponse topics;
  EXPECT_EQ(Call(&v1::Admin::Stub::ListTopics, v1::ListTopicsRequest(), &topics,
                 "admin-orders-only-0002")
                .error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(Call(&v1::Admin::Stub::ListTopics, v1::ListTopicsRequest(),
                   &topics, "admin-everything-0001")
                  .ok());
  EXPECT_TRUE(Call(&v1::Admin::Stub::PurgeTopic, purge, &purged,
                   "admin-everything-0001")
                  .ok());
}

}  // namespace
}  // namespace hourglass::api
