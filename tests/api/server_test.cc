#include "api/server.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"

namespace hourglass::api {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

std::unique_ptr<Health::Stub> HealthClient(int port) {
  return Health::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
}

grpc::Status Check(Health::Stub& stub, HealthCheckResponse* response,
                   const std::string& service = "") {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  HealthCheckRequest request;
  request.set_service(service);
  return stub.Check(&context, request, response);
}

// The status health gives `service`, or the call's error code's name.
std::string StatusOf(Health::Stub& stub, const std::string& service) {
  HealthCheckResponse response;
  const grpc::Status status = Check(stub, &response, service);
  if (!status.ok()) return absl::StrCat("error ", status.error_code());
  return HealthCheckResponse::ServingStatus_Name(response.status());
}

TEST(ServerTest, ServesHealthOnAnOsChosenPort) {
  auto server = Server::Start({.listen_address = "127.0.0.1:0"});
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_GT((*server)->port(), 0);

  auto stub = HealthClient((*server)->port());
  HealthCheckResponse response;
  const grpc::Status status = Check(*stub, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
}

TEST(ServerTest, ThePrimaryServiceFollowsTheWholeServerByDefault) {
  // A single node takes writes whenever it serves: it is its own primary.
  auto server = Server::Start({.listen_address = "127.0.0.1:0"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = HealthClient((*server)->port());
  EXPECT_EQ(StatusOf(*stub, ""), "SERVING");
  EXPECT_EQ(StatusOf(*stub, kPrimaryHealthService), "SERVING");

  (*server)->SetServing(false);
  EXPECT_EQ(StatusOf(*stub, ""), "NOT_SERVING");
  EXPECT_EQ(StatusOf(*stub, kPrimaryHealthService), "NOT_SERVING");
  (*server)->SetServing(true);
  EXPECT_EQ(StatusOf(*stub, ""), "SERVING");
  EXPECT_EQ(StatusOf(*stub, kPrimaryHealthService), "SERVING");
  // grpc.health.v1's answer for a name it does not know.
  EXPECT_EQ(StatusOf(*stub, "hourglass.v1.NoSuchService"),
            absl::StrCat("error ", grpc::StatusCode::NOT_FOUND));
}

TEST(ServerTest, StartsNotServingWhenToldAndSetsEachNameApart) {
  // As a cluster node does: not serving until it has a part in its shard,
  // then "" (a member that answers) and the primary each on their own.
  auto server = Server::Start(
      {.listen_address = "127.0.0.1:0", .serving_at_start = false});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = HealthClient((*server)->port());
  EXPECT_EQ(StatusOf(*stub, ""), "NOT_SERVING");
  EXPECT_EQ(StatusOf(*stub, kPrimaryHealthService), "NOT_SERVING");

  (*server)->SetServing("", true);
  EXPECT_EQ(StatusOf(*stub, ""), "SERVING");
  EXPECT_EQ(StatusOf(*stub, kPrimaryHealthService), "NOT_SERVING");
  (*server)->SetServing(kPrimaryHealthService, true);
  EXPECT_EQ(StatusOf(*stub, ""), "SERVING");
  EXPECT_EQ(StatusOf(*stub, kPrimaryHealthService), "SERVING");
  (*server)->SetServing("", false);
  EXPECT_EQ(StatusOf(*stub, ""), "NOT_SERVING");
  EXPECT_EQ(StatusOf(*stub, kPrimaryHealthService), "SERVING");
}

TEST(ServerTest, RefusesAnAddressInUseNamingIt) {
  auto first = Server::Start({.listen_address = "127.0.0.1:0"});
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string taken = absl::StrCat("127.0.0.1:", (*first)->port());

  auto second = Server::Start({.listen_address = taken});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find(taken), std::string::npos)
      << second.status();
}

TEST(ServerTest, ShutdownStopsServing) {
  auto server = Server::Start({.listen_address = "127.0.0.1:0"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = HealthClient((*server)->port());
  (*server)->Shutdown(absl::ZeroDuration());
  (*server)->Shutdown(absl::ZeroDuration());  // Idempotent.

  HealthCheckResponse response;
  const grpc::Status status = Check(*stub, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << status.error_message();
}

}  // namespace
}  // namespace hourglass::api
