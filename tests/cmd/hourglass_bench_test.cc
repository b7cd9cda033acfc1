// Runs the real hourglass-bench briefly against a real hourglassd and
// checks the summary's exact structure, that every message was delivered
// once and none early, in the human form and with --json.

#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/daemon.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/temp_dir.h"

namespace hourglass {
namespace {

using ::testing::ElementsAre;
using ::testing::MatchesRegex;

constexpr absl::Duration kTimeout = absl::Seconds(60);

// The lines of `output`, without the final newline.
std::vector<std::string> Lines(const std::string& output) {
  std::vector<std::string> lines = absl::StrSplit(output, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A regular expression (POSIX extended, as gtest uses) for `pattern`, in
// which D stands for an integer, F for a decimal number and T for a human
// duration such as 1.234ms or 2.5s; other characters stand for themselves.
std::string Pattern(const std::string& pattern) {
  std::string escaped;
  for (const char c : pattern) {
    if (std::string("{}()[].+*?^$|\\").find(c) != std::string::npos) {
      escaped += '\\';
    }
    escaped += c;
  }
  return absl::StrReplaceAll(escaped, {{"D", "[0-9]+"},
                                       {"F", "[0-9]+(\\.[0-9]+)?(e-?[0-9]+)?"},
                                       {"T", "(0|[0-9.]+(ns|us|ms|s|m|h))+"}});
}

class HourglassBenchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto daemon = testing::Daemon::Start(HOURGLASSD_PATH, dir_.path() + "/data",
                                         {"--shutdown_grace=500ms"});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = *std::move(daemon);
  }

  // Runs `PROGRAM --addr=... ARGS` (PROGRAM: hourglass-bench unless
  // given) with stdout and stderr apart.
  struct Output {
    int exit_code;
    std::string out;
    std::string err;
  };
  Output Bench(const std::vector<std::string>& args,
               const std::string& program = HOURGLASS_BENCH_PATH) {
    std::vector<std::string> quoted = {
        absl::StrCat("'", program, "'"),
        absl::StrCat("--addr=", daemon_->address())};
    for (const std::string& arg : args) {
      quoted.push_back(absl::StrCat("'", arg, "'"));
    }
    const std::string err_path = dir_.path() + "/stderr";
    const testing::RunResult result =
        testing::Run({"/bin/sh", "-c",
                      absl::StrCat("exec ", absl::StrJoin(quoted, " "), " 2>'",
                                   err_path, "'")},
                     kTimeout);
    return {result.exit_code, result.output, ReadFile(err_path)};
  }

  testing::TempDir dir_;
  std::unique_ptr<testing::Daemon> daemon_;
};

TEST_F(HourglassBenchTest, SummaryHasEveryFigureAndAllWereDelivered) {
  // Due 1.2 s after publishing, so that at least one progress line comes.
  // Consumers on Subscribe, a gRPC message per delivery (the JSON test
  // below takes the default, SubscribeBatches).
  const Output run =
      Bench({"--count=500", "--batch=50", "--producers=2", "--concurrency=4",
             "--consumers=2", "--consume=single", "--delay=1200ms",
             "--durability=sync"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_THAT(
      Lines(run.out),
      ElementsAre(
          MatchesRegex(Pattern("topic        bench-D")), "durability   sync",
          "workload     batches of 50, 100-byte payloads, 4 calls in flight "
          "on 2 connections, as fast as possible, delay 1.2s, 2 consumers "
          "(Subscribe)",
          MatchesRegex(Pattern("published    500 msgs in 10 calls in T = D "
                               "msg/s; call p50 T p99 T max T")),
          MatchesRegex(Pattern("delivered    500 of 500 in T = D msg/s")),
          MatchesRegex(Pattern("lateness     p50 T p90 T p99 T p99.9 T max T")),
          "early        0", "duplicates   0", "undelivered  0",
          "errors       0"));
  const std::vector<std::string> progress = Lines(run.err);
  ASSERT_FALSE(progress.empty());
  EXPECT_THAT(progress.front(),
              MatchesRegex(Pattern("bench: 1s published D (D/s) delivered D "
                                   "(D/s) errors 0 early 0")));
}

TEST_F(HourglassBenchTest, JsonOfAHotSecond) {
  const Output run =
      Bench({"--json", "--topic=hot", "--count=300", "--batch=10",
             "--producers=1", "--concurrency=2", "--payload=64",
             "--delay=hot:1s", "--durability=async"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_THAT(
      Lines(run.out),
      ElementsAre(MatchesRegex(Pattern(
          "{\"topic\":\"hot\",\"group\":\"bench\",\"durability\":\"async\","
          "\"producers\":1,\"publish_rpc\":\"Publish\",\"consumers\":1,"
          "\"consumer_rpc\":\"SubscribeBatches\",\"concurrency\":2,"
          "\"batch\":10,\"payload_bytes\":64,\"delay\":\"hot:1s\",\"rate\":0,"
          "\"published\":300,\"publish_calls\":30,\"publish_seconds\":F,"
          "\"publish_rate\":F,\"publish_call_ms\":{\"p50\":F,\"p99\":F,"
          "\"max\":F},\"delivered\":300,\"delivery_seconds\":F,"
          "\"delivery_rate\":F,\"lateness_ms\":{\"p50\":F,\"p90\":F,"
          "\"p99\":F,\"p99_9\":F,\"max\":F},\"early\":0,\"duplicates\":0,"
          "\"foreign\":0,\"undelivered\":0,\"errors\":0,"
          "\"failed_messages\":0,\"stream_errors\":0,\"first_error\":\"\","
          "\"interrupted\":false}"))));
}

// On PublishStream: single messages as requests on one stream per
// producer, paced to the rate.
TEST_F(HourglassBenchTest, PublishOnlyAtARateOnStreams) {
  const Output run =
      Bench({"--consumers=0", "--count=200", "--batch=1", "--concurrency=8",
             "--rate=2000", "--delay=1h", "--publish=stream"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const std::vector<std::string> lines = Lines(run.out);
  ASSERT_EQ(lines.size(), 10u) << run.out;
  EXPECT_EQ(lines[2],
            "workload     batches of 1, 100-byte payloads, 8 requests in "
            "flight on 2 PublishStreams, 2000 msg/s, delay 1h, 0 consumers");
  EXPECT_THAT(lines[3],
              MatchesRegex(Pattern("published    200 msgs in 200 requests "
                                   "in T = D msg/s; request p50 T p99 T max "
                                   "T")));
  EXPECT_EQ(lines[4], "delivered    - (no consumers)");
  EXPECT_EQ(lines[5], "lateness     -");
}

// --lateness-log: a line per message's first delivery, "<deliver_at>
// <arrival>" in microseconds since the Unix epoch, never arriving before
// it was due.
TEST_F(HourglassBenchTest, TheLatenessLogHasALinePerMessage) {
  const std::string log = dir_.path() + "/lateness.txt";
  const Output run = Bench({"--count=300", "--batch=10", "--delay=200ms",
                            "--reconnect", "--lateness-log=" + log});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const std::vector<std::string> lines = Lines(ReadFile(log));
  ASSERT_EQ(lines.size(), 300u);
  for (const std::string& line : lines) {
    ASSERT_THAT(line, MatchesRegex("[0-9]{16} [0-9]{16}"));
    const std::vector<std::string> times = absl::StrSplit(line, ' ');
    EXPECT_LE(std::stoll(times[0]), std::stoll(times[1])) << line;
  }
}

// --retries above 1 gives each message an id (so that a retry cannot store
// it twice): bench-<run>-<sequence>.
TEST_F(HourglassBenchTest, RetriedPublishesCarryIds) {
  const Output run = Bench({"--consumers=0", "--count=3", "--batch=3",
                            "--delay=1h", "--topic=ids", "--retries=5"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const testing::RunResult listed =
      testing::Run({HOURGLASS_PATH, "--addr=" + daemon_->address(), "messages",
                    "--topic=ids"},
                   kTimeout);
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  const std::vector<std::string> lines = Lines(listed.output);
  ASSERT_EQ(lines.size(), 4u) << listed.output;  // A header and three messages.
  for (int i = 0; i < 3; ++i) {
    EXPECT_THAT(lines[i + 1],
                MatchesRegex(absl::StrCat("bench-[0-9]+-", i, " .*")))
        << listed.output;
  }
}

TEST_F(HourglassBenchTest, RefusesBadFlagsBeforeConnecting) {
  Output run = Bench({"--delay=soon"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err,
            "hourglass-bench: --delay: \"soon\" is not a delay (use a "
            "duration such as 5s, a range such as 1s..10s, or hot:30s)\n");

  run = Bench({"--producers=4", "--concurrency=2"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err,
            "hourglass-bench: --concurrency: must be at least --producers "
            "(4): each producer keeps a call in flight\n");

  run = Bench({"--consume=bulk"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err,
            "hourglass-bench: --consume: bulk not in {batches,single} (see "
            "hourglass-bench --help)\n");
}

// The operator's CLI no longer loads brokers; `hourglass bench` says where
// the load generator went, and runs nothing.
TEST_F(HourglassBenchTest, TheCliSaysTheBenchMoved) {
  const Output run =
      Bench({"bench", "--count=10", "--consumers=0"}, HOURGLASS_PATH);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err,
            "hourglass: bench moved to a program of its own: run "
            "hourglass-bench with the same flags (see hourglass-bench "
            "--help)\n");
}

}  // namespace
}  // namespace hourglass
