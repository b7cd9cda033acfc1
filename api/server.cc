#include "api/server.h"

#include <chrono>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "api/call_metrics.h"
#include "api/pem.h"
#include "api/redirect.h"
#include "broker/store_health.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "spdlog/spdlog.h"

namespace hourglass::api {
namespace {

// Server credentials from `options`: plaintext, TLS or mutual TLS.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials(
    const ServerOptions& options) {
  const bool tls =
      !options.tls_cert_file.empty() || !options.tls_key_file.empty();
  if (!tls) {
    if (!options.tls_client_ca_file.empty()) {
      return absl::InvalidArgumentError(
          "--tls_client_ca needs --tls_cert and --tls_key: mutual TLS is TLS");
    }
    if (!options.tls_peer_ca_file.empty()) {
      return absl::InvalidArgumentError(
          "--tls_peer_ca needs --tls_cert and --tls_key: peers speak TLS to a "
          "server that does");
    }
    return grpc::InsecureServerCredentials();
  }
  if (options.tls_cert_file.empty() || options.tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "TLS needs both --tls_cert and --tls_key");
  }
  absl::StatusOr<std::string> cert =
      ReadPem("--tls_cert", options.tls_cert_file, "CERTIFICATE");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key =
      ReadPem("--tls_key", options.tls_key_file, "PRIVATE KEY");
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({*std::move(key), *std::move(cert)});
  // Client certificates are verified against both CAs; only
  // --tls_client_ca makes one required.
  for (const auto& [flag, path] :
       {std::pair<absl::string_view, const std::string&>{
            "--tls_client_ca", options.tls_client_ca_file},
        {"--tls_peer_ca", options.tls_peer_ca_file}}) {
    if (path.empty()) continue;
    absl::StatusOr<std::string> ca = ReadPem(flag, path, "CERTIFICATE");
    if (!ca.ok()) return ca.status();
    absl::StrAppend(&ssl.pem_root_certs, *ca, "\n");
  }
  if (!options.tls_client_ca_file.empty()) {
    ssl.client_certificate_request =
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  } else if (!options.tls_peer_ca_file.empty()) {
    ssl.client_certificate_request =
        GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

}  // namespace

bool IsLoopbackAddress(absl::string_view address) {
  if (absl::StartsWith(address, "unix:") ||
      absl::StartsWith(address, "unix-abstract:")) {
    return true;
  }
  absl::string_view host = address;
  if (const size_t colon = host.rfind(':'); colon != absl::string_view::npos) {
    host = host.substr(0, colon);
  }
  if (absl::ConsumePrefix(&host, "[")) {
    if (!absl::ConsumeSuffix(&host, "]")) return false;
    return host == "::1";
  }
  if (absl::EqualsIgnoreCase(host, "localhost")) return true;
  // 127.0.0.0/8, written as a dotted quad.
  const std::vector<absl::string_view> parts = absl::StrSplit(host, '.');
  if (parts.size() != 4 || parts[0] != "127") return false;
  for (absl::string_view part : parts) {
    int value = 0;
    if (!absl::SimpleAtoi(part, &value) || value < 0 || value > 255) {
      return false;
    }
  }
  return true;
}

absl::StatusOr<std::unique_ptr<Server>> Server::Start(
    const ServerOptions& options) {
  // Both switches are process-wide in gRPC and only affect servers built
  // after them; setting them again is harmless.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();

  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      Credentials(options);
  if (!credentials.ok()) return credentials.status();

  grpc::ServerBuilder builder;
  // Without this, gRPC binds with SO_REUSEPORT and a second broker on the
  // same port would silently share its traffic.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  int port = 0;
  builder.SetMaxReceiveMessageSize(options.max_receive_bytes);
  if (options.max_streams_per_connection > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                               options.max_streams_per_connection);
  }
  builder.AddChannelArgument(
      GRPC_ARG_KEEPALIVE_TIME_MS,
      static_cast<int>(absl::ToInt64Milliseconds(options.keepalive_time)));
  builder.AddChannelArgument(
      GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
      static_cast<int>(absl::ToInt64Milliseconds(options.keepalive_timeout)));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // By default the server stops pinging after two pings without data in
  // between: a quiet stream's dead peer would go unnoticed.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // Clients' own keepalive pings, down to every 10 s, are welcome.
  builder.AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10'000);
  if (options.grpc_memory_bytes > 0) {
    grpc::ResourceQuota quota("hourglassd");
    quota.Resize(options.grpc_memory_bytes);
    builder.SetResourceQuota(quota);
  }
  std::vector<
      std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
      interceptors;
  if (options.metrics != nullptr) {
    interceptors.push_back(
        std::make_unique<CallMetricsFactory>(options.metrics));
  }
  if (options.redirects) {
    interceptors.push_back(std::make_unique<RedirectFactory>());
  }
  if (!interceptors.empty()) {
    builder.experimental().SetInterceptorCreators(std::move(interceptors));
  }
  for (grpc::Service* service : options.services)
    builder.RegisterService(service);
  builder.AddListeningPort(options.listen_address, *credentials, &port);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    const bool tls = !options.tls_cert_file.empty();
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on \"", options.listen_address,
        "\": address in use, malformed or not local",
        tls ? ", or gRPC refused the TLS certificate and key (do they match?)"
            : ""));
  }
  grpc::HealthCheckServiceInterface& health = *server->GetHealthCheckService();
  health.SetServingStatus(kPrimaryHealthService, options.serving_at_start);
  if (!options.serving_at_start) health.SetServingStatus(false);
  return std::unique_ptr<Server>(new Server(std::move(server), port));
}

Server::Server(std::unique_ptr<grpc::Server> server, int port)
    : server_(std::move(server)), port_(port) {}

Server::~Server() { Shutdown(absl::ZeroDuration()); }

void FollowStoreHealth(broker::StoreHealth& health, Server* server) {
  health.Watch([server, first = true](const absl::Status& store) mutable {
    server->SetServing(store.ok());
    if (std::exchange(first, false) && store.ok()) return;  // As it starts.
    if (store.ok()) {
      spdlog::info("hourglassd is SERVING again: the store takes writes");
    } else {
      spdlog::error("hourglassd is NOT_SERVING: the store refuses writes: {}",
                    store.ToString());
    }
  });
}

void Server::SetServing(bool serving) {
  // Ignored by gRPC once Shutdown began: then NOT_SERVING stays.
  server_->GetHealthCheckService()->SetServingStatus(serving);
}

void Server::SetServing(absl::string_view service, bool serving) {
  server_->GetHealthCheckService()->SetServingStatus(std::string(service),
                                                     serving);
}

void Server::Shutdown(absl::Duration grace) {
  // grpc::Server::Shutdown is itself idempotent and thread-safe.
  server_->GetHealthCheckService()->Shutdown();
  server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
}

}  // namespace hourglass::api
