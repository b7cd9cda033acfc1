#include "api/metrics_http.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "broker/metrics.h"
#include "httplib.h"

namespace hourglass::api {
namespace {

// Worker threads: scrapes are serialised by the registry anyway; the extra
// ones serve scrapers that keep idle connections open.
constexpr size_t kWorkers = 4;
// Bounds on how long an idle or silent connection holds a worker, and so on
// how long Shutdown can wait for one.
constexpr time_t kKeepAliveSeconds = 1;
constexpr time_t kReadTimeoutSeconds = 2;

struct HostPort {
  std::string host;
  int port = 0;
};

absl::StatusOr<HostPort> ParseHostPort(const std::string& address) {
  const size_t colon = address.rfind(':');
  HostPort parsed;
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(address.substr(colon + 1), &parsed.port) ||
      parsed.port < 0 || parsed.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics address \"", address, "\" is not host:port (port 0-65535)"));
  }
  parsed.host = address.substr(0, colon);
  if (parsed.host.size() >= 2 && parsed.host.front() == '[' &&
      parsed.host.back() == ']') {
    parsed.host = parsed.host.substr(1, parsed.host.size() - 2);
  }
  if (parsed.host.empty()) parsed.host = "0.0.0.0";
  return parsed;
}

// httplib's default sets SO_REUSEPORT, with which a second server on the
// same port would silently share its traffic; SO_REUSEADDR only allows
// rebinding while old connections linger in TIME_WAIT.
void SetSocketOptions(int socket) {
  const int yes = 1;
  setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
}

}  // namespace

MetricsServer::MetricsServer() : server_(std::make_unique<httplib::Server>()) {}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    std::string listen_address, metrics::Registry* registry) {
  absl::StatusOr<HostPort> parsed = ParseHostPort(listen_address);
  if (!parsed.ok()) return parsed.status();

  std::unique_ptr<MetricsServer> server(new MetricsServer());
  httplib::Server& http = *server->server_;
  http.set_socket_options(SetSocketOptions);
  http.set_keep_alive_timeout(kKeepAliveSeconds);
  http.set_read_timeout(kReadTimeoutSeconds, 0);
  // httplib calls this in the listener thread after it starts counting as
  // running, before it accepts anything.
  http.new_task_queue = [running = &server->running_] {
    running->Notify();
    return new httplib::ThreadPool(kWorkers);
  };
  http.Get("/metrics",
           [registry](const httplib::Request&, httplib::Response& response) {
             response.status = 200;
             response.body = registry->Render();
             response.set_header("Content-Type", kContentType);
           });

  errno = 0;
  const int port =
      parsed->port == 0
          ? http.bind_to_any_port(parsed->host)
          : (http.bind_to_port(parsed->host, parsed->port) ? parsed->port : -1);
  if (port < 0) {
    // errno is what the last bind or listen left, when that is what failed;
    // a host that does not resolve leaves no useful errno.
    const int error = errno;
    const bool bind_error =
        error == EADDRINUSE || error == EADDRNOTAVAIL || error == EACCES;
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on \"", listen_address, "\": ",
                     bind_error ? std::strerror(error)
                                : "address in use, malformed or not local"));
  }
  server->port_ = port;

  absl::MutexLock lock(&server->mu_);
  server->listener_ = std::thread([&http] { http.listen_after_bind(); });
  return server;
}

MetricsServer::~MetricsServer() { Shutdown(); }

void MetricsServer::Shutdown() {
  absl::MutexLock lock(&mu_);
  if (!listener_.joinable()) return;
  // stop() before the listener counts as running would be lost, and the
  // listener would then accept forever.
  running_.WaitForNotification();
  server_->stop();
  listener_.join();
}

}  // namespace hourglass::api
