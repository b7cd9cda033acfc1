// hourglassd: the Hourglass broker daemon.
//
// Flags are absl flags, so --flagfile=FILE reads one flag per line and
// --help lists them all.

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "api/admin_calls.h"
#include "api/admin_service.h"
#include "api/auth.h"
#include "api/broker_service.h"
#include "api/metrics_http.h"
#include "api/recurrence_service.h"
#include "api/redirect.h"
#include "api/server.h"
#include "api/validation.h"
#include "broker/clock.h"
#include "broker/engine.h"
#include "broker/metrics.h"
#include "cmd/hourglassd/allocator.h"
#include "cmd/hourglassd/cluster_flags.h"
#include "cmd/hourglassd/cluster_join.h"
#include "cmd/hourglassd/sd_notify.h"
#include "cmd/hourglassd/signals.h"
#include "cmd/hourglassd/startup_warnings.h"
#include "cmd/hourglassd/web_console.h"
#include "node/cluster_node.h"
#include "spdlog/spdlog.h"
#include "storage/message_store.h"
#include "storage/rocksdb_store.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:7070",
          "host:port of the gRPC API. Loopback only by default.");
ABSL_FLAG(std::string, data_dir, "./data",
          "Directory of the embedded RocksDB store; created with mode 0700 "
          "if missing.");
ABSL_FLAG(std::string, snapshot_dir, "",
          "Directory the snapshots go into (hourglass snapshot, the Admin "
          "service's CreateSnapshot, the console): each names a new "
          "directory in it, never a path. Default: snapshots under "
          "--data_dir (the same filesystem, so that a snapshot links the "
          "store's files rather than copying them).");
ABSL_FLAG(std::string, restore_from, "",
          "Before starting, copy the snapshot in this directory (written by "
          "`hourglass snapshot`, or a stopped broker's data dir) into "
          "--data_dir, which must be missing or empty. With --etcd, the "
          "node creates a new cluster from it. Default: none.");
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1:9464",
          "host:port of the Prometheus endpoint, /metrics. Port 0 lets the "
          "OS choose one.");
ABSL_FLAG(std::string, console_allowed_hosts, "",
          "Host names, comma-separated, by which browsers may reach the web "
          "console besides its IP addresses and localhost (a DNS name of "
          "the machine, a load balancer's). A request naming another host "
          "gets 403, so that a web page whose name is made to resolve to "
          "this machine (DNS rebinding) cannot use the console. Default: "
          "none.");
ABSL_FLAG(bool, console, true,
          "Serve the web console at / on --metrics_listen: pages, and a JSON "
          "API under /api/v1/ that needs a token with the admin role when "
          "--auth_tokens is on. --console=false serves /metrics only.");
ABSL_FLAG(absl::Duration, metrics_request_timeout, absl::Seconds(5),
          "Longest a /metrics connection may take once a worker serves it "
          "(reading the request, writing the answer); past it the connection "
          "is closed, so slow clients cannot hold the workers.");
ABSL_FLAG(uint32_t, metrics_max_queued_connections, 4,
          "/metrics connections that may wait while all 4 workers are busy; "
          "past them a connection is answered 503 at once.");
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
ABSL_FLAG(uint64_t, max_batch, 10000,
          "Most messages in one Publish (and ids in one dead-letter "
          "redrive).");
ABSL_FLAG(uint64_t, max_headers, 64, "Most headers of one message.");
ABSL_FLAG(uint64_t, max_header_bytes, 64 << 10,
          "Most bytes of one message's header keys and values together.");
ABSL_FLAG(absl::Duration, max_ack_timeout, absl::Hours(24),
          "Longest ack_timeout a Subscribe stream may ask for.");
ABSL_FLAG(uint32_t, max_attempts, 16,
          "Deliveries of a message to one group before it moves to the "
          "dead-letter topic <topic>.dlq.");
ABSL_FLAG(uint64_t, max_groups_per_topic, 64,
          "Most consumer groups of one topic (each group gets every message "
          "of its topic). 0: no limit.");
ABSL_FLAG(uint32_t, max_credit, 10000,
          "Largest max_in_flight (credit) a Subscribe stream may ask for.");
ABSL_FLAG(absl::Duration, ack_timeout, absl::Seconds(30),
          "Ack timeout of Subscribe streams that set none: an unacknowledged "
          "delivery is delivered again after it.");
ABSL_FLAG(absl::Duration, stream_stall_timeout, absl::Seconds(60),
          "A Subscribe stream that writes nothing to its client for this "
          "long while deliveries wait to be sent is ended, and its "
          "deliveries go back to the group at once.");
ABSL_FLAG(uint64_t, stream_outbox_bytes, 16 << 20,
          "Most bytes of deliveries waiting to be written to one Subscribe "
          "stream; past it the stream gets no more until it writes (a "
          "larger delivery still goes alone).");
ABSL_FLAG(absl::Duration, keepalive_time, absl::Seconds(30),
          "How often the gRPC server pings each connection (HTTP/2 "
          "keepalive). A dead client's streams end within about "
          "--keepalive_time + --keepalive_timeout.");
ABSL_FLAG(absl::Duration, keepalive_timeout, absl::Seconds(10),
          "How long a keepalive ping may go unanswered before the server "
          "closes the connection and ends its calls.");
ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(10),
          "How long running calls may take to finish on SIGTERM/SIGINT.");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain of the gRPC server (server certificate "
          "first). With --tls_key, the gRPC API speaks only TLS; in cluster "
          "mode the nodes speak it to each other too, presenting it as "
          "client certificate (--tls_peer_ca). Default: plaintext.");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA certificates of clients: turns on mutual TLS, refusing "
          "clients without a certificate they signed. Needs --tls_cert. With "
          "--auth_tokens, a certificate gets roles only from a `cert` line "
          "naming it.");
ABSL_FLAG(std::string, auth_tokens, "",
          "File of bearer tokens, and of client certificate names (`cert` "
          "lines), with their roles (produce, consume, admin) and topic "
          "patterns, one per line (format in docs/tls-and-tokens.md); "
          "refused if group or others may read it; reloaded on SIGHUP. "
          "Default: no authentication.");
ABSL_FLAG(uint64_t, max_streams, 10000,
          "Most streams (Subscribe, SubscribeBatches, PublishStream) open at "
          "once; the next is refused with "
          "RESOURCE_EXHAUSTED. 0: no limit.");
ABSL_FLAG(int32_t, max_streams_per_connection, 1000,
          "Most concurrent calls on one client connection (HTTP/2 "
          "MAX_CONCURRENT_STREAMS); more wait. 0: gRPC's default, no limit.");
ABSL_FLAG(uint64_t, max_request_bytes, 64 << 20,
          "Largest gRPC request accepted, in bytes; a larger one gets "
          "RESOURCE_EXHAUSTED.");
ABSL_FLAG(uint64_t, max_publish_queue_bytes, 256 << 20,
          "Most bytes of Publish requests being written at once; past it a "
          "Publish gets RESOURCE_EXHAUSTED. 0: no limit.");
ABSL_FLAG(uint64_t, grpc_memory_mb, 0,
          "Memory gRPC may use for connections and calls, in MiB (a gRPC "
          "resource quota); under pressure new connections are refused. 0: "
          "no limit.");

namespace {

using ::hourglass::hourglassd::BlockTerminationSignals;
using ::hourglass::hourglassd::WaitForTerminationSignal;
using ::hourglass::hourglassd::WarnIfCertLinesUnused;
using ::hourglass::hourglassd::WarnIfDataDirOpen;
using ::hourglass::hourglassd::WarnIfExposed;

[[noreturn]] void Fail(const std::string& reason) {
  spdlog::critical("hourglassd: {}", reason);
  std::exit(1);
}

// Metrics about the process itself, which need nothing from the broker.
void AddProcessMetrics(hourglass::metrics::Registry& registry,
                       absl::Time start_time) {
  using hourglass::metrics::Metric;
  registry.Gauges(Metric::kBuildInfo).Add({HOURGLASS_VERSION}).Set(1);
  registry.Gauges(Metric::kStartTimeSeconds)
      .Add({})
      .Set(absl::ToDoubleSeconds(start_time - absl::UnixEpoch()));
}

// Tells the service manager `state` through `notifier` (systemd's
// Type=notify); a failure is logged, not fatal: the broker serves the same.
void NotifyServiceManager(
    const hourglass::hourglassd::ServiceNotifier& notifier,
    std::string_view state) {
  if (absl::Status sent = notifier.Notify(state); !sent.ok()) {
    spdlog::warn("WARNING: {}", std::string(sent.message()));
  }
}

// Single node: restores --restore_from if given, opens the store in
// `data_dir` and logs the effective configuration. Exits on failure.
std::unique_ptr<hourglass::storage::MessageStore> OpenSingleStore(
    const std::string& data_dir, const std::string& durability,
    int32_t block_cache_mb, absl::FunctionRef<void()> log_configuration) {
  if (const std::string snapshot = absl::GetFlag(FLAGS_restore_from);
      !snapshot.empty()) {
    const absl::Time restore_start = absl::Now();
    if (absl::Status restored =
            hourglass::storage::RocksDbStore::Restore(snapshot, data_dir);
        !restored.ok()) {
      Fail(std::string(restored.message()));
    }
    spdlog::info("hourglassd restored snapshot {} into data dir {} in {}",
                 snapshot, data_dir,
                 absl::FormatDuration(absl::Now() - restore_start));
  }
  const absl::Time open_start = absl::Now();
  absl::StatusOr<std::unique_ptr<hourglass::storage::MessageStore>> store =
      hourglass::storage::RocksDbStore::Open({
          .path = data_dir,
          .sync = durability == "sync",
          .block_cache_bytes = static_cast<size_t>(block_cache_mb) << 20,
          .on_upgrade =
              [&data_dir](uint32_t from, uint32_t to) {
                spdlog::info(
                    "hourglassd upgraded data dir {} from format version {} "
                    "to {}; older hourglassd versions no longer open it",
                    data_dir, from, to);
              },
          .on_upgrade_progress =
              [&data_dir](uint64_t counted) {
                spdlog::info(
                    "hourglassd upgrading data dir {} to format version 4: "
                    "counted {} scheduled messages so far",
                    data_dir, counted);
              },
      });
  if (!store.ok()) Fail(std::string(store.status().message()));
  log_configuration();
  spdlog::info(
      "hourglassd opened data dir {} (durability={}, block cache {} MiB) in {}",
      data_dir, durability, block_cache_mb,
      absl::FormatDuration(absl::Now() - open_start));
  WarnIfDataDirOpen(data_dir);
  return *std::move(store);
}

// --snapshot_dir, or snapshots under `data_dir`, made absolute. Exits if
// it cannot be.
std::string SnapshotDir(const std::string& data_dir) {
  std::string dir = absl::GetFlag(FLAGS_snapshot_dir);
  if (dir.empty()) dir = data_dir + "/snapshots";
  std::error_code error;
  const std::filesystem::path absolute =
      std::filesystem::absolute(dir, error).lexically_normal();
  if (error) {
    Fail(absl::StrCat("cannot make --snapshot_dir \"", dir,
                      "\" absolute: ", error.message()));
  }
  return absolute.string();
}

// Cluster mode: checks the cluster flags, agrees on the cluster's shard
// count with etcd (waiting for etcd if it does not answer), and opens the
// node (a gate per shard, the stores of the shards it held, its connection
// to etcd). Exits on failure. Null if a SIGTERM or SIGINT among `signals`
// came while it waited for etcd (logged).
std::unique_ptr<hourglass::node::ClusterNode> OpenClusterNode(
    const std::string& data_dir, bool sync, int32_t block_cache_mb,
    const hourglass::broker::Engine::Options& engine_options,
    hourglass::broker::Clock* clock,
    const hourglass::api::Authorizer* authorizer, const sigset_t& signals) {
  const hourglass::hourglassd::ServerTlsFlags server_tls = {
      .cert = absl::GetFlag(FLAGS_tls_cert),
      .key = absl::GetFlag(FLAGS_tls_key),
      .client_ca = absl::GetFlag(FLAGS_tls_client_ca)};
  absl::StatusOr<hourglass::node::ClusterNodeOptions> from_flags =
      hourglass::hourglassd::ClusterOptionsFromFlags(server_tls);
  if (!from_flags.ok()) Fail(std::string(from_flags.status().message()));
  hourglass::node::ClusterNodeOptions options = *std::move(from_flags);
  for (const std::string& warning :
       hourglass::hourglassd::ClusterFlagWarnings(server_tls, options)) {
    spdlog::warn("WARNING: {}", warning);
  }
  options.data_dir = data_dir;
  options.restore_from = absl::GetFlag(FLAGS_restore_from);
  options.sync = sync;
  options.block_cache_bytes = static_cast<size_t>(block_cache_mb) << 20;
  // Replication requests stay well inside what the peers receive
  // (--max_request_bytes, the same on every node); larger entries go in
  // pieces.
  options.peer_request_bytes = static_cast<size_t>(std::min<uint64_t>(
      uint64_t{4} << 20, absl::GetFlag(FLAGS_max_request_bytes) / 2));
  options.engine = engine_options;
  options.clock = clock;
  options.authorizer = authorizer;
  absl::StatusOr<std::unique_ptr<hourglass::node::ClusterNode>> node =
      hourglass::hourglassd::OpenClusterNode(
          std::move(options), hourglass::hourglassd::ShardsFlag(), signals);
  if (!node.ok()) Fail(std::string(node.status().message()));
  if (*node == nullptr) return nullptr;  // A signal came.
  WarnIfDataDirOpen(data_dir);
  return *std::move(node);
}

}  // namespace

int main(int argc, char** argv) {
  // Debian builds abseil without NDEBUG, and so every Mutex lock and
  // unlock also updates a global graph of lock order, under a global lock,
  // to detect deadlocks: a cost on every thread of the broker. The test
  // binaries, which do not run this main, keep that check.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  absl::SetProgramUsageMessage(
      "The Hourglass delayed-message broker.\n\n"
      "  hourglassd [--listen=127.0.0.1:7070] [--data_dir=./data] "
      "[--durability=sync|async] [--flagfile=FILE]");
  // --help lists the flags of this file; absl would look for a file named
  // after the program (hourglassd.cc) and list none.
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view path) {
    return absl::StrContains(path, "cmd/hourglassd/");
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  usage.version_string = [] {
    return absl::StrCat(
        "hourglassd ", HOURGLASS_VERSION, " (data format ",
        hourglass::storage::RocksDbStore::kFormatVersion, "; opens formats ",
        hourglass::storage::RocksDbStore::kOldestFormatVersion, " to ",
        hourglass::storage::RocksDbStore::kFormatVersion, ")\n",
        "memory allocator: ", hourglass::hourglassd::AllocatorName(), "\n");
  };
  absl::SetFlagsUsageConfig(usage);
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
  const absl::Duration max_ack_timeout = absl::GetFlag(FLAGS_max_ack_timeout);
  if (max_ack_timeout < ack_timeout) {
    Fail(absl::StrCat("--max_ack_timeout (",
                      absl::FormatDuration(max_ack_timeout),
                      ") must be at least --ack_timeout (",
                      absl::FormatDuration(ack_timeout), ")"));
  }

  const absl::Duration stall_timeout =
      absl::GetFlag(FLAGS_stream_stall_timeout);
  if (stall_timeout < absl::Seconds(1)) {
    Fail(absl::StrCat("--stream_stall_timeout must be at least 1s, not ",
                      absl::FormatDuration(stall_timeout)));
  }
  const uint64_t outbox_bytes = absl::GetFlag(FLAGS_stream_outbox_bytes);
  if (outbox_bytes < 1) Fail("--stream_outbox_bytes must be at least 1, not 0");
  const absl::Duration keepalive_time = absl::GetFlag(FLAGS_keepalive_time);
  const absl::Duration keepalive_timeout =
      absl::GetFlag(FLAGS_keepalive_timeout);
  for (const auto& [flag, value] :
       {std::pair{"--keepalive_time", keepalive_time},
        std::pair{"--keepalive_timeout", keepalive_timeout}}) {
    if (value < absl::Seconds(1) || value > absl::Hours(24)) {
      Fail(absl::StrCat(flag, " must be between 1s and 24h, not ",
                        absl::FormatDuration(value)));
    }
  }

  hourglass::api::MetricsServer::Options metrics_options;
  metrics_options.request_timeout =
      absl::GetFlag(FLAGS_metrics_request_timeout);
  metrics_options.max_queued =
      absl::GetFlag(FLAGS_metrics_max_queued_connections);
  if (metrics_options.request_timeout < absl::Milliseconds(100)) {
    Fail(absl::StrCat("--metrics_request_timeout must be at least 100ms, not ",
                      absl::FormatDuration(metrics_options.request_timeout)));
  }

  const uint64_t max_request_bytes = absl::GetFlag(FLAGS_max_request_bytes);
  if (max_request_bytes < 1024 || max_request_bytes > INT32_MAX) {
    Fail(absl::StrCat("--max_request_bytes must be between 1024 and ",
                      INT32_MAX, ", not ", max_request_bytes));
  }
  const int32_t max_streams_per_connection =
      absl::GetFlag(FLAGS_max_streams_per_connection);
  if (max_streams_per_connection < 0) {
    Fail(absl::StrCat("--max_streams_per_connection must be >= 0, not ",
                      max_streams_per_connection));
  }

  // systemd's Type=notify (deploy/hourglassd.service) hears READY=1 once
  // the broker recovered and serves, STOPPING=1 when shutdown begins. A
  // malformed $NOTIFY_SOCKET fails fast: the manager would otherwise wait
  // out its start timeout and kill a broker that serves.
  absl::StatusOr<hourglass::hourglassd::ServiceNotifier> notifier =
      hourglass::hourglassd::ServiceNotifier::FromEnvironment();
  if (!notifier.ok()) Fail(std::string(notifier.status().message()));

  // Read before anything starts, so that a bad file fails fast.
  std::unique_ptr<hourglass::api::Authorizer> authorizer;
  if (const std::string tokens = absl::GetFlag(FLAGS_auth_tokens);
      !tokens.empty()) {
    absl::StatusOr<std::unique_ptr<hourglass::api::Authorizer>> loaded =
        hourglass::api::Authorizer::FromFile(tokens);
    if (!loaded.ok()) Fail(std::string(loaded.status().message()));
    authorizer = *std::move(loaded);
  }

  const sigset_t signals = BlockTerminationSignals();
  // Outlives everything that records into it: declared before them.
  hourglass::metrics::Registry registry;
  const absl::Time started_at = absl::Now();
  AddProcessMetrics(registry, started_at);
  // Bound before the data dir is opened, so that a port in use fails fast
  // and no broker work is started only to be dropped; announced after the
  // gRPC address, which tools read first.
  const std::string metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  auto metrics_server = hourglass::api::MetricsServer::Start(
      metrics_listen, &registry, metrics_options);
  if (!metrics_server.ok())
    Fail(std::string(metrics_server.status().message()));

  hourglass::broker::SystemClock clock;
  hourglass::broker::Engine::Options engine_options;
  engine_options.scheduler.horizon = horizon;
  engine_options.metrics = &registry;
  engine_options.dispatcher.max_attempts = max_attempts;
  engine_options.dispatcher.max_groups_per_topic =
      absl::GetFlag(FLAGS_max_groups_per_topic);
  engine_options.dispatcher.default_ack_timeout = ack_timeout;
  engine_options.dispatcher.stall_timeout = stall_timeout;
  engine_options.dispatcher.max_unsent_bytes = outbox_bytes;

  // The effective configuration, logged once the flags, the metrics
  // address and the data dir passed their checks (whose failures are one
  // line each).
  auto log_configuration = [&] {
    spdlog::info(
        "hourglassd {} running with --listen={} --data_dir={} "
        "--metrics_listen={} --metrics_request_timeout={} "
        "--metrics_max_queued_connections={} "
        "--durability={} --horizon={} --block_cache_mb={} "
        "--max_payload_bytes={} --max_delay={} --max_batch={} "
        "--max_attempts={} --ack_timeout={} --max_credit={} --max_streams={} "
        "--shutdown_grace={} --tls={} --auth_tokens={}",
        HOURGLASS_VERSION, absl::GetFlag(FLAGS_listen),
        absl::GetFlag(FLAGS_data_dir), absl::GetFlag(FLAGS_metrics_listen),
        absl::FormatDuration(metrics_options.request_timeout),
        metrics_options.max_queued, durability, absl::FormatDuration(horizon),
        block_cache_mb, absl::GetFlag(FLAGS_max_payload_bytes),
        absl::FormatDuration(absl::GetFlag(FLAGS_max_delay)),
        absl::GetFlag(FLAGS_max_batch), max_attempts,
        absl::FormatDuration(ack_timeout), absl::GetFlag(FLAGS_max_credit),
        absl::GetFlag(FLAGS_max_streams),
        absl::FormatDuration(absl::GetFlag(FLAGS_shutdown_grace)),
        absl::GetFlag(FLAGS_tls_cert).empty() ? "off" : "on",
        absl::GetFlag(FLAGS_auth_tokens).empty()
            ? "off"
            : absl::GetFlag(FLAGS_auth_tokens));
  };

  // Single node: the store and the engine open here. Cluster mode: the node
  // opens its shards' stores, and a shard's engine runs only while this
  // node is the shard's primary (node/cluster_node.h).
  const std::string data_dir = absl::GetFlag(FLAGS_data_dir);
  std::unique_ptr<hourglass::storage::MessageStore> store;
  std::unique_ptr<hourglass::broker::Engine> engine;
  std::unique_ptr<hourglass::node::ClusterNode> cluster_node;
  hourglass::broker::Broker* broker = nullptr;
  if (!hourglass::hourglassd::EtcdFlag().empty()) {
    log_configuration();
    cluster_node =
        OpenClusterNode(data_dir, durability == "sync", block_cache_mb,
                        engine_options, &clock, authorizer.get(), signals);
    if (cluster_node == nullptr) {  // Stopped while it waited for etcd.
      (*metrics_server)->Shutdown();
      spdlog::info("hourglassd stopped");
      return 0;
    }
    broker = cluster_node->broker();
  } else {
    if (absl::Status unused = hourglass::hourglassd::CheckNoClusterTlsFlags();
        !unused.ok()) {
      Fail(std::string(unused.message()));
    }
    store = OpenSingleStore(data_dir, durability, block_cache_mb,
                            log_configuration);
    const absl::Time recover_start = absl::Now();
    absl::StatusOr<std::unique_ptr<hourglass::broker::Engine>> opened =
        hourglass::broker::Engine::Open(store.get(), &clock, engine_options);
    if (!opened.ok()) Fail(std::string(opened.status().message()));
    engine = *std::move(opened);
    engine->Start();
    const hourglass::broker::Dispatcher::Recovery& recovery =
        engine->dispatcher().recovery();
    const hourglass::broker::BrokerInfo info = engine->Info();
    spdlog::info(
        "hourglassd recovered store {} (format version {}) in {}: {} groups, "
        "{} deliveries that were in flight are due again, {} wait out a nack; "
        "loading {} ahead",
        info.store_id, info.format_version,
        absl::FormatDuration(absl::Now() - recover_start), recovery.groups,
        recovery.due_again, recovery.waiting,
        absl::FormatDuration(engine_options.scheduler.horizon));
    broker = engine.get();
  }

  hourglass::api::Limits limits;
  limits.snapshot_dir = SnapshotDir(data_dir);
  limits.max_payload_bytes = absl::GetFlag(FLAGS_max_payload_bytes);
  limits.max_delay = absl::GetFlag(FLAGS_max_delay);
  limits.max_batch = absl::GetFlag(FLAGS_max_batch);
  limits.max_headers = absl::GetFlag(FLAGS_max_headers);
  limits.max_header_bytes = absl::GetFlag(FLAGS_max_header_bytes);
  limits.max_ack_timeout = absl::GetFlag(FLAGS_max_ack_timeout);
  limits.max_credit = absl::GetFlag(FLAGS_max_credit);
  limits.max_streams = absl::GetFlag(FLAGS_max_streams);
  limits.max_publish_queue_bytes = absl::GetFlag(FLAGS_max_publish_queue_bytes);
  hourglass::api::BrokerService broker_service(broker, &clock, limits,
                                               authorizer.get());

  hourglass::api::AdminService admin_service(broker, &clock, limits, started_at,
                                             authorizer.get());
  hourglass::api::RecurrenceService recurrence_service(&clock,
                                                       authorizer.get());

  // The web console answers on the metrics listener from here on (until
  // then its paths get 404), through the same calls as the Admin service.
  std::optional<hourglass::hourglassd::WebConsole> console;
  if (absl::GetFlag(FLAGS_console)) {
    console = hourglass::hourglassd::MountWebConsole(
        {.broker = broker,
         .clock = &clock,
         .limits = limits,
         .started_at = started_at,
         .authorizer = authorizer != nullptr
                           ? authorizer.get()
                           : &hourglass::api::Authorizer::Disabled(),
         .publisher = &broker_service,
         .cluster_node = cluster_node.get(),
         .timeout = metrics_options.request_timeout,
         .port = (*metrics_server)->port(),
         .allowed_hosts = absl::GetFlag(FLAGS_console_allowed_hosts)},
        **metrics_server);
  }

  hourglass::api::ServerOptions options;
  options.listen_address = absl::GetFlag(FLAGS_listen);
  options.services = {&broker_service, &admin_service, &recurrence_service};
  if (cluster_node != nullptr) {
    for (grpc::Service* service : cluster_node->services()) {
      options.services.push_back(service);
    }
    options.redirects = true;
  }
  // Room for the largest legal Publish (every message at the payload and
  // header limits, plus ids and framing), but no more than
  // --max_request_bytes.
  options.max_receive_bytes = static_cast<int>(std::min<uint64_t>(
      max_request_bytes,
      limits.max_batch *
              (limits.max_payload_bytes + limits.max_header_bytes + (4 << 10)) +
          (1 << 20)));
  options.tls_cert_file = absl::GetFlag(FLAGS_tls_cert);
  options.tls_key_file = absl::GetFlag(FLAGS_tls_key);
  options.tls_client_ca_file = absl::GetFlag(FLAGS_tls_client_ca);
  if (cluster_node != nullptr) {
    // Peers present their certificates as clients (node/cluster_node.h).
    options.tls_peer_ca_file = cluster_node->peer_tls().ca_file;
  }
  options.max_streams_per_connection = max_streams_per_connection;
  options.grpc_memory_bytes = absl::GetFlag(FLAGS_grpc_memory_mb) << 20;
  options.keepalive_time = keepalive_time;
  options.keepalive_timeout = keepalive_timeout;
  options.metrics = &registry;
  // A cluster node is not ready until it plays its part in its shards.
  options.serving_at_start = cluster_node == nullptr;
  auto server = hourglass::api::Server::Start(options);
  if (!server.ok()) Fail(std::string(server.status().message()));
  const bool tls = !options.tls_cert_file.empty();
  const bool mutual_tls = !options.tls_client_ca_file.empty();
  WarnIfExposed(options.listen_address, tls, mutual_tls, authorizer != nullptr,
                metrics_listen, console.has_value());
  if (authorizer != nullptr) {
    WarnIfCertLinesUnused(*authorizer, authorizer->counts().certificates,
                          mutual_tls);
  }
  // SIGTERM or SIGINT, when it came before the node joined its cluster.
  std::optional<int> early_signal;
  if (engine != nullptr) {
    // gRPC health follows the store: NOT_SERVING while it refuses writes.
    hourglass::api::FollowStoreHealth(engine->store_health(), server->get());
  } else {
    // gRPC health follows the node's part in its shards (what "" and
    // hourglass.v1.Primary mean: node/node_health.h; deploy/README.md says
    // what probes ask).
    cluster_node->WatchHealth([server = server->get(), first = true](
                                  hourglass::node::NodeHealth health) mutable {
      server->SetServing("", health.member);
      server->SetServing(hourglass::api::kPrimaryHealthService, health.primary);
      if (std::exchange(first, false)) return;  // As it starts.
      spdlog::info("hourglassd health: {} (\"\"), {} ({})",
                   health.member ? "SERVING" : "NOT_SERVING",
                   health.primary ? "SERVING" : "NOT_SERVING",
                   hourglass::api::kPrimaryHealthService);
    });
    // Joins once the server listens: peers and clients reach it at once.
    const std::string advertise = hourglass::hourglassd::AdvertiseAddress(
        options.listen_address, (*server)->port());
    // The node stays a member until it shuts down: through an etcd outage
    // its shards keep serving, and a lease etcd ended meanwhile is replaced
    // (cluster::Member).
    absl::StatusOr<std::optional<int>> joined =
        hourglass::hourglassd::JoinCluster(*cluster_node, advertise, signals);
    if (!joined.ok()) Fail(std::string(joined.status().message()));
    early_signal = *joined;
    if (!early_signal.has_value()) {
      spdlog::info("hourglassd joined cluster {} as node {}, advertising {}",
                   cluster_node->cluster(), cluster_node->node_id(), advertise);
    }
  }
  NotifyServiceManager(
      *notifier,
      absl::StrCat("READY=1\nSTATUS=serving on ", options.listen_address,
                   " (port ", (*server)->port(), ")"));
  spdlog::info("hourglassd listening on {} (port {}): {}, {}",
               options.listen_address, (*server)->port(),
               mutual_tls ? "mutual TLS" : (tls ? "TLS" : "plaintext"),
               authorizer != nullptr
                   ? absl::StrCat("tokens from ", authorizer->origin())
                   : std::string("no authentication"));
  spdlog::info("hourglassd serving metrics on {} (port {})", metrics_listen,
               (*metrics_server)->port());
  if (console.has_value()) {
    spdlog::info("hourglassd serving the web console on {} (port {}) at /{}",
                 metrics_listen, (*metrics_server)->port(),
                 authorizer != nullptr ? "; its API needs an admin token" : "");
  }
  const int signal =
      early_signal.has_value()
          ? *early_signal
          : WaitForTerminationSignal(signals, authorizer.get(), mutual_tls,
                                     broker_service, cluster_node.get());
  spdlog::info("hourglassd received {}, shutting down",
               signal == SIGTERM ? "SIGTERM" : "SIGINT");
  NotifyServiceManager(*notifier,
                       absl::StrCat("STOPPING=1\nSTATUS=shutting down on ",
                                    signal == SIGTERM ? "SIGTERM" : "SIGINT"));
  // Scrapes and the console stop first: collectors and the console read
  // the broker.
  (*metrics_server)->Shutdown();
  // Streams end first (consumers reconnect elsewhere or later); calls in
  // progress, such as publishes being written, finish within the grace.
  if (engine != nullptr) {
    engine->Shutdown(
        absl::UnavailableError("hourglassd is shutting down; reconnect later"));
  } else {
    cluster_node->Leave();
  }
  (*server)->Shutdown(absl::GetFlag(FLAGS_shutdown_grace));
  if (engine != nullptr)
    engine->store_health().Unwatch();  // It tells the server.
  server->reset();
  engine.reset();
  cluster_node.reset();
  store.reset();
  spdlog::info("hourglassd stopped");
  return 0;
}
