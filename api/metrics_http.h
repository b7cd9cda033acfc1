#ifndef HOURGLASS_API_METRICS_HTTP_H_
#define HOURGLASS_API_METRICS_HTTP_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace prometheus {
class Counter;
}  // namespace prometheus

namespace hourglass::metrics {
class Registry;
}  // namespace hourglass::metrics

namespace hourglass::api {

class HttpService;

// The Prometheus endpoint: answers GET /metrics with the registry rendered
// in the text exposition format 0.0.4 (Content-Type
// "text/plain; version=0.0.4; charset=utf-8"). Every other request goes to
// the HttpService mounted (Mount: the web console), or gets 404 without
// one.
// Each scrape runs the registry's collectors on one of the server's worker
// threads.
//
// Slow and idle clients cannot keep scrapes from being answered. A listener
// thread accepts connections and queues them for a fixed set of workers;
// each worker serves one request per connection (answered with
// Connection: close) within Options::request_timeout from when it takes the
// connection: every read and write waits at most until then, however the
// client trickles its bytes, and the connection is closed once it passes.
// A connection that finds every worker busy and Options::max_queued others
// waiting is answered 503 and closed at once, on the listener thread, without
// reading it. So a connection that is not refused is answered (or closed)
// within
//   (ceil(max_queued / workers) + 1) * request_timeout
// of its arrival: 10 s with the defaults. A request (head and body) of more
// than 64 KiB is not read further, and a body of more than 4 KiB is refused
// (413), so a client cannot make the server hold much for it. httplib parses
// requests and routes them; the connections, the queue and the deadline are
// this class's, since httplib 0.11.4 has only per-read timeouts and a queue
// without a bound (see metrics_http.cc).
//
// Refused and timed-out connections are counted in
// hourglass_metrics_http_refused_total and
// hourglass_metrics_http_timed_out_total.
//
// Thread-safe: every method may be called from any thread.
class MetricsServer {
 public:
  // Content-Type of /metrics.
  static constexpr char kContentType[] =
      "text/plain; version=0.0.4; charset=utf-8";

  struct Options {
    // Connections served at once, a thread each. Default: 4.
    size_t workers = 4;
    // Connections accepted while every worker is busy, waiting for one;
    // past them a connection is refused (503). Default: 4
    // (--metrics_max_queued_connections).
    size_t max_queued = 4;
    // How long a worker may spend on a connection: reading the request,
    // rendering, writing the answer. Past it the connection is closed,
    // whatever state it is in. Default: 5 s (--metrics_request_timeout).
    absl::Duration request_timeout = absl::Seconds(5);
  };

  // Binds `listen_address` ("host:port"; "[v6 address]:port"; port 0 lets
  // the OS choose, see port(); an empty host means every interface) and
  // starts serving `registry`, which is not owned and must outlive the
  // server. Returns INVALID_ARGUMENT naming the address if it is not
  // host:port or `options` are out of range (no worker, a request timeout
  // that is not positive), and UNAVAILABLE naming it if it cannot be bound
  // (in use, not a local address).
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      std::string listen_address, metrics::Registry* registry, Options options);
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      std::string listen_address, metrics::Registry* registry) {
    return Start(std::move(listen_address), registry, Options());
  }

  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Shuts down (see Shutdown) if still running.
  ~MetricsServer();

  // The port the server listens on (the OS's choice for port 0).
  int port() const { return port_; }

  // What the server is doing: connections being served and waiting, and
  // those refused and timed out so far.
  struct Load {
    size_t serving = 0;
    size_t queued = 0;
    uint64_t refused = 0;
    uint64_t timed_out = 0;
  };
  Load load();
  // Waits until `done(load())` is true; false if `timeout` passes first.
  bool AwaitLoad(const std::function<bool(const Load&)>& done,
                 absl::Duration timeout);

  // From now on, requests other than GET (and HEAD) /metrics go to
  // `service`; nullptr unmounts it (they get 404 again), once the requests
  // it is serving are answered. Not owned: it must stay valid until it is
  // unmounted or the server is shut down.
  void Mount(HttpService* service) ABSL_LOCKS_EXCLUDED(service_mu_);

  // Stops listening (the port is free once it returns), closes every
  // connection, served or waiting, at once, and waits for the server's
  // threads. A scrape being rendered finishes rendering first. Idempotent.
  void Shutdown();

 private:
  class Http;

  MetricsServer(Options options, metrics::Registry* registry);

  // The listener thread: accepts connections and admits or refuses them.
  void Listen();
  // Queues `socket` for a worker, or refuses it if the queue is full.
  void Admit(int socket);
  // A worker thread: serves queued connections until Shutdown.
  void Work();
  // Serves one request on `socket` and closes it; returns whether the
  // request timeout ended it.
  bool Serve(int socket);
  // Answers a request that is not for /metrics.
  void ServeOther(const httplib::Request& request, httplib::Response& response)
      ABSL_LOCKS_EXCLUDED(service_mu_);

  // Constant after Start.
  const Options options_;
  const std::unique_ptr<Http> http_;
  int listen_socket_ = -1;
  // An eventfd, readable once Shutdown starts: every wait on a socket
  // waits on it too.
  int stop_fd_ = -1;
  int port_ = 0;
  // Children of the registry's families, which outlives the server.
  prometheus::Counter* refused_total_ = nullptr;
  prometheus::Counter* timed_out_total_ = nullptr;

  // Notified when Shutdown starts.
  absl::Notification stopping_;

  absl::Mutex mu_;
  // Accepted sockets waiting for a worker, oldest first.
  std::deque<int> queue_ ABSL_GUARDED_BY(mu_);
  size_t serving_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t refused_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t timed_out_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;

  // Held shared while the service answers a request.
  absl::Mutex service_mu_;
  HttpService* service_ ABSL_GUARDED_BY(service_mu_) = nullptr;

  absl::Mutex threads_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  // Not joinable once shut down.
  std::thread listener_ ABSL_GUARDED_BY(threads_mu_);
  std::vector<std::thread> workers_ ABSL_GUARDED_BY(threads_mu_);
};

}  // namespace hourglass::api

#endif  // HOURGLASS_API_METRICS_HTTP_H_
