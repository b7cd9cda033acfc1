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

grpc::Status Check(Health::Stub& stub, HealthCheckResponse* response) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  return stub.Check(&context, HealthCheckRequest(), response);
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
