// hourglass-bench: Hourglass's load generator. Publishes a workload to a
// fresh topic while consumers take and ack what comes due, prints a progress
// line every second and, at the end, publish and delivery throughput,
// lateness percentiles, early deliveries, duplicates and errors.
//
//   hourglass-bench [--addr=127.0.0.1:7070] [--timeout=10s] [--json] [FLAGS]

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/channel.h"
#include "client/consumer.h"
#include "cmd/common/connection.h"
#include "cmd/common/duration.h"
#include "cmd/common/errors.h"
#include "cmd/common/flags.h"
#include "cmd/common/signal_watcher.h"
#include "cmd/hourglass-bench/consumer.h"
#include "cmd/hourglass-bench/histogram.h"
#include "cmd/hourglass-bench/lateness_log.h"
#include "cmd/hourglass-bench/producer.h"
#include "cmd/hourglass-bench/report.h"
#include "cmd/hourglass-bench/stats.h"
#include "cmd/hourglass-bench/workload.h"

namespace hourglass::bench {
namespace {

using cli::Connection;
using cli::GlobalOptions;
using cli::HumanDuration;
using cli::ParseDuration;
using cli::ParseTimeout;
using cli::SignalWatcher;
using cli::UsageError;

// Messages published when neither --count nor --duration is given.
constexpr uint64_t kDefaultCount = 100000;

struct BenchOptions {
  std::string topic;
  int topics = 1;
  std::string group = "bench";
  int producers = 2;
  int consumers = 1;
  int concurrency = 8;
  uint32_t batch = 100;
  size_t payload = 100;
  std::string delay = "0";
  double rate = 0;
  uint64_t count = 0;
  std::string duration;
  uint32_t max_in_flight = 10000;
  std::string consume = "batches";
  std::string publish = "calls";
  std::string drain_timeout = "60s";
  std::string durability = "unknown";
  int retries = 1;
  bool reconnect = false;
  std::string lateness_log;
};

// The parsed and checked command line.
struct BenchPlan {
  PublishPlan::Options publish;
  absl::Duration drain_timeout;
  absl::Duration timeout;
};

absl::StatusOr<BenchPlan> Check(const GlobalOptions& globals,
                                const BenchOptions& options) {
  BenchPlan plan;
  absl::StatusOr<absl::Duration> timeout = ParseTimeout(globals.timeout);
  if (!timeout.ok()) return timeout.status();
  plan.timeout = *timeout;
  if (options.payload < kSequenceBytes) {
    return UsageError("--payload",
                      absl::StrCat("must be at least ", kSequenceBytes,
                                   " bytes (the message's sequence number)"));
  }
  if (options.concurrency < options.producers) {
    return UsageError(
        "--concurrency",
        absl::StrCat("must be at least --producers (", options.producers,
                     "): each producer keeps a call in flight"));
  }
  absl::StatusOr<DelaySpec> delay = ParseDelaySpec(options.delay);
  if (!delay.ok()) return UsageError("--delay", delay.status().message());
  absl::StatusOr<absl::Duration> drain = ParseDuration(options.drain_timeout);
  if (!drain.ok()) {
    return UsageError("--drain-timeout", drain.status().message());
  }
  plan.drain_timeout = *drain;

  if (options.consumers != 0 && options.consumers < options.topics) {
    return UsageError("--consumers",
                      absl::StrCat("must be 0 or at least --topics (",
                                   options.topics,
                                   "): each topic needs a consumer"));
  }
  PublishPlan::Options& publish = plan.publish;
  const std::string topic =
      options.topic.empty()
          ? absl::StrCat("bench-", absl::ToUnixMillis(absl::Now()))
          : options.topic;
  if (options.topics == 1) {
    publish.topics = {topic};
  } else {
    for (int i = 0; i < options.topics; ++i) {
      publish.topics.push_back(absl::StrCat(topic, "-", i));
    }
  }
  publish.payload_bytes = options.payload;
  publish.batch = options.batch;
  publish.delay = *delay;
  publish.rate = options.rate;
  publish.count = options.count;
  if (options.retries > 1) {
    // Unique to the run, so that no id is pending from an earlier one.
    publish.id_prefix =
        absl::StrCat("bench-", absl::ToUnixMicros(absl::Now()), "-");
  }
  if (!options.duration.empty()) {
    absl::StatusOr<absl::Duration> duration = ParseDuration(options.duration);
    if (!duration.ok()) {
      return UsageError("--duration", duration.status().message());
    }
    if (*duration <= absl::ZeroDuration()) {
      return UsageError("--duration", "must be more than 0");
    }
    publish.duration = *duration;
  } else if (options.count == 0) {
    publish.count = kDefaultCount;
  }
  return plan;
}

// "bench: 3s published 300000 (100000/s) delivered 120000 (40000/s) errors
// 0 early 0", on stderr. Keeps the counts of the last line for the rates.
class Progress {
 public:
  Progress(BenchCounters& counters, absl::Time start)
      : counters_(counters), start_(start), last_time_(start) {}

  void Print() {
    const absl::Time now = absl::Now();
    const uint64_t published =
        counters_.published.load(std::memory_order_relaxed);
    const uint64_t delivered =
        counters_.delivered.load(std::memory_order_relaxed);
    const double seconds = absl::ToDoubleSeconds(now - last_time_);
    std::cerr << absl::StrFormat(
                     "bench: %s published %d (%.0f/s) delivered %d (%.0f/s) "
                     "errors %d early %d",
                     HumanDuration(absl::Trunc(now - start_, absl::Seconds(1))),
                     published, (published - last_published_) / seconds,
                     delivered, (delivered - last_delivered_) / seconds,
                     counters_.errors.load(std::memory_order_relaxed) +
                         counters_.stream_errors.load(
                             std::memory_order_relaxed),
                     counters_.early.load(std::memory_order_relaxed))
              << std::endl;
    last_time_ = now;
    last_published_ = published;
    last_delivered_ = delivered;
  }

 private:
  BenchCounters& counters_;
  const absl::Time start_;
  absl::Time last_time_;
  uint64_t last_published_ = 0;
  uint64_t last_delivered_ = 0;
};

// Where Ctrl-C goes: it stops publishing and waiting; the run then reports
// what it measured so far.
class InterruptTarget {
 public:
  explicit InterruptTarget(BenchControl& control) : control_(control) {}
  void SetPlan(PublishPlan* plan) { plan_.store(plan); }
  void Interrupt() {
    control_.Interrupt();
    if (PublishPlan* plan = plan_.load(); plan != nullptr) plan->Stop();
  }

 private:
  BenchControl& control_;
  std::atomic<PublishPlan*> plan_{nullptr};
};

absl::Status Bench(const GlobalOptions& globals, const BenchOptions& options) {
  absl::StatusOr<BenchPlan> checked = Check(globals, options);
  if (!checked.ok()) return checked.status();
  const PublishPlan::Options& publish = checked->publish;

  BenchCounters counters;
  SeenSet seen;
  BenchControl control;
  // Before gRPC starts threads, so that they inherit the blocked signals.
  InterruptTarget target(control);
  SignalWatcher watcher([&target](int) { target.Interrupt(); });

  // Consumers first, so that the group exists before anything comes due.
  client::ConsumerOptions consume;
  consume.group = options.group;
  consume.max_in_flight = options.max_in_flight;
  consume.rpc = options.consume == "batches"
                    ? client::ConsumerOptions::Rpc::kSubscribeBatches
                    : client::ConsumerOptions::Rpc::kSubscribe;
  consume.reconnect = options.reconnect;
  std::unique_ptr<LatenessLog> lateness_log;
  if (!options.lateness_log.empty()) {
    absl::StatusOr<std::unique_ptr<LatenessLog>> created =
        LatenessLog::Create(options.lateness_log);
    if (!created.ok()) return created.status();
    lateness_log = *std::move(created);
  }
  // Outlive the consumers.
  std::vector<std::unique_ptr<Connection>> consumer_connections;
  std::vector<std::unique_ptr<BenchConsumer>> consumers;
  absl::Status failed;
  for (int i = 0; i < options.consumers && failed.ok(); ++i) {
    // Spread over the topics.
    consume.topic = publish.topics[static_cast<size_t>(i) % publish.topics.size()];
    absl::StatusOr<std::unique_ptr<Connection>> connection =
        Connection::Open(globals, /*own_connection=*/true);
    if (!connection.ok()) {
      failed = connection.status();
      break;
    }
    consumer_connections.push_back(*std::move(connection));
    absl::StatusOr<std::unique_ptr<BenchConsumer>> consumer =
        BenchConsumer::Subscribe(*consumer_connections.back(), consume,
                                 counters, seen, control, lateness_log.get());
    if (!consumer.ok()) {
      failed = consumer_connections.back()->Check(consumer.status());
      break;
    }
    consumers.push_back(*std::move(consumer));
  }
  if (!failed.ok()) {
    for (auto& consumer : consumers) consumer->Finish(absl::Now());
    return failed;
  }

  std::vector<std::unique_ptr<Connection>> connections;
  for (int i = 0; i < options.producers; ++i) {
    absl::StatusOr<std::unique_ptr<Connection>> connection =
        Connection::Open(globals, /*own_connection=*/true);
    if (!connection.ok()) {
      for (auto& consumer : consumers) consumer->Finish(absl::Now());
      return connection.status();
    }
    connections.push_back(*std::move(connection));
  }

  const absl::Time start = absl::Now();
  PublishPlan plan(publish, start);
  target.SetPlan(&plan);
  std::vector<std::unique_ptr<BenchProducer>> producers;
  for (int i = 0; i < options.producers; ++i) {
    // The calls in flight, spread as evenly as they go.
    const int slots = options.concurrency / options.producers +
                      (i < options.concurrency % options.producers ? 1 : 0);
    producers.push_back(std::make_unique<BenchProducer>(
        std::move(connections[i]), plan, counters, control, slots,
        options.publish == "stream" ? BenchProducer::Rpc::kPublishStream
                                    : BenchProducer::Rpc::kPublish,
        options.retries));
  }
  control.SetProducers(options.producers);
  for (auto& producer : producers) producer->Start();

  Progress progress(counters, start);
  // A progress line, with the streams that failed meanwhile counted.
  auto print_progress = [&] {
    for (auto& consumer : consumers) consumer->Poll();
    progress.Print();
  };
  absl::Time tick = start + absl::Seconds(1);
  while (!control.WaitPublished(tick) && !control.interrupted()) {
    print_progress();
    tick += absl::Seconds(1);
  }
  if (control.interrupted()) {
    plan.Stop();
    for (auto& producer : producers) producer->CancelWaits();
  }
  for (auto& producer : producers) producer->Wait();
  const uint64_t published = counters.published.load();

  bool all_delivered = consumers.empty();
  if (!consumers.empty() && !control.interrupted()) {
    control.SetTarget(published, counters.delivered.load());
    // The last message is due at most the longest delay after it was
    // published; then it has --drain-timeout to arrive.
    const absl::Time give_up =
        absl::Now() + publish.delay.longest() + checked->drain_timeout;
    for (;;) {
      all_delivered = control.WaitDelivered(std::min(tick, give_up));
      if (all_delivered || control.interrupted() || absl::Now() >= give_up) {
        break;
      }
      if (absl::Now() >= tick) {
        print_progress();
        tick += absl::Seconds(1);
      }
    }
  }
  for (auto& consumer : consumers) {
    consumer->Finish(absl::Now() + checked->timeout);
  }
  if (lateness_log != nullptr) {
    if (absl::Status closed = lateness_log->Close(); !closed.ok()) {
      std::cerr << "bench: " << closed.message() << std::endl;
    }
  }

  if (publish.delay.kind == DelaySpec::Kind::kHot &&
      counters.publish_span.last() > plan.hot_instant()) {
    std::cerr << "bench: warning: publishing ended "
              << HumanDuration(counters.publish_span.last() -
                               plan.hot_instant())
              << " after the hot instant; later messages were due at once "
                 "(use a longer hot:DELAY)"
              << std::endl;
  }

  BenchResult result;
  result.topic = publish.topics.size() == 1
                     ? publish.topics.front()
                     : absl::StrCat(publish.topics.front(), " .. ",
                                    publish.topics.back());
  result.group = options.group;
  result.durability = options.durability;
  result.producers = options.producers;
  result.publish_rpc =
      options.publish == "stream" ? "PublishStream" : "Publish";
  result.consumers = static_cast<int>(consumers.size());
  result.consumer_rpc =
      consume.rpc == client::ConsumerOptions::Rpc::kSubscribeBatches
          ? "SubscribeBatches"
          : "Subscribe";
  result.concurrency = options.concurrency;
  result.batch = publish.batch;
  result.payload_bytes = publish.payload_bytes;
  result.delay = publish.delay;
  result.rate = publish.rate;
  result.published = published;
  result.publish_calls = counters.publish_calls.load();
  if (published > 0) {
    result.publish_time =
        counters.publish_span.last() - counters.publish_span.first();
  }
  for (auto& producer : producers) {
    result.call_latency.Merge(producer->call_latency());
  }
  absl::Time first_arrival = absl::InfiniteFuture();
  absl::Time last_arrival = absl::InfinitePast();
  for (auto& consumer : consumers) {
    result.lateness.Merge(consumer->lateness());
    first_arrival = std::min(first_arrival, consumer->first_arrival());
    last_arrival = std::max(last_arrival, consumer->last_arrival());
  }
  result.delivered = counters.delivered.load();
  if (result.delivered > 0) result.delivery_time = last_arrival - first_arrival;
  result.early = counters.early.load();
  result.duplicates = counters.duplicates.load();
  result.foreign = counters.foreign.load();
  if (!consumers.empty() && published > result.delivered) {
    result.undelivered = published - result.delivered;
  }
  result.errors = counters.errors.load();
  result.failed_messages = counters.failed_messages.load();
  result.stream_errors = counters.stream_errors.load();
  result.first_error = counters.FirstError();
  result.interrupted = control.interrupted();

  std::cout << (globals.json ? JsonReport(result) : HumanReport(result))
            << std::flush;

  if (result.early > 0) {
    return absl::InternalError(
        absl::StrCat(result.early, " deliveries came before their deliver_at"));
  }
  if (result.errors + result.stream_errors > 0) {
    return absl::UnavailableError(
        absl::StrCat(result.errors + result.stream_errors,
                     " calls failed; the first: ", result.first_error));
  }
  if (!all_delivered && !result.interrupted) {
    return absl::DeadlineExceededError(absl::StrCat(
        result.undelivered, " of ", published,
        " messages were not delivered within --drain-timeout (",
        HumanDuration(checked->drain_timeout), ") after they were due"));
  }
  return absl::OkStatus();
}

void AddFlags(CLI::App* bench, BenchOptions* options) {
  bench->add_option("--topic", options->topic,
                    "Topic to use (default: a new one, bench-<unix ms>)");
  bench
      ->add_option("--topics", options->topics,
                   "Spread the messages over N topics, TOPIC-0 to TOPIC-<N-1>, "
                   "a batch to each in turn (in a cluster of many shards: "
                   "over its shards); the consumers are spread over them")
      ->type_name("N")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  bench->add_option("--group", options->group, "Consumer group")
      ->capture_default_str();
  bench->add_option("--producers", options->producers, "Publishing connections")
      ->type_name("N")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  bench
      ->add_option("--consumers", options->consumers,
                   "Subscribe streams, each on a connection of its own "
                   "(0: publish only)")
      ->type_name("N")
      ->capture_default_str()
      ->check(CLI::Range(0, 256));
  bench
      ->add_option("--concurrency", options->concurrency,
                   "Publish requests in flight, over all producers")
      ->type_name("N")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  bench->add_option("--batch", options->batch, "Messages per Publish call")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  bench->add_option("--payload", options->payload, "Payload size in bytes")
      ->type_name("BYTES")
      ->capture_default_str()
      ->check(CLI::Range(size_t{8}, size_t{1} << 20));
  bench
      ->add_option("--delay", options->delay,
                   "When messages come due: DURATION (fixed), MIN..MAX "
                   "(uniform) or hot:DURATION (all at one instant that long "
                   "after the start)")
      ->capture_default_str();
  bench
      ->add_option("--rate", options->rate,
                   "Messages per second over all producers (0: as fast as "
                   "possible)")
      ->type_name("MSGS/S")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  bench->add_option("--count", options->count,
                    "Messages to publish (default 100000 unless --duration)");
  bench
      ->add_option("--duration", options->duration,
                   "Publish for this long (with --count: whichever ends "
                   "first)")
      ->type_name("DURATION");
  bench
      ->add_option("--max-in-flight", options->max_in_flight,
                   "Credit of each consumer (at most the broker's "
                   "--max_credit)")
      ->capture_default_str();
  bench
      ->add_option("--publish", options->publish,
                   "How producers send: calls (a Publish call per batch) or "
                   "stream (batches as requests on one PublishStream per "
                   "producer, answered in order)")
      ->type_name("HOW")
      ->capture_default_str()
      ->check(CLI::IsMember({"calls", "stream"}));
  bench
      ->add_option("--consume", options->consume,
                   "How consumers take deliveries: batches (SubscribeBatches: "
                   "what is waiting, in one message) or single (Subscribe: a "
                   "message per delivery)")
      ->type_name("HOW")
      ->capture_default_str()
      ->check(CLI::IsMember({"batches", "single"}));
  bench
      ->add_option("--drain-timeout", options->drain_timeout,
                   "After publishing, wait this long past the longest delay "
                   "for every message to arrive")
      ->type_name("DURATION")
      ->capture_default_str();
  bench
      ->add_option("--durability", options->durability,
                   "The broker's --durability, as you started it; only "
                   "recorded in the report")
      ->type_name("MODE")
      ->capture_default_str()
      ->check(CLI::IsMember({"sync", "async", "unknown"}));
  bench
      ->add_option("--retries", options->retries,
                   "Attempts per publish request, the first included (1: a "
                   "failed request counts as an error at once). More than 1 "
                   "gives every message an id, so that a retry cannot store "
                   "it twice; with every node in --addr, publishing then "
                   "rides out a failover")
      ->type_name("N")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  bench->add_flag("--reconnect", options->reconnect,
                  "Consumers open their stream again when it breaks (a "
                  "failover); deliveries unacked at the break come again "
                  "and count as duplicates");
  bench
      ->add_option("--lateness-log", options->lateness_log,
                   "Write each message's first delivery to FILE, a line "
                   "each: deliver_at and arrival, in microseconds since the "
                   "Unix epoch")
      ->type_name("FILE");
  bench->footer(R"(
Publishes --count messages (or for --duration) to a fresh topic from
--producers connections keeping --concurrency Publish calls in flight, while
--consumers streams take and ack what comes due (each read acks what it
read in one request). Each payload starts with
the message's sequence number, so that each delivery is counted once. A
progress line goes to stderr every second. At the end it prints: publish
throughput (first call sent to last answered) and call latency; delivery
throughput (first to last arrival); lateness = arrival time minus the
deliver_at the broker stamped, on this machine's clock, as p50, p90, p99,
p99.9 and max; early deliveries (must be 0); duplicates (redeliveries);
undelivered messages; errors. --json prints the same as one JSON object.

Exit status 1 when a delivery came early, a call failed, or messages were
not delivered in time; the summary is printed all the same.

Global options (--addr, --timeout, --json, --tls*, --token) are those of
the hourglass CLI; the token and TLS files may come from HOURGLASS_TOKEN,
HOURGLASS_TLS_CA, HOURGLASS_TLS_CERT and HOURGLASS_TLS_KEY.

Examples:
  hourglass-bench --batch=100 --count=1000000 --consumers=0
  hourglass-bench --batch=1 --concurrency=64 --duration=30s --consumers=0
  hourglass-bench --batch=1 --concurrency=64 --publish=stream --consumers=0
  hourglass-bench --rate=10000 --duration=60s --delay=1s..10s --batch=10
  hourglass-bench --count=1000000 --batch=1000 --delay=hot:20s --consumers=2
  hourglass-bench --json --count=10000 --durability=sync
  hourglass-bench --addr=n1:7070,n2:7070,n3:7070 --rate=10000 --duration=60s
      --delay=2s --retries=30 --timeout=60s --reconnect
      --lateness-log=lateness.txt   (through a failover))");
}

}  // namespace
}  // namespace hourglass::bench

int main(int argc, char** argv) {
  hourglass::cli::QuietGrpcLogs();
  hourglass::cli::GlobalOptions globals;
  hourglass::bench::BenchOptions options;
  CLI::App app(
      "hourglass-bench: load an Hourglass broker: publish, consume and "
      "measure throughput and lateness.",
      "hourglass-bench");
  app.failure_message([](const CLI::App* app, const CLI::Error& error) {
    return hourglass::cli::UsageFailure("hourglass-bench", app, error);
  });
  app.set_version_flag("--version", "hourglass-bench " HOURGLASS_VERSION);
  hourglass::cli::AddGlobalFlags(app, globals);
  for (CLI::Option* option : app.get_options({})) {
    if (option->get_name() == "--addr") option->type_name("HOST:PORT");
    if (option->get_name() == "--timeout") option->type_name("DURATION");
    if (option->get_name() == "--token") option->type_name("TOKEN");
    if (absl::StartsWith(option->get_name(), "--tls-")) {
      option->type_name(option->get_name() == "--tls-server-name" ? "NAME"
                                                                  : "FILE");
    }
  }
  hourglass::bench::AddFlags(&app, &options);
  app.get_formatter()->column_width(34);

  // CLI11 reports parse errors and --help by exceptions; they stop here.
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : hourglass::cli::kExitUsage;
  }
  const absl::Status status = hourglass::bench::Bench(globals, options);
  if (!status.ok()) {
    std::cerr << "hourglass-bench: " << status.message() << std::endl;
  }
  // The run's channels are gone; gRPC may still be tearing them down.
  hourglass::client::AwaitGrpcShutdown(absl::Seconds(5));
  return hourglass::cli::ExitCode(status);
}
