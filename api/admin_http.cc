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
#include "absl/time/clock.h"
#include "api/admin_http_internal.h"
#include "api/redirect.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/client_context.h"
#include "hourglass/v1/admin.grpc.pb.h"

namespace hourglass::api {
namespace admin_http_internal {

namespace pb = google::protobuf;

std::string JsonString(absl::string_view text) {
  pb::Value value;
  value.set_string_value(std::string(text));
  std::string json;
  (void)pb::util::MessageToJsonString(value, &json);
  return json;
}

absl::StatusOr<std::string> PrintJson(const pb::Message& message) {
  pb::util::JsonPrintOptions print;
  print.always_print_primitive_fields = true;
  std::string json;
  if (pb::util::Status s = pb::util::MessageToJsonString(message, &json, print);
      !s.ok()) {
    return absl::InternalError(absl::StrCat("cannot print the answer as JSON: ",
                                            s.message().ToString()));
  }
  return json;
}

std::optional<std::string> ForwardTarget(const absl::Status& status,
                                         const ClusterAccess* cluster) {
  if (cluster == nullptr || status.code() != absl::StatusCode::kUnavailable) {
    return std::nullopt;
  }
  std::optional<Primary> primary = PrimaryOf(status);
  if (!primary.has_value() || primary->address.empty()) return std::nullopt;
  return primary->address;
}

absl::Status ForwardedStatus(const grpc::Status& status,
                             const std::string& address) {
  const auto code = static_cast<absl::StatusCode>(status.error_code());
  if (code == absl::StatusCode::kUnavailable ||
      code == absl::StatusCode::kDeadlineExceeded) {
    return absl::Status(
        code, absl::StrCat("asked the shard's primary at ", address, ": ",
                           status.error_message()));
  }
  return absl::Status(code, status.error_message());
}

}  // namespace admin_http_internal

namespace {

namespace v1 = hourglass::v1;
namespace pb = google::protobuf;
using admin_http_internal::ForwardTarget;
using admin_http_internal::JsonString;
using admin_http_internal::PrintJson;

constexpr char kJson[] = "application/json";

// Path segments that name a field of the request ("{topic}"), by name.
using PathFields = std::map<std::string, std::string>;

// Calls `method` of `calls` with `request` and waits until `deadline` for
// its answer, into `response`. The call's state is shared with its
// callback, which may run after the deadline.
template <typename Request, typename Response>
absl::Status Call(AdminCalls& calls,
                  void (AdminCalls::*method)(const Grant&, const Request&,
                                             Response*, AdminCalls::Done),
                  const Grant& grant, const Request& request,
                  Response* response, absl::Time deadline,
                  absl::Duration timeout) {
  struct Pending {
    Request request;
    Response response;
    absl::Status status;
    absl::Notification done;
  };
  auto pending = std::make_shared<Pending>();
  pending->request = request;
  (calls.*method)(grant, pending->request, &pending->response,
                  [pending](absl::Status status) {
                    pending->status = std::move(status);
                    pending->done.Notify();
                  });
  if (!pending->done.WaitForNotificationWithDeadline(deadline)) {
    return absl::DeadlineExceededError(
        absl::StrCat("the broker did not answer within ",
                     absl::FormatDuration(timeout), "; retry"));
  }
  if (!pending->status.ok()) return pending->status;
  *response = std::move(pending->response);
  return absl::OkStatus();
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

// What a route's call gets.
struct RouteCall {
  AdminCalls& calls;
  const Grant& grant;
  const HttpRequest& http;
  const PathFields& path;
  const AdminHttp::Options& options;
  // When the answer is due (Options::timeout after the request came).
  absl::Time deadline;
};

// One endpoint: a method and a path pattern under /api/v1/, whose
// segments in braces name string fields of the request.
struct Route {
  absl::string_view method;
  std::vector<absl::string_view> pattern;
  // Parses the request and calls the broker: the JSON answer.
  std::function<absl::StatusOr<std::string>(const RouteCall&)> call;
};

// The route of an Admin call: `admin` on this node; in cluster mode, if
// this node does not lead the topic's shard, `forward` on its primary.
template <typename Request, typename Response>
Route MakeRoute(absl::string_view method,
                std::vector<absl::string_view> pattern,
                void (AdminCalls::*admin)(const Grant&, const Request&,
                                          Response*, AdminCalls::Done),
                grpc::Status (v1::Admin::Stub::*forward)(grpc::ClientContext*,
                                                         const Request&,
                                                         Response*)) {
  return Route{
      method, std::move(pattern),
      [admin, forward](const RouteCall& c) -> absl::StatusOr<std::string> {
        Request request;
        if (absl::Status s = Parse(c.http, c.path, request); !s.ok()) {
          return s;
        }
        Response response;
        absl::Status status = Call(c.calls, admin, c.grant, request, &response,
                                   c.deadline, c.options.timeout);
        if (std::optional<std::string> primary =
                ForwardTarget(status, c.options.cluster)) {
          response.Clear();
          status = admin_http_internal::Forward(*c.options.cluster, *primary,
                                                forward, request, &response,
                                                c.http, c.deadline);
        }
        if (!status.ok()) return status;
        return PrintJson(response);
      }};
}

const std::vector<Route>& Routes() {
  using Stub = v1::Admin::Stub;
  static const std::vector<Route>* const kRoutes = new std::vector<Route>{
      MakeRoute("GET", {"stats"}, &AdminCalls::GetStats, &Stub::GetStats),
      MakeRoute("GET", {"topics"}, &AdminCalls::ListTopics, &Stub::ListTopics),
      MakeRoute("GET", {"topics", "{topic}", "groups"}, &AdminCalls::ListGroups,
                &Stub::ListGroups),
      MakeRoute("POST", {"topics", "{topic}", "groups"},
                &AdminCalls::CreateGroup, &Stub::CreateGroup),
      MakeRoute("DELETE", {"topics", "{topic}", "groups", "{group}"},
                &AdminCalls::DeleteGroup, &Stub::DeleteGroup),
      MakeRoute("GET", {"topics", "{topic}", "messages"},
                &AdminCalls::ListMessages, &Stub::ListMessages),
      MakeRoute("GET", {"topics", "{topic}", "messages", "{id}"},
                &AdminCalls::GetMessage, &Stub::GetMessage),
      MakeRoute("POST", {"topics", "{topic}", "messages", "{id}", "cancel"},
                &AdminCalls::CancelMessage, &Stub::CancelMessage),
      MakeRoute("POST", {"topics", "{topic}", "messages", "{id}", "reschedule"},
                &AdminCalls::Reschedule, &Stub::Reschedule),
      MakeRoute("POST", {"topics", "{topic}", "redrive"},
                &AdminCalls::RedriveDeadLetters, &Stub::RedriveDeadLetters),
      MakeRoute("POST", {"topics", "{topic}", "purge"}, &AdminCalls::PurgeTopic,
                &Stub::PurgeTopic),
      MakeRoute("GET", {"topics", "{topic}", "schedule"},
                &AdminCalls::GetSchedule, &Stub::GetSchedule),
      MakeRoute("POST", {"snapshot"}, &AdminCalls::CreateSnapshot,
                &Stub::CreateSnapshot),
      Route{"POST",
            {"topics", "{topic}", "publish"},
            [](const RouteCall& c) {
              return admin_http_internal::ServePublish(
                  c.grant, c.http, c.path.at("topic"), c.options, c.deadline);
            }},
      Route{"GET",
            {"cluster"},
            [](const RouteCall& c) {
              return admin_http_internal::ServeCluster(
                  c.grant, c.http, c.options.cluster, c.deadline);
            }},
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
  const absl::Time deadline = absl::Now() + options_.timeout;
  absl::StatusOr<std::string> answer = route->call(
      RouteCall{*calls_, *grant, request, fields, options_, deadline});
  if (!answer.ok()) return JsonError(answer.status());
  return Json(200, *std::move(answer));
}

}  // namespace hourglass::api
