// hourglassd with --auth_tokens against real clients: every role against
// every Broker RPC, topic patterns, SIGHUP reloads, and the CLI's --token
// and HOURGLASS_TOKEN.

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "hourglass/v1/admin.grpc.pb.h"
#include "tests/testing/broker_client.h"
#include "tests/testing/daemon.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"

namespace hourglass {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr absl::Duration kWait = absl::Seconds(30);

constexpr char kProducer[] = "producer-0123456789abcdef";
constexpr char kConsumer[] = "consumer-0123456789abcdef";
constexpr char kAdmin[] = "admin-0123456789abcdef012";
constexpr char kOrdersOnly[] = "orders-only-0123456789abc";
constexpr char kAll[] = "all-roles-0123456789abcde";

constexpr char kTokens[] = R"(# The tokens of AuthTest.
producer-0123456789abcdef   produce
consumer-0123456789abcdef   consume
admin-0123456789abcdef012   admin
orders-only-0123456789abc   produce,consume  orders,orders.*
all-roles-0123456789abcde   produce,consume,admin
)";

const grpc::Status kOk = grpc::Status::OK;

grpc::Status Unauthenticated(const std::string& message) {
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, message);
}
grpc::Status PermissionDenied(const std::string& message) {
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, message);
}

// Compares code and message.
MATCHER_P(IsStatus, expected, "") {
  *result_listener << "is " << arg.error_code() << " \"" << arg.error_message()
                   << "\"";
  return arg.error_code() == expected.error_code() &&
         arg.error_message() == expected.error_message();
}

class AuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tokens_ = dir_.path() + "/tokens.txt";
    WriteTokens(kTokens);
    auto daemon = testing::Daemon::Start(
        HOURGLASSD_PATH, dir_.path() + "/data",
        {"--auth_tokens=" + tokens_, "--shutdown_grace=500ms"});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = *std::move(daemon);
    // Groups the tests subscribe to with tokens that may not create them.
    for (const char* topic : {"orders", "orders.eu", "reload", "still"}) {
      ASSERT_TRUE(CreateGroup(kAll, topic, "g").ok());
    }
  }

  // Admin.CreateGroup with `token`.
  grpc::Status CreateGroup(const std::string& token, const std::string& topic,
                           const std::string& group) {
    auto admin = hourglass::v1::Admin::NewStub(
        daemon_->Channel(grpc::InsecureChannelCredentials(), token));
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + kWait));
    hourglass::v1::CreateGroupRequest request;
    request.set_topic(topic);
    request.set_group(group);
    hourglass::v1::Group created;
    return admin->CreateGroup(&context, request, &created);
  }

  void TearDown() override {
    if (daemon_ == nullptr) return;
    // Tokens never reach the log.
    for (const char* token :
         {kProducer, kConsumer, kAdmin, kOrdersOnly, kAll}) {
      EXPECT_THAT(daemon_->process().output(), Not(HasSubstr(token)));
    }
  }

  // Writes the token file, readable by its owner only (hourglassd refuses
  // it otherwise).
  void WriteTokens(const std::string& text) {
    std::ofstream(tokens_, std::ios::trunc) << text;
    ASSERT_EQ(chmod(tokens_.c_str(), 0600), 0);
  }

  // A client sending `token` ("" for none).
  std::unique_ptr<testing::BrokerClient> Client(const std::string& token) {
    return std::make_unique<testing::BrokerClient>(
        daemon_->Channel(grpc::InsecureChannelCredentials(), token));
  }

  static grpc::Status Publish(testing::BrokerClient& client,
                              const std::vector<std::string>& topics,
                              absl::Duration delay = absl::Hours(1)) {
    hourglass::v1::PublishRequest request;
    for (const std::string& topic : topics) {
      *request.add_messages() = testing::NewMessage(topic, "p", delay);
    }
    hourglass::v1::PublishResponse response;
    return client.Publish(request, &response);
  }

  // Opens a stream of `topic` to group "g"; its status if the broker ended
  // it, or nullopt if it is subscribed (a delivery due now arrives on it).
  std::optional<grpc::Status> Subscribe(
      testing::BrokerClient& client, const std::string& topic,
      testing::SubscribeRpc rpc = testing::SubscribeRpc::kSubscribe) {
    hourglass::v1::Open open;
    open.set_topic(topic);
    open.set_group("g");
    std::unique_ptr<testing::Subscription> stream = client.Subscribe(open, rpc);
    std::unique_ptr<testing::BrokerClient> producer = Client(kProducer);
    const grpc::Status published =
        Publish(*producer, {topic}, absl::ZeroDuration());
    EXPECT_TRUE(published.ok()) << published.error_message();
    if (!stream->Take(1, kWait).empty()) return std::nullopt;
    return stream->WaitEnd(kWait);
  }

  testing::TempDir dir_;
  std::string tokens_;
  std::unique_ptr<testing::Daemon> daemon_;
};

TEST_F(AuthTest, EveryRoleAgainstEveryBrokerCall) {
  const grpc::Status missing =
      Unauthenticated("missing \"authorization: Bearer <token>\" metadata");
  struct Case {
    std::string token;
    grpc::Status publish;
    grpc::Status cancel;
    std::optional<grpc::Status> subscribe;  // nullopt: subscribed.
  };
  const Case cases[] = {
      {"", missing, missing, missing},
      {"unknown-0123456789abcdef", Unauthenticated("unknown token"),
       Unauthenticated("unknown token"), Unauthenticated("unknown token")},
      {kProducer, kOk, kOk,
       PermissionDenied("token lacks role consume for topic \"orders\"")},
      {kConsumer,
       PermissionDenied("message 0: token lacks role produce for topic "
                        "\"orders\""),
       PermissionDenied("token lacks role produce for topic \"orders\""),
       std::nullopt},
      {kAdmin,
       PermissionDenied("message 0: token lacks role produce for topic "
                        "\"orders\""),
       PermissionDenied("token lacks role produce for topic \"orders\""),
       PermissionDenied("token lacks role consume for topic \"orders\"")},
      {kOrdersOnly, kOk, kOk, std::nullopt},
      {kAll, kOk, kOk, std::nullopt},
  };
  std::unique_ptr<testing::BrokerClient> all = Client(kAll);
  int n = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.token.empty() ? "no token" : c.token);
    std::unique_ptr<testing::BrokerClient> client = Client(c.token);
    EXPECT_THAT(Publish(*client, {"orders"}), IsStatus(c.publish));
    {
      hourglass::v1::PublishRequest request;
      *request.add_messages() =
          testing::NewMessage("orders", "p", absl::Hours(1));
      hourglass::v1::PublishAnswer answer;
      EXPECT_THAT(client->PublishStream(request, &answer), IsStatus(c.publish))
          << "PublishStream";
    }

    // Cancel a message that exists, so that an allowed call is OK.
    const std::string id = absl::StrCat("to-cancel-", ++n);
    ASSERT_TRUE(all->Publish("orders", "p", absl::Hours(1), id).ok());
    EXPECT_THAT(client->Cancel("orders", id), IsStatus(c.cancel));

    for (const testing::SubscribeRpc rpc :
         {testing::SubscribeRpc::kSubscribe,
          testing::SubscribeRpc::kSubscribeBatches}) {
      SCOPED_TRACE(rpc == testing::SubscribeRpc::kSubscribe
                       ? "Subscribe"
                       : "SubscribeBatches");
      const std::optional<grpc::Status> subscribed =
          Subscribe(*client, "orders", rpc);
      EXPECT_EQ(subscribed.has_value(), c.subscribe.has_value());
      if (subscribed.has_value() && c.subscribe.has_value()) {
        EXPECT_THAT(*subscribed, IsStatus(*c.subscribe));
      }
    }
  }
}

TEST_F(AuthTest, TopicPatternsLimitEveryCall) {
  std::unique_ptr<testing::BrokerClient> client = Client(kOrdersOnly);
  EXPECT_THAT(Publish(*client, {"orders", "orders.eu"}), IsStatus(kOk));
  // All or nothing: the first message is not stored either.
  std::unique_ptr<testing::BrokerClient> all = Client(kAll);
  ASSERT_TRUE(all->Publish("orders", "p", absl::Hours(1), "kept-out").ok());
  EXPECT_THAT(Publish(*client, {"orders", "payments"}),
              IsStatus(PermissionDenied(
                  "message 1: token's produce role does not cover topic "
                  "\"payments\"")));
  EXPECT_THAT(client->Cancel("payments", "x"),
              IsStatus(PermissionDenied(
                  "token's produce role does not cover topic \"payments\"")));
  const std::optional<grpc::Status> stream = Subscribe(*client, "ordersX");
  ASSERT_TRUE(stream.has_value());
  EXPECT_THAT(*stream,
              IsStatus(PermissionDenied(
                  "token's consume role does not cover topic \"ordersX\"")));
  EXPECT_EQ(Subscribe(*client, "orders.eu"), std::nullopt);
}

// Each group multiplies every later message of its topic: a consume token
// subscribes to groups that exist, and only an admin creates one, by
// subscribing or with Admin.CreateGroup.
TEST_F(AuthTest, OnlyAnAdminCreatesAGroup) {
  std::unique_ptr<testing::BrokerClient> consumer = Client(kConsumer);
  std::unique_ptr<testing::Subscription> refused =
      consumer->Subscribe("orders", "new");
  const std::optional<grpc::Status> status = refused->WaitEnd(kWait);
  ASSERT_TRUE(status.has_value());
  EXPECT_THAT(*status,
              IsStatus(grpc::Status(
                  grpc::StatusCode::NOT_FOUND,
                  "group \"new\" of topic \"orders\" does not exist, and this "
                  "token may not create it: an admin creates it (hourglass "
                  "groups create --topic=orders --group=new)")));
  EXPECT_THAT(CreateGroup(kConsumer, "orders", "new"),
              IsStatus(PermissionDenied(
                  "token lacks role admin for topic \"orders\"")));
  // An admin that consumes creates it by subscribing.
  std::unique_ptr<testing::Subscription> created =
      Client(kAll)->Subscribe("orders", "new");
  EXPECT_THAT(created->Close(), IsStatus(kOk));
  EXPECT_EQ(CreateGroup(kAll, "orders", "new").error_code(),
            grpc::StatusCode::ALREADY_EXISTS);
  // Now the consume token subscribes, and gets what comes due.
  std::unique_ptr<testing::Subscription> admitted =
      consumer->Subscribe("orders", "new");
  ASSERT_TRUE(
      Client(kAll)->Publish("orders", "p", absl::ZeroDuration(), "m1").ok());
  const std::vector<testing::Received> got = admitted->Take(1, kWait);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].delivery.id(), "m1");
}

// A producer cannot plant dead letters, which a redrive would then move
// into the topic: publishing to a dead-letter topic needs role admin too.
TEST_F(AuthTest, OnlyAnAdminPublishesToADeadLetterTopic) {
  for (const char* token : {kProducer, kOrdersOnly}) {
    SCOPED_TRACE(token);
    std::unique_ptr<testing::BrokerClient> client = Client(token);
    EXPECT_THAT(Publish(*client, {"orders", "orders.dlq"}),
                IsStatus(PermissionDenied(
                    "message 1: topic \"orders.dlq\" is a dead-letter topic: "
                    "publishing there needs role admin")));
  }
  EXPECT_THAT(Publish(*Client(kAll), {"orders.dlq"}), IsStatus(kOk));
}

// On a PublishStream each request is checked against the token's topic
// patterns on its own: one that names a topic outside them gets
// PERMISSION_DENIED in its answer, naming the message and the topic, and
// stores nothing (not even its messages that are covered); the stream goes
// on with the next request.
TEST_F(AuthTest, PublishStreamAnswersEachRequestByTheTokensTopics) {
  std::unique_ptr<testing::BrokerClient> client = Client(kOrdersOnly);
  std::vector<hourglass::v1::PublishRequest> requests(4);
  *requests[0].add_messages() =
      testing::NewMessage("orders", "p", absl::Hours(1), "o-1");
  *requests[1].add_messages() =
      testing::NewMessage("payments", "p", absl::Hours(1), "pay-1");
  *requests[2].add_messages() =
      testing::NewMessage("orders.eu", "p", absl::Hours(1), "o-2");
  *requests[2].add_messages() =
      testing::NewMessage("payments", "p", absl::Hours(1), "pay-2");
  *requests[3].add_messages() =
      testing::NewMessage("orders.eu", "p", absl::Hours(1), "o-3");
  std::vector<hourglass::v1::PublishAnswer> answers;
  EXPECT_THAT(client->PublishStream(requests, &answers), IsStatus(kOk));
  ASSERT_EQ(answers.size(), 4u);

  EXPECT_EQ(answers[0].code(), grpc::StatusCode::OK);
  ASSERT_EQ(answers[0].receipts_size(), 1);
  EXPECT_EQ(answers[0].receipts(0).id(), "o-1");
  EXPECT_EQ(answers[1].code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(answers[1].message(),
            "message 0: token's produce role does not cover topic "
            "\"payments\"");
  EXPECT_EQ(answers[1].receipts_size(), 0);
  EXPECT_EQ(answers[2].code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(answers[2].message(),
            "message 1: token's produce role does not cover topic "
            "\"payments\"");
  EXPECT_EQ(answers[2].receipts_size(), 0);
  EXPECT_EQ(answers[3].code(), grpc::StatusCode::OK);
  ASSERT_EQ(answers[3].receipts_size(), 1);
  EXPECT_EQ(answers[3].receipts(0).id(), "o-3");

  // Stored: what was answered with a receipt, and nothing else.
  std::unique_ptr<testing::BrokerClient> all = Client(kAll);
  EXPECT_THAT(all->Cancel("orders", "o-1"), IsStatus(kOk));
  EXPECT_THAT(all->Cancel("orders.eu", "o-3"), IsStatus(kOk));
  for (const auto& [topic, id] :
       std::vector<std::pair<std::string, std::string>>{
           {"payments", "pay-1"},
           {"orders.eu", "o-2"},
           {"payments", "pay-2"}}) {
    EXPECT_THAT(all->Cancel(topic, id),
                IsStatus(grpc::Status(
                    grpc::StatusCode::NOT_FOUND,
                    absl::StrCat("no scheduled message with id \"", id,
                                 "\" in topic \"", topic,
                                 "\" (unknown, already due, or cancelled)"))));
  }
}

// A reload takes effect for new calls at once, and for the streams already
// open too: a Subscribe stream whose token was removed, or lost role
// consume, ends at once (without a request of its own); a PublishStream
// whose token was removed ends at its next request. Streams whose token
// still grants what they do go on.
TEST_F(AuthTest, SighupReloadsTokensAndEndsStreamsTheyNoLongerGrant) {
  constexpr char kNew[] = "new-token-0123456789abcde";
  std::unique_ptr<testing::Subscription> removed =
      Client(kConsumer)->Subscribe("reload", "g");
  hourglass::v1::Open demoted_open;
  demoted_open.set_topic("orders");
  demoted_open.set_group("g");
  std::unique_ptr<testing::Subscription> demoted =
      Client(kOrdersOnly)
          ->Subscribe(demoted_open, testing::SubscribeRpc::kSubscribeBatches);
  std::unique_ptr<testing::Subscription> kept =
      Client(kAll)->Subscribe("reload", "kept");
  std::unique_ptr<testing::BrokerClient> producer = Client(kProducer);
  grpc::ClientContext publish_context;
  publish_context.set_deadline(absl::ToChronoTime(absl::Now() + kWait));
  auto publishing = producer->stub()->PublishStream(&publish_context);
  hourglass::v1::PublishRequest request;
  *request.add_messages() =
      testing::NewMessage("reload", "p", absl::Hours(1), "before");
  ASSERT_TRUE(publishing->Write(request));
  hourglass::v1::PublishStreamResponse answered;
  ASSERT_TRUE(publishing->Read(&answered));
  ASSERT_EQ(answered.answers_size(), 1);
  EXPECT_EQ(answered.answers(0).code(), grpc::StatusCode::OK);

  // The consumer's, producer's and admin's tokens go, orders-only loses
  // role consume, a new one comes.
  WriteTokens(absl::StrCat(kOrdersOnly, " produce orders,orders.*\n", kAll,
                           " produce,consume,admin\n", kNew,
                           " produce,consume\n"));
  daemon_->process().Signal(SIGHUP);
  ASSERT_TRUE(daemon_->process().WaitForOutput(
      absl::StrCat("reloaded 3 tokens and 0 cert lines from ", tokens_), kWait))
      << daemon_->process().output();

  EXPECT_THAT(removed->WaitEnd(kWait).value_or(kOk),
              IsStatus(Unauthenticated("unknown token")));
  EXPECT_THAT(demoted->WaitEnd(kWait).value_or(kOk),
              IsStatus(PermissionDenied(
                  "token lacks role consume for topic \"orders\"")));
  *request.mutable_messages(0) =
      testing::NewMessage("reload", "p", absl::Hours(1), "after");
  publishing->Write(request);  // May fail: the stream is ending.
  EXPECT_FALSE(publishing->Read(&answered));
  EXPECT_THAT(publishing->Finish(), IsStatus(Unauthenticated("unknown token")));
  EXPECT_THAT(Client(kAll)->Cancel("reload", "after"),
              IsStatus(grpc::Status(
                  grpc::StatusCode::NOT_FOUND,
                  "no scheduled message with id \"after\" in topic \"reload\" "
                  "(unknown, already due, or cancelled)")));

  // New calls: the new token works, the removed ones do not.
  std::unique_ptr<testing::BrokerClient> fresh = Client(kNew);
  EXPECT_THAT(Publish(*fresh, {"reload"}, absl::ZeroDuration()), IsStatus(kOk));
  EXPECT_THAT(
      Client(kConsumer)->Subscribe("reload", "g")->WaitEnd(kWait).value_or(kOk),
      IsStatus(Unauthenticated("unknown token")));
  // The stream whose token stays receives and acks.
  std::vector<testing::Received> got = kept->Take(1, kWait);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(kept->Ack({got[0].delivery.id()}));

  // A bad file changes nothing.
  WriteTokens("new-token-0123456789abcde produce,consume,root\n");
  daemon_->process().Signal(SIGHUP);
  ASSERT_TRUE(daemon_->process().WaitForOutput(
      absl::StrCat("hourglassd kept its tokens: reload failed: ", tokens_,
                   ":1: unknown role \"root\" (roles are produce, consume, "
                   "admin)"),
      kWait))
      << daemon_->process().output();
  EXPECT_THAT(Publish(*fresh, {"reload"}), IsStatus(kOk));
  EXPECT_EQ(kept->Close().error_code(), grpc::StatusCode::OK);
}

TEST_F(AuthTest, TheCliSendsItsToken) {
  const std::vector<std::string> publish = {
      HOURGLASS_PATH, "--addr=" + daemon_->address(), "publish",
      "--topic=cli",  "--at=2030-01-01T00:00:00Z",    "--id=a",
      "--data=x"};
  testing::RunResult result = testing::Run(publish, kWait);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.output,
            "hourglass: UNAUTHENTICATED: missing \"authorization: Bearer "
            "<token>\" metadata\n");

  std::vector<std::string> with_flag = publish;
  with_flag.push_back(absl::StrCat("--token=", kConsumer));
  result = testing::Run(with_flag, kWait);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.output,
            "hourglass: PERMISSION_DENIED: message 0: token lacks role "
            "produce for topic \"cli\"\n");

  ASSERT_EQ(setenv("HOURGLASS_TOKEN", kProducer, 1), 0);
  result = testing::Run(publish, kWait);
  unsetenv("HOURGLASS_TOKEN");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(result.output,
            "ID  DELIVER_AT                DUPLICATE\n"
            "a   2030-01-01T00:00:00.000Z  no\n");

  // Health needs no token.
  result = testing::Run(
      {HOURGLASS_PATH, "--addr=" + daemon_->address(), "health"}, kWait);
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(result.output, "SERVING\n");
}

TEST_F(AuthTest, SighupRefusesATokenFileOthersMayRead) {
  WriteTokens(absl::StrCat(kProducer, " produce\n"));
  ASSERT_EQ(chmod(tokens_.c_str(), 0644), 0);
  daemon_->process().Signal(SIGHUP);
  ASSERT_TRUE(daemon_->process().WaitForOutput(
      absl::StrCat("hourglassd kept its tokens: reload failed: ", tokens_,
                   " is readable by group and others (mode 0644); chmod 600 "
                   "it\n"),
      kWait))
      << daemon_->process().output();
  // The consumer's token, gone from the refused file, still works.
  EXPECT_EQ(Subscribe(*Client(kConsumer), "still"), std::nullopt);
}

TEST(AuthStartTest, RefusesToStartWithABadTokenFile) {
  testing::TempDir dir;
  const std::string tokens = dir.path() + "/tokens.txt";
  std::ofstream(tokens) << "# none yet\n";
  ASSERT_EQ(chmod(tokens.c_str(), 0600), 0);
  const testing::RunResult result = testing::Run(
      {HOURGLASSD_PATH, "--listen=127.0.0.1:0", "--metrics_listen=127.0.0.1:0",
       "--data_dir=" + dir.path() + "/data", "--auth_tokens=" + tokens},
      kWait);
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_THAT(result.output,
              HasSubstr(absl::StrCat("hourglassd: ", tokens,
                                     ": no tokens and no cert lines (every "
                                     "call would be refused)")));
  EXPECT_THAT(result.output, Not(HasSubstr("listening")));
}

}  // namespace
}  // namespace hourglass
