// hourglassd with TLS and mutual TLS (--tls_cert, --tls_key,
// --tls_client_ca) against real clients: gRPC channels and the hourglass
// CLI; and client certificates granted roles by `cert` lines of the token
// file. Certificates are made for each test suite by the openssl command.

#include <sys/stat.h>

#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "api/server.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "hourglass/v1/admin.grpc.pb.h"
#include "tests/testing/broker_client.h"
#include "tests/testing/certificates.h"
#include "tests/testing/daemon.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"

namespace hourglass {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kTimeout = absl::Seconds(30);

using ::hourglass::testing::ReadTextFile;

// A CA, and certificates it signs: the broker's (for localhost and
// 127.0.0.1) and clients' (one with only a common name, and two known by
// the token file of CertLinesGrantRolesToClientCertificates: by common
// name, and by a URI among subject alternative names); and a client
// certificate from another CA.
class Certificates : public testing::Certificates {
 public:
  Certificates() : testing::Certificates(OPENSSL_PATH) {
    MakeCa("ca", "Hourglass test CA");
    MakeCert("server", "ca", "localhost",
             "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
             "extendedKeyUsage=serverAuth\n");
    MakeCert("client", "ca", "hourglass-client",
             "extendedKeyUsage=clientAuth\n");
    MakeCert("worker", "ca", "worker-1", "extendedKeyUsage=clientAuth\n");
    MakeCert("billing", "ca", "Billing Service",
             "subjectAltName=DNS:billing.hourglass.test,"
             "URI:spiffe://hourglass.test/billing\n"
             "extendedKeyUsage=clientAuth\n");
    MakeCa("other-ca", "Another CA");
    MakeCert("stranger", "other-ca", "stranger",
             "extendedKeyUsage=clientAuth\n");
  }

  // TLS credentials trusting the test CA, with `client`'s certificate
  // unless it is empty.
  std::shared_ptr<grpc::ChannelCredentials> Credentials(
      const std::string& client = "") const {
    return testing::Certificates::Credentials("ca", client);
  }
};

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { certs_ = new Certificates(); }
  static void TearDownTestSuite() {
    delete certs_;
    certs_ = nullptr;
  }

  // Starts hourglassd with TLS, and with mutual TLS if `mutual`, and
  // `more` flags.
  void StartDaemon(bool mutual, const std::vector<std::string>& more = {}) {
    std::vector<std::string> flags = {"--tls_cert=" + certs_->Pem("server"),
                                      "--tls_key=" + certs_->Key("server"),
                                      "--shutdown_grace=500ms"};
    if (mutual) flags.push_back("--tls_client_ca=" + certs_->Pem("ca"));
    flags.insert(flags.end(), more.begin(), more.end());
    auto daemon =
        testing::Daemon::Start(HOURGLASSD_PATH, dir_.path() + "/data", flags);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = *std::move(daemon);
  }

  // A channel to the daemon that does not wait to connect.
  std::shared_ptr<grpc::Channel> Channel(
      std::shared_ptr<grpc::ChannelCredentials> credentials) {
    return grpc::CreateChannel(daemon_->address(), std::move(credentials));
  }

  // Publishes one message due in an hour over `channel`.
  grpc::Status Publish(std::shared_ptr<grpc::Channel> channel) {
    testing::BrokerClient client(std::move(channel));
    hourglass::v1::PublishRequest request;
    *request.add_messages() =
        testing::NewMessage("orders", "payload", absl::Hours(1));
    hourglass::v1::PublishResponse response;
    return client.Publish(request, &response);
  }

  // Runs the hourglass CLI against the daemon.
  testing::RunResult Cli(std::vector<std::string> args) {
    args.insert(args.begin(), {HOURGLASS_PATH, "--addr=" + daemon_->address(),
                               "--timeout=10s"});
    return testing::Run(args, kTimeout);
  }

  static Certificates* certs_;
  testing::TempDir dir_;
  std::unique_ptr<testing::Daemon> daemon_;
};

Certificates* TlsTest::certs_ = nullptr;

TEST_F(TlsTest, ServesClientsThatTrustItsCa) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon(/*mutual=*/false));
  EXPECT_THAT(daemon_->process().output(), HasSubstr("): TLS, no auth"));

  const grpc::Status status = Publish(Channel(certs_->Credentials()));
  EXPECT_TRUE(status.ok()) << status.error_message();

  // The whole way: a consumer over TLS receives what a producer sent.
  testing::BrokerClient client(daemon_->Channel(certs_->Credentials()));
  auto consumer = client.Subscribe("now", "g");
  ASSERT_TRUE(client.Publish("now", "over tls", absl::ZeroDuration()).ok());
  std::vector<testing::Received> got = consumer->Take(1, kTimeout);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].delivery.payload(), "over tls");

  const testing::RunResult cli =
      Cli({"--tls-ca=" + certs_->Pem("ca"), "health"});
  EXPECT_EQ(cli.exit_code, 0) << cli.output;
  EXPECT_EQ(cli.output, "SERVING\n");
}

TEST_F(TlsTest, APlaintextClientFailsCleanly) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon(/*mutual=*/false));

  const grpc::Status status =
      Publish(Channel(grpc::InsecureChannelCredentials()));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << status.error_message();

  const testing::RunResult cli = Cli({"health"});
  EXPECT_EQ(cli.exit_code, 1);
  EXPECT_EQ(cli.output,
            absl::StrCat("hourglass: cannot reach ", daemon_->address(),
                         ": it accepts connections but not as a plaintext "
                         "gRPC server (if it uses TLS, pass --tls-ca or "
                         "--tls)\n"));

  // The broker is unharmed.
  EXPECT_TRUE(Publish(Channel(certs_->Credentials())).ok());
}

TEST_F(TlsTest, AClientThatDoesNotTrustTheBrokersCaFails) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon(/*mutual=*/false));
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = ReadTextFile(certs_->Pem("other-ca"));
  const grpc::Status status = Publish(Channel(grpc::SslCredentials(ssl)));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << status.error_message();

  const testing::RunResult cli =
      Cli({"--tls-ca=" + certs_->Pem("other-ca"), "health"});
  EXPECT_EQ(cli.exit_code, 1);
  EXPECT_EQ(cli.output,
            absl::StrCat("hourglass: cannot reach ", daemon_->address(),
                         ": it accepts connections but the TLS handshake "
                         "failed (check --tls-ca, --tls-cert, --tls-key and "
                         "the name in its certificate) or it is not a gRPC "
                         "server\n"));
}

TEST_F(TlsTest, MutualTlsServesOnlyClientsWithACertificateFromItsCa) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon(/*mutual=*/true));
  EXPECT_THAT(daemon_->process().output(), HasSubstr("): mutual TLS, no auth"));

  grpc::Status status = Publish(Channel(certs_->Credentials("client")));
  EXPECT_TRUE(status.ok()) << status.error_message();

  status = Publish(Channel(certs_->Credentials()));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << "no client certificate: " << status.error_message();
  status = Publish(Channel(certs_->Credentials("stranger")));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << "a certificate from another CA: " << status.error_message();
  status = Publish(Channel(grpc::InsecureChannelCredentials()));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << "plaintext: " << status.error_message();

  testing::RunResult cli = Cli(
      {"--tls-ca=" + certs_->Pem("ca"), "--tls-cert=" + certs_->Pem("client"),
       "--tls-key=" + certs_->Key("client"), "health"});
  EXPECT_EQ(cli.exit_code, 0) << cli.output;
  EXPECT_EQ(cli.output, "SERVING\n");

  cli = Cli({"--tls-ca=" + certs_->Pem("ca"), "health"});
  EXPECT_EQ(cli.exit_code, 1) << cli.output;
  EXPECT_EQ(cli.output,
            absl::StrCat("hourglass: cannot reach ", daemon_->address(),
                         ": it accepts connections but the TLS handshake "
                         "failed (check --tls-ca, --tls-cert, --tls-key and "
                         "the name in its certificate) or it is not a gRPC "
                         "server\n"));

  cli = Cli({"--tls-ca=" + certs_->Pem("ca"),
             "--tls-cert=" + certs_->Pem("client"), "health"});
  EXPECT_EQ(cli.exit_code, 2);
  EXPECT_EQ(cli.output,
            "hourglass: --tls-cert: --tls-cert and --tls-key go together\n");
}

// Code and message of a gRPC status, to compare and print.
std::string Describe(const grpc::Status& status) {
  return absl::StrCat(status.error_code(), " ", status.error_message());
}
std::string Describe(grpc::StatusCode code, const std::string& message) {
  return absl::StrCat(code, " ", message);
}

TEST_F(TlsTest, CertLinesGrantRolesToClientCertificates) {
  constexpr char kAdmin[] = "admin-token-0123456789ab";
  constexpr char kConsumer[] = "consumer-token-012345678";
  const std::string tokens = dir_.path() + "/tokens.txt";
  std::ofstream(tokens)
      << "cert worker-1 produce orders,orders.*\n"
      << "cert spiffe://hourglass.test/billing consume orders\n"
      << kAdmin << " admin,produce,consume\n"
      << kConsumer << " consume\n";
  ASSERT_EQ(chmod(tokens.c_str(), 0600), 0);
  ASSERT_NO_FATAL_FAILURE(
      StartDaemon(/*mutual=*/true, {"--auth_tokens=" + tokens}));
  EXPECT_THAT(daemon_->process().output(),
              HasSubstr("): mutual TLS, tokens from " + tokens));

  // Granted by its common name: exactly its role and topics.
  testing::BrokerClient worker(daemon_->Channel(certs_->Credentials("worker")));
  EXPECT_EQ(Describe(Publish(daemon_->Channel(certs_->Credentials("worker")))),
            Describe(grpc::Status::OK));
  EXPECT_TRUE(worker.Publish("orders.eu", "p", absl::Hours(1)).ok());
  EXPECT_EQ(worker.Publish("payments", "p", absl::Hours(1)).status(),
            absl::PermissionDeniedError(
                "message 0: client certificate's produce role does not cover "
                "topic \"payments\""));
  std::unique_ptr<testing::Subscription> refused =
      worker.Subscribe("orders", "g");
  EXPECT_EQ(Describe(refused->WaitEnd(kTimeout).value_or(grpc::Status::OK)),
            Describe(grpc::StatusCode::PERMISSION_DENIED,
                     "client certificate lacks role consume for topic "
                     "\"orders\""));

  // Granted by a URI among its alternative names (its common name has a
  // space): it consumes what the worker publishes, and may not publish. Its
  // group is an admin's to create.
  {
    auto admin = hourglass::v1::Admin::NewStub(
        daemon_->Channel(certs_->Credentials("client"), kAdmin));
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + kTimeout));
    hourglass::v1::CreateGroupRequest request;
    request.set_topic("orders");
    request.set_group("g");
    hourglass::v1::Group created;
    EXPECT_EQ(Describe(admin->CreateGroup(&context, request, &created)),
              Describe(grpc::Status::OK));
  }
  testing::BrokerClient billing(
      daemon_->Channel(certs_->Credentials("billing")));
  std::unique_ptr<testing::Subscription> stream =
      billing.Subscribe("orders", "g");
  ASSERT_TRUE(
      worker.Publish("orders", "to billing", absl::ZeroDuration()).ok());
  std::vector<testing::Received> got = stream->Take(1, kTimeout);
  ASSERT_EQ(got.size(), 1u) << Describe(
      stream->WaitEnd(absl::ZeroDuration()).value_or(grpc::Status::OK));
  EXPECT_EQ(got[0].delivery.payload(), "to billing");
  EXPECT_EQ(billing.Publish("orders", "p", absl::Hours(1)).status(),
            absl::PermissionDeniedError("message 0: client certificate lacks "
                                        "role produce for topic \"orders\""));

  // A certificate of the CA that no line names gets nothing.
  const std::string no_grant =
      "no cert line names the client certificate (\"hourglass-client\") and "
      "the call has no \"authorization: Bearer <token>\" metadata";
  EXPECT_EQ(Describe(Publish(daemon_->Channel(certs_->Credentials("client")))),
            Describe(grpc::StatusCode::UNAUTHENTICATED, no_grant));

  // A token decides, whatever the certificate: the admin's works with a
  // certificate that has no grant, the consumer's limits the worker.
  EXPECT_EQ(Describe(Publish(
                daemon_->Channel(certs_->Credentials("client"), kAdmin))),
            Describe(grpc::Status::OK));
  testing::BrokerClient worker_with_token(
      daemon_->Channel(certs_->Credentials("worker"), kConsumer));
  EXPECT_EQ(worker_with_token.Publish("orders", "p", absl::Hours(1)).status(),
            absl::PermissionDeniedError(
                "message 0: token lacks role produce for topic \"orders\""));
  EXPECT_EQ(Describe(stream->Close()), Describe(grpc::Status::OK));

  // The CLI, with a certificate and no token.
  const std::vector<std::string> tls = {"--tls-ca=" + certs_->Pem("ca"),
                                        "publish", "--topic=orders",
                                        "--delay=1h", "--data=x"};
  std::vector<std::string> args = tls;
  args.insert(args.begin(), {"--tls-cert=" + certs_->Pem("worker"),
                             "--tls-key=" + certs_->Key("worker")});
  testing::RunResult cli = Cli(args);
  EXPECT_EQ(cli.exit_code, 0) << cli.output;
  args = tls;
  args.insert(args.begin(), {"--tls-cert=" + certs_->Pem("client"),
                             "--tls-key=" + certs_->Key("client")});
  cli = Cli(args);
  EXPECT_EQ(cli.exit_code, 1);
  EXPECT_EQ(cli.output, "hourglass: UNAUTHENTICATED: " + no_grant + "\n");
}

TEST_F(TlsTest, CertLinesWithoutMutualTlsAreWarnedAbout) {
  const std::string tokens = dir_.path() + "/tokens.txt";
  std::ofstream(tokens) << "cert worker-1 produce\n";
  ASSERT_EQ(chmod(tokens.c_str(), 0600), 0);
  ASSERT_NO_FATAL_FAILURE(
      StartDaemon(/*mutual=*/false, {"--auth_tokens=" + tokens}));
  EXPECT_THAT(daemon_->process().output(),
              HasSubstr(absl::StrCat("WARNING: the cert lines of ", tokens,
                                     " grant nothing: without --tls_client_ca "
                                     "no client presents a certificate\n")));
  EXPECT_EQ(Describe(Publish(Channel(certs_->Credentials()))),
            Describe(grpc::StatusCode::UNAUTHENTICATED,
                     "missing \"authorization: Bearer <token>\" metadata"));
}

TEST_F(TlsTest, RefusesToStartWithBadTlsFlags) {
  struct Case {
    std::vector<std::string> flags;
    std::string message;
  };
  const std::string missing = dir_.path() + "/missing.pem";
  const Case cases[] = {
      {{"--tls_cert=" + missing, "--tls_key=" + certs_->Key("server")},
       absl::StrCat("cannot read --tls_cert \"", missing,
                    "\": No such file or directory")},
      {{"--tls_cert=" + certs_->Pem("server")},
       "TLS needs both --tls_cert and --tls_key"},
      {{"--tls_client_ca=" + certs_->Pem("ca")},
       "--tls_client_ca needs --tls_cert and --tls_key: mutual TLS is TLS"},
      {{"--tls_cert=" + certs_->Pem("server"),
        "--tls_key=" + certs_->Pem("server")},
       absl::StrCat("--tls_key \"", certs_->Pem("server"),
                    "\" is not a PEM file with a PRIVATE KEY")},
      {{"--tls_cert=" + certs_->Key("server"),
        "--tls_key=" + certs_->Key("server")},
       absl::StrCat("--tls_cert \"", certs_->Key("server"),
                    "\" is not a PEM file with a CERTIFICATE")},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv = {HOURGLASSD_PATH, "--listen=127.0.0.1:0",
                                     "--metrics_listen=127.0.0.1:0",
                                     "--data_dir=" + dir_.path() + "/data"};
    argv.insert(argv.end(), c.flags.begin(), c.flags.end());
    const testing::RunResult result = testing::Run(argv, kTimeout);
    EXPECT_EQ(result.exit_code, 1) << result.output;
    EXPECT_THAT(result.output, HasSubstr("hourglassd: " + c.message));
  }
}

// Off loopback, TLS leaves only the warning that authentication is off;
// mutual TLS, or tokens, remove that one too. (The plaintext cases are in
// hourglassd_test.cc.)
TEST_F(TlsTest, WarnsOffLoopbackOnlyOfWhatIsMissing) {
  const std::string tokens = dir_.path() + "/tokens.txt";
  std::ofstream(tokens) << "all-roles-0123456789abcde produce,consume,admin\n";
  ASSERT_EQ(chmod(tokens.c_str(), 0600), 0);
  struct Case {
    std::string name;
    bool mutual;
    std::vector<std::string> flags;
    std::vector<std::string> warnings;
  };
  const Case cases[] = {
      {"TLS",
       false,
       {"--listen=0.0.0.0:0"},
       {"warning WARNING: --listen=0.0.0.0:0 is not loopback and "
        "authentication is off (--auth_tokens, --tls_client_ca): anyone who "
        "can connect may publish, consume and cancel"}},
      {"mutual TLS", true, {"--listen=0.0.0.0:0"}, {}},
      {"TLS and tokens",
       false,
       {"--listen=0.0.0.0:0", "--auth_tokens=" + tokens},
       {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    StartDaemon(c.mutual, c.flags);
    ASSERT_NE(daemon_, nullptr);
    // Listening: the warnings, which come before, are in the log.
    EXPECT_EQ(testing::Warnings(daemon_->process().output()), c.warnings)
        << daemon_->process().output();
    EXPECT_EQ(daemon_->Stop(), 0) << daemon_->process().output();
    daemon_.reset();
  }
}

TEST(ListenAddressTest, LoopbackOrNot) {
  for (const char* address : {"127.0.0.1:7070", "127.1.2.3:0", "localhost:7070",
                              "[::1]:7070", "unix:/run/hourglass.sock"}) {
    EXPECT_TRUE(api::IsLoopbackAddress(address)) << address;
  }
  for (const char* address :
       {"0.0.0.0:7070", "[::]:7070", "10.0.0.5:7070", "broker.internal:7070",
        "128.0.0.1:7070", "127.0.0.256:7070", "[::1:7070"}) {
    EXPECT_FALSE(api::IsLoopbackAddress(address)) << address;
  }
}

}  // namespace
}  // namespace hourglass
