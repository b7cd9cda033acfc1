// Runs the real hourglass CLI against a real hourglassd and checks what an
// operator sees: exact output, one-line errors and exit codes.
//
// The Admin subcommands (reschedule, stats, topics, groups, messages, show,
// dlq, purge) are tested here for what they check before connecting, and
// the listing ones for their old names (ls, groups list, dlq list), which
// must list what the new ones do; hourglass_admin_test.cc tests the rest.
// Also here: HOURGLASS_ADDR, and the bash completion.

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/daemon.h"
#include "tests/testing/eventually.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"

namespace hourglass {
namespace {

using ::testing::ContainsRegex;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;
using ::testing::StartsWith;

constexpr absl::Duration kTimeout = absl::Seconds(30);

// A due time far ahead (2030-01-01, within the default --max_delay), so
// that receipts print exactly and messages stay scheduled.
constexpr char kLater[] = "2030-01-01T00:00:00Z";

std::vector<std::string> Cli(std::vector<std::string> args) {
  args.insert(args.begin(), HOURGLASS_PATH);
  return args;
}

testing::RunResult RunCli(std::vector<std::string> args) {
  return testing::Run(Cli(std::move(args)), kTimeout);
}

// The lines of `output`, without the final newline.
std::vector<std::string> Lines(const std::string& output) {
  std::vector<std::string> lines = absl::StrSplit(output, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

// What a finished command printed, stdout and stderr apart.
struct SplitResult {
  int exit_code;
  std::string out;
  std::string err;
};

std::ostream& operator<<(std::ostream& os, const SplitResult& result) {
  return os << "exit " << result.exit_code << "\nstdout:\n"
            << result.out << "stderr:\n"
            << result.err;
}

// Runs `env VARIABLES... hourglass ARGS...` (VARIABLES as NAME=VALUE)
// through the shell, which sends stderr to the file `err_file`, so that
// stdout and stderr come apart.
SplitResult RunSplit(const std::string& err_file,
                     const std::vector<std::string>& variables,
                     const std::vector<std::string>& args) {
  std::vector<std::string> argv = {
      "/bin/sh", "-c",     "err=$1; shift; exec \"$@\" 2>\"$err\"",
      "sh",      err_file, "/usr/bin/env"};
  argv.insert(argv.end(), variables.begin(), variables.end());
  argv.push_back(HOURGLASS_PATH);
  argv.insert(argv.end(), args.begin(), args.end());
  const testing::RunResult result = testing::Run(argv, kTimeout);
  std::ifstream in(err_file);
  return {result.exit_code, result.output,
          std::string(std::istreambuf_iterator<char>(in),
                      std::istreambuf_iterator<char>())};
}

// The line an old name of a renamed subcommand prints on stderr.
std::string RenamedNote(const std::string& old_name,
                        const std::string& new_name) {
  return absl::StrCat("hourglass: \"", old_name, "\" is now \"", new_name,
                      "\"; the old name goes in the next release\n");
}

// A loopback port that nothing listens on: bound by the OS, then released.
int UnusedPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t size = sizeof(address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), size) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) != 0) {
    close(fd);
    return 0;
  }
  close(fd);
  return ntohs(address.sin_port);
}

TEST(HourglassCliTest, RefusesABadDurationBeforeConnecting) {
  const testing::RunResult result = RunCli(
      {"--addr=127.0.0.1:1", "publish", "--topic=t", "--data=x", "--delay=5x"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.output,
            "hourglass: --delay: \"5x\" is not a duration (use e.g. 500ms, "
            "30s, 15m, 2h, 3d)\n");
}

TEST(HourglassCliTest, RefusesABadTimeAndHeaderAndTimeout) {
  testing::RunResult result =
      RunCli({"publish", "--topic=t", "--data=x", "--at=tomorrow"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.output,
            "hourglass: --at: \"tomorrow\" is not a time (use RFC 3339, e.g. "
            "2026-01-02T15:04:05Z, or now, +30m, -2h)\n");

  result = RunCli({"publish", "--topic=t", "--data=x", "--header=novalue"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.output,
            "hourglass: --header: \"novalue\" is not KEY=VALUE\n");

  result = RunCli({"--timeout=0", "cancel", "--topic=t", "--id=x"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.output, "hourglass: --timeout: must be more than 0\n");
}

TEST(HourglassCliTest, RefusesABadDeadlineBeforeConnecting) {
  testing::RunResult result = RunCli(
      {"--addr=127.0.0.1:1", "publish", "--topic=t", "--data=x", "--ttl=5x"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.output,
            "hourglass: --ttl: \"5x\" is not a duration (use e.g. 500ms, "
            "30s, 15m, 2h, 3d)\n");
  result = RunCli({"--addr=127.0.0.1:1", "publish", "--topic=t", "--data=x",
                   "--expire_at=tomorrow"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.output,
            "hourglass: --expire_at: \"tomorrow\" is not a time (use RFC "
            "3339, e.g. 2026-01-02T15:04:05Z, or now, +30m, -2h)\n");
  result = RunCli({"--addr=127.0.0.1:1", "publish", "--topic=t", "--data=x",
                   "--ttl=1m", "--on_expire=keep"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.output, HasSubstr("--on_expire"));
}

// Checks the Admin subcommands make before sending anything.
TEST(HourglassCliTest, AdminSubcommandsRefuseBadFlagsBeforeConnecting) {
  testing::RunResult result = RunCli(
      {"--addr=127.0.0.1:1", "messages", "--topic=t", "--state=sleeping"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.output,
            "hourglass: --state: \"sleeping\" is not a state (use scheduled, "
            "ready, in-flight or dead)\n");

  result = RunCli({"--addr=127.0.0.1:1", "reschedule", "--topic=t", "--id=x"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.output,
            "hourglass: give the new due time with --delay or --at\n");

  result = RunCli(
      {"--addr=127.0.0.1:1", "dlq", "redrive", "--topic=t", "--limit=5"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.output,
            "hourglass: --limit: is for listing dead letters, not for "
            "redrive\n");
}

// groups and dlq list with no subcommand; then they need --topic, as
// messages does.
TEST(HourglassCliTest, ListingCommandsRefuseAMissingTopic) {
  for (const char* command : {"groups", "dlq", "messages"}) {
    const testing::RunResult result = RunCli({"--addr=127.0.0.1:1", command});
    EXPECT_EQ(result.exit_code, 2) << command;
    EXPECT_EQ(result.output,
              absl::StrCat("hourglass: --topic is required (see hourglass ",
                           command, " --help)\n"));
  }
  // The old names too, and a command line they refuse says nothing of the
  // rename.
  for (const std::vector<std::string>& command :
       std::vector<std::vector<std::string>>{
           {"ls"}, {"groups", "list"}, {"dlq", "list"}}) {
    std::vector<std::string> args = {"--addr=127.0.0.1:1"};
    args.insert(args.end(), command.begin(), command.end());
    const testing::RunResult result = RunCli(args);
    EXPECT_EQ(result.exit_code, 2);
    EXPECT_EQ(result.output,
              absl::StrCat("hourglass: --topic is required (see hourglass ",
                           absl::StrJoin(command, " "), " --help)\n"));
  }

  const testing::RunResult result =
      RunCli({"--addr=127.0.0.1:1", "dlq", "frob"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.output,
            "hourglass: unknown subcommand \"frob\" (see hourglass dlq "
            "--help)\n");
}

// An old name does what the new one does: here, fail to connect (exit 1),
// after its note.
TEST(HourglassCliTest, OldListingNamesSayTheirNewNameOnStderr) {
  const int port = UnusedPort();
  ASSERT_GT(port, 0);
  const std::string address = absl::StrCat("127.0.0.1:", port);
  testing::TempDir dir;
  for (const auto& [old_name, new_name] :
       std::vector<std::pair<std::string, std::string>>{
           {"ls", "messages"},
           {"groups list", "groups"},
           {"dlq list", "dlq"}}) {
    std::vector<std::string> args = absl::StrSplit(old_name, ' ');
    args.insert(args.begin(), "--addr=" + address);
    args.push_back("--topic=t");
    const SplitResult result = RunSplit(dir.path() + "/err", {}, args);
    EXPECT_EQ(result.exit_code, 1) << result;
    EXPECT_EQ(result.out, "");
    EXPECT_EQ(result.err, absl::StrCat(RenamedNote(old_name, new_name),
                                       "hourglass: cannot reach ", address,
                                       ": connection refused\n"));
  }
}

TEST(HourglassCliTest, PurgeRefusesWithoutYesWhenStdinIsNotATerminal) {
  const testing::RunResult result = testing::Run(
      {"/bin/sh", "-c",
       absl::StrCat("exec '", HOURGLASS_PATH,
                    "' --addr=127.0.0.1:1 purge --topic=orders < /dev/null")},
      kTimeout);
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.output,
            "hourglass: refusing to purge orders without --yes (stdin is not "
            "a terminal to confirm on)\n");
}

TEST(HourglassCliTest, RefusesAnUnknownSubcommand) {
  const testing::RunResult result = RunCli({"frobnicate"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.output,
            "hourglass: unknown subcommand \"frobnicate\" (see hourglass "
            "--help)\n");
}

TEST(HourglassCliTest, RefusesAMissingRequiredFlagNamingTheSubcommand) {
  const testing::RunResult result = RunCli({"cancel", "--id=x"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.output,
            "hourglass: --topic is required (see hourglass cancel --help)\n");
}

TEST(HourglassCliTest, HelpListsEverySubcommandWithExamples) {
  const testing::RunResult result = RunCli({"--help"});
  EXPECT_EQ(result.exit_code, 0);
  for (const char* subcommand :
       {"publish", "subscribe", "cancel", "reschedule", "stats", "topics",
        "groups", "messages", "show", "dlq", "purge", "recurring",
        "completion"}) {
    EXPECT_THAT(result.output,
                ContainsRegex(absl::StrCat("\n  ", subcommand, " +[A-Z]")));
  }
  // Old names work, but are not shown.
  EXPECT_THAT(result.output, Not(ContainsRegex("\n  ls ")));
  EXPECT_THAT(result.output,
              HasSubstr("HOURGLASS_ADDR (one address or\nseveral separated "
                        "by commas, as --addr)"));
  EXPECT_THAT(result.output, HasSubstr("--addr HOST:PORT=127.0.0.1:7070"));
  EXPECT_THAT(result.output, HasSubstr("--timeout DURATION=10s"));
  EXPECT_THAT(result.output, HasSubstr("Examples:\n  hourglass publish"));

  for (const char* subcommand :
       {"publish", "subscribe", "cancel", "reschedule", "stats", "topics",
        "groups", "messages", "show", "dlq", "purge", "recurring",
        "completion"}) {
    const testing::RunResult help = RunCli({subcommand, "--help"});
    EXPECT_EQ(help.exit_code, 0) << subcommand;
    EXPECT_THAT(help.output,
                HasSubstr(absl::StrCat("Usage: hourglass ", subcommand)));
    EXPECT_THAT(help.output, ContainsRegex("Examples?:\n  hourglass "))
        << subcommand;
  }
}

TEST(HourglassCliTest, ReportsAnUnreachableBrokerInOneLine) {
  const int port = UnusedPort();
  ASSERT_GT(port, 0);
  const std::string address = absl::StrCat("127.0.0.1:", port);
  const testing::RunResult result =
      RunCli({"--addr=" + address, "publish", "--topic=t", "--data=x"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.output, absl::StrCat("hourglass: cannot reach ", address,
                                        ": connection refused\n"));
}

// A peer that accepts TCP connections (the kernel does, from the listen
// backlog) but never speaks HTTP/2: the connection is never ready.
TEST(HourglassCliTest, ReportsASilentPeerAfterTheTimeout) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof(address);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), size), 0);
  ASSERT_EQ(listen(fd, 16), 0);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size), 0);
  const std::string peer = absl::StrCat("127.0.0.1:", ntohs(address.sin_port));

  const testing::RunResult result = RunCli(
      {"cancel", "--topic=t", "--id=x", "--addr=" + peer, "--timeout=1s"});
  close(fd);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.output, absl::StrCat("hourglass: cannot reach ", peer,
                                        ": no answer within 1s "
                                        "(--timeout)\n"));
}

// ---- completion

// `hourglass completion bash`, written to `dir`: the script's path, or ""
// after a failure.
std::string CompletionScript(const testing::TempDir& dir) {
  const testing::RunResult result = RunCli({"completion", "bash"});
  EXPECT_EQ(result.exit_code, 0) << result.output;
  if (result.exit_code != 0) return "";
  const std::string path = dir.path() + "/hourglass.bash";
  std::ofstream(path) << result.output;
  return path;
}

// What the completion in `script` offers for `words` (the program first,
// the word being completed last), as bash asks for it: a line per word.
std::string Complete(const std::string& script,
                     const std::vector<std::string>& words) {
  std::vector<std::string> argv = {
      "/bin/bash", "-c",
      "source \"$1\"; shift; COMP_WORDS=(\"$@\"); COMP_CWORD=$(($# - 1)); "
      "_hourglass; for word in \"${COMPREPLY[@]}\"; do echo \"$word\"; done",
      "bash", script};
  argv.insert(argv.end(), words.begin(), words.end());
  const testing::RunResult result = testing::Run(argv, kTimeout);
  EXPECT_EQ(result.exit_code, 0) << result.output;
  return result.output;
}

TEST(HourglassCliTest, CompletionBashIsAValidScript) {
  testing::TempDir dir;
  const std::string script = CompletionScript(dir);
  ASSERT_NE(script, "");
  const testing::RunResult checked =
      testing::Run({"/bin/bash", "-n", script}, kTimeout);
  EXPECT_EQ(checked.exit_code, 0) << checked.output;
  EXPECT_EQ(checked.output, "");
  const testing::RunResult registered =
      testing::Run({"/bin/bash", "-c", "source \"$1\" && complete -p hourglass",
                    "bash", script},
                   kTimeout);
  EXPECT_EQ(registered.exit_code, 0) << registered.output;
  EXPECT_EQ(registered.output, "complete -F _hourglass hourglass\n");

  const testing::RunResult missing = RunCli({"completion"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.output,
            "hourglass: A subcommand is required (see hourglass completion "
            "--help)\n");
}

TEST(HourglassCliTest, CompletionBashCompletesSubcommandsAndOptions) {
  testing::TempDir dir;
  const std::string script = CompletionScript(dir);
  ASSERT_NE(script, "");
  // Every subcommand shown in --help; the old names are not offered.
  EXPECT_EQ(Complete(script, {"hourglass", ""}),
            "publish\nsubscribe\ncancel\nreschedule\nmessages\nshow\ndlq\n"
            "stats\ntopics\ngroups\npurge\nschedule\nsnapshot\ncluster\n"
            "recurring\nhealth\ncompletion\n");
  EXPECT_EQ(Complete(script, {"hourglass", "mes"}), "messages\n");
  EXPECT_EQ(Complete(script, {"hourglass", "l"}), "");
  EXPECT_EQ(Complete(script, {"hourglass", "groups", ""}), "create\ndelete\n");
  EXPECT_EQ(Complete(script, {"hourglass", "completion", ""}), "bash\n");
  // Option values are skipped on the way to the subcommand.
  EXPECT_EQ(Complete(script,
                     {"hourglass", "--addr", "127.0.0.1:7070", "--json", "dl"}),
            "dlq\n");
  EXPECT_EQ(
      Complete(script, {"hourglass", "--timeout", "=", "5s", "cluster", "m"}),
      "move\n");

  // A command's own options; the global ones where none of its own fits.
  EXPECT_EQ(Complete(script, {"hourglass", "publish", "--to"}), "--topic\n");
  EXPECT_EQ(Complete(script, {"hourglass", "publish", "--tok"}), "--token\n");
  EXPECT_EQ(Complete(script, {"hourglass", "--t"}),
            "--timeout\n--tls\n--tls-ca\n--tls-cert\n--tls-key\n"
            "--tls-server-name\n--token\n");
  EXPECT_EQ(Complete(script, {"hourglass", "dlq", "redrive", "--"}),
            "--help\n--topic\n--id\n");
  EXPECT_EQ(Complete(script, {"hourglass", "cluster", "move", "--sh"}),
            "--shard\n");
  EXPECT_EQ(Complete(script, {"hourglass", "messages", "--topic", "t", "--p"}),
            "--page-token\n");

  // A FILE's value is a file name, after "--tls-ca=" or "--file ".
  std::ofstream(dir.path() + "/ca.pem") << "x";
  EXPECT_EQ(Complete(script, {"hourglass", "--tls-ca", "=", dir.path() + "/c"}),
            dir.path() + "/ca.pem\n");
  EXPECT_EQ(
      Complete(script, {"hourglass", "publish", "--file", dir.path() + "/ca"}),
      dir.path() + "/ca.pem\n");
  EXPECT_EQ(Complete(script, {"hourglass", "publish", "--topic", ""}), "");
}

// ---- against a broker

class HourglassCliBrokerTest : public ::testing::Test {
 protected:
  void SetUp() override { StartDaemon({}); }

  // Starts hourglassd with `flags` on top of the test's own.
  void StartDaemon(std::vector<std::string> flags) {
    flags.push_back("--shutdown_grace=500ms");
    auto daemon = testing::Daemon::Start(HOURGLASSD_PATH, dir_.path() + "/data",
                                         std::move(flags));
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = *std::move(daemon);
  }

  std::string Addr() const { return "--addr=" + daemon_->address(); }

  // Runs the CLI with --addr first, stdout and stderr apart.
  SplitResult RunApart(std::vector<std::string> args) {
    args.insert(args.begin(), Addr());
    return RunSplit(dir_.path() + "/stderr", {}, args);
  }

  // Runs the CLI with the environment variables `variables` (NAME=VALUE),
  // stdout and stderr apart.
  SplitResult RunWith(const std::vector<std::string>& variables,
                      const std::vector<std::string>& args) {
    return RunSplit(dir_.path() + "/stderr", variables, args);
  }

  // Runs the CLI with --addr first.
  testing::RunResult Run(std::vector<std::string> args) {
    args.insert(args.begin(), Addr());
    return RunCli(std::move(args));
  }

  // Starts the CLI with --addr first, for a subscribe.
  std::unique_ptr<testing::Subprocess> Start(std::vector<std::string> args) {
    args.insert(args.begin(), Addr());
    auto process = testing::Subprocess::Start(Cli(std::move(args)));
    EXPECT_TRUE(process.ok()) << process.status();
    return process.ok() ? *std::move(process) : nullptr;
  }

  testing::TempDir dir_;
  std::unique_ptr<testing::Daemon> daemon_;
};

TEST_F(HourglassCliBrokerTest, PublishPrintsTheReceipt) {
  const testing::RunResult result =
      Run({"publish", "--topic=orders", "--id=order-42", "--data=hi",
           absl::StrCat("--at=", kLater)});
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(result.output,
            "ID        DELIVER_AT                DUPLICATE\n"
            "order-42  2030-01-01T00:00:00.000Z  no\n");

  const testing::RunResult again =
      Run({"publish", "--topic=orders", "--id=order-42", "--data=other",
           "--delay=5m"});
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(again.output,
            "ID        DELIVER_AT                DUPLICATE\n"
            "order-42  2030-01-01T00:00:00.000Z  yes\n");
}

TEST_F(HourglassCliBrokerTest, JsonWorksBeforeAndAfterTheSubcommand) {
  const std::string at = absl::StrCat("--at=", kLater);
  const testing::RunResult before = RunCli(
      {"--json", Addr(), "publish", "--topic=t", "--id=j1", "--data=x", at});
  EXPECT_EQ(before.exit_code, 0) << before.output;
  EXPECT_EQ(before.output,
            "{\"receipts\":[{\"id\":\"j1\",\"duplicate\":false,"
            "\"deliver_at\":\"2030-01-01T00:00:00Z\"}]}\n");

  const testing::RunResult after = RunCli(
      {"publish", "--topic=t", "--id=j1", "--data=x", at, "--json", Addr()});
  EXPECT_EQ(after.exit_code, 0) << after.output;
  EXPECT_EQ(after.output,
            "{\"receipts\":[{\"id\":\"j1\",\"duplicate\":true,"
            "\"deliver_at\":\"2030-01-01T00:00:00Z\"}]}\n");
}

TEST_F(HourglassCliBrokerTest, RecurringNextPrintsFireTimesInUtcAndTheZone) {
  const testing::RunResult result =
      Run({"recurring", "next", "--cron=30 2 * * *", "--tz=America/New_York",
           "--from=2027-03-13T00:00:00Z", "--count=3"});
  EXPECT_EQ(result.exit_code, 0) << result.output;
  // 02:30 does not exist on 2027-03-14: it fires as the gap ends.
  EXPECT_EQ(result.output,
            "FIRE TIME (UTC)       LOCAL (America/New_York)\n"
            "2027-03-13T07:30:00Z  2027-03-13T02:30:00-05:00\n"
            "2027-03-14T07:00:00Z  2027-03-14T03:00:00-04:00\n"
            "2027-03-15T06:30:00Z  2027-03-15T02:30:00-04:00\n");

  const testing::RunResult json =
      Run({"--json", "recurring", "next", "--every=90s",
           "--start_at=2027-01-01T00:00:00Z", "--end_at=2027-01-01T00:03:00Z",
           "--from=2026-12-31T00:00:00Z"});
  EXPECT_EQ(json.exit_code, 0) << json.output;
  EXPECT_EQ(json.output,
            "{\"time_zone\":\"\",\"fire_times\":["
            "{\"utc\":\"2027-01-01T00:00:00Z\",\"local\":\"2027-01-01T00:00:00Z\"},"
            "{\"utc\":\"2027-01-01T00:01:30Z\",\"local\":\"2027-01-01T00:01:30Z\"}"
            "]}\n");
}

TEST_F(HourglassCliBrokerTest, RecurringNextReportsBadRules) {
  testing::RunResult result =
      Run({"recurring", "next", "--cron=@daily", "--every=1h"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.output,
            "hourglass: give exactly one of --cron and --every\n");
  result = Run({"recurring", "next", "--cron=0 0 * * *", "--tz=Mars/Olympus"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.output,
            "hourglass: INVALID_ARGUMENT: rule: unknown time zone "
            "\"Mars/Olympus\"\n");
  result = Run({"recurring", "next", "--cron=@daily", "--count=0"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.output, "hourglass: --count: 0 is not between 1 and 1000\n");
}

TEST_F(HourglassCliBrokerTest, PublishCountSuffixesIdsAndSummarises) {
  const testing::RunResult result =
      Run({"publish", "--topic=load", "--id=m", "--count=3", "--batch=2",
           "--data=x", absl::StrCat("--at=", kLater)});
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output,
              StartsWith("ID   DELIVER_AT                DUPLICATE\n"
                         "m-1  2030-01-01T00:00:00.000Z  no\n"
                         "m-2  2030-01-01T00:00:00.000Z  no\n"
                         "m-3  2030-01-01T00:00:00.000Z  no\n"
                         "published 3 messages to load in 2 calls in "));
}

TEST_F(HourglassCliBrokerTest, PublishReportsTheBrokersRefusal) {
  const testing::RunResult result = Run({"publish", "--topic=a b", "--data=x"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.output, StartsWith("hourglass: INVALID_ARGUMENT: "));
  EXPECT_THAT(result.output, HasSubstr("\"a b\""));
  EXPECT_EQ(Lines(result.output).size(), 1u) << result.output;
}

TEST_F(HourglassCliBrokerTest, PublishSendsTheDeadlineForTheBrokerToCheck) {
  testing::RunResult result =
      Run({"publish", "--topic=t", "--data=x", "--delay=10s", "--ttl=5s"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.output,
            "hourglass: INVALID_ARGUMENT: message 0: ttl 5s is not longer "
            "than the message's delay 10s: it would expire before it comes "
            "due\n");
  result = Run({"publish", "--topic=t", "--data=x", "--delay=10s", "--ttl=1m",
                "--on_expire=dead_letter"});
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

TEST_F(HourglassCliBrokerTest, CancelThenNotFound) {
  ASSERT_EQ(
      Run({"publish", "--topic=orders", "--id=c1", "--data=x", "--delay=1h"})
          .exit_code,
      0);
  const testing::RunResult cancelled =
      Run({"cancel", "--topic=orders", "--id=c1"});
  EXPECT_EQ(cancelled.exit_code, 0) << cancelled.output;
  EXPECT_EQ(cancelled.output, "cancelled c1 in orders\n");

  const testing::RunResult again = Run({"cancel", "--topic=orders", "--id=c1"});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_THAT(again.output,
              StartsWith("hourglass: NOT_FOUND: no scheduled message with id "
                         "\"c1\" in topic \"orders\""));
  EXPECT_EQ(Lines(again.output).size(), 1u) << again.output;

  ASSERT_EQ(
      Run({"publish", "--topic=orders", "--id=c2", "--data=x", "--delay=1h"})
          .exit_code,
      0);
  const testing::RunResult json =
      Run({"cancel", "--topic=orders", "--id=c2", "--json"});
  EXPECT_EQ(json.exit_code, 0) << json.output;
  EXPECT_EQ(json.output,
            "{\"topic\":\"orders\",\"id\":\"c2\",\"cancelled\":true}\n");
}

TEST_F(HourglassCliBrokerTest, SubscribeReceivesWhatWasPublished) {
  const testing::RunResult published =
      Run({"--json", "publish", "--topic=orders", "--id=m1",
           "--data=hello world", "--header=k=v", "--header=a=b=c"});
  ASSERT_EQ(published.exit_code, 0) << published.output;
  // {"receipts":[{"id":"m1","duplicate":false,"deliver_at":"..."}]}
  const size_t at = published.output.find("\"deliver_at\":\"");
  ASSERT_NE(at, std::string::npos) << published.output;
  std::string deliver_at = published.output.substr(
      at + 14, published.output.find('"', at + 14) - at - 14);
  // The JSON mapping leaves out zero milliseconds; the table never does.
  if (deliver_at.find('.') == std::string::npos) {
    deliver_at.insert(deliver_at.size() - 1, ".000");
  }

  const testing::RunResult received =
      Run({"subscribe", "--topic=orders", "--group=g", "--count=1"});
  EXPECT_EQ(received.exit_code, 0) << received.output;
  const std::vector<std::string> lines = Lines(received.output);
  ASSERT_EQ(lines.size(), 2u) << received.output;
  EXPECT_EQ(lines[0], "subscribed to orders as group g (ack=auto)");
  EXPECT_THAT(lines[1], StartsWith("id=m1 topic=orders attempt=1 deliver_at=" +
                                   deliver_at + " published_at="));
  EXPECT_THAT(
      lines[1],
      ContainsRegex(" published_at=[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z "
                    "header\\.a=\"b=c\" header\\.k=v "
                    "payload=\"hello world\"$"));
}

TEST_F(HourglassCliBrokerTest, SubscribePrintsJsonLines) {
  ASSERT_EQ(Run({"publish", "--topic=t", "--id=j", "--count=2", "--data=hi"})
                .exit_code,
            0);
  const testing::RunResult received =
      Run({"subscribe", "--topic=t", "--group=g", "--count=2", "--json"});
  EXPECT_EQ(received.exit_code, 0) << received.output;
  const std::vector<std::string> lines = Lines(received.output);
  ASSERT_EQ(lines.size(), 3u) << received.output;
  EXPECT_EQ(lines[0], "subscribed to t as group g (ack=auto)");
  for (int i = 1; i <= 2; ++i) {
    EXPECT_THAT(lines[i], StartsWith(absl::StrCat("{\"id\":\"j-", i,
                                                  "\",\"topic\":\"t\","
                                                  "\"payload\":\"aGk=\",")));
    EXPECT_THAT(lines[i], HasSubstr("\"attempt\":1,"));
    EXPECT_THAT(lines[i], HasSubstr("\"headers\":{}"));
    EXPECT_THAT(lines[i], ContainsRegex("\"deliver_at\":\"[0-9T:.-]+Z\""));
  }
}

// With credit 1, the second and third messages arrive only if the CLI acked
// the ones before.
TEST_F(HourglassCliBrokerTest, SubscribeAcksEachDeliveryWithAckAuto) {
  ASSERT_EQ(Run({"publish", "--topic=t", "--id=m", "--count=3", "--data=x"})
                .exit_code,
            0);
  const testing::RunResult received =
      Run({"subscribe", "--topic=t", "--group=g", "--max-in-flight=1",
           "--ack-timeout=1h", "--count=3"});
  EXPECT_EQ(received.exit_code, 0) << received.output;
  std::vector<std::string> ids;
  for (const std::string& line : Lines(received.output)) {
    if (line.rfind("id=", 0) == 0)
      ids.push_back(line.substr(0, line.find(' ')));
  }
  EXPECT_THAT(ids, ElementsAre("id=m-1", "id=m-2", "id=m-3"));
}

// Unacked, the message comes again after the ack timeout with attempt 2.
TEST_F(HourglassCliBrokerTest, SubscribeNeverAcksWithAckNone) {
  ASSERT_EQ(Run({"publish", "--topic=t", "--id=n1", "--data=x"}).exit_code, 0);
  const testing::RunResult received =
      Run({"subscribe", "--topic=t", "--group=g", "--ack=none",
           "--ack-timeout=1s", "--count=2"});
  EXPECT_EQ(received.exit_code, 0) << received.output;
  const std::vector<std::string> lines = Lines(received.output);
  ASSERT_EQ(lines.size(), 3u) << received.output;
  EXPECT_THAT(lines[1], StartsWith("id=n1 topic=t attempt=1 "));
  EXPECT_THAT(lines[2], StartsWith("id=n1 topic=t attempt=2 "));
}

// --ack=manual acks the ids read from stdin: with credit 1, "b" arrives
// only after "a" was acked there. The end of stdin then ends the command.
TEST_F(HourglassCliBrokerTest, SubscribeAcksIdsFromStdinWithAckManual) {
  ASSERT_EQ(Run({"publish", "--topic=t", "--id=a", "--data=1"}).exit_code, 0);
  ASSERT_EQ(Run({"publish", "--topic=t", "--id=b", "--data=2"}).exit_code, 0);
  const std::string fifo = dir_.path() + "/acks";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto process = testing::Subprocess::Start(
      {"/bin/sh", "-c",
       absl::StrCat("exec '", HOURGLASS_PATH, "' ", Addr(),
                    " subscribe --topic=t --group=g --ack=manual "
                    "--max-in-flight=1 --ack-timeout=1h < '",
                    fifo, "'")});
  ASSERT_TRUE(process.ok()) << process.status();
  // Opening blocks until the shell opens the other end.
  const int acks = open(fifo.c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(acks, 0);
  ASSERT_TRUE((*process)->WaitForOutput("id=a topic=t", kTimeout))
      << (*process)->output();
  EXPECT_THAT((*process)->output(), Not(HasSubstr("id=b")));
  ASSERT_EQ(write(acks, "a\n", 2), 2);
  ASSERT_TRUE((*process)->WaitForOutput("id=b topic=t", kTimeout))
      << (*process)->output();
  ASSERT_EQ(write(acks, "b\n", 2), 2);
  close(acks);
  EXPECT_EQ((*process)->Wait(kTimeout), 0) << (*process)->output();
}

TEST_F(HourglassCliBrokerTest, SubscribeEndsCleanlyOnCtrlC) {
  std::unique_ptr<testing::Subprocess> process =
      Start({"subscribe", "--topic=t", "--group=g"});
  ASSERT_NE(process, nullptr);
  ASSERT_TRUE(process->WaitForOutput("subscribed to t as group g (ack=auto)\n",
                                     kTimeout))
      << process->output();
  process->Signal(SIGINT);
  EXPECT_EQ(process->Wait(kTimeout), 0) << process->output();
  EXPECT_EQ(process->output(), "subscribed to t as group g (ack=auto)\n");
}

TEST_F(HourglassCliBrokerTest, SubscribeReportsARefusedOpenInOneLine) {
  const testing::RunResult result =
      Run({"subscribe", "--topic=a b", "--group=g"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.output, StartsWith("hourglass: INVALID_ARGUMENT: "));
  EXPECT_THAT(result.output, HasSubstr("\"a b\""));
  EXPECT_EQ(Lines(result.output).size(), 1u) << result.output;
}

TEST_F(HourglassCliBrokerTest, PublishReadsThePayloadFromAFile) {
  const std::string file = dir_.path() + "/payload";
  std::ofstream(file) << "line one\nline two";
  ASSERT_EQ(Run({"publish", "--topic=t", "--id=f", "--file=" + file}).exit_code,
            0);
  const testing::RunResult received =
      Run({"subscribe", "--topic=t", "--group=g", "--count=1"});
  EXPECT_EQ(received.exit_code, 0) << received.output;
  EXPECT_THAT(received.output, HasSubstr(" payload=\"line one\\nline two\"\n"));

  const testing::RunResult missing =
      Run({"publish", "--topic=t", "--file=" + dir_.path() + "/none"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.output,
            absl::StrCat("hourglass: --file: cannot open \"", dir_.path(),
                         "/none\": no such file or directory\n"));
}

// ---- HOURGLASS_ADDR

TEST_F(HourglassCliBrokerTest, AddrComesFromHourglassAddr) {
  const std::string broker = "HOURGLASS_ADDR=" + daemon_->address();
  const int port = UnusedPort();
  ASSERT_GT(port, 0);
  const std::string nothing = absl::StrCat("127.0.0.1:", port);
  constexpr char kTopics[] =
      "TOPIC   SCHEDULED  READY  IN_FLIGHT  DEAD  GROUPS\n"
      "orders          1      0          0     0       0\n";

  // Without --addr, the variable's address.
  SplitResult result =
      RunWith({broker}, {"publish", "--topic=orders", "--id=e1", "--data=x",
                         absl::StrCat("--at=", kLater)});
  EXPECT_EQ(result.exit_code, 0) << result;
  EXPECT_EQ(result.out,
            "ID  DELIVER_AT                DUPLICATE\n"
            "e1  2030-01-01T00:00:00.000Z  no\n");
  EXPECT_EQ(result.err, "");
  result = RunWith({broker}, {"topics"});
  EXPECT_EQ(result.exit_code, 0) << result;
  EXPECT_EQ(result.out, kTopics);

  // --addr wins, before the subcommand or after it.
  result = RunWith({"HOURGLASS_ADDR=" + nothing}, {Addr(), "topics"});
  EXPECT_EQ(result.exit_code, 0) << result;
  EXPECT_EQ(result.out, kTopics);
  result = RunWith({"HOURGLASS_ADDR=" + nothing}, {"topics", Addr()});
  EXPECT_EQ(result.exit_code, 0) << result;
  EXPECT_EQ(result.out, kTopics);
  result = RunWith({broker}, {"--addr=" + nothing, "topics"});
  EXPECT_EQ(result.exit_code, 1) << result;
  EXPECT_EQ(result.out, "");
  EXPECT_EQ(result.err, absl::StrCat("hourglass: cannot reach ", nothing,
                                     ": connection refused\n"));

  // A list, as --addr takes one: the first address that answers.
  result = RunWith(
      {absl::StrCat("HOURGLASS_ADDR=", nothing, ",", daemon_->address())},
      {"topics"});
  EXPECT_EQ(result.exit_code, 0) << result;
  EXPECT_EQ(result.out, kTopics);
  EXPECT_EQ(result.err, "");
}

// ---- listing: the new names list what the old ones did

// Two scheduled messages of orders, listed by both names, in tables, in JSON
// and a page at a time.
TEST_F(HourglassCliBrokerTest, MessagesListsWhatLsDid) {
  for (const char* id : {"--id=o1", "--id=o2"}) {
    ASSERT_EQ(Run({"publish", "--topic=orders", id, "--data=xyz",
                   absl::StrCat("--at=", kLater)})
                  .exit_code,
              0);
  }
  const SplitResult listed = RunApart({"messages", "--topic=orders"});
  EXPECT_EQ(listed.exit_code, 0) << listed;
  EXPECT_EQ(
      listed.out,
      "ID  TOPIC   DUE                       STATE      ATTEMPTS  SIZE\n"
      "o1  orders  2030-01-01T00:00:00.000Z  scheduled         0     3\n"
      "o2  orders  2030-01-01T00:00:00.000Z  scheduled         0     3\n");
  EXPECT_EQ(listed.err, "");
  SplitResult old = RunApart({"ls", "--topic=orders"});
  EXPECT_EQ(old.exit_code, 0) << old;
  EXPECT_EQ(old.out, listed.out);
  EXPECT_EQ(old.err, RenamedNote("ls", "messages"));

  const SplitResult json = RunApart({"messages", "--topic=orders", "--json"});
  EXPECT_EQ(json.exit_code, 0) << json;
  EXPECT_THAT(json.out, StartsWith("{\"messages\":[{\"id\":\"o1\","));
  old = RunApart({"ls", "--topic=orders", "--json"});
  EXPECT_EQ(old.exit_code, 0) << old;
  EXPECT_EQ(old.out, json.out);
  EXPECT_EQ(old.err, RenamedNote("ls", "messages"));

  // The next page's command names the new name, whichever listed.
  const SplitResult page =
      RunApart({"messages", "--topic=orders", "--limit=1"});
  EXPECT_EQ(page.exit_code, 0) << page;
  EXPECT_EQ(
      page.out,
      "ID  TOPIC   DUE                       STATE      ATTEMPTS  SIZE\n"
      "o1  orders  2030-01-01T00:00:00.000Z  scheduled         0     3\n");
  EXPECT_THAT(page.err,
              MatchesRegex(absl::StrCat(
                  "next page: hourglass ", Addr(),
                  " messages --topic=orders --state=scheduled --limit=1 "
                  "--page-token=[^ ]+\n")));
  old = RunApart({"ls", "--topic=orders", "--limit=1"});
  EXPECT_EQ(old.exit_code, 0) << old;
  EXPECT_EQ(old.out, page.out);
  EXPECT_EQ(old.err, RenamedNote("ls", "messages") + page.err);
}

TEST_F(HourglassCliBrokerTest, GroupsListsWhatGroupsListDid) {
  SplitResult listed = RunApart({"groups", "--topic=orders"});
  EXPECT_EQ(listed.exit_code, 1) << listed;
  EXPECT_EQ(listed.out, "");
  EXPECT_EQ(listed.err,
            "hourglass: NOT_FOUND: no topic \"orders\" (no pending messages "
            "and no groups)\n");

  ASSERT_EQ(
      Run({"groups", "create", "--topic=orders", "--group=billing"}).output,
      "created group billing on orders\n");
  listed = RunApart({"groups", "--topic=orders"});
  EXPECT_EQ(listed.exit_code, 0) << listed;
  EXPECT_THAT(listed.out,
              MatchesRegex("GROUP    CREATED                   READY  "
                           "IN_FLIGHT  CONSUMERS\n"
                           "billing  [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:"
                           "[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z      0          0"
                           "          0\n"));
  EXPECT_EQ(listed.err, "");
  SplitResult old = RunApart({"groups", "list", "--topic=orders"});
  EXPECT_EQ(old.exit_code, 0) << old;
  EXPECT_EQ(old.out, listed.out);
  EXPECT_EQ(old.err, RenamedNote("groups list", "groups"));

  const SplitResult json = RunApart({"groups", "--topic=orders", "--json"});
  EXPECT_EQ(json.exit_code, 0) << json;
  EXPECT_THAT(json.out, StartsWith("{\"groups\":[{\"topic\":\"orders\","
                                   "\"name\":\"billing\","));
  old = RunApart({"groups", "list", "--topic=orders", "--json"});
  EXPECT_EQ(old.exit_code, 0) << old;
  EXPECT_EQ(old.out, json.out);
  EXPECT_EQ(old.err, RenamedNote("groups list", "groups"));

  // The subcommands still work beside it.
  EXPECT_EQ(
      Run({"groups", "delete", "--topic=orders", "--group=billing"}).output,
      "deleted group billing of orders (0 ready and in-flight entries "
      "removed)\n");
}

// With --max_attempts=1: p-1 and p-2 of topic pay, delivered once to group
// g and not acked, are dead letters.
class HourglassCliDeadLetterTest : public HourglassCliBrokerTest {
 protected:
  void SetUp() override { StartDaemon({"--max_attempts=1"}); }
};

TEST_F(HourglassCliDeadLetterTest, DlqListsWhatDlqListDid) {
  ASSERT_EQ(Run({"publish", "--topic=pay", "--id=p", "--count=2", "--data=pay"})
                .exit_code,
            0);
  // Delivered once each and not acked; leaving hands them back.
  const testing::RunResult taken =
      Run({"subscribe", "--topic=pay", "--group=g", "--ack=none", "--count=2"});
  ASSERT_EQ(taken.exit_code, 0) << taken.output;
  // The next consumer with credit makes them dead letters: they had their
  // one attempt.
  std::unique_ptr<testing::Subprocess> consumer =
      Start({"subscribe", "--topic=pay", "--group=g", "--count=1"});
  ASSERT_NE(consumer, nullptr);
  SplitResult listed;
  EXPECT_TRUE(testing::Eventually(
      [&] {
        listed = RunApart({"dlq", "--topic=pay"});
        return Lines(listed.out).size() == 3;
      },
      kTimeout))
      << listed;
  EXPECT_EQ(listed.exit_code, 0) << listed;
  EXPECT_THAT(
      listed.out,
      MatchesRegex("ID   TOPIC    DUE                       STATE  ATTEMPTS  "
                   "SIZE\n"
                   "p-1  pay\\.dlq  [0-9TZ:.-]{24}  dead          1     3\n"
                   "p-2  pay\\.dlq  [0-9TZ:.-]{24}  dead          1     3\n"));
  EXPECT_EQ(listed.err, "");
  SplitResult old = RunApart({"dlq", "list", "--topic=pay"});
  EXPECT_EQ(old.exit_code, 0) << old;
  EXPECT_EQ(old.out, listed.out);
  EXPECT_EQ(old.err, RenamedNote("dlq list", "dlq"));
  // As messages --state=dead lists them.
  EXPECT_EQ(RunApart({"messages", "--topic=pay", "--state=dead"}).out,
            listed.out);

  const SplitResult json = RunApart({"dlq", "--topic=pay", "--json"});
  EXPECT_EQ(json.exit_code, 0) << json;
  EXPECT_THAT(json.out, StartsWith("{\"messages\":[{\"id\":\"p-1\","));
  old = RunApart({"dlq", "list", "--topic=pay", "--json"});
  EXPECT_EQ(old.exit_code, 0) << old;
  EXPECT_EQ(old.out, json.out);
  EXPECT_EQ(old.err, RenamedNote("dlq list", "dlq"));

  // The next page's command names the new name, whichever listed.
  const SplitResult page = RunApart({"dlq", "--topic=pay", "--limit=1"});
  EXPECT_EQ(page.exit_code, 0) << page;
  ASSERT_EQ(Lines(listed.out).size(), 3u);
  EXPECT_EQ(page.out, absl::StrCat(Lines(listed.out)[0], "\n",
                                   Lines(listed.out)[1], "\n"));
  EXPECT_THAT(page.err,
              MatchesRegex(absl::StrCat(
                  "next page: hourglass ", Addr(),
                  " dlq --topic=pay --limit=1 --page-token=[^ ]+\n")));
  old = RunApart({"dlq", "list", "--topic=pay", "--limit=1"});
  EXPECT_EQ(old.exit_code, 0) << old;
  EXPECT_EQ(old.out, page.out);
  EXPECT_EQ(old.err, RenamedNote("dlq list", "dlq") + page.err);

  // redrive still works beside it.
  const SplitResult redriven = RunApart({"dlq", "redrive", "--topic=pay"});
  EXPECT_EQ(redriven.exit_code, 0) << redriven;
  EXPECT_EQ(redriven.out, "redrove 2 dead letters from pay.dlq to pay\n");
  EXPECT_EQ(consumer->Wait(kTimeout), 0) << consumer->output();
}

}  // namespace
}  // namespace hourglass
