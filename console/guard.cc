#include "console/guard.h"

#include <arpa/inet.h>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "api/admin_http.h"

namespace hourglass::console {
namespace {

bool IsIpAddress(const std::string& host) {
  unsigned char address[16];
  return inet_pton(AF_INET, host.c_str(), address) == 1 ||
         inet_pton(AF_INET6, host.c_str(), address) == 1;
}

// Whether `host` (a Host header's value) names this console.
bool Answers(absl::string_view host, const GuardOptions& options) {
  std::string name;
  absl::string_view port_text;
  if (absl::StartsWith(host, "[")) {  // [v6]:port
    const size_t close = host.find(']');
    if (close == absl::string_view::npos) return false;
    name = std::string(host.substr(1, close - 1));
    absl::string_view rest = host.substr(close + 1);
    if (!rest.empty()) {
      if (!absl::ConsumePrefix(&rest, ":")) return false;
      port_text = rest;
    }
  } else {
    const size_t colon = host.rfind(':');
    name = std::string(host.substr(0, colon));
    if (colon != absl::string_view::npos) port_text = host.substr(colon + 1);
  }
  int port = 80;  // http's, when the Host header has none.
  if (!port_text.empty() && !absl::SimpleAtoi(port_text, &port)) return false;
  if (port != options.port) return false;
  if (IsIpAddress(name)) return true;
  name = absl::AsciiStrToLower(name);
  if (name == "localhost") return true;
  for (const std::string& allowed : options.allowed_hosts) {
    if (absl::AsciiStrToLower(allowed) == name) return true;
  }
  return false;
}

api::HttpResponse Refusal(bool api, int status, const absl::Status& why) {
  if (api) {
    api::HttpResponse response = api::JsonError(why);
    response.status = status;
    return response;
  }
  api::HttpResponse response;
  response.status = status;
  response.body = absl::StrCat(why.message(), "\n");
  return response;
}

}  // namespace

std::optional<api::HttpResponse> Guard(const api::HttpRequest& request,
                                       const GuardOptions& options, bool api) {
  const std::string host = request.host.value_or("");
  if (!Answers(host, options)) {
    return Refusal(
        api, 403,
        absl::PermissionDeniedError(absl::StrCat(
            "this console answers to its IP addresses, localhost and "
            "--console_allowed_hosts, not \"",
            host, "\"")));
  }
  if (!api) return std::nullopt;
  if (request.sec_fetch_site.has_value() &&
      absl::EqualsIgnoreCase(*request.sec_fetch_site, "cross-site")) {
    return Refusal(api, 403,
                   absl::PermissionDeniedError(
                       "the console's API does not answer other sites' pages "
                       "(Sec-Fetch-Site: cross-site)"));
  }
  const std::string own = absl::StrCat("http://", host);
  if (request.origin.has_value() &&
      !absl::EqualsIgnoreCase(*request.origin, own)) {
    return Refusal(api, 403,
                   absl::PermissionDeniedError(absl::StrCat(
                       "the console's API answers its own pages only (", own,
                       "), not a page of ", *request.origin)));
  }
  const bool changes = request.method == "POST" || request.method == "PUT" ||
                       request.method == "PATCH" || request.method == "DELETE";
  if (changes) {
    const std::string type = request.content_type.value_or("");
    const absl::string_view media =
        absl::string_view(type).substr(0, type.find(';'));
    if (!absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(media),
                                "application/json")) {
      return Refusal(
          api, 415,
          absl::InvalidArgumentError(absl::StrCat(
              request.method, " needs Content-Type: application/json, not \"",
              type, "\"")));
    }
  }
  return std::nullopt;
}

}  // namespace hourglass::console
