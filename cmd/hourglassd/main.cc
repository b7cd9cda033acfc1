// hourglassd: the Hourglass broker daemon.
//
// Flags are absl flags, so --flagfile=FILE reads one flag per line and
// --help lists them all.

#include <signal.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "api/admin_service.h"
#include "api/broker_service.h"
#include "api/metrics_http.h"
#include "api/server.h"
#include "api/validation.h"
#include "broker/clock.h"
#include "broker/engine.h"
#include "broker/metrics.h"
#include "spdlog/spdlog.h"
#include "storage/message_store.h"
#include "storage/rocksdb_store.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:7070",
          "host:port of the gRPC API. Loopback only by default.");
ABSL_FLAG(std::string, data_dir, "./data",
          "Directory of the embedded RocksDB store.");
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1:9464",
          "host:port of the Prometheus endpoint, /metrics. Port 0 lets the "
          "OS choose one.");
ABSL_FLAG(std::string, durability, "sync",
          "sync: Publish answers after fsync; async: after the write-ahead "
          "log write, without fsync.");
ABSL_FLAG(int32_t, block_cache_mb, 64,
          "RocksDB block cache shared by all tables, in MiB.");
ABSL_FLAG(absl::Duration, horizon, absl::Seconds(60),
          "Messages due within this time are held in memory; the rest wait "
          "on disk.");
ABSL_FLAG(uint64_t, max_payload_bytes, 1 << 20,
          "Largest message payload accepted, in bytes.");
ABSL_FLAG(absl::Duration, max_delay, absl::Hours(24 * 3650),
          "Longest delay accepted (default 3650 days).");
ABSL_FLAG(uint64_t, max_batch, 10000, "Most messages in one Publish.");
ABSL_FLAG(uint32_t, max_attempts, 16,
          "Deliveries of a message to one group before it moves to the "
          "dead-letter topic <topic>.dlq.");
ABSL_FLAG(uint32_t, max_credit, 10000,
          "Largest max_in_flight (credit) a Subscribe stream may ask for.");
ABSL_FLAG(absl::Duration, ack_timeout, absl::Seconds(30),
          "Ack timeout of Subscribe streams that set none: an unacknowledged "
          "delivery is delivered again after it.");
ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(10),
          "How long running calls may take to finish on SIGTERM/SIGINT.");

namespace {

[[noreturn]] void Fail(const std::string& reason) {
  spdlog::critical("hourglassd: {}", reason);
  std::exit(1);
}

// Blocks SIGTERM and SIGINT in this thread, and so in every thread started
// after it, so that WaitForTerminationSignal receives them synchronously.
sigset_t BlockTerminationSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

// Metrics about the process itself, which need nothing from the broker.
absl::Status AddProcessMetrics(hourglass::metrics::Registry& registry,
                               absl::Time start_time) {
  absl::StatusOr<hourglass::metrics::GaugeFamily*> build_info =
      registry.AddGauge("hourglass_build_info",
                        "Always 1; the labels say which hourglassd this is.",
                        {"version"});
  if (!build_info.ok()) return build_info.status();
  (*build_info)->WithLabels({HOURGLASS_VERSION})->Set(1);
  absl::StatusOr<hourglass::metrics::GaugeFamily*> start_time_seconds =
      registry.AddGauge("hourglass_start_time_seconds",
                        "When hourglassd started, in seconds since the Unix "
                        "epoch.");
  if (!start_time_seconds.ok()) return start_time_seconds.status();
  (*start_time_seconds)
      ->WithLabels({})
      ->Set(absl::ToDoubleSeconds(start_time - absl::UnixEpoch()));
  return absl::OkStatus();
}

int WaitForTerminationSignal(const sigset_t& signals) {
  int signal = 0;
  while (sigwait(&signals, &signal) != 0) {
  }
  return signal;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "The Hourglass delayed-message broker.\n\n"
      "  hourglassd [--listen=127.0.0.1:7070] [--data_dir=./data] "
      "[--durability=sync|async] [--flagfile=FILE]");
  absl::ParseCommandLine(argc, argv);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %^%l%$ %v");

  const std::string durability = absl::GetFlag(FLAGS_durability);
  if (durability != "sync" && durability != "async") {
    Fail(absl::StrCat("--durability must be sync or async, not \"", durability,
                      "\""));
  }

  const int32_t block_cache_mb = absl::GetFlag(FLAGS_block_cache_mb);
  if (block_cache_mb < 0) {
    Fail(absl::StrCat("--block_cache_mb must be >= 0, not ", block_cache_mb));
  }

  const absl::Duration horizon = absl::GetFlag(FLAGS_horizon);
  if (horizon < absl::Seconds(1) || horizon > absl::Hours(24)) {
    Fail(absl::StrCat("--horizon must be between 1s and 24h, not ",
                      absl::FormatDuration(horizon)));
  }

  const uint32_t max_attempts = absl::GetFlag(FLAGS_max_attempts);
  if (max_attempts < 1) Fail("--max_attempts must be at least 1, not 0");
  const absl::Duration ack_timeout = absl::GetFlag(FLAGS_ack_timeout);
  if (ack_timeout < absl::Milliseconds(1)) {
    Fail(absl::StrCat("--ack_timeout must be at least 1ms, not ",
                      absl::FormatDuration(ack_timeout)));
  }

  const sigset_t signals = BlockTerminationSignals();
  // Outlives everything that records into it: declared before them.
  hourglass::metrics::Registry registry;
  const absl::Time started_at = absl::Now();
  if (absl::Status status = AddProcessMetrics(registry, started_at);
      !status.ok()) {
    Fail(std::string(status.message()));
  }
  // Bound before the data dir is opened, so that a port in use fails fast
  // and no broker work is started only to be dropped; announced after the
  // gRPC address, which tools read first.
  const std::string metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  auto metrics_server =
      hourglass::api::MetricsServer::Start(metrics_listen, &registry);
  if (!metrics_server.ok())
    Fail(std::string(metrics_server.status().message()));

  const absl::Time open_start = absl::Now();
  absl::StatusOr<std::unique_ptr<hourglass::storage::MessageStore>> store =
      hourglass::storage::RocksDbStore::Open({
          .path = absl::GetFlag(FLAGS_data_dir),
          .sync = durability == "sync",
          .block_cache_bytes = static_cast<size_t>(block_cache_mb) << 20,
      });
  if (!store.ok()) Fail(std::string(store.status().message()));
  spdlog::info(
      "hourglassd opened data dir {} (durability={}, block cache {} MiB) in {}",
      absl::GetFlag(FLAGS_data_dir), durability, block_cache_mb,
      absl::FormatDuration(absl::Now() - open_start));

  hourglass::broker::SystemClock clock;
  hourglass::broker::Engine::Options engine_options;
  engine_options.scheduler.horizon = horizon;
  engine_options.dispatcher.max_attempts = max_attempts;
  engine_options.dispatcher.default_ack_timeout = ack_timeout;
  const absl::Time recover_start = absl::Now();
  absl::StatusOr<std::unique_ptr<hourglass::broker::Engine>> engine =
      hourglass::broker::Engine::Open(store->get(), &clock, engine_options);
  if (!engine.ok()) Fail(std::string(engine.status().message()));
  (*engine)->Start();
  spdlog::info("hourglassd recovered in {} (horizon {})",
               absl::FormatDuration(absl::Now() - recover_start),
               absl::FormatDuration(engine_options.scheduler.horizon));

  hourglass::api::Limits limits;
  limits.max_payload_bytes = absl::GetFlag(FLAGS_max_payload_bytes);
  limits.max_delay = absl::GetFlag(FLAGS_max_delay);
  limits.max_batch = absl::GetFlag(FLAGS_max_batch);
  limits.max_credit = absl::GetFlag(FLAGS_max_credit);
  hourglass::api::BrokerService broker_service(engine->get(), &clock, limits);

  hourglass::api::AdminService admin_service(engine->get(), &clock, limits,
                                             started_at);

  hourglass::api::ServerOptions options;
  options.listen_address = absl::GetFlag(FLAGS_listen);
  options.services = {&broker_service, &admin_service};
  // Room for the largest legal Publish: every message at the payload limit,
  // plus headers and framing; gRPC caps a message at 2 GiB.
  options.max_receive_bytes = static_cast<int>(std::min<uint64_t>(
      INT32_MAX,
      limits.max_batch * (limits.max_payload_bytes + (16 << 10)) + (1 << 20)));
  auto server = hourglass::api::Server::Start(options);
  if (!server.ok()) Fail(std::string(server.status().message()));
  spdlog::info("hourglassd listening on {} (port {})", options.listen_address,
               (*server)->port());
  spdlog::info("hourglassd serving metrics on {} (port {})", metrics_listen,
               (*metrics_server)->port());

  const int signal = WaitForTerminationSignal(signals);
  spdlog::info("hourglassd received {}, shutting down",
               signal == SIGTERM ? "SIGTERM" : "SIGINT");
  // Scrapes stop first: collectors may read the broker.
  (*metrics_server)->Shutdown();
  // Streams end first (consumers reconnect elsewhere or later); calls in
  // progress, such as publishes being written, finish within the grace.
  (*engine)->Shutdown(
      absl::UnavailableError("hourglassd is shutting down; reconnect later"));
  (*server)->Shutdown(absl::GetFlag(FLAGS_shutdown_grace));
  server->reset();
  engine->reset();
  store->reset();
  spdlog::info("hourglassd stopped");
  return 0;
}
