#include "api/metrics_http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "api/http_service.h"
#include "broker/metrics.h"
#include "httplib.h"

// Why not httplib's own server loop (cpp-httplib 0.11.4, Debian 12): its
// only timeouts are per read and per write (set_read_timeout), so a client
// that sends a byte every second holds a worker for as long as it likes (a
// request may have any number of header lines); its ThreadPool queues
// connections without a bound and has no way to refuse one (the
// max-queued-requests argument came in a later version); set_idle_interval
// only calls TaskQueue::on_idle while no connection arrives, and
// set_keep_alive_max_count bounds requests per connection, not time. The
// accepted socket never reaches code outside httplib before the request is
// read (process_and_close_socket is private), so no watchdog could shut it
// down. What httplib does offer is Server::process_request, protected,
// which reads, routes and answers one request on any httplib::Stream. So
// this file owns the sockets, the queue and the workers, and hands httplib
// a Stream whose every wait ends at the connection's deadline.

namespace hourglass::api {
namespace {

using SteadyTime = std::chrono::steady_clock::time_point;

// Most bytes read from one connection: a GET's head is far smaller, and
// httplib keeps what it reads (headers, a body) in memory.
constexpr size_t kMaxRequestBytes = 64 << 10;
// A body beyond this is refused (413) and not kept.
constexpr size_t kMaxBodyBytes = 4 << 10;
// How long the listener waits before accepting again when the process is
// out of file descriptors or memory (the connection waits in the backlog).
constexpr absl::Duration kAcceptBackoff = absl::Milliseconds(100);

// The answer to a connection refused because the queue is full.
constexpr char kBusyBody[] =
    "too many connections to the metrics endpoint; retry\n";

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

// The address and port of a socket's end, or ("", -1).
void AddressOf(int socket, bool peer, std::string& ip, int& port) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  ip.clear();
  port = -1;
  if ((peer
           ? getpeername(socket, reinterpret_cast<sockaddr*>(&address), &length)
           : getsockname(socket, reinterpret_cast<sockaddr*>(&address),
                         &length)) != 0) {
    return;
  }
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(address);
    inet_ntop(AF_INET, &v4.sin_addr, text, sizeof(text));
    port = ntohs(v4.sin_port);
  } else if (address.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(address);
    inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof(text));
    port = ntohs(v6.sin6_port);
  }
  ip = text;
}

// A connection as httplib reads and writes it, bounded in time and size:
// every wait ends at `deadline`, or as soon as `stop_fd` is readable
// (Shutdown), and reading stops after kMaxRequestBytes. Reads are buffered,
// since httplib reads a request head a byte at a time.
//
// Used by one thread.
class DeadlineStream final : public httplib::Stream {
 public:
  // REQUIRES: `socket` is non-blocking.
  DeadlineStream(int socket, int stop_fd, SteadyTime deadline)
      : socket_(socket), stop_fd_(stop_fd), deadline_(deadline) {}

  bool is_readable() const override { return begin_ < end_ || Wait(POLLIN); }
  bool is_writable() const override { return Wait(POLLOUT); }

  ssize_t read(char* out, size_t size) override {
    if (begin_ == end_) {
      const ssize_t n = Receive();
      if (n <= 0) return n;
      begin_ = 0;
      end_ = static_cast<size_t>(n);
    }
    const size_t n = std::min(size, end_ - begin_);
    std::memcpy(out, buffer_ + begin_, n);
    begin_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* data, size_t size) override {
    while (true) {
      if (!Wait(POLLOUT)) return -1;
      const ssize_t n = send(socket_, data, size, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n >= 0) return n;
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return -1;
      }
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    AddressOf(socket_, /*peer=*/true, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    AddressOf(socket_, /*peer=*/false, ip, port);
  }
  int socket() const override { return socket_; }

  // Whether a wait ended at the deadline.
  bool timed_out() const { return timed_out_; }

 private:
  // Receives into the buffer: bytes received, 0 at the end of the stream,
  // -1 on an error, the deadline, Shutdown or kMaxRequestBytes.
  ssize_t Receive() {
    while (true) {
      if (received_ >= kMaxRequestBytes || !Wait(POLLIN)) return -1;
      const ssize_t n =
          recv(socket_, buffer_,
               std::min(sizeof(buffer_), kMaxRequestBytes - received_),
               MSG_DONTWAIT);
      if (n >= 0) {
        received_ += static_cast<size_t>(n);
        return n;
      }
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return -1;
      }
    }
  }

  // Waits until the socket has `events` (or an error or hang-up, which the
  // next recv or send reports); false at the deadline or at Shutdown.
  bool Wait(short events) const {
    while (true) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(
          deadline_ - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        timed_out_ = true;
        return false;
      }
      pollfd fds[2] = {{socket_, events, 0}, {stop_fd_, POLLIN, 0}};
      const int ready = poll(
          fds, 2, static_cast<int>(std::min<int64_t>(left.count(), 1 << 30)));
      if (ready < 0 && errno != EINTR) return false;
      if (ready <= 0) continue;
      if (fds[1].revents != 0) return false;
      if (fds[0].revents != 0) return true;
    }
  }

  const int socket_;
  const int stop_fd_;
  const SteadyTime deadline_;
  mutable bool timed_out_ = false;
  size_t received_ = 0;
  char buffer_[4096];
  size_t begin_ = 0;
  size_t end_ = 0;
};

// Answers 503 and closes `socket` without waiting: it is non-blocking, and a
// client that does not read the answer loses it. What the client already
// sent is read first (without waiting), so that the close does not reset
// the connection under the answer.
void Refuse(int socket) {
  const std::string answer = absl::StrCat(
      "HTTP/1.1 503 Service Unavailable\r\n"
      "Content-Type: text/plain\r\n"
      "Content-Length: ",
      sizeof(kBusyBody) - 1,
      "\r\n"
      "Connection: close\r\n"
      "\r\n",
      kBusyBody);
  (void)send(socket, answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  char discard[4096];
  for (size_t read = 0; read < kMaxRequestBytes;) {
    const ssize_t n = recv(socket, discard, sizeof(discard), MSG_DONTWAIT);
    if (n <= 0) break;
    read += static_cast<size_t>(n);
  }
  close(socket);
}

}  // namespace

// httplib's request parsing, routing and answering, on connections it does
// not accept itself.
class MetricsServer::Http final : public httplib::Server {
 public:
  // Reads one request from `stream` and answers it, with Connection: close.
  void ServeOne(httplib::Stream& stream) {
    bool connection_closed = true;
    process_request(stream, /*close_connection=*/true, connection_closed,
                    nullptr);
  }

  // Takes the socket bind_to_port or bind_to_any_port opened, which
  // httplib then no longer touches.
  int TakeListeningSocket() { return svr_sock_.exchange(INVALID_SOCKET); }
};

MetricsServer::MetricsServer(Options options, metrics::Registry* registry)
    : options_(options), http_(std::make_unique<Http>()) {
  refused_total_ =
      &registry->Counters(metrics::Metric::kMetricsHttpRefusedTotal).Add({});
  timed_out_total_ =
      &registry->Counters(metrics::Metric::kMetricsHttpTimedOutTotal).Add({});
}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    std::string listen_address, metrics::Registry* registry, Options options) {
  absl::StatusOr<HostPort> parsed = ParseHostPort(listen_address);
  if (!parsed.ok()) return parsed.status();
  if (options.workers == 0 || options.request_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics server needs at least one worker and a positive request "
        "timeout, not ",
        options.workers, " and ",
        absl::FormatDuration(options.request_timeout)));
  }

  std::unique_ptr<MetricsServer> server(new MetricsServer(options, registry));
  Http& http = *server->http_;
  http.set_socket_options(SetSocketOptions);
  http.set_payload_max_length(kMaxBodyBytes);
  http.Get("/metrics",
           [registry](const httplib::Request&, httplib::Response& response) {
             response.status = 200;
             response.body = registry->Render();
             response.set_header("Content-Type", kContentType);
           });
  MetricsServer* s = server.get();
  auto other = [s](const httplib::Request& request,
                   httplib::Response& response) {
    s->ServeOther(request, response);
  };
  http.Get(".*", other);
  http.Post(".*", other);
  http.Put(".*", other);
  http.Patch(".*", other);
  http.Delete(".*", other);
  http.Options(".*", other);

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
  server->listen_socket_ = http.TakeListeningSocket();
  // Non-blocking, so that accept never waits for a connection that went
  // away between poll and accept.
  fcntl(server->listen_socket_, F_SETFL,
        fcntl(server->listen_socket_, F_GETFL) | O_NONBLOCK);
  server->stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (server->stop_fd_ < 0) {
    const int error = errno;
    close(server->listen_socket_);
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on \"", listen_address,
                     "\": eventfd: ", std::strerror(error)));
  }

  absl::MutexLock lock(&s->threads_mu_);
  s->listener_ = std::thread([s] { s->Listen(); });
  for (size_t i = 0; i < options.workers; ++i) {
    s->workers_.emplace_back([s] { s->Work(); });
  }
  return server;
}

MetricsServer::~MetricsServer() {
  Shutdown();
  if (stop_fd_ >= 0) close(stop_fd_);
}

void MetricsServer::Listen() {
  while (true) {
    pollfd fds[2] = {{listen_socket_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno != EINTR &&
          stopping_.WaitForNotificationWithTimeout(kAcceptBackoff)) {
        return;
      }
      continue;
    }
    if (fds[1].revents != 0) return;
    const int socket =
        accept4(listen_socket_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (socket >= 0) {
      Admit(socket);
    } else if ((errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
                errno == ENOMEM) &&
               stopping_.WaitForNotificationWithTimeout(kAcceptBackoff)) {
      return;
    }
    // Otherwise the connection went away (ECONNABORTED, EAGAIN) or a
    // signal came (EINTR): accept the next one.
  }
}

void MetricsServer::Admit(int socket) {
  {
    absl::MutexLock lock(&mu_);
    // Waiting connections go to idle workers at once, so this bounds the
    // queue by max_queued.
    if (!stopped_ &&
        queue_.size() + serving_ < options_.workers + options_.max_queued) {
      queue_.push_back(socket);
      return;
    }
    // Counted together, so that what load() says /metrics says too.
    ++refused_;
    refused_total_->Increment();
  }
  Refuse(socket);
}

void MetricsServer::Work() {
  while (true) {
    int socket;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopped_ || !queue_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (stopped_) return;  // Shutdown closes what is queued.
      socket = queue_.front();
      queue_.pop_front();
      ++serving_;
    }
    const bool timed_out = Serve(socket);
    {
      absl::MutexLock lock(&mu_);
      --serving_;
      if (timed_out) {
        ++timed_out_;
        timed_out_total_->Increment();
      }
    }
  }
}

bool MetricsServer::Serve(int socket) {
  DeadlineStream stream(
      socket, stop_fd_,
      std::chrono::steady_clock::now() +
          absl::ToChronoMilliseconds(options_.request_timeout));
  http_->ServeOne(stream);
  close(socket);
  return stream.timed_out();
}

void MetricsServer::Mount(HttpService* service) {
  absl::MutexLock lock(&service_mu_);
  service_ = service;
}

void MetricsServer::ServeOther(const httplib::Request& request,
                               httplib::Response& response) {
  absl::ReaderMutexLock lock(&service_mu_);
  if (service_ == nullptr) {
    response.status = 404;
    return;
  }
  HttpRequest in;
  in.method = request.method;
  // The raw target, so that an encoded '/' stays inside its segment.
  const absl::string_view target = request.target;
  absl::string_view path = target.substr(0, target.find('?'));
  absl::ConsumePrefix(&path, "/");
  for (absl::string_view segment : absl::StrSplit(path, '/')) {
    in.path.push_back(httplib::detail::decode_url(std::string(segment),
                                                  /*convert_plus_to_space=*/
                                                  false));
  }
  if (in.path.size() == 1 && in.path[0].empty()) in.path.clear();
  in.query.assign(request.params.begin(), request.params.end());
  for (const auto& [name, field] :
       {std::pair{"Authorization", &HttpRequest::authorization},
        std::pair{"Host", &HttpRequest::host},
        std::pair{"Origin", &HttpRequest::origin},
        std::pair{"Sec-Fetch-Site", &HttpRequest::sec_fetch_site},
        std::pair{"Content-Type", &HttpRequest::content_type}}) {
    if (request.has_header(name)) in.*field = request.get_header_value(name);
  }
  in.body = request.body;
  HttpResponse out = service_->Serve(in);
  response.status = out.status;
  for (const auto& [name, value] : out.headers) {
    response.set_header(name, value);
  }
  response.set_content(out.body, out.content_type);
}

MetricsServer::Load MetricsServer::load() {
  absl::MutexLock lock(&mu_);
  return {serving_, queue_.size(), refused_, timed_out_};
}

bool MetricsServer::AwaitLoad(const std::function<bool(const Load&)>& done,
                              absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto reached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return done(Load{serving_, queue_.size(), refused_, timed_out_});
  };
  return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
}

void MetricsServer::Shutdown() {
  absl::MutexLock threads_lock(&threads_mu_);
  if (!listener_.joinable()) return;
  std::deque<int> queued;
  {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
    queued.swap(queue_);
  }
  stopping_.Notify();
  // Wakes the listener and every wait on a served connection.
  const uint64_t one = 1;
  (void)write(stop_fd_, &one, sizeof(one));
  listener_.join();
  for (std::thread& worker : workers_) worker.join();
  workers_.clear();
  for (const int socket : queued) close(socket);
  close(listen_socket_);
}

}  // namespace hourglass::api
