// hourglass_soak: the client side of tests/soak.sh.
//
// Runs producers, consumers of several groups and a canceller against one
// hourglassd for --duration while the script restarts the broker
// (SIGTERM and SIGKILL) under it, keeping a ledger of every message (see
// tests/soak/ledger.h). Then it stops producing, waits (at most
// --drain_timeout) until every message that must be delivered was acked by
// every group and the broker holds nothing of the topic, prints a summary
// and exits 0, or 1 with the list of violations.

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "hourglass/v1/admin.pb.h"
#include "tests/soak/canceller.h"
#include "tests/soak/consumer.h"
#include "tests/soak/context.h"
#include "tests/soak/ledger.h"
#include "tests/soak/producer.h"

ABSL_FLAG(std::string, addr_file, "",
          "File holding the broker's host:port; the soak script rewrites it "
          "when a restart moves the broker. Required.");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(60), "How long to produce.");
ABSL_FLAG(uint64_t, seed, 0, "Seed of every random choice. Required.");
ABSL_FLAG(std::string, restart_log, "",
          "File where the soak script writes one line per broker restart, "
          "naming its signal; read for the summary. Default: none.");
ABSL_FLAG(absl::Duration, drain_timeout, absl::Seconds(120),
          "After producing, how long to wait for every owed ack and for "
          "the broker to empty the topic.");
ABSL_FLAG(int32_t, producers, 3, "Producer threads.");
ABSL_FLAG(int32_t, groups, 2, "Consumer groups of the topic.");
ABSL_FLAG(int32_t, consumers_per_group, 2, "Consumer threads per group.");
ABSL_FLAG(absl::Duration, publish_gap, absl::Milliseconds(40),
          "Mean pause between two publishes of one producer.");
ABSL_FLAG(absl::Duration, max_delay, absl::Seconds(3),
          "Delays are drawn from [0, max_delay].");
ABSL_FLAG(absl::Duration, mean_connected, absl::Seconds(8),
          "Mean time a consumer stays subscribed before it leaves.");
ABSL_FLAG(uint32_t, max_attempts, 16, "The broker's --max_attempts.");

namespace hourglass::soak {
namespace {

// Roles of the setup's and the final check's random generators.
constexpr int kMainRole = 0;

void Log(const std::string& line) {
  std::cout << absl::FormatTime("%H:%M:%E3S", absl::Now(),
                                absl::LocalTimeZone())
            << " soak: " << line << std::endl;
}

// Registers every group (Admin.CreateGroup), so that each receives every
// message from the first publish on. False if the broker did not answer by
// `deadline`.
bool RegisterGroups(Shared& shared, absl::Time deadline) {
  std::mt19937_64 rng = WorkerRng(shared.config.seed, kMainRole, 0);
  Backoff backoff(&rng);
  absl::Notification never;
  for (int g = 0; g < shared.config.groups; ++g) {
    while (true) {
      std::unique_ptr<Connection> connection =
          Connect(shared, never, backoff, deadline);
      if (connection == nullptr) return false;
      hourglass::v1::CreateGroupRequest request;
      request.set_topic(shared.config.topic);
      request.set_group(GroupName(g));
      const absl::Status status =
          connection->admin->CreateGroup(request).status();
      if (status.ok() || status.code() == absl::StatusCode::kAlreadyExists) {
        break;
      }
      if (!OutcomeUnknown(status.code())) {
        ReportUnexpected(shared, "CreateGroup", status);
      }
      backoff.Wait(never);
    }
  }
  return true;
}

// What the broker still holds of the topic and its dead letters; "" if
// nothing. Unknown (the call failed, or the stats lack the topic or one of
// its groups) reads as "?".
std::string Leftovers(Shared& shared, Connection& connection) {
  hourglass::v1::GetStatsRequest request;
  request.set_topic(shared.config.topic);
  const absl::StatusOr<hourglass::v1::GetStatsResponse> stats =
      connection.admin->GetStats(request);
  if (!stats.ok()) {
    return absl::StrCat("? (GetStats: ", stats.status().message(), ")");
  }
  const hourglass::v1::GetStatsResponse& response = *stats;
  const hourglass::v1::TopicStats* topic = nullptr;
  for (const hourglass::v1::TopicStats& t : response.topics()) {
    if (t.topic() == shared.config.topic) topic = &t;
  }
  if (topic == nullptr) return "? (GetStats does not list the topic)";
  std::vector<std::string> held;
  if (topic->scheduled() > 0) {
    held.push_back(absl::StrCat(topic->scheduled(), " scheduled"));
  }
  if (topic->ready() + topic->in_flight() > 0) {
    held.push_back(absl::StrCat(topic->ready(), " ready, ", topic->in_flight(),
                                " in flight"));
  }
  if (topic->dead_lettered() > 0) {
    held.push_back(absl::StrCat(topic->dead_lettered(), " dead-lettered"));
  }
  int groups = 0;
  for (const hourglass::v1::GroupStats& group : topic->groups()) {
    ++groups;
    if (group.ready() + group.in_flight() > 0) {
      held.push_back(absl::StrCat(group.group(), ": ", group.ready(),
                                  " ready, ", group.in_flight(), " in flight"));
    }
  }
  if (groups != shared.config.groups) {
    held.push_back(absl::StrCat("? (GetStats lists ", groups, " groups, not ",
                                shared.config.groups, ")"));
  }
  return absl::StrJoin(held, "; ");
}

// Waits until the broker holds nothing of the topic, or `deadline`.
// Returns what it still holds then ("" for nothing).
std::string AwaitEmptyBroker(Shared& shared, absl::Time deadline) {
  std::mt19937_64 rng = WorkerRng(shared.config.seed, kMainRole, 1);
  Backoff backoff(&rng);
  absl::Notification never;
  std::unique_ptr<Connection> connection;
  std::string held = "? (no answer)";
  while (absl::Now() < deadline) {
    if (connection == nullptr) {
      connection = Connect(shared, never, backoff, deadline);
      if (connection == nullptr) break;
    }
    held = Leftovers(shared, *connection);
    if (held.empty()) return held;
    if (held.starts_with("? (GetStats:")) connection.reset();
    // Acks being written and redeliveries take a moment, and nothing
    // announces their end: look again shortly.
    absl::SleepFor(absl::Milliseconds(100));
  }
  return held;
}

// Restarts by signal, from the script's log.
std::string Restarts(const std::string& path) {
  if (path.empty()) return "not recorded";
  std::ifstream in(path);
  std::map<std::string, int> by_kind;
  int total = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    ++by_kind[line];
    ++total;
  }
  std::vector<std::string> parts;
  for (const auto& [kind, n] : by_kind)
    parts.push_back(absl::StrCat(kind, " ", n));
  return absl::StrCat(total, parts.empty() ? "" : " (",
                      absl::StrJoin(parts, ", "), parts.empty() ? "" : ")");
}

void PrintSummary(const Shared& shared, const Ledger::Counts& c,
                  const std::string& restarts) {
  const Counters& k = shared.counters;
  std::cout << absl::StrCat(
      "soak summary (seed ", shared.config.seed, ")\n", "  messages      ",
      c.messages, " tried: ", c.published, " published, ", c.refused,
      " refused, ", c.unknown_only, " outcome unknown\n", "  publishes     ",
      k.publish_calls.load(), " calls: ", k.publish_unknown.load(),
      " outcome unknown, ", k.publish_retry_later.load(), " retry later, ",
      k.bad_batches.load(), " bad batches refused; ", c.retried,
      " ids sent again, ", c.duplicates, " duplicate receipts\n",
      "  cancels       ", k.cancel_calls.load(), " calls: ", c.cancelled,
      " cancelled (", c.cancelled_second_copies,
      " of them a retried id's second copy), ", c.cancel_not_found,
      " NOT_FOUND, ", c.cancel_unknown, " outcome unknown\n",
      "  deliveries    ", c.deliveries, ": ", c.redeliveries,
      " redeliveries (attempt > 1), ", c.after_ack, " after an ack\n",
      "  answers       ", c.acks, " acks, ", k.nacks.load(), " nacks, ",
      k.ignored.load(), " left to the ack timeout\n", "  connections   ",
      k.connects.load(), " connects, ", k.disconnects.load(),
      " disconnects by consumers, ", k.stream_ends.load(), " streams lost\n",
      "  restarts      ", restarts, "\n", "  unexpected    ",
      k.unexpected_codes.load(), " status codes\n", "  owed acks     ", c.owed,
      "\n", "  violations    ", c.violations, "\n");
}

int Main() {
  Shared shared;
  Config& config = shared.config;
  config.seed = absl::GetFlag(FLAGS_seed);
  config.producers = absl::GetFlag(FLAGS_producers);
  config.groups = absl::GetFlag(FLAGS_groups);
  config.consumers_per_group = absl::GetFlag(FLAGS_consumers_per_group);
  config.publish_gap = absl::GetFlag(FLAGS_publish_gap);
  config.max_delay = absl::GetFlag(FLAGS_max_delay);
  config.mean_connected = absl::GetFlag(FLAGS_mean_connected);
  config.max_attempts = absl::GetFlag(FLAGS_max_attempts);
  shared.addr_file = absl::GetFlag(FLAGS_addr_file);
  const absl::Duration duration = absl::GetFlag(FLAGS_duration);
  const absl::Duration drain_timeout = absl::GetFlag(FLAGS_drain_timeout);
  if (shared.addr_file.empty() || config.producers < 1 || config.groups < 1 ||
      config.consumers_per_group < 1) {
    std::cerr << "hourglass_soak: --addr_file is required; --producers, "
                 "--groups and --consumers_per_group must be at least 1\n";
    return 2;
  }
  Ledger ledger(config.topic, config.groups, config.max_attempts);
  shared.ledger = &ledger;
  Log(absl::StrCat("seed ", config.seed, ", producing for ",
                   absl::FormatDuration(duration), " with ", config.producers,
                   " producers and ", config.consumers_per_group,
                   " consumers in each of ", config.groups, " groups"));

  if (!RegisterGroups(shared, absl::Now() + absl::Seconds(60))) {
    std::cerr << "hourglass_soak: could not register the groups\n";
    return 2;
  }
  Canceller canceller(&shared);
  std::vector<std::unique_ptr<Producer>> producers;
  std::vector<std::unique_ptr<Consumer>> consumers;
  for (int g = 0; g < config.groups; ++g) {
    for (int i = 0; i < config.consumers_per_group; ++i) {
      consumers.push_back(std::make_unique<Consumer>(
          &shared, g, g * config.consumers_per_group + i));
      consumers.back()->Start();
    }
  }
  canceller.Start();
  for (int i = 0; i < config.producers; ++i) {
    producers.push_back(std::make_unique<Producer>(&shared, &canceller, i));
    producers.back()->Start();
  }

  // The soak itself: the workers run, the script restarts the broker.
  absl::SleepFor(duration);
  Log("stopping producers; draining");
  const absl::Time drain_deadline = absl::Now() + drain_timeout;
  shared.stop_producing.Notify();
  canceller.Join();
  // Producers finish the batch they are retrying (the broker is up for
  // good now), unless the drain ends first: then stop_all ends their
  // retries (each call has its deadline) and the consumers.
  absl::Notification drained;
  std::thread stopper([&] {
    if (!drained.WaitForNotificationWithTimeout(drain_deadline - absl::Now())) {
      shared.stop_all.Notify();
    }
  });
  for (auto& p : producers) p->Join();
  // What the broker holds after the drain; looked at only once no ack is
  // owed (else Verify lists the messages missing).
  std::string held;
  if (ledger.AwaitSettled(drain_deadline)) {
    Log("every owed ack sent; waiting for the broker to empty the topic");
    held = AwaitEmptyBroker(shared, drain_deadline);
  }
  drained.Notify();
  stopper.join();
  // The stopper may have notified it already.
  if (!shared.stop_all.HasBeenNotified()) shared.stop_all.Notify();
  for (auto& c : consumers) c->Join();
  if (!held.empty()) {
    ledger.AddViolation(
        absl::StrCat("after the drain the broker still holds: ", held));
  }

  const std::vector<std::string> violations = ledger.Verify();
  PrintSummary(shared, ledger.counts(),
               Restarts(absl::GetFlag(FLAGS_restart_log)));
  if (violations.empty()) {
    Log("PASS: every published, uncancelled message was delivered and acked "
        "by every group; no violations");
    return 0;
  }
  for (const std::string& v : violations)
    std::cout << "VIOLATION: " << v << "\n";
  const uint64_t total = ledger.counts().violations;
  if (total > violations.size()) {
    std::cout << "... and " << total - violations.size() << " more\n";
  }
  Log(absl::StrCat("FAIL: ", total, " violations (seed ", config.seed, ")"));
  return 1;
}

}  // namespace
}  // namespace hourglass::soak

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "hourglass_soak --addr_file=FILE --seed=N [--duration=60s]: the client "
      "side of tests/soak.sh");
  absl::ParseCommandLine(argc, argv);
  return hourglass::soak::Main();
}
