// Which requests the console's guard (console/guard.h) lets through:
// Host, Origin, Sec-Fetch-Site and Content-Type, case by case.

#include "console/guard.h"

#include <optional>
#include <string>

#include "api/http_service.h"
#include "gtest/gtest.h"

namespace hourglass::console {
namespace {

const GuardOptions kOptions{.port = 9464, .allowed_hosts = {"Broker.Example"}};

// The status Guard answers `request` with; 0 when it lets it through.
int StatusOf(const api::HttpRequest& request, bool api = true) {
  std::optional<api::HttpResponse> refused = Guard(request, kOptions, api);
  return refused.has_value() ? refused->status : 0;
}

api::HttpRequest Request(std::string method, std::string host) {
  api::HttpRequest request;
  request.method = std::move(method);
  request.host = std::move(host);
  return request;
}

TEST(GuardTest, HostMustNameThisConsole) {
  for (const char* host :
       {"127.0.0.1:9464", "10.1.2.3:9464", "[::1]:9464", "localhost:9464",
        "LOCALHOST:9464", "broker.example:9464", "BROKER.EXAMPLE:9464"}) {
    EXPECT_EQ(StatusOf(Request("GET", host)), 0) << host;
    EXPECT_EQ(StatusOf(Request("GET", host), /*api=*/false), 0) << host;
  }
  for (const char* host :
       {"evil.example:9464", "127.0.0.1:9465", "127.0.0.1", "localhost",
        "[::1]", "[::1:9464", "127.0.0.1:x", "", "broker.example.evil:9464"}) {
    EXPECT_EQ(StatusOf(Request("GET", host)), 403) << host;
    EXPECT_EQ(StatusOf(Request("GET", host), /*api=*/false), 403) << host;
  }
  api::HttpRequest none;
  none.method = "GET";
  EXPECT_EQ(StatusOf(none), 403);
  // Port 80 is the default of a Host header without one.
  const GuardOptions on80{.port = 80};
  EXPECT_FALSE(Guard(Request("GET", "localhost"), on80, true).has_value());
}

TEST(GuardTest, TheApiAnswersItsOwnOriginOnly) {
  api::HttpRequest request = Request("GET", "127.0.0.1:9464");
  request.origin = "http://127.0.0.1:9464";
  EXPECT_EQ(StatusOf(request), 0);
  request.origin = "https://127.0.0.1:9464";
  EXPECT_EQ(StatusOf(request), 403);
  request.origin = "http://localhost:9464";  // Another origin.
  EXPECT_EQ(StatusOf(request), 403);
  request.origin.reset();
  request.sec_fetch_site = "cross-site";
  EXPECT_EQ(StatusOf(request), 403);
  for (const char* site : {"same-origin", "same-site", "none"}) {
    request.sec_fetch_site = site;
    EXPECT_EQ(StatusOf(request), 0) << site;
  }
  // The pages hold no data: only their Host is checked.
  request.sec_fetch_site = "cross-site";
  request.origin = "https://evil.example";
  EXPECT_EQ(StatusOf(request, /*api=*/false), 0);
}

TEST(GuardTest, ChangesNeedAJsonBody) {
  for (const char* method : {"POST", "PUT", "PATCH", "DELETE"}) {
    api::HttpRequest request = Request(method, "127.0.0.1:9464");
    EXPECT_EQ(StatusOf(request), 415) << method;
    for (const char* type :
         {"text/plain", "multipart/form-data; boundary=x",
          "application/x-www-form-urlencoded", "application/jsonx"}) {
      request.content_type = type;
      EXPECT_EQ(StatusOf(request), 415) << method << " " << type;
    }
    for (const char* type : {"application/json", "Application/JSON",
                             "application/json; charset=utf-8"}) {
      request.content_type = type;
      EXPECT_EQ(StatusOf(request), 0) << method << " " << type;
    }
  }
  EXPECT_EQ(StatusOf(Request("GET", "127.0.0.1:9464")), 0);
  EXPECT_EQ(StatusOf(Request("HEAD", "127.0.0.1:9464")), 0);
}

}  // namespace
}  // namespace hourglass::console
