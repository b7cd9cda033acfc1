// systemd's notification protocol: ServiceNotifier's datagrams on sockets
// the test binds itself (a path and an abstract name), then the real
// hourglassd under $NOTIFY_SOCKET, as Type=notify starts it.

#include "cmd/hourglassd/sd_notify.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "tests/testing/daemon.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"

namespace hourglass::hourglassd {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kTimeout = absl::Seconds(30);

// An AF_UNIX datagram socket bound to a path or, for a name starting with
// '@', to that name in the abstract namespace: the service manager's end.
class NotifySocket {
 public:
  // `name` as $NOTIFY_SOCKET would give it.
  explicit NotifySocket(const std::string& name)
      : fd_(socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) {
    sockaddr_un address = {};
    address.sun_family = AF_UNIX;
    memcpy(address.sun_path, name.data(), name.size());
    socklen_t length = offsetof(sockaddr_un, sun_path) + name.size();
    if (name.front() == '@') {
      address.sun_path[0] = '\0';
    } else {
      ++length;
    }
    bound_ = fd_ >= 0 &&
             bind(fd_, reinterpret_cast<sockaddr*>(&address), length) == 0;
  }
  ~NotifySocket() {
    if (fd_ >= 0) close(fd_);
  }
  NotifySocket(const NotifySocket&) = delete;
  NotifySocket& operator=(const NotifySocket&) = delete;

  bool bound() const { return bound_; }

  // The next datagram, waiting up to `timeout` for it; nullopt if none came.
  std::optional<std::string> Receive(absl::Duration timeout) {
    pollfd ready = {.fd = fd_, .events = POLLIN, .revents = 0};
    const absl::Time deadline = absl::Now() + timeout;
    while (true) {
      const int wait_ms =
          static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
      const int polled = poll(&ready, 1, wait_ms < 0 ? 0 : wait_ms);
      if (polled < 0 && errno == EINTR) continue;
      if (polled <= 0) return std::nullopt;
      return ReceiveNow();
    }
  }

  // The datagram already queued, without waiting; nullopt if none is.
  std::optional<std::string> ReceiveNow() {
    char buffer[4096];
    const ssize_t got = recv(fd_, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (got < 0) return std::nullopt;
    return std::string(buffer, got);
  }

 private:
  const int fd_;
  bool bound_ = false;
};

// Sets an environment variable for the scope; child processes started
// meanwhile inherit it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
};

// An abstract socket name no other test process uses.
std::string AbstractName() {
  static int counter = 0;
  return absl::StrCat("@hourglass-sd-notify-test-", getpid(), "-", ++counter);
}

TEST(ServiceNotifierTest, WithoutNotifySocketItIsDisabledAndNotifySucceeds) {
  absl::StatusOr<ServiceNotifier> notifier = ServiceNotifier::Create("");
  ASSERT_TRUE(notifier.ok()) << notifier.status();
  EXPECT_FALSE(notifier->enabled());
  EXPECT_TRUE(notifier->Notify("READY=1").ok());
}

TEST(ServiceNotifierTest, SendsEachNotificationAsOneDatagramToAPath) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/notify";
  NotifySocket manager(path);
  ASSERT_TRUE(manager.bound()) << strerror(errno);

  absl::StatusOr<ServiceNotifier> notifier = ServiceNotifier::Create(path);
  ASSERT_TRUE(notifier.ok()) << notifier.status();
  EXPECT_TRUE(notifier->enabled());
  ASSERT_TRUE(notifier->Notify("READY=1").ok());
  ASSERT_TRUE(notifier->Notify("STOPPING=1\nSTATUS=shutting down").ok());

  EXPECT_EQ(manager.ReceiveNow(), "READY=1");
  EXPECT_EQ(manager.ReceiveNow(), "STOPPING=1\nSTATUS=shutting down");
  EXPECT_EQ(manager.ReceiveNow(), std::nullopt);
}

TEST(ServiceNotifierTest, AnAtSignNamesTheAbstractNamespace) {
  const std::string name = AbstractName();
  NotifySocket manager(name);
  ASSERT_TRUE(manager.bound()) << strerror(errno);

  absl::StatusOr<ServiceNotifier> notifier = ServiceNotifier::Create(name);
  ASSERT_TRUE(notifier.ok()) << notifier.status();
  ASSERT_TRUE(notifier->Notify("READY=1\nSTATUS=serving").ok());

  EXPECT_EQ(manager.ReceiveNow(), "READY=1\nSTATUS=serving");
  EXPECT_EQ(manager.ReceiveNow(), std::nullopt);
}

TEST(ServiceNotifierTest, FromEnvironmentReadsNotifySocket) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/notify";
  NotifySocket manager(path);
  ASSERT_TRUE(manager.bound()) << strerror(errno);
  {
    ScopedEnv env("NOTIFY_SOCKET", path);
    absl::StatusOr<ServiceNotifier> notifier =
        ServiceNotifier::FromEnvironment();
    ASSERT_TRUE(notifier.ok()) << notifier.status();
    ASSERT_TRUE(notifier->Notify("READY=1").ok());
    EXPECT_EQ(manager.ReceiveNow(), "READY=1");
  }
  absl::StatusOr<ServiceNotifier> unset = ServiceNotifier::FromEnvironment();
  ASSERT_TRUE(unset.ok()) << unset.status();
  EXPECT_FALSE(unset->enabled());
}

TEST(ServiceNotifierTest, PathsUpTo107BytesFitAndLongerOnesAreRefused) {
  testing::TempDir dir;
  std::string longest = dir.path() + "/";
  longest.append(107 - longest.size(), 'n');
  ASSERT_EQ(longest.size(), 107u);
  NotifySocket manager(longest);
  ASSERT_TRUE(manager.bound()) << strerror(errno);
  absl::StatusOr<ServiceNotifier> notifier = ServiceNotifier::Create(longest);
  ASSERT_TRUE(notifier.ok()) << notifier.status();
  ASSERT_TRUE(notifier->Notify("READY=1").ok());
  EXPECT_EQ(manager.ReceiveNow(), "READY=1");

  const std::string too_long = longest + "n";
  absl::StatusOr<ServiceNotifier> refused = ServiceNotifier::Create(too_long);
  EXPECT_EQ(refused.status(),
            absl::InvalidArgumentError(absl::StrCat(
                "NOTIFY_SOCKET=\"", too_long, "\" is longer than 107 bytes")));
}

TEST(ServiceNotifierTest, AbstractNamesUpTo108BytesFitAndLongerOnesAreRefused) {
  std::string longest = AbstractName() + "-";
  longest.append(108 - longest.size(), 'n');
  NotifySocket manager(longest);
  ASSERT_TRUE(manager.bound()) << strerror(errno);
  absl::StatusOr<ServiceNotifier> notifier = ServiceNotifier::Create(longest);
  ASSERT_TRUE(notifier.ok()) << notifier.status();
  ASSERT_TRUE(notifier->Notify("READY=1").ok());
  EXPECT_EQ(manager.ReceiveNow(), "READY=1");

  const std::string too_long = longest + "n";
  EXPECT_EQ(ServiceNotifier::Create(too_long).status(),
            absl::InvalidArgumentError(absl::StrCat(
                "NOTIFY_SOCKET=\"", too_long, "\" is longer than 108 bytes")));
}

TEST(ServiceNotifierTest, RefusesRelativePathsAndABareAtSign) {
  EXPECT_EQ(ServiceNotifier::Create("run/notify").status(),
            absl::InvalidArgumentError(
                "NOTIFY_SOCKET=\"run/notify\" is neither an absolute path nor "
                "'@' and an abstract socket name"));
  EXPECT_EQ(ServiceNotifier::Create("@").status(),
            absl::InvalidArgumentError(
                "NOTIFY_SOCKET=\"@\" names no abstract socket"));
}

TEST(ServiceNotifierTest, NotifyFailsWithTheErrnoWhenNoSocketListens) {
  testing::TempDir dir;
  const std::string missing = dir.path() + "/missing";
  absl::StatusOr<ServiceNotifier> notifier = ServiceNotifier::Create(missing);
  ASSERT_TRUE(notifier.ok()) << notifier.status();
  const absl::Status no_file = notifier->Notify("READY=1");
  EXPECT_EQ(no_file.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(no_file.message(),
              HasSubstr(absl::StrCat("cannot notify NOTIFY_SOCKET=", missing)));

  // The socket's file outlives the socket: nobody receives there.
  const std::string closed = dir.path() + "/closed";
  { NotifySocket gone(closed); }
  absl::StatusOr<ServiceNotifier> to_closed = ServiceNotifier::Create(closed);
  ASSERT_TRUE(to_closed.ok()) << to_closed.status();
  EXPECT_EQ(to_closed->Notify("READY=1").code(),
            absl::StatusCode::kUnavailable);
}

// hourglassd as systemd's Type=notify runs it: READY=1 once it serves,
// before it logs that it listens (which tools wait for), and STOPPING=1 on
// SIGTERM, before it exits 0.
TEST(HourglassdNotifyTest, SaysReadyOnceServingAndStoppingOnSigterm) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/notify";
  NotifySocket manager(path);
  ASSERT_TRUE(manager.bound()) << strerror(errno);
  ScopedEnv env("NOTIFY_SOCKET", path);

  absl::StatusOr<std::unique_ptr<testing::Daemon>> daemon =
      testing::Daemon::Start(HOURGLASSD_PATH, dir.path() + "/data",
                             {"--metrics_listen=127.0.0.1:0"});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  // Sent before the "listening on" line that Start waited for.
  EXPECT_EQ(manager.ReceiveNow(),
            absl::StrCat("READY=1\nSTATUS=serving on 127.0.0.1:0 (port ",
                         (*daemon)->port(), ")"));
  EXPECT_EQ(manager.ReceiveNow(), std::nullopt);

  grpc::health::v1::HealthCheckResponse health;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kTimeout));
  ASSERT_TRUE(grpc::health::v1::Health::NewStub((*daemon)->Channel())
                  ->Check(&context, {}, &health)
                  .ok());
  EXPECT_EQ(health.status(), grpc::health::v1::HealthCheckResponse::SERVING);

  (*daemon)->process().Signal(SIGTERM);
  EXPECT_EQ(manager.Receive(kTimeout),
            "STOPPING=1\nSTATUS=shutting down on SIGTERM");
  EXPECT_EQ((*daemon)->process().Wait(kTimeout), 0);
  EXPECT_EQ(manager.ReceiveNow(), std::nullopt);
}

TEST(HourglassdNotifyTest, AMalformedNotifySocketStopsItWithOneLine) {
  testing::TempDir dir;
  ScopedEnv env("NOTIFY_SOCKET", "run/notify");
  const testing::RunResult result = testing::Run(
      {HOURGLASSD_PATH, "--listen=127.0.0.1:0", "--metrics_listen=127.0.0.1:0",
       "--data_dir=" + dir.path() + "/data"},
      kTimeout);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.output,
              HasSubstr("hourglassd: NOTIFY_SOCKET=\"run/notify\" is neither "
                        "an absolute path nor '@' and an abstract socket "
                        "name\n"));
}

}  // namespace
}  // namespace hourglass::hourglassd
