// client::Channel: its options, and what Connect says about a broker it
// cannot reach.

#include "client/channel.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/fake_broker.h"
#include "tests/testing/temp_dir.h"

namespace hourglass::client {
namespace {

// A listening socket that never speaks: the kernel accepts connections from
// its backlog, nothing answers. Also gives an unused port once closed.
class SilentPeer {
 public:
  SilentPeer() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof(address);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&address), size), 0);
    EXPECT_EQ(listen(fd_, 16), 0);
    EXPECT_EQ(getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &size),
              0);
    port_ = ntohs(address.sin_port);
  }
  ~SilentPeer() { Close(); }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// A status without its payloads, to compare with one made by hand.
absl::Status Plain(const absl::Status& status) {
  return absl::Status(status.code(), status.message());
}

absl::Status CreateWith(ChannelOptions options) {
  return Channel::Create(std::move(options)).status();
}

TEST(ChannelTest, RefusesBadOptionsNamingThem) {
  ChannelOptions options;
  options.call_timeout = absl::ZeroDuration();
  EXPECT_EQ(CreateWith(options),
            absl::InvalidArgumentError("call_timeout must be more than 0"));

  options = ChannelOptions();
  options.token = "two words";
  EXPECT_EQ(CreateWith(options),
            absl::InvalidArgumentError("token has a space or a character "
                                       "other than printable ASCII"));

  options = ChannelOptions();
  options.tls.cert_file = "client.pem";
  EXPECT_EQ(
      CreateWith(options),
      absl::InvalidArgumentError("tls.cert_file and tls.key_file go together"));

  testing::TempDir dir;
  options = ChannelOptions();
  options.tls.ca_file = dir.path() + "/missing.pem";
  EXPECT_EQ(CreateWith(options),
            absl::InvalidArgumentError(
                absl::StrCat("tls.ca_file: cannot read \"", dir.path(),
                             "/missing.pem\": no such file or directory")));
}

TEST(ChannelTest, AnyTlsFileTurnsTlsOn) {
  testing::TempDir dir;
  const std::string ca = dir.path() + "/ca.pem";
  FILE* f = fopen(ca.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fclose(f);
  ChannelOptions options;
  EXPECT_FALSE((*Channel::Create(options))->tls());
  options.tls.ca_file = ca;
  EXPECT_TRUE((*Channel::Create(options))->tls());
}

TEST(ChannelTest, ConnectReportsARefusedConnectionAtOnce) {
  SilentPeer peer;
  const std::string address = peer.address();
  peer.Close();
  ChannelOptions options;
  options.address = address;
  std::shared_ptr<Channel> channel = *Channel::Create(options);
  const absl::Status status = channel->Connect(absl::Seconds(30));
  EXPECT_EQ(Plain(status),
            absl::UnavailableError(absl::StrCat("cannot reach ", address,
                                                ": connection refused")));
  EXPECT_EQ(ConnectFailureOf(status), ConnectFailure::kUnreachable);
}

TEST(ChannelTest, ConnectReportsASilentPeerAfterTheTimeout) {
  SilentPeer peer;
  ChannelOptions options;
  options.address = peer.address();
  std::shared_ptr<Channel> channel = *Channel::Create(options);
  const absl::Status status = channel->Connect(absl::Milliseconds(300));
  EXPECT_EQ(Plain(status),
            absl::UnavailableError(absl::StrCat("cannot reach ", peer.address(),
                                                ": no answer within 300ms")));
  EXPECT_EQ(ConnectFailureOf(status), ConnectFailure::kNoAnswer);
}

TEST(ChannelTest, ConnectTellsTlsAgainstPlaintextApart) {
  testing::FakeBroker plaintext;
  ChannelOptions options;
  options.address = plaintext.address();
  EXPECT_TRUE((*Channel::Create(options))->Connect(absl::Seconds(30)).ok());

  options.tls.enabled = true;
  const absl::Status status =
      (*Channel::Create(options))->Connect(absl::Seconds(30));
  EXPECT_EQ(Plain(status),
            absl::UnavailableError(absl::StrCat(
                "cannot reach ", plaintext.address(),
                ": it accepts connections but the TLS handshake failed "
                "(check the CA, the client certificate and key, and the name "
                "in its certificate) or it is not a gRPC server")));
  EXPECT_EQ(ConnectFailureOf(status), ConnectFailure::kNotGrpc);
  EXPECT_EQ(ConnectFailureOf(absl::UnavailableError("x")),
            ConnectFailure::kNone);
}

}  // namespace
}  // namespace hourglass::client
