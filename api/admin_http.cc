#include "api/admin_http.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/notification.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace hourglass::api {
namespace {

namespace v1 = hourglass::v1;
namespace pb = google::protobuf;

constexpr char kJson[] = "application/json";

// `text` as a JSON string, quoted and escaped by protobuf's printer.
std::string JsonString(absl::string_view text) {
  pb::Value value;
  value.set_string_value(std::string(text));
  std::string json;
  (void)pb::util::MessageToJsonString(value, &json);
  return json;
}

// Path segments that name a field of the request ("{topic}"), by name.
using PathFields = std::map<std::string, std::string>;

// Calls `method` of `calls` with `request` and waits up to `timeout` for
// its answer. The call's state is shared with its callback, which may run
// after a timeout.
template <typename Request, typename Response>
absl::StatusOr<std::string> Call(
    AdminCalls& calls,
    void (AdminCalls::*method)(const Grant&, const Request&, Response*,
                               AdminCalls::Done),
    const Grant& grant, Request request, absl::Duration timeout) {
  struct Pending {
    Request request;
    Response response;
    absl::Status status;
    absl::Notification done;
  };
  auto pending = std::make_shared<Pending>();
  pending->request = std::move(request);
  (calls.*method)(grant, pending->request, &pending->response,
                  [pending](absl::Status status) {
                    pending->status = std::move(status);
                    pending->done.Notify();
                  });
  if (!pending->done.WaitForNotificationWithTimeout(timeout)) {
    return absl::DeadlineExceededError(
        absl::StrCat("the broker did not answer within ",
                     absl::FormatDuration(timeout), "; retry"));
  }
  if (!pending->status.ok()) return pending->status;
  pb::util::JsonPrintOptions print;
  print.always_print_primitive_fields = true;
  std::string json;
  if (pb::util::Status s =
          pb::util::MessageToJsonString(pending->response, &json, print);
      !s.ok()) {
    return absl::InternalError(absl::StrCat("cannot print the answer as JSON: ",
                                            s.message().ToString()));
  }
  return json;
}

// Fills `message` from the query parameters (every method but POST) or the
// JSON body (POST), then from `path`. INVALID_ARGUMENT naming what is
// wrong.
absl::Status Parse(const HttpRequest& http, const PathFields& path,
                   pb::Message& message) {
  std::string json;
  absl::string_view what;
  if (http.method == "POST") {
    if (!http.query.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "query parameter \"", http.query.front().first,
          "\": a POST takes its fields as a JSON body, not in the query"));
    }
    json = http.body.empty() ? "{}" : http.body;
    what = "JSON body";
  } else {
    // Each parameter as a JSON string, which the JSON mapping accepts for
    // numbers, enums and timestamps alike.
    std::set<absl::string_view> names;
    for (const auto& [name, value] : http.query) {
      if (!names.insert(name).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("query parameter \"", name, "\" is given twice"));
      }
      absl::StrAppend(&json, json.empty() ? "{" : ",", JsonString(name), ":",
                      JsonString(value));
    }
    absl::StrAppend(&json, json.empty() ? "{}" : "}");
    what = "query";
  }
  if (pb::util::Status s = pb::util::JsonStringToMessage(json, &message);
      !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad ", what, ": ", s.message().ToString()));
  }
  const pb::Descriptor* descriptor = message.GetDescriptor();
  const pb::Reflection* reflection = message.GetReflection();
  for (const auto& [name, value] : path) {
    const pb::FieldDescriptor* field = descriptor->FindFieldByName(name);
    const std::string given = reflection->GetString(message, field);
    if (!given.empty() && given != value) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " \"", given, "\" in the ", what,
                       " differs from the path's \"", value, "\""));
    }
    reflection->SetString(&message, field, value);
  }
  return absl::OkStatus();
}

// One endpoint: a method and a path pattern under /api/v1/, whose
// segments in braces name string fields of the request.
struct Route {
  absl::string_view method;
  std::vector<absl::string_view> pattern;
  // Parses the request and calls the broker: the JSON answer.
  std::function<absl::StatusOr<std::string>(AdminCalls&, const Grant&,
                                            const HttpRequest&,
                                            const PathFields&, absl::Duration)>
      call;
};

template <typename Request, typename Response>
Route MakeRoute(absl::string_view method,
                std::vector<absl::string_view> pattern,
                void (AdminCalls::*admin)(const Grant&, const Request&,
                                          Response*, AdminCalls::Done)) {
  return Route{method, std::move(pattern),
               [admin](AdminCalls& calls, const Grant& grant,
                       const HttpRequest& http, const PathFields& path,
                       absl::Duration timeout) -> absl::StatusOr<std::string> {
                 Request request;
                 if (absl::Status s = Parse(http, path, request); !s.ok()) {
                   return s;
                 }
                 return Call(calls, admin, grant, std::move(request), timeout);
               }};
}

const std::vector<Route>& Routes() {
  static const std::vector<Route>* const kRoutes = new std::vector<Route>{
      MakeRoute("GET", {"stats"}, &AdminCalls::GetStats),
      MakeRoute("GET", {"topics"}, &AdminCalls::ListTopics),
      MakeRoute("GET", {"topics", "{topic}", "groups"},
                &AdminCalls::ListGroups),
      MakeRoute("POST", {"topics", "{topic}", "groups"},
                &AdminCalls::CreateGroup),
      MakeRoute("DELETE", {"topics", "{topic}", "groups", "{group}"},
                &AdminCalls::DeleteGroup),
      MakeRoute("GET", {"topics", "{topic}", "messages"},
                &AdminCalls::ListMessages),
      MakeRoute("GET", {"topics", "{topic}", "messages", "{id}"},
                &AdminCalls::GetMessage),
      MakeRoute("POST", {"topics", "{topic}", "messages", "{id}", "cancel"},
                &AdminCalls::CancelMessage),
      MakeRoute("POST", {"topics", "{topic}", "messages", "{id}", "reschedule"},
                &AdminCalls::Reschedule),
      MakeRoute("POST", {"topics", "{topic}", "redrive"},
                &AdminCalls::RedriveDeadLetters),
      MakeRoute("POST", {"topics", "{topic}", "purge"},
                &AdminCalls::PurgeTopic),
      MakeRoute("GET", {"topics", "{topic}", "schedule"},
                &AdminCalls::GetSchedule),
      MakeRoute("POST", {"snapshot"}, &AdminCalls::CreateSnapshot),
  };
  return *kRoutes;
}

// Whether `path` (after api/v1) fits `pattern`; if so, fills `fields`.
bool Matches(const std::vector<absl::string_view>& pattern,
             const std::vector<std::string>& path, size_t offset,
             PathFields& fields) {
  if (path.size() - offset != pattern.size()) return false;
  PathFields found;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const absl::string_view part = pattern[i];
    const std::string& segment = path[offset + i];
    if (absl::StartsWith(part, "{")) {
      found[std::string(part.substr(1, part.size() - 2))] = segment;
    } else if (part != segment) {
      return false;
    }
  }
  fields = std::move(found);
  return true;
}

HttpResponse Json(int status, std::string body) {
  HttpResponse response;
  response.status = status;
  response.content_type = kJson;
  response.body = std::move(body);
  return response;
}

// {"code": `code`, "message": `message`}, in that order.
HttpResponse ErrorJson(int status, absl::string_view code,
                       absl::string_view message) {
  return Json(status, absl::StrCat(R"({"code":)", JsonString(code),
                                   R"(,"message":)", JsonString(message), "}"));
}

}  // namespace

int HttpStatusOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted:
      return 409;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kCancelled:
      return 499;
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

HttpResponse JsonError(const absl::Status& status) {
  HttpResponse response =
      ErrorJson(HttpStatusOf(status.code()),
                absl::StatusCodeToString(status.code()), status.message());
  if (status.code() == absl::StatusCode::kUnauthenticated) {
    response.headers["WWW-Authenticate"] = "Bearer realm=\"hourglass\"";
  }
  return response;
}

AdminHttp::AdminHttp(AdminCalls* calls, const Authorizer* authorizer,
                     Options options)
    : calls_(calls), authorizer_(authorizer), options_(options) {}

HttpResponse AdminHttp::Serve(const HttpRequest& request) const {
  constexpr size_t kPrefix = 2;  // "api", "v1".
  const std::string method = request.method == "HEAD" ? "GET" : request.method;
  const Route* route = nullptr;
  PathFields fields;
  std::vector<absl::string_view> allowed;
  for (const Route& candidate : Routes()) {
    PathFields matched;
    if (!Matches(candidate.pattern, request.path, kPrefix, matched)) continue;
    allowed.push_back(candidate.method);
    if (candidate.method == method) {
      route = &candidate;
      fields = std::move(matched);
    }
  }
  if (route == nullptr) {
    if (allowed.empty()) {
      return JsonError(absl::NotFoundError(
          absl::StrCat("no API endpoint /", absl::StrJoin(request.path, "/"))));
    }
    const std::string allow = absl::StrJoin(allowed, ", ");
    HttpResponse response = ErrorJson(
        405, "METHOD_NOT_ALLOWED",
        absl::StrCat(request.method, " is not allowed on /",
                     absl::StrJoin(request.path, "/"), "; use ", allow));
    response.headers["Allow"] = allow;
    return response;
  }
  std::optional<absl::string_view> authorization;
  if (request.authorization.has_value()) authorization = *request.authorization;
  absl::StatusOr<Grant> grant = authorizer_->AuthenticateHeader(
      authorization.has_value() ? &*authorization : nullptr);
  if (!grant.ok()) return JsonError(grant.status());
  absl::StatusOr<std::string> answer =
      route->call(*calls_, *grant, request, fields, options_.timeout);
  if (!answer.ok()) return JsonError(answer.status());
  return Json(200, *std::move(answer));
}

}  // namespace hourglass::api
