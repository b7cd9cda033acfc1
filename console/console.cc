#include "console/console.h"

#include <optional>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "console/assets.h"

namespace hourglass::console {
namespace {

// Content-Type of an asset, by its name's extension.
absl::string_view ContentType(absl::string_view name) {
  if (absl::EndsWith(name, ".html")) return "text/html; charset=utf-8";
  if (absl::EndsWith(name, ".css")) return "text/css; charset=utf-8";
  if (absl::EndsWith(name, ".js")) return "text/javascript; charset=utf-8";
  return "application/octet-stream";
}

api::HttpResponse StaticFile(const api::HttpRequest& request) {
  api::HttpResponse response;
  const std::string name =
      request.path.empty() ? std::string("index.html") : request.path.front();
  const Asset* found = nullptr;
  if (request.path.size() <= 1) {
    for (const Asset& asset : Assets()) {
      if (asset.name == name) found = &asset;
    }
  }
  if (found == nullptr) {
    response.status = 404;
    response.body =
        absl::StrCat("no such page: /", absl::StrJoin(request.path, "/"), "\n");
    return response;
  }
  if (request.method != "GET" && request.method != "HEAD") {
    response.status = 405;
    response.headers["Allow"] = "GET, HEAD";
    response.body = absl::StrCat(request.method, " is not allowed on /",
                                 found->name, "; use GET\n");
    return response;
  }
  response.content_type = std::string(ContentType(found->name));
  response.body = std::string(found->bytes);
  return response;
}

}  // namespace

Console::Console(api::AdminCalls* calls, const api::Authorizer* authorizer,
                 api::AdminHttp::Options options, GuardOptions guard)
    : api_(calls, authorizer, options), guard_(std::move(guard)) {}

api::HttpResponse Console::Serve(const api::HttpRequest& request) {
  const bool is_api = request.path.size() >= 2 && request.path[0] == "api" &&
                      request.path[1] == "v1";
  std::optional<api::HttpResponse> refused = Guard(request, guard_, is_api);
  api::HttpResponse response =
      refused.has_value()
          ? *std::move(refused)
          : (is_api ? api_.Serve(request) : StaticFile(request));
  response.headers["Content-Security-Policy"] =
      "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'";
  response.headers["X-Content-Type-Options"] = "nosniff";
  response.headers["Cache-Control"] = "no-store";
  response.headers["Referrer-Policy"] = "no-referrer";
  return response;
}

}  // namespace hourglass::console
