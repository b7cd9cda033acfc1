#ifndef HOURGLASS_API_METRICS_HTTP_H_
#define HOURGLASS_API_METRICS_HTTP_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace hourglass::metrics {
class Registry;
}  // namespace hourglass::metrics

namespace hourglass::api {

// The Prometheus endpoint: answers GET /metrics with the registry rendered
// in the text exposition format 0.0.4 (Content-Type
// "text/plain; version=0.0.4; charset=utf-8"), and 404 on any other path.
// Each scrape runs the registry's collectors on one of the server's worker
// threads.
//
// It runs its own listener thread and a few workers from Start until
// Shutdown. Thread-safe: every method may be called from any thread.
class MetricsServer {
 public:
  // Content-Type of /metrics.
  static constexpr char kContentType[] =
      "text/plain; version=0.0.4; charset=utf-8";

  // Binds `listen_address` ("host:port"; "[v6 address]:port"; port 0 lets
  // the OS choose, see port(); an empty host means every interface) and
  // starts serving `registry`, which is not owned and must outlive the
  // server. Returns INVALID_ARGUMENT naming the address if it is not
  // host:port, and UNAVAILABLE naming it if it cannot be bound (in use, not
  // a local address).
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      std::string listen_address, metrics::Registry* registry);

  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Shuts down (see Shutdown) if still running.
  ~MetricsServer();

  // The port the server listens on (the OS's choice for port 0).
  int port() const { return port_; }

  // Stops listening, lets scrapes in progress finish and waits for the
  // server's threads. Connections a scraper keeps open close within about a
  // second; one that sends nothing is dropped after two. Idempotent.
  void Shutdown();

 private:
  MetricsServer();

  // Constant after Start.
  std::unique_ptr<httplib::Server> server_;
  int port_ = 0;

  // Notified by the listener thread once the server counts as running:
  // httplib's stop() does nothing before that.
  absl::Notification running_;

  absl::Mutex mu_;
  // The thread in httplib's accept loop; not joinable once shut down.
  std::thread listener_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hourglass::api

#endif  // HOURGLASS_API_METRICS_HTTP_H_
