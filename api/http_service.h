#ifndef HOURGLASS_API_HTTP_SERVICE_H_
#define HOURGLASS_API_HTTP_SERVICE_H_

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hourglass::api {

// One HTTP request, as the metrics listener (metrics_http.h) parsed it.
struct HttpRequest {
  // "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE" or "OPTIONS".
  std::string method;
  // The path's segments, percent-decoded: "/api/v1/topics/a%2Fb" is
  // {"api", "v1", "topics", "a/b"}; "/" is {}. A trailing slash adds an
  // empty segment.
  std::vector<std::string> path;
  // The query's parameters, decoded ('+' is a space), in order.
  std::vector<std::pair<std::string, std::string>> query;
  // The Authorization header, if any.
  std::optional<std::string> authorization;
  // The headers that tell where a request comes from and what its body
  // is, if present: Host, Origin, Sec-Fetch-Site, Content-Type.
  std::optional<std::string> host;
  std::optional<std::string> origin;
  std::optional<std::string> sec_fetch_site;
  std::optional<std::string> content_type;
  std::string body;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  // Other headers, such as Allow or WWW-Authenticate.
  std::map<std::string, std::string> headers;
};

// What the metrics listener serves besides /metrics (MetricsServer::Mount):
// the web console.
//
// Thread-safe: Serve is called from the listener's worker threads at once.
class HttpService {
 public:
  virtual ~HttpService() = default;

  // Answers `request`. Blocks the worker until it has the answer, so it
  // must answer within the listener's request timeout.
  virtual HttpResponse Serve(const HttpRequest& request) = 0;
};

}  // namespace hourglass::api

#endif  // HOURGLASS_API_HTTP_SERVICE_H_
