// hourglass.v1.Broker over loopback gRPC, on an engine backed by a
// fault-injecting memory store.

#include "api/broker_service.h"

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "api/publish_stream.h"
#include "api/server.h"
#include "broker/engine.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "storage/keys.h"
#include "tests/testing/broker_client.h"
#include "tests/testing/faulty_store.h"

namespace hourglass::api {
namespace {

using hourglass::v1::CancelRequest;
using hourglass::v1::CancelResponse;
using hourglass::v1::Message;
using hourglass::v1::PublishRequest;
using hourglass::v1::PublishResponse;

// A plaintext channel to `server` on loopback.
std::shared_ptr<grpc::Channel> ChannelTo(const Server& server) {
  return grpc::CreateChannel(absl::StrCat("127.0.0.1:", server.port()),
                             grpc::InsecureChannelCredentials());
}

Message Msg(const std::string& topic, int64_t delay_ms,
            const std::string& id = "") {
  Message m;
  m.set_topic(topic);
  m.set_id(id);
  m.set_payload("hello");
  m.mutable_delay()->set_seconds(delay_ms / 1000);
  m.mutable_delay()->set_nanos(static_cast<int32_t>(delay_ms % 1000) *
                               1'000'000);
  return m;
}

class BrokerServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    broker::Engine::Options options;
    options.on_dispatched =
        [this](const std::vector<broker::ScheduledEntry>& chunk) {
          absl::MutexLock lock(&dispatched_mu_);
          dispatched_ += chunk.size();
        };
    auto engine = broker::Engine::Open(&store_, &clock_, options);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
    engine_->Start();
    service_ = std::make_unique<BrokerService>(
        engine_.get(), &clock_,
        Limits{.max_payload_bytes = 16, .max_batch = 3});
    auto server = Server::Start(
        {.listen_address = "127.0.0.1:0", .services = {service_.get()}});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = hourglass::v1::Broker::NewStub(ChannelTo(*server_));
  }

  void TearDown() override {
    server_.reset();
    engine_.reset();
  }

  grpc::Status Publish(const PublishRequest& request,
                       PublishResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    return stub_->Publish(&context, request, response);
  }

  grpc::Status Cancel(const std::string& topic, const std::string& id) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    CancelRequest request;
    request.set_topic(topic);
    request.set_id(id);
    CancelResponse response;
    return stub_->Cancel(&context, request, &response);
  }

  // Waits until `n` messages in all have come due and been moved to ready
  // (to their topic's waiting area while it has no group).
  bool WaitDispatched(size_t n) {
    absl::MutexLock lock(&dispatched_mu_);
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(dispatched_mu_) {
      return dispatched_ >= n;
    };
    return dispatched_mu_.AwaitWithTimeout(absl::Condition(&done),
                                           absl::Seconds(30));
  }

  // Calls `run` with a fresh Subscribe stream, then with a fresh
  // SubscribeBatches stream; the status each returned, by RPC name.
  template <typename Run>
  std::vector<std::pair<std::string, grpc::Status>> OnBothRpcs(Run run) {
    std::vector<std::pair<std::string, grpc::Status>> statuses;
    {
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
      statuses.emplace_back("Subscribe", run(stub_->Subscribe(&context)));
    }
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    statuses.emplace_back("SubscribeBatches",
                          run(stub_->SubscribeBatches(&context)));
    return statuses;
  }

  // Publishes m0 ... m<n-1> to `topic`, due now, and waits until they have
  // come due (into the topic's waiting area while it has no group).
  void PublishDueNow(const std::string& topic, int n) {
    PublishRequest request;
    for (int i = 0; i < n; ++i) {
      *request.add_messages() = Msg(topic, 0, absl::StrCat("m", i));
    }
    PublishResponse response;
    ASSERT_TRUE(Publish(request, &response).ok());
    ASSERT_TRUE(WaitDispatched(n));
  }

  size_t StoredMessages() {
    size_t n = 0;
    EXPECT_TRUE(store_
                    .Scan(storage::Table::kMessages, "", "",
                          [&](std::string_view, std::string_view) {
                            ++n;
                            return true;
                          })
                    .ok());
    return n;
  }

  absl::Mutex dispatched_mu_;
  size_t dispatched_ ABSL_GUARDED_BY(dispatched_mu_) = 0;
  testing::FaultyStore store_;
  broker::SystemClock clock_;
  std::unique_ptr<broker::Engine> engine_;
  std::unique_ptr<BrokerService> service_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<hourglass::v1::Broker::Stub> stub_;
};

int64_t Millis(const google::protobuf::Timestamp& t) {
  return t.seconds() * 1000 + t.nanos() / 1'000'000;
}

TEST_F(BrokerServiceTest, PublishAnswersReceiptsInRequestOrder) {
  PublishRequest request;
  *request.add_messages() = Msg("orders", 30'000, "order-1");
  *request.add_messages() = Msg("orders", 0);
  PublishResponse response;
  const int64_t before = absl::ToUnixMillis(absl::Now());
  const grpc::Status status = Publish(request, &response);
  const int64_t after = absl::ToUnixMillis(absl::Now());
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.receipts_size(), 2);
  EXPECT_EQ(response.receipts(0).id(), "order-1");
  EXPECT_FALSE(response.receipts(0).duplicate());
  EXPECT_GE(Millis(response.receipts(0).deliver_at()), before + 30'000);
  EXPECT_LE(Millis(response.receipts(0).deliver_at()), after + 30'000);
  EXPECT_EQ(response.receipts(1).id(), "hg-0000000000000002");
  EXPECT_EQ(StoredMessages(), 2u);
}

TEST_F(BrokerServiceTest, ARepeatedIdGetsTheFirstReceipt) {
  PublishRequest request;
  *request.add_messages() = Msg("orders", 60'000, "order-1");
  PublishResponse first, second;
  ASSERT_TRUE(Publish(request, &first).ok());
  ASSERT_TRUE(Publish(request, &second).ok());
  EXPECT_TRUE(second.receipts(0).duplicate());
  EXPECT_EQ(Millis(second.receipts(0).deliver_at()),
            Millis(first.receipts(0).deliver_at()));
  EXPECT_EQ(StoredMessages(), 1u);
}

// Every kind of bad Publish: INVALID_ARGUMENT naming the problem, and
// nothing stored, not even the good messages of the batch.
TEST_F(BrokerServiceTest, BadPublishesAreRejectedWholeWithAReason) {
  struct Case {
    std::string name;
    PublishRequest request;
    std::string message;
  };
  std::vector<Case> cases;
  cases.push_back({"empty", PublishRequest(), "the request has no messages"});
  {
    PublishRequest r;
    for (int i = 0; i < 4; ++i) *r.add_messages() = Msg("t", 0);
    cases.push_back(
        {"too many", r,
         "the request has 4 messages; the limit is 3 (--max_batch)"});
  }
  auto one_bad = [&](std::string name, Message bad, std::string message) {
    PublishRequest r;
    *r.add_messages() = Msg("good", 0);
    *r.add_messages() = std::move(bad);
    cases.push_back({std::move(name), std::move(r), std::move(message)});
  };
  one_bad("empty topic", Msg("", 0), "message 1: topic is empty");
  one_bad("bad topic", Msg("a b", 0), "message 1: topic \"a b\" has a space");
  {
    Message m = Msg("t", 0);
    m.set_payload(std::string(17, 'x'));
    one_bad("payload", m,
            "message 1: payload is 17 bytes; the limit is 16 "
            "(--max_payload_bytes)");
  }
  {
    Message m = Msg("t", 0);
    m.mutable_delay()->set_seconds(-1);
    one_bad("negative delay", m, "message 1: delay -1s is negative");
  }
  {
    Message m = Msg("t", 0);
    m.mutable_delay()->set_seconds(3651LL * 86400);
    one_bad(
        "delay too long", m,
        "message 1: delay 87624h is over the limit of 87600h (--max_delay)");
  }
  {
    Message m = Msg("t", 0);
    m.mutable_delay()->set_nanos(-5);
    m.mutable_delay()->set_seconds(1);
    one_bad("bad duration", m,
            "message 1: delay is not a valid Duration (seconds 1, nanos -5)");
  }
  {
    Message m;
    m.set_topic("t");
    m.mutable_deliver_at()->set_nanos(2'000'000'000);
    one_bad("bad timestamp", m,
            "message 1: deliver_at is not a valid Timestamp (seconds 0, nanos "
            "2000000000)");
  }
  {
    Message m = Msg("t", 0);
    m.mutable_delay()->set_seconds(315'576'000'001);
    one_bad("duration seconds", m,
            "message 1: delay is not a valid Duration (seconds 315576000001, "
            "nanos 0)");
  }
  {
    Message m;
    m.set_topic("t");
    m.mutable_deliver_at()->set_seconds(253'402'300'800);
    one_bad("timestamp seconds", m,
            "message 1: deliver_at is not a valid Timestamp (seconds "
            "253402300800, nanos 0)");
  }
  {
    Message m;
    m.set_topic("t");
    m.mutable_deliver_at()->set_seconds(absl::ToUnixSeconds(absl::Now()) +
                                        3651LL * 86400);
    PublishRequest r;
    *r.add_messages() = m;
    cases.push_back({"deliver_at too far", r, ""});
  }
  one_bad("long id", Msg("t", 0, std::string(129, 'i')),
          "message 1: id \"" + std::string(64, 'i') +
              "...\" is 129 bytes long; the limit is 128");

  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    PublishResponse response;
    const grpc::Status status = Publish(c.request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    if (!c.message.empty()) {
      EXPECT_EQ(status.error_message(), c.message);
    } else {
      EXPECT_THAT(status.error_message(),
                  ::testing::EndsWith("ahead (--max_delay)"));
    }
    EXPECT_EQ(response.receipts_size(), 0);
  }
  EXPECT_EQ(StoredMessages(), 0u);
}

TEST_F(BrokerServiceTest, AFullDiskIsResourceExhaustedAndStoresNothing) {
  store_.FailWrites(
      absl::ResourceExhaustedError("write in data dir /d: disk full"));
  PublishRequest request;
  *request.add_messages() = Msg("t", 1000);
  PublishResponse response;
  const grpc::Status status = Publish(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(status.error_message(), "write in data dir /d: disk full");
  store_.FailWrites(absl::OkStatus());
  EXPECT_EQ(StoredMessages(), 0u);
  EXPECT_TRUE(Publish(request, &response).ok());  // Space is back.
}

TEST_F(BrokerServiceTest, CancelAnswersOkOnceThenNotFound) {
  PublishRequest request;
  *request.add_messages() = Msg("orders", 60'000, "order-9");
  PublishResponse response;
  ASSERT_TRUE(Publish(request, &response).ok());
  EXPECT_TRUE(Cancel("orders", "order-9").ok());
  const grpc::Status again = Cancel("orders", "order-9");
  EXPECT_EQ(again.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(again.error_message(),
            "no scheduled message with id \"order-9\" in topic \"orders\" "
            "(unknown, already due, or cancelled)");
  EXPECT_EQ(Cancel("bad topic", "x").error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Cancel("orders", "").error_message(), "id is empty");
  EXPECT_EQ(StoredMessages(), 0u);
}

// Each bad Subscribe ends the stream with INVALID_ARGUMENT naming the
// problem, and registers no group.
TEST_F(BrokerServiceTest, BadSubscribeRequestsEndTheStream) {
  auto open = [](std::string topic, std::string group) {
    hourglass::v1::SubscribeRequest r;
    r.mutable_open()->set_topic(std::move(topic));
    r.mutable_open()->set_group(std::move(group));
    return r;
  };
  struct Case {
    std::string name;
    std::vector<hourglass::v1::SubscribeRequest> requests;
    std::string message;
  };
  std::vector<Case> cases;
  {
    hourglass::v1::SubscribeRequest ack;
    ack.mutable_ack()->add_ids("x");
    cases.push_back(
        {"ack first", {ack}, "the first request of a stream must be open"});
  }
  cases.push_back({"no kind",
                   {hourglass::v1::SubscribeRequest()},
                   "the first request of a stream must be open"});
  cases.push_back({"bad topic",
                   {open("a/b", "g")},
                   "open.topic \"a/b\" has '/'; names may use only A-Z a-z "
                   "0-9 . _ -"});
  cases.push_back({"empty group", {open("t", "")}, "open.group is empty"});
  {
    hourglass::v1::SubscribeRequest r = open("t", "g");
    r.mutable_open()->mutable_ack_timeout()->set_seconds(-2);
    cases.push_back(
        {"negative ack timeout", {r}, "open.ack_timeout -2s is negative"});
  }
  {
    hourglass::v1::SubscribeRequest r = open("t", "g");
    r.mutable_open()->set_max_in_flight(10'001);
    cases.push_back({"credit",
                     {r},
                     "open.max_in_flight 10001 is over the limit of 10000 "
                     "(--max_credit)"});
  }
  // Writes the requests on a fresh stream of either RPC; the stream's end.
  auto run = []<typename Response>(
                 std::unique_ptr<grpc::ClientReaderWriter<
                     hourglass::v1::SubscribeRequest, Response>>
                     stream,
                 const Case& c) {
    for (const auto& r : c.requests) stream->Write(r);
    Response ignored;
    EXPECT_FALSE(stream->Read(&ignored));
    return stream->Finish();
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    for (const auto& [rpc, status] :
         OnBothRpcs([&](auto stream) { return run(std::move(stream), c); })) {
      SCOPED_TRACE(rpc);
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
      EXPECT_EQ(status.error_message(), c.message);
    }
  }
  EXPECT_THAT(engine_->dispatcher().Groups(), ::testing::IsEmpty());
}

// After a good open, a second open or a bad nack ends the stream too.
TEST_F(BrokerServiceTest, BadRequestsAfterOpenEndTheStream) {
  auto run = []<typename Response>(
                 std::unique_ptr<grpc::ClientReaderWriter<
                     hourglass::v1::SubscribeRequest, Response>>
                     stream,
                 const std::string& kind) {
    hourglass::v1::SubscribeRequest open;
    open.mutable_open()->set_topic("t");
    open.mutable_open()->set_group("g");
    EXPECT_TRUE(stream->Write(open));
    stream->WaitForInitialMetadata();
    hourglass::v1::SubscribeRequest bad;
    if (kind == "open") {
      bad = open;
    } else {
      bad.mutable_nack()->set_id("x");
      bad.mutable_nack()->mutable_delay()->set_seconds(-1);
    }
    stream->Write(bad);
    Response ignored;
    EXPECT_FALSE(stream->Read(&ignored));
    return stream->Finish();
  };
  for (const std::string kind : {"open", "nack"}) {
    SCOPED_TRACE(kind);
    for (const auto& [rpc, status] : OnBothRpcs(
             [&](auto stream) { return run(std::move(stream), kind); })) {
      SCOPED_TRACE(rpc);
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
      EXPECT_EQ(status.error_message(),
                kind == "open" ? "open may only be the first request"
                               : "nack.delay -1s is negative");
    }
  }
}

// Each delivery carries exactly its own message's fields, whatever the
// deliveries before it on the stream held.
class BrokerServiceRpcTest
    : public BrokerServiceTest,
      public ::testing::WithParamInterface<testing::SubscribeRpc> {
 protected:
  std::unique_ptr<testing::Subscription> Subscribe(const std::string& topic,
                                                   const std::string& group,
                                                   uint32_t max_in_flight = 0) {
    hourglass::v1::Open open;
    open.set_topic(topic);
    open.set_group(group);
    open.set_max_in_flight(max_in_flight);
    return std::make_unique<testing::Subscription>(stub_.get(), open,
                                                   GetParam());
  }
};

INSTANTIATE_TEST_SUITE_P(
    Rpcs, BrokerServiceRpcTest,
    ::testing::Values(testing::SubscribeRpc::kSubscribe,
                      testing::SubscribeRpc::kSubscribeBatches),
    [](const ::testing::TestParamInfo<testing::SubscribeRpc>& info) {
      return info.param == testing::SubscribeRpc::kSubscribe
                 ? "Subscribe"
                 : "SubscribeBatches";
    });

TEST_P(BrokerServiceRpcTest, EachDeliveryCarriesExactlyItsOwnMessage) {
  std::unique_ptr<testing::Subscription> sub = Subscribe("t", "g");
  struct Sent {
    std::string id;
    std::string payload;
    std::map<std::string, std::string> headers;
  };
  const std::vector<std::vector<Sent>> rounds = {
      {{"a", "a-long-payload!!", {{"k1", "v1"}, {"k2", "v2"}}}, {"b", "b", {}}},
      {{"c", "", {{"k3", "v3"}}}, {"dd", "d", {}}},
  };
  for (const std::vector<Sent>& round : rounds) {
    PublishRequest request;
    for (const Sent& s : round) {
      Message& m = *request.add_messages();
      m = Msg("t", 0, s.id);
      m.set_payload(s.payload);
      m.mutable_headers()->insert(s.headers.begin(), s.headers.end());
    }
    PublishResponse response;
    ASSERT_TRUE(Publish(request, &response).ok());
    const std::vector<testing::Received> got =
        sub->Take(round.size(), absl::Seconds(30));
    ASSERT_EQ(got.size(), round.size());
    for (size_t i = 0; i < round.size(); ++i) {
      const hourglass::v1::Delivery& d = got[i].delivery;
      SCOPED_TRACE(round[i].id);
      EXPECT_EQ(d.id(), round[i].id);
      EXPECT_EQ(d.topic(), "t");
      EXPECT_EQ(d.payload(), round[i].payload);
      const std::map<std::string, std::string> headers(d.headers().begin(),
                                                       d.headers().end());
      EXPECT_EQ(headers, round[i].headers);
      EXPECT_EQ(d.attempt(), 1u);
      EXPECT_EQ(Millis(d.deliver_at()),
                Millis(response.receipts(i).deliver_at()));
    }
  }
}

// What came due while a topic had no group goes to its first group in due
// order: on SubscribeBatches in one response, on Subscribe in one each.
TEST_P(BrokerServiceRpcTest, WhatWaitedArrivesInOrderInAsFewResponsesAsFit) {
  ASSERT_NO_FATAL_FAILURE(PublishDueNow("t", 3));

  auto sub = Subscribe("t", "g");
  const std::vector<testing::Received> got = sub->Take(3, absl::Seconds(30));
  std::vector<std::pair<std::string, size_t>> seen;  // (id, response)
  for (const testing::Received& r : got) {
    seen.emplace_back(r.delivery.id(), r.response);
  }
  using P = std::pair<std::string, size_t>;
  if (GetParam() == testing::SubscribeRpc::kSubscribeBatches) {
    EXPECT_THAT(seen,
                ::testing::ElementsAre(P("m0", 0), P("m1", 0), P("m2", 0)));
  } else {
    EXPECT_THAT(seen,
                ::testing::ElementsAre(P("m0", 0), P("m1", 1), P("m2", 2)));
  }
}

// A stream holds at most its credit unacknowledged; an Ack of a whole batch
// frees it, and the next deliveries follow in due order.
TEST_P(BrokerServiceRpcTest, AnAckOfABatchFreesItsCredit) {
  ASSERT_NO_FATAL_FAILURE(PublishDueNow("t", 3));

  auto sub = Subscribe("t", "g", /*max_in_flight=*/2);
  std::vector<testing::Received> first = sub->Take(2, absl::Seconds(30));
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].delivery.id(), "m0");
  EXPECT_EQ(first[1].delivery.id(), "m1");
  // The credit is spent: nothing more comes until an ack.
  EXPECT_THAT(sub->Take(1, absl::Milliseconds(200)), ::testing::IsEmpty());
  ASSERT_TRUE(sub->Ack({"m0", "m1"}));
  std::vector<testing::Received> second = sub->Take(1, absl::Seconds(30));
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].delivery.id(), "m2");
  EXPECT_EQ(second[0].delivery.attempt(), 1u);
  EXPECT_GT(second[0].response, first[1].response);
}

// SubscribeBatches packs about 1 MiB of deliveries per response at most; a
// delivery larger than that travels alone. Order holds across responses.
TEST_F(BrokerServiceTest, SubscribeBatchesSplitsResponsesAtAboutOneMebibyte) {
  // A second service on the same engine, with the default 1 MiB payloads.
  BrokerService service(engine_.get(), &clock_, Limits{});
  auto server =
      Server::Start({.listen_address = "127.0.0.1:0", .services = {&service}});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = hourglass::v1::Broker::NewStub(ChannelTo(**server));
  // 400 KiB, 400 KiB, 400 KiB, 1 MiB, 1 KiB.
  const std::vector<size_t> sizes = {400 << 10, 400 << 10, 400 << 10, 1 << 20,
                                     1 << 10};
  PublishRequest request;
  for (size_t i = 0; i < sizes.size(); ++i) {
    Message& m = *request.add_messages();
    m = Msg("big", 0, absl::StrCat("m", i));
    m.set_payload(std::string(sizes[i], static_cast<char>('a' + i)));
  }
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  PublishResponse response;
  ASSERT_TRUE(stub->Publish(&context, request, &response).ok());
  ASSERT_TRUE(WaitDispatched(sizes.size()));

  hourglass::v1::Open open;
  open.set_topic("big");
  open.set_group("g");
  testing::Subscription sub(stub.get(), open,
                            testing::SubscribeRpc::kSubscribeBatches);
  const std::vector<testing::Received> got =
      sub.Take(sizes.size(), absl::Seconds(30));
  ASSERT_EQ(got.size(), sizes.size());
  std::vector<size_t> responses;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].delivery.id(), absl::StrCat("m", i));
    EXPECT_EQ(got[i].delivery.payload(),
              std::string(sizes[i], static_cast<char>('a' + i)));
    responses.push_back(got[i].response);
  }
  // Two of 400 KiB fit in one response, three do not; the 1 MiB one (with
  // its id and topic, just over) goes alone, and so does what follows it.
  EXPECT_THAT(responses, ::testing::ElementsAre(0, 0, 1, 2, 3));
  sub.Cancel();
  server->reset();
}

// Each request of a PublishStream is answered in request order, a bad one
// with its error (and nothing stored) without ending the stream; the
// stream ends OK after the client's side.
TEST_F(BrokerServiceTest, PublishStreamAnswersEachRequestInOrder) {
  testing::BrokerClient client(ChannelTo(*server_));
  absl::StatusOr<hourglass::v1::Receipt> first =
      client.Publish("orders", "p", absl::Hours(1), "x");
  ASSERT_TRUE(first.ok()) << first.status();
  std::vector<PublishRequest> requests(4);
  *requests[0].add_messages() = Msg("orders", 30'000, "a");
  *requests[1].add_messages() = Msg("a b", 0);
  *requests[2].add_messages() = Msg("orders", 0, "b");
  *requests[2].add_messages() = Msg("orders", 0, "c");
  *requests[3].add_messages() = Msg("orders", 0, "x");  // Pending already.
  std::vector<hourglass::v1::PublishAnswer> answers;
  const int64_t before = absl::ToUnixMillis(absl::Now());
  const grpc::Status status = client.PublishStream(requests, &answers);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(answers.size(), 4u);

  ASSERT_EQ(answers[0].receipts_size(), 1);
  EXPECT_EQ(answers[0].code(), 0);
  EXPECT_EQ(answers[0].receipts(0).id(), "a");
  EXPECT_FALSE(answers[0].receipts(0).duplicate());
  EXPECT_GE(Millis(answers[0].receipts(0).deliver_at()), before + 30'000);

  EXPECT_EQ(answers[1].code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(answers[1].message(), "message 0: topic \"a b\" has a space");
  EXPECT_EQ(answers[1].receipts_size(), 0);

  ASSERT_EQ(answers[2].receipts_size(), 2);
  EXPECT_EQ(answers[2].receipts(0).id(), "b");
  EXPECT_EQ(answers[2].receipts(1).id(), "c");

  ASSERT_EQ(answers[3].receipts_size(), 1);
  EXPECT_EQ(answers[3].receipts(0).id(), "x");
  EXPECT_TRUE(answers[3].receipts(0).duplicate());
  EXPECT_EQ(Millis(answers[3].receipts(0).deliver_at()),
            Millis(first->deliver_at()));
  EXPECT_EQ(StoredMessages(), 4u);  // x, a, b and c.
}

// A Broker whose PublishStream hands each request to `publish`, the test's
// stand-in for the engine, and reads at most `max_pending` ahead.
class PublishStreamService final
    : public hourglass::v1::Broker::CallbackService {
 public:
  PublishStreamService(PublishCall publish, size_t max_pending,
                       size_t max_pending_bytes = kMaxPendingAnswerBytes)
      : publish_(std::move(publish)),
        max_pending_(max_pending),
        max_pending_bytes_(max_pending_bytes) {}

  grpc::ServerBidiReactor<PublishRequest, hourglass::v1::PublishStreamResponse>*
  PublishStream(grpc::CallbackServerContext*) override {
    return NewPublishStream(
        [this](const PublishRequest& r, PublishDone done) {
          return publish_(r, std::move(done));
        },
        {.max_pending = max_pending_, .max_pending_bytes = max_pending_bytes_});
  }

 private:
  PublishCall publish_;
  const size_t max_pending_;
  const size_t max_pending_bytes_;
};

// The answer a stand-in publish gives: one receipt, with the id of the
// request's first message.
std::vector<broker::PublishReceipt> ReceiptFor(std::string id) {
  return {{std::move(id), absl::FromUnixMillis(1000), false}};
}

using PublishStreamClient =
    grpc::ClientReaderWriterInterface<PublishRequest,
                                      hourglass::v1::PublishStreamResponse>;

// Writes a request of one message with `id` to `stream`.
bool WriteOne(PublishStreamClient& stream, const std::string& id) {
  PublishRequest request;
  *request.add_messages() = Msg("t", 0, id);
  return stream.Write(request);
}

// Publishes that end when the test says: a PublishStream on a server of
// its own whose publishes wait in a list until Answer.
class HeldPublishes {
 public:
  explicit HeldPublishes(size_t max_pending,
                         size_t max_pending_bytes = kMaxPendingAnswerBytes)
      : service_(
            [this](const PublishRequest& request, PublishDone done) {
              absl::MutexLock lock(&mu_);
              held_.push_back({request.messages(0).id(), std::move(done)});
              return absl::OkStatus();
            },
            max_pending, max_pending_bytes) {
    auto server = Server::Start(
        {.listen_address = "127.0.0.1:0", .services = {&service_}});
    EXPECT_TRUE(server.ok()) << server.status();
    if (server.ok()) server_ = *std::move(server);
  }

  // Opens a PublishStream, sends requests "m0", "m1", ... of one message
  // each, `n` in all, and ends the client's side; nullptr if the server did
  // not start or a write failed. REQUIRES: `context` outlives the stream.
  std::unique_ptr<PublishStreamClient> Send(grpc::ClientContext& context,
                                            int n) {
    if (server_ == nullptr) return nullptr;
    if (stub_ == nullptr) {
      stub_ = hourglass::v1::Broker::NewStub(ChannelTo(*server_));
    }
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    std::unique_ptr<PublishStreamClient> stream =
        stub_->PublishStream(&context);
    for (int i = 0; i < n; ++i) {
      if (!WriteOne(*stream, absl::StrCat("m", i))) return nullptr;
    }
    stream->WritesDone();
    return stream;
  }

  // Whether `n` publishes began within `timeout`.
  bool WaitFor(size_t n, absl::Duration timeout = absl::Seconds(30)) {
    absl::MutexLock lock(&mu_);
    auto reached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return held_.size() >= n;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
  }

  // Ends the i-th publish with one receipt: its request's id, then
  // `padding` bytes of 'x'. REQUIRES: WaitFor(i + 1).
  void Answer(size_t i, size_t padding = 0) {
    PublishDone done;
    std::string id;
    {
      absl::MutexLock lock(&mu_);
      done = std::move(held_[i].done);
      id = held_[i].id;
    }
    std::move(done)(ReceiptFor(id + std::string(padding, 'x')));
  }

 private:
  struct Held {
    std::string id;
    PublishDone done;
  };

  absl::Mutex mu_;
  std::vector<Held> held_ ABSL_GUARDED_BY(mu_);
  PublishStreamService service_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<hourglass::v1::Broker::Stub> stub_;
};

// Reads `stream` to its end: for each response, the first receipt id of
// each answer (at most `prefix` bytes of it).
std::vector<std::vector<std::string>> ReadAnswerIds(
    PublishStreamClient& stream, size_t prefix = std::string::npos) {
  std::vector<std::vector<std::string>> responses;
  hourglass::v1::PublishStreamResponse got;
  while (stream.Read(&got)) {
    std::vector<std::string>& ids = responses.emplace_back();
    for (const hourglass::v1::PublishAnswer& answer : got.answers()) {
      ids.push_back(answer.receipts_size() == 0
                        ? "(no receipt)"
                        : answer.receipts(0).id().substr(0, prefix));
    }
  }
  return responses;
}

// A stream reads at most max_pending requests ahead of its answers; the
// answers go out in request order whatever order the publishes end in,
// those known together in one response.
TEST(PublishStreamTest, ReadsAtMostMaxPendingAheadAndAnswersInOrder) {
  HeldPublishes publishes(/*max_pending=*/2);
  grpc::ClientContext context;
  auto stream = publishes.Send(context, 4);
  ASSERT_NE(stream, nullptr);
  ASSERT_TRUE(publishes.WaitFor(2));
  // Two requests await their answers: the stream reads no third (all four
  // were sent; a stream that read ahead would have the third at once).
  EXPECT_FALSE(publishes.WaitFor(3, absl::Milliseconds(300)));
  // The second ends first; its answer waits for the first's, and the two
  // go out together.
  publishes.Answer(1);
  publishes.Answer(0);
  ASSERT_TRUE(publishes.WaitFor(4));
  publishes.Answer(3);
  publishes.Answer(2);
  const auto responses = ReadAnswerIds(*stream);
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_THAT(responses,
              ::testing::ElementsAre(::testing::ElementsAre("m0", "m1"),
                                     ::testing::ElementsAre("m2", "m3")));
}

// The answers a stream holds for its client are bounded in bytes too: an
// answer counts at an estimate from its request (about 75 bytes for one
// message with a short id) until it is known, then at its size.
TEST(PublishStreamTest, ReadsAheadAtMostMaxPendingBytesOfAnswers) {
  HeldPublishes publishes(/*max_pending=*/100, /*max_pending_bytes=*/150);
  grpc::ClientContext context;
  auto stream = publishes.Send(context, 4);
  ASSERT_NE(stream, nullptr);
  ASSERT_TRUE(publishes.WaitFor(2));
  EXPECT_FALSE(publishes.WaitFor(3, absl::Milliseconds(300)));
  // A large answer, once known, holds the stream back until it is sent.
  publishes.Answer(1, /*padding=*/1000);
  EXPECT_FALSE(publishes.WaitFor(3, absl::Milliseconds(300)));
  publishes.Answer(0);  // Both are sent; the stream reads on.
  ASSERT_TRUE(publishes.WaitFor(4));
  publishes.Answer(3);
  publishes.Answer(2);
  const auto responses = ReadAnswerIds(*stream, /*prefix=*/2);
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_THAT(responses,
              ::testing::ElementsAre(::testing::ElementsAre("m0", "m1"),
                                     ::testing::ElementsAre("m2", "m3")));
}

// Answers ready together share responses of up to kMaxResponseBytes each.
TEST(PublishStreamTest, AResponseHoldsAnswersUpToOneMebibyte) {
  HeldPublishes publishes(/*max_pending=*/3);
  grpc::ClientContext context;
  auto stream = publishes.Send(context, 3);
  ASSERT_NE(stream, nullptr);
  ASSERT_TRUE(publishes.WaitFor(3));
  // Three answers of 400 kB, all ready once the first is: two fit.
  constexpr size_t kPadding = 400'000;
  static_assert(2 * kPadding < kMaxResponseBytes);
  static_assert(3 * kPadding > kMaxResponseBytes);
  publishes.Answer(2, kPadding);
  publishes.Answer(1, kPadding);
  publishes.Answer(0, kPadding);
  const auto responses = ReadAnswerIds(*stream, /*prefix=*/2);
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_THAT(responses,
              ::testing::ElementsAre(::testing::ElementsAre("m0", "m1"),
                                     ::testing::ElementsAre("m2")));
}

// The request is the publish's until it returns, even once it has answered:
// the stream reads nothing into it meanwhile, though the answer is written
// and the client has sent more.
TEST(PublishStreamTest, APublishOwnsItsRequestUntilItReturns) {
  absl::Notification release_first;
  absl::Mutex mu;
  std::vector<std::string> published;  // Guarded by mu.
  std::string first_request_at_return;
  PublishStreamService service(
      [&](const PublishRequest& request, PublishDone done) {
        const std::string id = request.messages(0).id();
        {
          absl::MutexLock lock(&mu);
          published.push_back(id);
        }
        std::move(done)(ReceiptFor(id));
        if (id != "m0") return absl::OkStatus();
        release_first.WaitForNotification();
        first_request_at_return = request.messages(0).id();
        return absl::OkStatus();
      },
      kMaxPendingPublishes);
  auto server =
      Server::Start({.listen_address = "127.0.0.1:0", .services = {&service}});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = hourglass::v1::Broker::NewStub(ChannelTo(**server));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  auto stream = stub->PublishStream(&context);
  ASSERT_TRUE(WriteOne(*stream, "m0"));
  hourglass::v1::PublishStreamResponse got;
  ASSERT_TRUE(stream->Read(&got));  // m0's answer, sent from inside publish.
  ASSERT_EQ(got.answers_size(), 1);
  ASSERT_EQ(got.answers(0).receipts_size(), 1);
  EXPECT_EQ(got.answers(0).receipts(0).id(), "m0");
  ASSERT_TRUE(WriteOne(*stream, "m1"));
  // A stream that read on once m0's answer was written would publish m1
  // at once, while m0's publish still holds its request.
  {
    absl::MutexLock lock(&mu);
    auto second = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      return published.size() >= 2;
    };
    EXPECT_FALSE(
        mu.AwaitWithTimeout(absl::Condition(&second), absl::Milliseconds(300)));
  }
  release_first.Notify();
  stream->WritesDone();
  EXPECT_THAT(ReadAnswerIds(*stream),
              ::testing::ElementsAre(::testing::ElementsAre("m1")));
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(first_request_at_return, "m0");
  absl::MutexLock lock(&mu);
  EXPECT_THAT(published, ::testing::ElementsAre("m0", "m1"));
}

}  // namespace
}  // namespace hourglass::api
