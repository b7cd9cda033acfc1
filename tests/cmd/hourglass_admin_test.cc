// Runs the real hourglass CLI's Admin subcommands (reschedule, stats, topics,
// groups, messages, show, dlq, purge) against a real hourglassd and checks
// what an operator sees: exact tables and JSON, the next-page hint of
// messages and dlq followed as printed, one-line errors and exit codes.
// (tests/cmd/hourglass_test.cc checks the old names ls, groups list and dlq
// list.)
//
// State is set up with the CLI where that is simple and with the gRPC API
// where a test must hold something (a consumer with deliveries in flight)
// or wait for the broker (a message coming due). Times the test cannot know
// (publish times, due times of dead letters) are masked after checking that
// they fall within the test's run; times it chose are checked exactly.

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "hourglass/v1/admin.grpc.pb.h"
#include "tests/testing/broker_client.h"
#include "tests/testing/daemon.h"
#include "tests/testing/eventually.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"

namespace hourglass {
namespace {

namespace v1 = hourglass::v1;

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;
using ::testing::StartsWith;

constexpr absl::Duration kTimeout = absl::Seconds(30);

// A due time far ahead (2030-01-01, within the default --max_delay), so
// that messages stay scheduled and print exactly.
constexpr char kLater[] = "2030-01-01T00:00:00Z";

// What replaces a masked time: as wide as a time in a table, so that
// columns stay aligned.
constexpr char kSomeTime[] = "YYYY-MM-DDTHH:MM:SS.mmmZ";

// What a finished command printed, apart.
struct Outcome {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::ostream& operator<<(std::ostream& os, const Outcome& outcome) {
  return os << "exit " << outcome.exit_code << "\nstdout:\n"
            << outcome.out << "stderr:\n"
            << outcome.err;
}

// Runs argv (argv[0] a path) with stdin on /dev/null, so that no command
// ever sees a terminal, and collects stdout and stderr apart. Kills it after
// kTimeout.
Outcome RunSplit(const std::vector<std::string>& argv) {
  Outcome outcome;
  int out[2];
  int err[2];
  if (pipe2(out, O_CLOEXEC) != 0) return outcome;
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    return outcome;
  }
  std::vector<char*> args;
  for (const std::string& arg : argv) {
    args.push_back(const_cast<char*>(arg.c_str()));
  }
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    const int null = open("/dev/null", O_RDONLY);
    dup2(null, STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    dup2(err[1], STDERR_FILENO);
    execv(args[0], args.data());
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  if (pid < 0) {
    close(out[0]);
    close(err[0]);
    return outcome;
  }
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  std::string* sinks[2] = {&outcome.out, &outcome.err};
  int open_fds = 2;
  const absl::Time deadline = absl::Now() + kTimeout;
  while (open_fds > 0) {
    const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left <= 0) break;
    const int ready = poll(fds, 2, static_cast<int>(left));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buffer[4096];
      const ssize_t n = read(fds[i].fd, buffer, sizeof(buffer));
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<size_t>(n));
        continue;
      }
      close(fds[i].fd);
      fds[i].fd = -1;  // poll skips it from now on.
      --open_fds;
    }
  }
  if (open_fds > 0) kill(pid, SIGKILL);  // Still writing: it did not end.
  for (pollfd& p : fds) {
    if (p.fd >= 0) close(p.fd);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  outcome.exit_code =
      WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return outcome;
}

// A child whose stdin, stdout and stderr are a pseudo-terminal, as an
// operator's shell would start it. Echo and output processing are off, so
// that the test reads exactly what the child wrote and nothing of what it
// typed. Not thread-safe.
class TerminalProcess {
 public:
  static absl::StatusOr<std::unique_ptr<TerminalProcess>> Start(
      const std::vector<std::string>& argv) {
    std::vector<char*> args;
    for (const std::string& arg : argv) {
      args.push_back(const_cast<char*>(arg.c_str()));
    }
    args.push_back(nullptr);
    int master = -1;
    const pid_t pid = forkpty(&master, nullptr, nullptr, nullptr);
    if (pid < 0) {
      return absl::InternalError(absl::StrCat("forkpty: errno ", errno));
    }
    if (pid == 0) {
      // Child: only async-signal-safe calls until exec.
      termios mode;
      if (tcgetattr(STDIN_FILENO, &mode) == 0) {
        mode.c_lflag &= ~static_cast<tcflag_t>(ECHO);
        mode.c_oflag &= ~static_cast<tcflag_t>(OPOST);
        tcsetattr(STDIN_FILENO, TCSANOW, &mode);
      }
      execv(args[0], args.data());
      _exit(127);
    }
    return std::unique_ptr<TerminalProcess>(new TerminalProcess(pid, master));
  }

  ~TerminalProcess() {
    if (!reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (master_ >= 0) close(master_);
  }

  // Reads until the output contains `text`; false after kTimeout or when
  // the child closed the terminal first.
  bool WaitForOutput(absl::string_view text) {
    const absl::Time deadline = absl::Now() + kTimeout;
    while (!absl::StrContains(output_, text)) {
      if (!ReadSome(deadline)) return absl::StrContains(output_, text);
    }
    return true;
  }

  // Types `text` on the terminal.
  bool Type(absl::string_view text) {
    return write(master_, text.data(), text.size()) ==
           static_cast<ssize_t>(text.size());
  }

  // Reads the rest of the output and reaps the child: its exit code, or
  // 128 + the signal that ended it (SIGKILL after kTimeout).
  int Wait() {
    const absl::Time deadline = absl::Now() + kTimeout;
    while (ReadSome(deadline)) {
    }
    if (master_ >= 0) kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    reaped_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  const std::string& output() const { return output_; }

 private:
  TerminalProcess(pid_t pid, int master) : pid_(pid), master_(master) {}

  // Reads what is there until `deadline`; false at the end of the output
  // (Linux reports EIO once the child's side is closed) or the deadline.
  bool ReadSome(absl::Time deadline) {
    if (master_ < 0) return false;
    const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left <= 0) return false;
    pollfd p{master_, POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(left));
    if (ready < 0 && errno == EINTR) return true;
    if (ready <= 0) return false;
    char buffer[4096];
    const ssize_t n = read(master_, buffer, sizeof(buffer));
    if (n <= 0) {
      close(master_);
      master_ = -1;
      return false;
    }
    output_.append(buffer, static_cast<size_t>(n));
    return true;
  }

  const pid_t pid_;
  int master_;
  bool reaped_ = false;
  std::string output_;
};

// The lines of `text`, without the final newline.
std::vector<std::string> Lines(absl::string_view text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

// `text` with every time in [from, to] written as the CLI writes times
// (RFC 3339 in UTC, with or without a fraction: "2030-01-01T00:00:00.000Z"
// in tables, "2030-01-01T00:00:00Z" in JSON) replaced by kSomeTime. Times
// outside the range stay, so that an exact comparison still catches them.
std::string MaskTimes(absl::string_view text, absl::Time from, absl::Time to) {
  constexpr absl::string_view kShape = "dddd-dd-ddTdd:dd:dd";
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    bool shaped = i + kShape.size() < text.size();
    for (size_t k = 0; shaped && k < kShape.size(); ++k) {
      const char c = text[i + k];
      shaped = kShape[k] == 'd' ? absl::ascii_isdigit(c) : c == kShape[k];
    }
    size_t end = i + kShape.size();
    if (shaped && text[end] == '.') {
      do {
        ++end;
      } while (end < text.size() && absl::ascii_isdigit(text[end]));
    }
    absl::Time time;
    std::string error;
    if (shaped && end < text.size() && text[end] == 'Z' &&
        absl::ParseTime(absl::RFC3339_full,
                        std::string(text.substr(i, end + 1 - i)), &time,
                        &error) &&
        time >= from && time <= to) {
      out += kSomeTime;
      i = end + 1;
      continue;
    }
    out += text[i];
    ++i;
  }
  return out;
}

// Runs the command of a next-page hint ("next page: hourglass ...\n", all
// of stderr) through the shell, as an operator pastes it, with the hourglass
// under test for the first word.
Outcome RunHint(absl::string_view hint) {
  constexpr absl::string_view kPrefix = "next page: hourglass ";
  if (!absl::StartsWith(hint, kPrefix) || !absl::EndsWith(hint, "\n") ||
      Lines(hint).size() != 1) {
    return {-1, "", absl::StrCat("not a next-page hint: ", hint)};
  }
  hint.remove_prefix(kPrefix.size());
  hint.remove_suffix(1);
  return RunSplit(
      {"/bin/sh", "-c", absl::StrCat("exec '", HOURGLASS_PATH, "' ", hint)});
}

// The page token in a next-page hint.
std::string PageToken(absl::string_view hint) {
  const size_t at = hint.find("--page-token=");
  if (at == absl::string_view::npos) return "";
  return std::string(absl::StripAsciiWhitespace(
      hint.substr(at + absl::string_view("--page-token=").size())));
}

class HourglassAdminCliTest : public ::testing::Test {
 protected:
  // Starts hourglassd with `flags` on top of the test's own.
  void StartBroker(std::vector<std::string> flags = {}) {
    started_ = absl::Now();
    flags.push_back("--shutdown_grace=500ms");
    auto daemon = testing::Daemon::Start(HOURGLASSD_PATH, dir_.path() + "/data",
                                         std::move(flags));
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = *std::move(daemon);
    channel_ = daemon_->Channel();
    client_ = std::make_unique<testing::BrokerClient>(channel_);
    admin_ = v1::Admin::NewStub(channel_);
  }

  // On failure, shows what hourglassd logged.
  void TearDown() override {
    if (daemon_ == nullptr || !HasFailure()) return;
    const int code = daemon_->Stop(absl::Seconds(5));
    ADD_FAILURE() << "hourglassd exited " << code << ", having printed:\n"
                  << daemon_->process().output();
  }

  std::string Addr() const { return "--addr=" + daemon_->address(); }

  // Runs `hourglass --addr=BROKER args...`.
  Outcome Cli(std::vector<std::string> args) const {
    args.insert(args.begin(), {HOURGLASS_PATH, Addr()});
    return RunSplit(args);
  }

  // Starts `hourglass --addr=BROKER args...` (stdout and stderr together),
  // for a subscribe that runs while the test goes on.
  std::unique_ptr<testing::Subprocess> StartCli(
      std::vector<std::string> args) const {
    args.insert(args.begin(), {HOURGLASS_PATH, Addr()});
    auto process = testing::Subprocess::Start(args);
    EXPECT_TRUE(process.ok()) << process.status();
    return process.ok() ? *std::move(process) : nullptr;
  }

  // Runs the CLI and expects it to succeed quietly on stderr; returns its
  // stdout.
  std::string CliOk(std::vector<std::string> args) const {
    const Outcome outcome = Cli(args);
    EXPECT_EQ(outcome.exit_code, 0) << absl::StrJoin(args, " ") << "\n"
                                    << outcome;
    EXPECT_EQ(outcome.err, "") << absl::StrJoin(args, " ");
    return outcome.out;
  }

  // Publishes with the CLI (`hourglass publish args...`) and expects it to
  // succeed; --count adds a summary line on stderr.
  void Publish(std::vector<std::string> args) const {
    args.insert(args.begin(), "publish");
    const Outcome outcome = Cli(args);
    EXPECT_EQ(outcome.exit_code, 0) << absl::StrJoin(args, " ") << "\n"
                                    << outcome;
    EXPECT_THAT(outcome.err, ::testing::AnyOf("", StartsWith("published ")));
  }

  // `text` with the times of the test's run masked (publish times, due
  // times of messages published due now).
  std::string Masked(absl::string_view text) const {
    return MaskTimes(text, absl::FromUnixMillis(absl::ToUnixMillis(started_)),
                     absl::Now());
  }

  // The first page (up to 1000) of `topic`'s messages in `state`, as the
  // Admin service lists them, and the call's status.
  grpc::Status TryList(const std::string& topic, v1::MessageState state,
                       v1::ListMessagesResponse& response) const {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + kTimeout));
    v1::ListMessagesRequest request;
    request.set_topic(topic);
    request.set_state(state);
    request.set_page_size(1000);
    return admin_->ListMessages(&context, request, &response);
  }

  // As TryList; a failed call fails the test and lists nothing.
  v1::ListMessagesResponse List(const std::string& topic,
                                v1::MessageState state) const {
    v1::ListMessagesResponse response;
    const grpc::Status status = TryList(topic, state, response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  // Waits until `topic` lists `n` messages in `state`; false, with the last
  // listing's status and size in a failure, if it does not within kTimeout.
  bool WaitForListed(const std::string& topic, v1::MessageState state,
                     int n) const {
    grpc::Status status;
    v1::ListMessagesResponse response;
    if (testing::Eventually(
            [&] {
              response.Clear();
              status = TryList(topic, state, response);
              return status.ok() && response.messages_size() == n;
            },
            kTimeout)) {
      return true;
    }
    ADD_FAILURE() << "waited for " << n << " messages of " << topic
                  << " in state " << v1::MessageState_Name(state) << "; "
                  << (status.ok()
                          ? absl::StrCat("listed ", response.messages_size())
                          : status.error_message());
    return false;
  }

  testing::TempDir dir_;
  absl::Time started_;
  std::unique_ptr<testing::Daemon> daemon_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<testing::BrokerClient> client_;
  std::unique_ptr<v1::Admin::Stub> admin_;
};

// ---- reschedule

TEST_F(HourglassAdminCliTest, RescheduleMovesAScheduledMessage) {
  ASSERT_NO_FATAL_FAILURE(StartBroker());
  Publish(
      {"--topic=orders", "--id=r1", "--data=x", absl::StrCat("--at=", kLater)});

  EXPECT_EQ(CliOk({"reschedule", "--topic=orders", "--id=r1",
                   "--at=2031-06-01T12:30:00Z"}),
            "ID  DELIVER_AT\n"
            "r1  2031-06-01T12:30:00.000Z\n");
  EXPECT_EQ(
      CliOk({"messages", "--topic=orders"}),
      "ID  TOPIC   DUE                       STATE      ATTEMPTS  SIZE\n"
      "r1  orders  2031-06-01T12:30:00.000Z  scheduled         0     1\n");

  // A delay counts from the broker's now, to the millisecond.
  const absl::Time before =
      absl::FromUnixMillis(absl::ToUnixMillis(absl::Now()));
  const std::string json = CliOk(
      {"reschedule", "--topic=orders", "--id=r1", "--delay=1h", "--json"});
  const absl::Time after = absl::Now();
  EXPECT_EQ(MaskTimes(json, before + absl::Hours(1), after + absl::Hours(1)),
            absl::StrCat("{\"id\":\"r1\",\"duplicate\":false,\"deliver_at\":\"",
                         kSomeTime, "\"}\n"));
}

TEST_F(HourglassAdminCliTest, RescheduleReportsRefusalsInOneLine) {
  ASSERT_NO_FATAL_FAILURE(StartBroker());
  Publish({"--topic=orders", "--id=r1", "--data=x", "--delay=1h"});
  Publish({"--topic=orders", "--id=due", "--data=x"});
  ASSERT_TRUE(WaitForListed("orders", v1::MESSAGE_STATE_READY, 1));

  Outcome outcome =
      Cli({"reschedule", "--topic=orders", "--id=nope", "--delay=1h"});
  EXPECT_EQ(outcome.exit_code, 1);
  EXPECT_EQ(outcome.out, "");
  EXPECT_EQ(outcome.err,
            "hourglass: NOT_FOUND: no scheduled message with id \"nope\" in "
            "topic \"orders\" (unknown, already due, or cancelled)\n");

  // Due already: no longer scheduled.
  outcome = Cli({"reschedule", "--topic=orders", "--id=due", "--delay=1h"});
  EXPECT_EQ(outcome.exit_code, 1);
  EXPECT_EQ(outcome.err,
            "hourglass: NOT_FOUND: no scheduled message with id \"due\" in "
            "topic \"orders\" (unknown, already due, or cancelled)\n");

  outcome = Cli({"reschedule", "--topic=orders", "--id=r1", "--delay=87601h"});
  EXPECT_EQ(outcome.exit_code, 1);
  EXPECT_EQ(outcome.out, "");
  EXPECT_EQ(outcome.err,
            "hourglass: INVALID_ARGUMENT: delay 87601h is over the limit of "
            "87600h (--max_delay)\n");

  outcome = Cli({"reschedule", "--topic=a b", "--id=r1", "--delay=1h"});
  EXPECT_EQ(outcome.exit_code, 1);
  EXPECT_EQ(outcome.err,
            "hourglass: INVALID_ARGUMENT: topic \"a b\" has a space\n");

  // Bad command lines: exit 2, nothing sent.
  outcome = Cli(
      {"reschedule", "--topic=orders", "--id=r1", "--delay=1h", "--at=now"});
  EXPECT_EQ(outcome.exit_code, 2);
  EXPECT_EQ(outcome.out, "");
  EXPECT_EQ(outcome.err,
            "hourglass: --delay excludes --at (see hourglass reschedule "
            "--help)\n");
  outcome = Cli({"reschedule", "--topic=orders", "--id=r1", "--delay=soon"});
  EXPECT_EQ(outcome.exit_code, 2);
  EXPECT_EQ(outcome.err,
            "hourglass: --delay: \"soon\" is not a duration (use e.g. 500ms, "
            "30s, 15m, 2h, 3d)\n");
  outcome = Cli({"reschedule", "--topic=orders", "--delay=1h"});
  EXPECT_EQ(outcome.exit_code, 2);
  EXPECT_EQ(outcome.err,
            "hourglass: --id is required (see hourglass reschedule --help)\n");

  // Nothing moved.
  const v1::ListMessagesResponse scheduled =
      List("orders", v1::MESSAGE_STATE_SCHEDULED);
  ASSERT_EQ(scheduled.messages_size(), 1);
  EXPECT_EQ(scheduled.messages(0).id(), "r1");
}

// ---- stats and topics

// Topic alpha: 6 scheduled. beta: group g with 6 ready, nothing delivered.
// gamma: 6 due and waiting for a first group.
class HourglassAdminCliStatsTest : public HourglassAdminCliTest {
 protected:
  void SetUpTopics() {
    Publish({"--topic=alpha", "--id=a", "--count=6", "--data=x",
             absl::StrCat("--at=", kLater)});
    CliOk({"groups", "create", "--topic=beta", "--group=g"});
    Publish({"--topic=beta", "--id=b", "--count=6", "--data=x"});
    Publish({"--topic=gamma", "--id=c", "--count=6", "--data=x"});
    ASSERT_TRUE(WaitForListed("beta", v1::MESSAGE_STATE_READY, 6));
    ASSERT_TRUE(WaitForListed("gamma", v1::MESSAGE_STATE_READY, 6));
  }
};

// The first line of `hourglass stats`: when the broker started, its
// version, data format and store.
constexpr char kStatsHeader[] =
    "broker started YYYY-MM-DDTHH:MM:SS.mmmZ \\(up (0|[0-9]+s)\\), "
    "hourglassd 0\\.1\\.0, data format 4, store [0-9a-f]{32}";

TEST_F(HourglassAdminCliStatsTest, StatsCountEveryStateExactly) {
  ASSERT_NO_FATAL_FAILURE(StartBroker());
  std::vector<std::string> lines = Lines(Masked(CliOk({"stats"})));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_THAT(lines[0], MatchesRegex(kStatsHeader));
  EXPECT_EQ(lines[1], "");
  EXPECT_EQ(lines[2], "no topics");

  ASSERT_NO_FATAL_FAILURE(SetUpTopics());
  const std::string table = Masked(CliOk({"stats"}));
  lines = Lines(table);
  ASSERT_GE(lines.size(), 2u) << table;
  EXPECT_THAT(lines[0], MatchesRegex(kStatsHeader));
  // Six publishes in the last minute are 0.1 a second.
  EXPECT_EQ(table.substr(table.find('\n') + 1),
            "\n"
            "TOPIC  SCHEDULED  READY  IN_FLIGHT  DEAD  PUBLISH/S  DELIVER/S  "
            "LATE_P50  LATE_P90  LATE_P99  LATE_MAX\n"
            "alpha          6      0          0     0        0.1        0.0  "
            "       0         0         0         0\n"
            "beta           0      6          0     0        0.1        0.0  "
            "       0         0         0         0\n"
            "gamma          0      6          0     0        0.1        0.0  "
            "       0         0         0         0\n"
            "\n"
            "TOPIC  GROUP  READY  IN_FLIGHT  CONSUMERS  ACK/S\n"
            "beta   g          6          0          0    0.0\n");

  // The store id, which differs run to run, masked too.
  std::string json = Masked(CliOk({"stats", "--topic=beta", "--json"}));
  const size_t id = json.find("\"store_id\":\"");
  ASSERT_NE(id, std::string::npos) << json;
  json.replace(id + 12, 32, "<id>");
  EXPECT_EQ(json,
            "{\"topics\":[{\"topic\":\"beta\",\"scheduled\":\"0\","
            "\"ready\":\"6\",\"in_flight\":\"0\",\"dead_lettered\":\"0\","
            "\"publish_rate\":0.1,\"delivery_rate\":0,\"lateness\":{"
            "\"p50\":\"0s\",\"p90\":\"0s\",\"p99\":\"0s\",\"max\":\"0s\"},"
            "\"groups\":[{\"group\":\"g\",\"ready\":\"6\",\"in_flight\":\"0\","
            "\"consumers\":0,\"ack_rate\":0}]}],"
            "\"version\":\"0.1.0\",\"format_version\":4,\"store_id\":\"<id>\","
            "\"serving\":true,\"not_serving_reason\":\"\","
            "\"started_at\":\"YYYY-MM-DDTHH:MM:SS.mmmZ\"}\n");

  // A consumer takes one: in flight, delivered, late by some amount.
  std::unique_ptr<testing::Subscription> consumer =
      client_->Subscribe("beta", "g", 1, absl::Hours(1));
  ASSERT_EQ(consumer->Take(1, kTimeout).size(), 1u);
  const std::string one = Masked(CliOk({"stats", "--topic=beta"}));
  lines = Lines(one);
  ASSERT_EQ(lines.size(), 7u) << one;
  EXPECT_THAT(lines[3],
              MatchesRegex("beta +0 +5 +1 +0 +0\\.1 +0\\.0 +[0-9.]+[mu]?s "
                           "+[0-9.]+[mu]?s +[0-9.]+[mu]?s +[0-9.]+[mu]?s"));
  EXPECT_EQ(lines[5], "TOPIC  GROUP  READY  IN_FLIGHT  CONSUMERS  ACK/S");
  EXPECT_EQ(lines[6], "beta   g          5          1          1    0.0");
}

TEST_F(HourglassAdminCliStatsTest, StatsReportsRefusalsInOneLine) {
  ASSERT_NO_FATAL_FAILURE(StartBroker());
  Outcome outcome = Cli({"stats", "--topic=nope"});
  EXPECT_EQ(outcome.exit_code, 1);
  EXPECT_EQ(outcome.out, "");
  EXPECT_EQ(outcome.err,
            "hourglass: NOT_FOUND: no topic \"nope\" (no pending messages and "
            "no groups)\n");
  outcome = Cli({"stats", "--topic=a b"});
  EXPECT_EQ(outcome.exit_code, 1);
  EXPECT_EQ(outcome.err,
            "hourglass: INVALID_ARGUMENT: topic \"a b\" has a space\n");
  outcome = Cli({"stats", "--topic"});
  EXPECT_EQ(outcome.exit_code, 2);
  EXPECT_EQ(outcome.out, "");
  EXPECT_THAT(outcome.err, StartsWith("hourglass: "));
  EXPECT_THAT(outcome.err, HasSubstr("(see hourglass stats --help)\n"));
  EXPECT_EQ(Lines(outcome.err).size(), 1u) << outcome.err;
}

TEST_F(HourglassAdminCliStatsTest, TopicsListsEveryTopicInNameOrder) {
  ASSERT_NO_FATAL_FAILURE(StartBroker());
  EXPECT_EQ(CliOk({"topics"}), "no topics\n");
  EXPECT_EQ(CliOk({"topics", "--json"}), "{\"topics\":[]}\n");

  ASSERT_NO_FATAL_FAILURE(SetUpTopics());
  EXPECT_EQ(CliOk({"topics"}),
            "TOPIC  SCHEDULED  READY  IN_FLIGHT  DEAD  GROUPS\n"
            "alpha          6      0          0     0       0\n"
            "beta           0      6          0     0       1\n"
            "gamma          0      6          0     0       0\n");
  EXPECT_EQ(CliOk({"--json", "topics"}),
            "{\"topics\":["
            "{\"name\":\"alpha\",\"scheduled\":\"6\",\"groups\":0,"
            "\"ready\":\"0\",\"in_flight\":\"0\",\"dead_lettered\":\"0\"},"
            "{\"name\":\"beta\",\"scheduled\":\"0\",\"groups\":1,"
            "\"ready\":\"6\",\"in_flight\":\"0\",\"dead_lettered\":\"0\"},"
            "{\"name\":\"gamma\",\"scheduled\":\"0\",\"groups\":0,"
            "\"ready\":\"6\",\"in_flight\":\"0\",\"dead_lettered\":\"0\"}]}\n");

  const Outcome extra = Cli({"topics", "--topic=alpha"});
  EXPECT_EQ(extra.exit_code, 2);
  EXPECT_EQ(extra.out, "");
  EXPECT_THAT(extra.err, StartsWith("hourglass: "));
  EXPECT_EQ(Lines(extra.err).size(), 1u) << extra.err;
}

// ---- groups

TEST_F(HourglassAdminCliTest, GroupsAreCreatedListedAndDeleted) {
  ASSERT_NO_FATAL_FAILURE(StartBroker());
  Outcome outcome = Cli({"groups", "--topic=beta"});
  EXPECT_EQ(outcome.exit_code, 1);
  EXPECT_EQ(outcome.out, "");
  EXPECT_EQ(outcome.err,
            "hourglass: NOT_FOUND: no topic \"beta\" (no pending messages and "
            "no groups)\n");

  EXPECT_EQ(CliOk({"groups", "create", "--topic=beta", "--group=g2"}),
            "created group g2 on beta\n");
  const absl::Time before =
      absl::FromUnixMillis(absl::ToUnixMillis(absl::Now()));
  const std::string created =
      CliOk({"groups", "create", "--topic=beta", "--group=g1", "--json"});
  EXPECT_EQ(
      MaskTimes(created, before, absl::Now()),
      absl::StrCat("{\"topic\":\"beta\",\"name\":\"g1\",\"ready\":\"0\","
                   "\"in_flight\":\"0\",\"consumers\":0,\"created_at\":\"",
                   kSomeTime, "\"}\n"));

  outcome = Cli({"groups", "create", "--topic=beta", "--group=g1"});
  EXPECT_EQ(outcome.exit_code, 1);
  EXPECT_EQ(outcome.out, "");
  EXPECT_EQ(outcome.err,
            "hourglass: ALREADY_EXISTS: group \"g1\" of topic \"beta\" already "
            "exists\n");
  outcome = Cli({"groups", "create", "--topic=beta", "--group=a b"});
  EXPECT_EQ(outcome.exit_code, 1);
  EXPECT_EQ(outcome.err,
            "hourglass: INVALID_ARGUMENT: group \"a b\" has a space\n");
  outcome = Cli({"groups", "create", "--topic=beta"});
  EXPECT_EQ(outcome.exit_code, 2);
  EXPECT_EQ(outcome.err,
            "hourglass: --group is required (see hourglass groups create "
            "--help)\n");

  // Both groups take both messages; a consumer of g1 holds one.
  Publish({"--topic=beta", "--id=m", "--count=2", "--data=x"});
  ASSERT_TRUE(WaitForListed("beta", v1::MESSAGE_STATE_READY, 4));
  std::unique_ptr<testing::Subprocess> consumer =
      StartCli({"subscribe", "--topic=beta", "--group=g1", "--ack=none",
                "--max-in-flight=1", "--ack-timeout=1h"});
  ASSERT_NE(consumer, nullptr);
  ASSERT_TRUE(consumer->WaitForOutput("id=m-1 ", kTimeout))
      << consumer->output();
  EXPECT_EQ(Masked(CliOk({"groups", "--topic=beta"})),
            "GROUP  CREATED                   READY  IN_FLIGHT  CONSUMERS\n"
            "g1     YYYY-MM-DDTHH:MM:SS.mmmZ      1          1          1\n"
            "g2     YYYY-MM-DDTHH:MM:SS.mmmZ      2          0          0\n");
  EXPECT_EQ(Masked(CliOk({"groups", "--topic=beta", "--json"})),
            "{\"groups\":["
            "{\"topic\":\"beta\",\"name\":\"g1\",\"ready\":\"1\","
            "\"in_flight\":\"1\",\"consumers\":1,"
            "\"created_at\":\"YYYY-MM-DDTHH:MM:SS.mmmZ\"},"
            "{\"topic\":\"beta\",\"name\":\"g2\",\"ready\":\"2\","
            "\"in_flight\":\"0\",\"consumers\":0,"
            "\"created_at\":\"YYYY-MM-DDTHH:MM:SS.mmmZ\"}]}\n");

  // Deleting g1 removes its two entries and ends its consumer's stream.
  EXPECT_EQ(CliOk({"groups", "delete", "--topic=beta", "--group=g1"}),
            "deleted group g1 of beta (2 ready and in-flight entries "
            "removed)\n");
  EXPECT_EQ(consumer->Wait(kTimeout), 1) << consumer->output();
  EXPECT_THAT(consumer->output(),
              HasSubstr("\nhourglass: NOT_FOUND: group \"g1\" was deleted\n"));
  EXPECT_EQ(Masked(CliOk({"groups", "--topic=beta"})),
            "GROUP  CREATED                   READY  IN_FLIGHT  CONSUMERS\n"
            "g2     YYYY-MM-DDTHH:MM:SS.mmmZ      2          0          0\n");
  EXPECT_EQ(CliOk({"groups", "delete", "--topic=beta", "--group=g2", "--json"}),
            "{\"removed\":\"2\"}\n");

  outcome = Cli({"groups", "delete", "--topic=beta", "--group=g1"});
  EXPECT_EQ(outcome.exit_code, 1);
  EXPECT_EQ(outcome.out, "");
  EXPECT_EQ(outcome.err,
            "hourglass: NOT_FOUND: no group \"g1\" in topic \"beta\"\n");

  // A topic with messages and no groups.
  Publish({"--topic=solo", "--data=x", "--delay=1h"});
  EXPECT_EQ(CliOk({"groups", "--topic=solo"}), "no groups on solo\n");
  EXPECT_EQ(CliOk({"groups", "--topic=solo", "--json"}), "{\"groups\":[]}\n");
}

// An unknown subcommand of `groups` is named as such, whichever command
// CLI11 leaves it with.
TEST_F(HourglassAdminCliTest, GroupsNamesAnUnknownSubcommand) {
  const Outcome outcome =
      RunSplit({HOURGLASS_PATH, "--addr=127.0.0.1:1", "groups", "rename"});
  EXPECT_EQ(outcome.exit_code, 2);
  EXPECT_EQ(outcome.out, "");
  EXPECT_EQ(outcome.err,
            "hourglass: unknown subcommand \"rename\" (see hourglass groups "
            "--help)\n");
}

// ---- messages

TEST_F(HourglassAdminCliTest, MessagesPagesThroughScheduledMessagesByTheHint) {
  ASSERT_NO_FATAL_FAILURE(StartBroker());
  // Published out of due order; ties keep publish order.
  Publish({"--topic=orders", "--id=late", "--data=later",
           "--at=2030-01-01T02:00:00Z"});
  Publish({"--topic=orders", "--id=p", "--count=5", "--data=xyz",
           absl::StrCat("--at=", kLater)});

  Outcome page = Cli({"messages", "--topic=orders", "--limit=2"});
  EXPECT_EQ(page.exit_code, 0) << page;
  EXPECT_EQ(
      page.out,
      "ID   TOPIC   DUE                       STATE      ATTEMPTS  SIZE\n"
      "p-1  orders  2030-01-01T00:00:00.000Z  scheduled         0     3\n"
      "p-2  orders  2030-01-01T00:00:00.000Z  scheduled         0     3\n");
  const std::string token = PageToken(page.err);
  ASSERT_FALSE(token.empty()) << page.err;
  EXPECT_EQ(page.err, absl::StrCat("next page: hourglass ", Addr(),
                                   " messages --topic=orders --state=scheduled "
                                   "--limit=2 --page-token=",
                                   token, "\n"));

  page = RunHint(page.err);
  EXPECT_EQ(page.exit_code, 0) << page;
  EXPECT_EQ(
      page.out,
      "ID   TOPIC   DUE                       STATE      ATTEMPTS  SIZE\n"
      "p-3  orders  2030-01-01T00:00:00.000Z  scheduled         0     3\n"
      "p-4  orders  2030-01-01T00:00:00.000Z  scheduled         0     3\n");
  page = RunHint(page.err);
  EXPECT_EQ(page.exit_code, 0) << page;
  EXPECT_EQ(
      page.out,
      "ID    TOPIC   DUE                       STATE      ATTEMPTS  SIZE\n"
      "p-5   orders  2030-01-01T00:00:00.000Z  scheduled         0     3\n"
      "late  orders  2030-01-01T02:00:00.000Z  scheduled         0     5\n");
  EXPECT_EQ(page.err, "");  // The last page.

  // A due-time range.
  EXPECT_EQ(
      CliOk({"messages", "--topic=orders", "--from=2030-01-01T01:00:00Z"}),
      "ID    TOPIC   DUE                       STATE      ATTEMPTS  SIZE\n"
      "late  orders  2030-01-01T02:00:00.000Z  scheduled         0     5\n");
  EXPECT_EQ(CliOk({"messages", "--topic=orders", "--from=2030-01-01T01:00:00Z",
                   "--to=2030-01-01T02:00:00Z"}),
            "no scheduled messages in orders\n");

  // --json: the response itself, its token included.
  const Outcome json = Cli({"messages", "--topic=orders", "--limit=1", "--json",
                            "--to=2030-01-01T01:00:00Z"});
  EXPECT_EQ(json.exit_code, 0) << json;
  EXPECT_EQ(json.err, "");
  v1::ListMessagesResponse response;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(json.out, &response).ok())
      << json.out;
  ASSERT_FALSE(response.next_page_token().empty());
  EXPECT_EQ(Masked(json.out),
            "{\"messages\":[{\"id\":\"p-1\",\"topic\":\"orders\","
            "\"state\":\"MESSAGE_STATE_SCHEDULED\",\"payload_size\":3,"
            "\"headers\":{},\"payload_preview\":\"\",\"groups\":[],"
            "\"attempt\":0,\"deliver_at\":\"2030-01-01T00:00:00Z\","
            "\"published_at\":\"YYYY-MM-DDTHH:MM:SS.mmmZ\"}],"
            "\"next_page_token\":\"" +
                response.next_page_token() + "\"}\n");
  // Its token works with the same range only.
  page = Cli({"messages", "--topic=orders", "--limit=1",
              "--to=2030-01-01T01:00:00Z",
              "--page-token=" + response.next_page_token()});
  EXPECT_EQ(page.exit_code, 0) << page;
  EXPECT_EQ(
      page.out,
      "ID   TOPIC   DUE                       STATE      ATTEMPTS  SIZE\n"
      "p-2  orders  2030-01-01T00:00:00.000Z  scheduled         0     3\n");
  EXPECT_THAT(page.err, StartsWith(absl::StrCat(
                            "next page: hourglass ", Addr(),
                            " messages --topic=orders --state=scheduled "
                            "--to=2030-01-01T01:00:00Z --limit=1 "
                            "--page-token=")));
  Outcome bad = Cli({"messages", "--topic=orders", "--limit=1",
                     "--page-token=" + response.next_page_token()});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(bad.out, "");
  EXPECT_EQ(bad.err,
            "hourglass: INVALID_ARGUMENT: page_token belongs to a listing "
            "with other topic, state, group or due range\n");
  bad = Cli({"messages", "--topic=orders", "--page-token=garbage"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(bad.err,
            "hourglass: INVALID_ARGUMENT: page_token is not a token this "
            "broker made\n");

  EXPECT_EQ(CliOk({"messages", "--topic=empty"}),
            "no scheduled messages in empty\n");
}

// Relative times become absolute in the hint, so that the next page lists
// the same range however much later it runs.
TEST_F(HourglassAdminCliTest, MessagesHintRepeatsARelativeRangeExactly) {
  ASSERT_NO_FATAL_FAILURE(StartBroker());
  for (const char* delay : {"10m", "20m", "30m"}) {
    Publish({"--topic=soon", absl::StrCat("--id=in-", delay), "--data=x",
             absl::StrCat("--delay=", delay)});
  }
  const absl::Time before = absl::Now();
  Outcome page =
      Cli({"messages", "--topic=soon", "--from=now", "--to=+25m", "--limit=1"});
  const absl::Time after = absl::Now();
  EXPECT_EQ(page.exit_code, 0) << page;
  ASSERT_EQ(Lines(page.out).size(), 2u) << page.out;
  EXPECT_THAT(Lines(page.out)[1], StartsWith("in-10m  soon  "));
  // --from=<now> --to=<now + 25m>, to the millisecond.
  const std::string masked = MaskTimes(
      MaskTimes(page.err, absl::FromUnixMillis(absl::ToUnixMillis(before)),
                after),
      absl::FromUnixMillis(absl::ToUnixMillis(before)) + absl::Minutes(25),
      after + absl::Minutes(25));
  EXPECT_EQ(masked, absl::StrCat(
                        "next page: hourglass ", Addr(),
                        " messages --topic=soon --state=scheduled --from=",
                        kSomeTime, " --to=", kSomeTime,
                        " --limit=1 --page-token=", PageToken(page.err), "\n"));

  page = RunHint(page.err);
  EXPECT_EQ(page.exit_code, 0) << page;
  ASSERT_EQ(Lines(page.out).size(), 2u) << page.out;
  EXPECT_THAT(Lines(page.out)[1], StartsWith("in-20m  soon  "));
  EXPECT_EQ(page.err, "");  // in-30m is past --to.
}

TEST_F(HourglassAdminCliTest, MessagesRefusesBadFlagsInOneLine) {
  ASSERT_NO_FATAL_FAILURE(StartBroker());
  Outcome outcome = Cli({"messages", "--topic=orders", "--limit=0"});
  EXPECT_EQ(outcome.exit_code, 2);
  EXPECT_EQ(outcome.out, "");
  EXPECT_EQ(outcome.err,
            "hourglass: --limit: Value 0 not in range 1 to 1000 (see "
            "hourglass messages --help)\n");
  outcome = Cli({"messages", "--topic=orders", "--from=yesterday"});
  EXPECT_EQ(outcome.exit_code, 2);
  EXPECT_EQ(outcome.err,
            "hourglass: --from: \"yesterday\" is not a time (use RFC 3339, "
            "e.g. 2026-01-02T15:04:05Z, or now, +30m, -2h)\n");
  // The broker's refusals: exit 1.
  outcome = Cli({"messages", "--topic=orders", "--group=g"});
  EXPECT_EQ(outcome.exit_code, 1);
  EXPECT_EQ(outcome.out, "");
  EXPECT_EQ(outcome.err,
            "hourglass: INVALID_ARGUMENT: group narrows READY and IN_FLIGHT "
            "listings only\n");
  outcome = Cli({"messages", "--topic=a b"});
  EXPECT_EQ(outcome.exit_code, 1);
  EXPECT_EQ(outcome.err,
            "hourglass: INVALID_ARGUMENT: topic \"a b\" has a space\n");
}

// A message is ready or in flight in each group on its own: the listing
// says which group each row is about, and pages group after group.
TEST_F(HourglassAdminCliTest, MessagesListsReadyAndInFlightPerGroup) {
  ASSERT_NO_FATAL_FAILURE(StartBroker());
  CliOk({"groups", "create", "--topic=t", "--group=g1"});
  CliOk({"groups", "create", "--topic=t", "--group=g2"});
  Publish({"--topic=t", "--id=m", "--count=2", "--data=x"});
  ASSERT_TRUE(WaitForListed("t", v1::MESSAGE_STATE_READY, 4));
  std::unique_ptr<testing::Subscription> consumer =
      client_->Subscribe("t", "g1", 1, absl::Hours(1));
  ASSERT_EQ(consumer->Take(1, kTimeout).size(), 1u);
  ASSERT_TRUE(WaitForListed("t", v1::MESSAGE_STATE_READY, 3));

  std::vector<std::string> ready =
      Lines(Masked(CliOk({"messages", "--topic=t", "--state=ready"})));
  EXPECT_THAT(
      ready,
      ElementsAre(
          "ID   TOPIC  GROUP  DUE                       STATE  ATTEMPTS  SIZE",
          "m-2  t      g1     YYYY-MM-DDTHH:MM:SS.mmmZ  ready         0     1",
          "m-1  t      g2     YYYY-MM-DDTHH:MM:SS.mmmZ  ready         0     1",
          "m-2  t      g2     YYYY-MM-DDTHH:MM:SS.mmmZ  ready         0     "
          "1"));
  EXPECT_THAT(
      Lines(Masked(CliOk({"messages", "--topic=t", "--state=in-flight"}))),
      ElementsAre("ID   TOPIC  GROUP  DUE                       STATE      "
                  "ATTEMPTS  SIZE",
                  "m-1  t      g1     YYYY-MM-DDTHH:MM:SS.mmmZ  in-flight  "
                  "       1     1"));
  EXPECT_EQ(CliOk({"messages", "--topic=t", "--state=in-flight", "--group=g2"}),
            "no in-flight messages in t\n");

  // One a page: the hint carries on into the next group.
  Outcome page = Cli({"messages", "--topic=t", "--state=ready", "--limit=1"});
  std::vector<std::string> rows;
  for (int i = 0; i < 4 && page.exit_code == 0; ++i) {
    const std::vector<std::string> lines = Lines(Masked(page.out));
    ASSERT_EQ(lines.size(), 2u) << page;
    rows.push_back(lines[1]);
    if (page.err.empty()) break;
    EXPECT_THAT(page.err,
                StartsWith(absl::StrCat("next page: hourglass ", Addr(),
                                        " messages --topic=t --state=ready "
                                        "--limit=1 --page-token=")));
    page = RunHint(page.err);
  }
  EXPECT_EQ(page.exit_code, 0) << page;
  EXPECT_THAT(rows, ElementsAre(ready[1], ready[2], ready[3]));

  // With --group, the hint keeps it.
  page = Cli(
      {"messages", "--topic=t", "--state=ready", "--group=g2", "--limit=1"});
  EXPECT_EQ(page.exit_code, 0) << page;
  EXPECT_EQ(Lines(Masked(page.out)),
            (std::vector<std::string>{ready[0], ready[2]}));
  EXPECT_EQ(page.err,
            absl::StrCat("next page: hourglass ", Addr(),
                         " messages --topic=t --state=ready --group=g2 "
                         "--limit=1 --page-token=",
                         PageToken(page.err), "\n"));
  page = RunHint(page.err);
  EXPECT_EQ(page.exit_code, 0) << page;
  EXPECT_EQ(Lines(Masked(page.out)),
            (std::vector<std::string>{ready[0], ready[3]}));
  EXPECT_EQ(page.err, "");
}

// ---- show

TEST_F(HourglassAdminCliTest, ShowDescribesAScheduledMessage) {
  ASSERT_NO_FATAL_FAILURE(StartBroker());
  Publish({"--topic=orders", "--id=s1", "--data=hello\nworld",
           "--header=user=7", "--header=kind=a b",
           absl::StrCat("--at=", kLater)});

  EXPECT_EQ(Masked(CliOk({"show", "--topic=orders", "--id=s1"})),
            "id:            s1\n"
            "topic:         orders\n"
            "state:         scheduled\n"
            "deliver_at:    2030-01-01T00:00:00.000Z\n"
            "published_at:  YYYY-MM-DDTHH:MM:SS.mmmZ\n"
            "attempt:       0\n"
            "size:          11 bytes\n"
            "header:        kind=a b\n"
            "header:        user=7\n"
            "payload:       hello\\nworld\n");
  EXPECT_THAT(CliOk({"show", "--topic=orders", "--id=s1", "--preview=3"}),
              HasSubstr("\npayload:       hel... (8 more bytes)\n"));
  // One header: JSON prints a map in no fixed order.
  Publish({"--topic=orders", "--id=s2", "--data=hello", "--header=user=7",
           absl::StrCat("--at=", kLater)});
  EXPECT_EQ(Masked(CliOk({"show", "--topic=orders", "--id=s2", "--json",
                          "--preview=4"})),
            "{\"id\":\"s2\",\"topic\":\"orders\","
            "\"state\":\"MESSAGE_STATE_SCHEDULED\",\"payload_size\":5,"
            "\"headers\":{\"user\":\"7\"},\"payload_preview\":\"aGVsbA==\","
            "\"groups\":[],\"attempt\":0,"
            "\"deliver_at\":\"2030-01-01T00:00:00Z\","
            "\"published_at\":\"YYYY-MM-DDTHH:MM:SS.mmmZ\"}\n");

  // A deadline shows with what happens at it.
  Publish({"--topic=orders", "--id=s3", "--data=x",
           absl::StrCat("--at=", kLater), "--expire_at=2030-01-02T00:00:00Z",
           "--on_expire=dead_letter"});
  EXPECT_THAT(CliOk({"show", "--topic=orders", "--id=s3"}),
              HasSubstr("\nexpire_at:     2030-01-02T00:00:00.000Z (then "
                        "dead-lettered)\n"));
  EXPECT_THAT(CliOk({"show", "--topic=orders", "--id=s3", "--json"}),
              HasSubstr("\"deadline\":{\"on_expire\":\"ON_EXPIRE_DEAD_LETTER\","
                        "\"expire_at\":\"2030-01-02T00:00:00Z\"}"));
  EXPECT_THAT(CliOk({"show", "--topic=orders", "--id=s1"}),
              Not(HasSubstr("expire_at")));

  Outcome outcome = Cli({"show", "--topic=orders", "--id=nope"});
  EXPECT_EQ(outcome.exit_code, 1);
  EXPECT_EQ(outcome.out, "");
  EXPECT_EQ(outcome.err,
            "hourglass: NOT_FOUND: no message with id \"nope\" in topic "
            "\"orders\"\n");
  outcome = Cli({"show", "--topic=orders", "--id=s1", "--preview=2000000"});
  EXPECT_EQ(outcome.exit_code, 1);
  EXPECT_EQ(outcome.err,
            "hourglass: INVALID_ARGUMENT: preview_bytes 2000000 is over the "
            "limit of 1048576\n");
  outcome = Cli({"show", "--topic=orders", "--id=s1", "--preview=lots"});
  EXPECT_EQ(outcome.exit_code, 2);
  EXPECT_EQ(outcome.out, "");
  EXPECT_EQ(outcome.err,
            "hourglass: Could not convert: --preview = lots (see hourglass "
            "show --help)\n");
}

TEST_F(HourglassAdminCliTest, ShowGivesTheStateInEveryGroup) {
  ASSERT_NO_FATAL_FAILURE(StartBroker());
  CliOk({"groups", "create", "--topic=t", "--group=g1"});
  CliOk({"groups", "create", "--topic=t", "--group=g2"});
  Publish({"--topic=t", "--id=m1", "--data=x"});
  ASSERT_TRUE(WaitForListed("t", v1::MESSAGE_STATE_READY, 2));
  const absl::Time before =
      absl::FromUnixMillis(absl::ToUnixMillis(absl::Now()));
  std::unique_ptr<testing::Subscription> consumer =
      client_->Subscribe("t", "g1", 1, absl::Hours(1));
  ASSERT_EQ(consumer->Take(1, kTimeout).size(), 1u);
  const absl::Time after = absl::Now();

  // Ready before in flight: the message's state is its least advanced.
  EXPECT_EQ(MaskTimes(Masked(CliOk({"show", "--topic=t", "--id=m1"})),
                      before + absl::Hours(1), after + absl::Hours(1)),
            "id:            m1\n"
            "topic:         t\n"
            "state:         ready\n"
            "deliver_at:    YYYY-MM-DDTHH:MM:SS.mmmZ\n"
            "published_at:  YYYY-MM-DDTHH:MM:SS.mmmZ\n"
            "attempt:       1\n"
            "size:          1 bytes\n"
            "payload:       x\n"
            "\n"
            "GROUP  STATE      ATTEMPT  REDELIVER_AT\n"
            "g1     in-flight        1  YYYY-MM-DDTHH:MM:SS.mmmZ\n"
            "g2     ready            0  -\n");

  // Due on a topic with no group: it waits for the first.
  Publish({"--topic=solo", "--id=w1", "--data=x"});
  ASSERT_TRUE(WaitForListed("solo", v1::MESSAGE_STATE_READY, 1));
  const std::string waiting =
      Masked(CliOk({"show", "--topic=solo", "--id=w1"}));
  EXPECT_THAT(waiting, HasSubstr("state:         ready\n"));
  EXPECT_THAT(waiting, HasSubstr("\n\nGROUP  STATE  ATTEMPT  REDELIVER_AT\n"
                                 "-      ready        0  -\n"));
}

// ---- dlq

// With --max_attempts=1: p-1 and p-2 of topic pay, delivered once to group
// g and not acked, are dead letters; a consumer of g (`hourglass subscribe
// --count=1`, returned) waits for what comes next.
class HourglassAdminCliDeadLetterTest : public HourglassAdminCliTest {
 protected:
  std::unique_ptr<testing::Subprocess> MakeDeadLetters() {
    StartBroker({"--max_attempts=1"});
    if (HasFatalFailure()) return nullptr;
    Publish({"--topic=pay", "--id=p", "--count=2", "--data=pay"});
    // Delivered once each and not acked; leaving hands them back.
    const Outcome taken = Cli(
        {"subscribe", "--topic=pay", "--group=g", "--ack=none", "--count=2"});
    EXPECT_EQ(taken.exit_code, 0) << taken;
    EXPECT_THAT(taken.out, HasSubstr("id=p-1 topic=pay attempt=1 "));
    EXPECT_THAT(taken.out, HasSubstr("id=p-2 topic=pay attempt=1 "));
    // The next consumer with credit makes them dead letters: they had their
    // one attempt.
    std::unique_ptr<testing::Subprocess> consumer =
        StartCli({"subscribe", "--topic=pay", "--group=g", "--count=1"});
    EXPECT_TRUE(WaitForListed("pay", v1::MESSAGE_STATE_DEAD, 2));
    return consumer;
  }
};

TEST_F(HourglassAdminCliDeadLetterTest, DeadLettersAreListedAndRedriven) {
  std::unique_ptr<testing::Subprocess> consumer = MakeDeadLetters();
  ASSERT_NE(consumer, nullptr);
  ASSERT_FALSE(HasFailure());

  // ATTEMPTS is checked by DeadLettersKeepTheirAttempts.
  const std::string listed = Masked(CliOk({"dlq", "--topic=pay"}));
  EXPECT_THAT(
      Lines(listed),
      ElementsAre(
          "ID   TOPIC    DUE                       STATE  ATTEMPTS  SIZE",
          MatchesRegex("p-1  pay\\.dlq  YYYY-MM-DDTHH:MM:SS\\.mmmZ  dead +"
                       "[0-9]+     3"),
          MatchesRegex("p-2  pay\\.dlq  YYYY-MM-DDTHH:MM:SS\\.mmmZ  dead +"
                       "[0-9]+     3")));
  EXPECT_EQ(Masked(CliOk({"messages", "--topic=pay", "--state=dead"})), listed);

  Outcome page = Cli({"dlq", "--topic=pay", "--limit=1"});
  EXPECT_EQ(page.exit_code, 0) << page;
  ASSERT_EQ(Lines(listed).size(), 3u);
  EXPECT_EQ(Lines(Masked(page.out)),
            (std::vector<std::string>{Lines(listed)[0], Lines(listed)[1]}));
  EXPECT_EQ(page.err, absl::StrCat("next page: hourglass ", Addr(),
                                   " dlq --topic=pay --limit=1 "
                                   "--page-token=",
                                   PageToken(page.err), "\n"));
  page = RunHint(page.err);
  EXPECT_EQ(page.exit_code, 0) << page;
  EXPECT_EQ(Lines(Masked(page.out)),
            (std::vector<std::string>{Lines(listed)[0], Lines(listed)[2]}));
  EXPECT_EQ(page.err, "");

  const std::string shown =
      Masked(CliOk({"show", "--topic=pay.dlq", "--id=p-1"}));
  EXPECT_THAT(shown, StartsWith("id:            p-1\n"
                                "topic:         pay.dlq\n"
                                "state:         dead\n"
                                "deliver_at:    YYYY-MM-DDTHH:MM:SS.mmmZ\n"
                                "published_at:  YYYY-MM-DDTHH:MM:SS.mmmZ\n"));
  EXPECT_THAT(shown, HasSubstr("\nsize:          3 bytes\n"
                               "payload:       pay\n"));
  const std::vector<std::string> stats = Lines(CliOk({"stats", "--topic=pay"}));
  ASSERT_EQ(stats.size(), 7u);
  EXPECT_THAT(stats[3], MatchesRegex("pay +0 +0 +0 +2 .*"));
  EXPECT_EQ(stats[6], "pay    g          0          0          1    0.0");

  // A missing id moves nothing.
  Outcome outcome =
      Cli({"dlq", "redrive", "--topic=pay", "--id=p-2", "--id=nope"});
  EXPECT_EQ(outcome.exit_code, 1);
  EXPECT_EQ(outcome.out, "");
  EXPECT_EQ(outcome.err,
            "hourglass: NOT_FOUND: no dead letter with id \"nope\" of topic "
            "\"pay\" (in \"pay.dlq\")\n");
  EXPECT_EQ(List("pay", v1::MESSAGE_STATE_DEAD).messages_size(), 2);
  outcome = Cli({"dlq", "redrive", "--topic=a b"});
  EXPECT_EQ(outcome.exit_code, 1);
  EXPECT_EQ(outcome.err,
            "hourglass: INVALID_ARGUMENT: topic \"a b\" has a space\n");
  outcome = Cli({"dlq", "redrive"});
  EXPECT_EQ(outcome.exit_code, 2);
  EXPECT_EQ(outcome.err,
            "hourglass: --topic is required (see hourglass dlq redrive "
            "--help)\n");

  // Redriven, p-2 is due at once and goes to the waiting consumer.
  EXPECT_EQ(CliOk({"dlq", "redrive", "--topic=pay", "--id=p-2"}),
            "redrove 1 dead letters from pay.dlq to pay\n");
  EXPECT_EQ(consumer->Wait(kTimeout), 0) << consumer->output();
  EXPECT_THAT(consumer->output(), HasSubstr("\nid=p-2 topic=pay attempt="));
  EXPECT_EQ(Lines(Masked(CliOk({"dlq", "--topic=pay"}))),
            (std::vector<std::string>{Lines(listed)[0], Lines(listed)[1]}));

  EXPECT_EQ(CliOk({"dlq", "redrive", "--topic=pay", "--json"}),
            "{\"redriven\":\"1\"}\n");
  EXPECT_EQ(CliOk({"dlq", "--topic=pay"}), "no dead letters of pay\n");
  EXPECT_EQ(CliOk({"dlq", "--topic=pay", "--json"}),
            "{\"messages\":[],\"next_page_token\":\"\"}\n");
}

// A dead letter keeps the attempts it had: `dlq` and `show` report them.
TEST_F(HourglassAdminCliDeadLetterTest, DeadLettersKeepTheirAttempts) {
  std::unique_ptr<testing::Subprocess> consumer = MakeDeadLetters();
  ASSERT_NE(consumer, nullptr);
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ(Masked(CliOk({"dlq", "--topic=pay"})),
            "ID   TOPIC    DUE                       STATE  ATTEMPTS  SIZE\n"
            "p-1  pay.dlq  YYYY-MM-DDTHH:MM:SS.mmmZ  dead          1     3\n"
            "p-2  pay.dlq  YYYY-MM-DDTHH:MM:SS.mmmZ  dead          1     3\n");
  EXPECT_THAT(CliOk({"show", "--topic=pay.dlq", "--id=p-1"}),
              HasSubstr("\nattempt:       1\n"));
}

// ---- purge

// Topic t: 3 scheduled, 2 ready in group g and 1 in flight there.
class HourglassAdminCliPurgeTest : public HourglassAdminCliTest {
 protected:
  void SetUpTopic() {
    CliOk({"groups", "create", "--topic=t", "--group=g"});
    Publish({"--topic=t", "--id=held", "--data=x"});
    ASSERT_TRUE(WaitForListed("t", v1::MESSAGE_STATE_READY, 1));
    consumer_ = client_->Subscribe("t", "g", 1, absl::Hours(1));
    ASSERT_EQ(consumer_->Take(1, kTimeout).size(), 1u);
    Publish({"--topic=t", "--id=r", "--count=2", "--data=x"});
    Publish({"--topic=t", "--id=s", "--count=3", "--data=x", "--delay=1h"});
    ASSERT_TRUE(WaitForListed("t", v1::MESSAGE_STATE_READY, 2));
  }

  std::unique_ptr<testing::Subscription> consumer_;
};

TEST_F(HourglassAdminCliPurgeTest, PurgeWithYesDeletesWhatItSays) {
  ASSERT_NO_FATAL_FAILURE(StartBroker());
  ASSERT_NO_FATAL_FAILURE(SetUpTopic());
  Publish({"--topic=other", "--data=x", "--delay=1h"});

  EXPECT_EQ(CliOk({"purge", "--topic=t", "--scheduled", "--yes"}),
            "purged 3 scheduled messages of t\n");
  EXPECT_EQ(CliOk({"purge", "--topic=t", "--ready", "-y", "--json"}),
            "{\"purged\":\"2\"}\n");
  // The delivery in flight and the other topic stay.
  EXPECT_EQ(CliOk({"topics"}),
            "TOPIC  SCHEDULED  READY  IN_FLIGHT  DEAD  GROUPS\n"
            "other          1      0          0     0       0\n"
            "t              0      0          1     0       1\n");
  EXPECT_EQ(CliOk({"purge", "--topic=t", "--yes"}),
            "purged 0 scheduled and ready messages of t\n");

  Outcome outcome = Cli({"purge", "--topic=a b", "--yes"});
  EXPECT_EQ(outcome.exit_code, 1);
  EXPECT_EQ(outcome.out, "");
  EXPECT_EQ(outcome.err,
            "hourglass: INVALID_ARGUMENT: topic \"a b\" has a space\n");
  outcome = Cli({"purge", "--topic=other"});  // stdin is /dev/null.
  EXPECT_EQ(outcome.exit_code, 2);
  EXPECT_EQ(outcome.err,
            "hourglass: refusing to purge other without --yes (stdin is not a "
            "terminal to confirm on)\n");
  outcome = Cli({"purge", "--yes"});
  EXPECT_EQ(outcome.exit_code, 2);
  EXPECT_EQ(outcome.err,
            "hourglass: --topic is required (see hourglass purge --help)\n");
  EXPECT_EQ(List("other", v1::MESSAGE_STATE_SCHEDULED).messages_size(), 1);
}

// On a terminal purge asks first; anything but y or yes keeps everything.
TEST_F(HourglassAdminCliPurgeTest, PurgeAsksOnATerminal) {
  ASSERT_NO_FATAL_FAILURE(StartBroker());
  ASSERT_NO_FATAL_FAILURE(SetUpTopic());
  const std::vector<std::string> argv = {HOURGLASS_PATH, Addr(), "purge",
                                         "--topic=t"};
  constexpr char kQuestion[] =
      "Delete every scheduled and ready message of t? [y/N] ";

  auto declined = TerminalProcess::Start(argv);
  ASSERT_TRUE(declined.ok()) << declined.status();
  ASSERT_TRUE((*declined)->WaitForOutput(kQuestion)) << (*declined)->output();
  ASSERT_TRUE((*declined)->Type("n\n"));
  EXPECT_EQ((*declined)->Wait(), 1);
  EXPECT_EQ((*declined)->output(),
            absl::StrCat(kQuestion,
                         "hourglass: purge cancelled; nothing was deleted\n"));
  EXPECT_EQ(List("t", v1::MESSAGE_STATE_SCHEDULED).messages_size(), 3);
  EXPECT_EQ(List("t", v1::MESSAGE_STATE_READY).messages_size(), 2);

  auto scheduled_only = TerminalProcess::Start(
      {HOURGLASS_PATH, Addr(), "purge", "--topic=t", "--scheduled"});
  ASSERT_TRUE(scheduled_only.ok()) << scheduled_only.status();
  ASSERT_TRUE((*scheduled_only)
                  ->WaitForOutput("Delete every scheduled message of t? "
                                  "[y/N] "))
      << (*scheduled_only)->output();
  ASSERT_TRUE((*scheduled_only)->Type(" YES \n"));
  EXPECT_EQ((*scheduled_only)->Wait(), 0);
  EXPECT_EQ((*scheduled_only)->output(),
            "Delete every scheduled message of t? [y/N] "
            "purged 3 scheduled messages of t\n");

  auto confirmed = TerminalProcess::Start(argv);
  ASSERT_TRUE(confirmed.ok()) << confirmed.status();
  ASSERT_TRUE((*confirmed)->WaitForOutput(kQuestion)) << (*confirmed)->output();
  ASSERT_TRUE((*confirmed)->Type("y\n"));
  EXPECT_EQ((*confirmed)->Wait(), 0);
  EXPECT_EQ(
      (*confirmed)->output(),
      absl::StrCat(kQuestion, "purged 2 scheduled and ready messages of t\n"));
  EXPECT_EQ(List("t", v1::MESSAGE_STATE_READY).messages_size(), 0);
  EXPECT_EQ(List("t", v1::MESSAGE_STATE_IN_FLIGHT).messages_size(), 1);
}

// ---- schedule

TEST_F(HourglassAdminCliTest, ScheduleDrawsABarPerBucketScaledToTheLargest) {
  ASSERT_NO_FATAL_FAILURE(StartBroker());
  Publish(
      {"--topic=orders", "--id=a", "--data=x", "--at=2030-01-01T00:00:10Z"});
  Publish(
      {"--topic=orders", "--id=b", "--data=x", "--at=2030-01-01T00:30:00Z"});
  Publish(
      {"--topic=orders", "--id=c", "--data=x", "--at=2030-01-01T01:45:00Z"});
  Publish(
      {"--topic=orders", "--id=d", "--data=x", "--at=2030-01-03T12:00:00Z"});
  EXPECT_EQ(CliOk({"schedule", "--topic=orders", "--from=2030-01-01T00:00:00Z",
                   "--to=2030-01-01T03:00:00Z", "--bucket=1h", "--width=10"}),
            "START              COUNT  SCHEDULED\n"
            "2030-01-01T00:00Z      2  ##########\n"
            "2030-01-01T01:00Z      1  #####\n"
            "2030-01-01T02:00Z      0\n"
            "3 scheduled in 3 buckets of 1h\n");
  // Days print as dates; a bucket's count covers all of it.
  EXPECT_EQ(CliOk({"schedule", "--topic=orders", "--from=2030-01-01T06:00:00Z",
                   "--to=2030-01-03T00:00:01Z", "--bucket=1d", "--width=10"}),
            "START       COUNT  SCHEDULED\n"
            "2030-01-01      3  ##########\n"
            "2030-01-02      0\n"
            "2030-01-03      1  ###\n"
            "4 scheduled in 3 buckets of 1d\n");
  EXPECT_EQ(
      CliOk({"--json", "schedule", "--topic=orders",
             "--from=2030-01-01T00:00:00Z", "--to=2030-01-01T01:00:00Z",
             "--bucket=30m"}),
      "{\"buckets\":[{\"count\":\"1\",\"start\":\"2030-01-01T00:00:00Z\"},"
      "{\"count\":\"1\",\"start\":\"2030-01-01T00:30:00Z\"}],"
      "\"total\":\"2\"}\n");
}

TEST_F(HourglassAdminCliTest, ScheduleReportsBadInputInOneLine) {
  ASSERT_NO_FATAL_FAILURE(StartBroker());
  Outcome outcome = Cli({"schedule", "--topic=orders", "--bucket=90s"});
  EXPECT_EQ(outcome.exit_code, 1);
  EXPECT_EQ(outcome.out, "");
  EXPECT_EQ(outcome.err,
            "hourglass: INVALID_ARGUMENT: bucket 1m30s is not a positive "
            "whole number of minutes\n");
  outcome = Cli({"schedule", "--topic=orders", "--from=+1h", "--to=now"});
  EXPECT_EQ(outcome.exit_code, 1);
  EXPECT_THAT(outcome.err,
              MatchesRegex("hourglass: INVALID_ARGUMENT: to \\S+ is not after "
                           "from \\S+\n"));
  outcome = Cli({"schedule", "--topic=orders", "--to=+365d", "--bucket=1m"});
  EXPECT_EQ(outcome.exit_code, 1);
  EXPECT_THAT(
      outcome.err,
      MatchesRegex("hourglass: INVALID_ARGUMENT: from .* is 5256(00|01) "
                   "buckets; the limit is 10000: choose longer "
                   "buckets or a shorter range\n"));
  // Bad command lines: exit 2, nothing sent.
  outcome = Cli({"schedule", "--topic=orders", "--from=soon"});
  EXPECT_EQ(outcome.exit_code, 2);
  EXPECT_EQ(outcome.err,
            "hourglass: --from: \"soon\" is not a time (use RFC 3339, e.g. "
            "2026-01-02T15:04:05Z, or now, +30m, -2h)\n");
  outcome = Cli({"schedule", "--topic=orders", "--bucket=hourly"});
  EXPECT_EQ(outcome.exit_code, 2);
  EXPECT_EQ(outcome.err,
            "hourglass: --bucket: \"hourly\" is not a duration (use e.g. "
            "500ms, 30s, 15m, 2h, 3d)\n");
  outcome = Cli({"schedule"});
  EXPECT_EQ(outcome.exit_code, 2);
  EXPECT_EQ(outcome.err,
            "hourglass: --topic is required (see hourglass schedule --help)\n");
}

}  // namespace
}  // namespace hourglass
