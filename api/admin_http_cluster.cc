// GET /api/v1/cluster of the console's JSON API (admin_http.h): the
// cluster map, with the lag of every shard asked of its primary.

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "api/admin_http_internal.h"
#include "grpcpp/client_context.h"
#include "hourglass/v1/cluster.grpc.pb.h"

namespace hourglass::api::admin_http_internal {
namespace {

namespace v1 = hourglass::v1;

// A shard whose lag its primary did not give.
struct LagError {
  uint32_t shard = 0;
  std::string primary;
  std::string message;
};

// Cluster.GetClusterMap of the nodes at `addresses` (node id to address),
// asked at once, each until `deadline`: each one's map, or why not.
std::map<std::string, absl::StatusOr<v1::ClusterMap>> AskPrimaries(
    ClusterAccess& cluster, const std::map<std::string, std::string>& addresses,
    const HttpRequest& http, absl::Time deadline) {
  // Shared with the calls' callbacks, which may outlive this function if
  // gRPC ends a call late.
  struct Answers {
    absl::Mutex mu;
    size_t outstanding ABSL_GUARDED_BY(mu) = 0;
    std::map<std::string, absl::StatusOr<v1::ClusterMap>> maps
        ABSL_GUARDED_BY(mu);
  };
  struct PendingCall {
    std::unique_ptr<v1::Cluster::Stub> stub;
    grpc::ClientContext context;
    v1::GetClusterMapRequest request;
    v1::ClusterMap response;
  };
  auto answers = std::make_shared<Answers>();
  {
    absl::MutexLock lock(&answers->mu);
    answers->outstanding = addresses.size();
  }
  for (const auto& [id, address] : addresses) {
    auto call = std::make_shared<PendingCall>();
    call->stub = v1::Cluster::NewStub(cluster.ChannelTo(address));
    call->context.set_deadline(absl::ToChronoTime(deadline));
    if (http.authorization.has_value()) {
      call->context.AddMetadata("authorization", *http.authorization);
    }
    call->stub->async()->GetClusterMap(
        &call->context, &call->request, &call->response,
        [answers, call, id = id, address = address](grpc::Status status) {
          absl::MutexLock lock(&answers->mu);
          if (status.ok()) {
            answers->maps.emplace(id, std::move(call->response));
          } else {
            answers->maps.emplace(id, ForwardedStatus(status, address));
          }
          --answers->outstanding;
        });
  }
  absl::MutexLock lock(&answers->mu);
  // Each call ends by its deadline; a second more for its callback.
  auto done = [&answers]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(answers->mu) {
    return answers->outstanding == 0;
  };
  answers->mu.AwaitWithDeadline(absl::Condition(&done),
                                deadline + absl::Seconds(1));
  return answers->maps;
}

// Puts into `map` the last index and lag of each shard that another node
// leads, as that node gives them; the shards it cannot give, in `errors`.
void AddLagFromPrimaries(ClusterAccess& cluster, const HttpRequest& http,
                         absl::Time deadline, v1::ClusterMap& map,
                         std::vector<LagError>& errors) {
  std::map<std::string, std::string> address_of;
  for (const v1::ClusterNode& node : map.nodes()) {
    address_of[node.id()] = node.address();
  }
  std::map<std::string, std::string> ask;
  for (const v1::ShardInfo& shard : map.shards()) {
    if (shard.primary().empty()) {
      errors.push_back({shard.shard(), "",
                        "the shard has no primary now (a failover is under "
                        "way): no lag to show"});
    } else if (shard.primary() != map.node()) {
      auto address = address_of.find(shard.primary());
      if (address == address_of.end()) {
        errors.push_back(
            {shard.shard(), shard.primary(),
             absl::StrCat("primary ", shard.primary(), " is not alive")});
      } else {
        ask[shard.primary()] = address->second;
      }
    }
  }
  if (ask.empty()) return;
  const std::map<std::string, absl::StatusOr<v1::ClusterMap>> maps =
      AskPrimaries(cluster, ask, http, deadline);
  for (v1::ShardInfo& shard : *map.mutable_shards()) {
    if (ask.find(shard.primary()) == ask.end()) continue;
    auto answer = maps.find(shard.primary());
    if (answer == maps.end()) {
      errors.push_back({shard.shard(), shard.primary(),
                        absl::StrCat("primary ", shard.primary(),
                                     " did not answer in time")});
      continue;
    }
    if (!answer->second.ok()) {
      errors.push_back({shard.shard(), shard.primary(),
                        std::string(answer->second.status().message())});
      continue;
    }
    bool found = false;
    for (const v1::ShardInfo& theirs : answer->second->shards()) {
      if (theirs.shard() == shard.shard() && theirs.epoch() == shard.epoch() &&
          theirs.primary() == shard.primary()) {
        shard.set_last_index(theirs.last_index());
        *shard.mutable_lag() = theirs.lag();
        found = true;
      }
    }
    if (!found) {
      errors.push_back(
          {shard.shard(), shard.primary(),
           absl::StrCat("primary ", shard.primary(), " does not see shard ",
                        shard.shard(), " at epoch ", shard.epoch(),
                        " as its own (the shard is changing hands)")});
    }
  }
}

// The "nodes" array: every node the map names, by id.
std::string NodesJson(const v1::ClusterMap& map) {
  struct Node {
    std::string address, zone;
    bool alive = false, draining = false;
  };
  std::map<std::string, Node> nodes;
  for (const v1::ClusterNode& n : map.nodes()) {
    Node& node = nodes[n.id()];
    node.address = n.address();
    node.zone = n.zone();
    node.alive = true;
  }
  for (const v1::ShardInfo& shard : map.shards()) {
    for (const std::string& id : shard.replicas()) nodes[id];
  }
  for (const std::string& id : map.draining()) nodes[id].draining = true;
  std::vector<std::string> out;
  for (const auto& [id, node] : nodes) {
    out.push_back(absl::StrCat(
        R"({"id":)", JsonString(id), R"(,"address":)", JsonString(node.address),
        R"(,"zone":)", JsonString(node.zone), R"(,"alive":)",
        node.alive ? "true" : "false", R"(,"draining":)",
        node.draining ? "true" : "false", R"(,"controller":)",
        id == map.controller() ? "true" : "false", "}"));
  }
  return absl::StrCat("[", absl::StrJoin(out, ","), "]");
}

// `messages` printed as a JSON array.
template <typename Messages>
absl::StatusOr<std::string> ArrayJson(const Messages& messages) {
  std::vector<std::string> out;
  for (const auto& message : messages) {
    absl::StatusOr<std::string> json = PrintJson(message);
    if (!json.ok()) return json.status();
    out.push_back(*std::move(json));
  }
  return absl::StrCat("[", absl::StrJoin(out, ","), "]");
}

}  // namespace

absl::StatusOr<std::string> ServeCluster(const Grant& grant,
                                         const HttpRequest& http,
                                         ClusterAccess* cluster,
                                         absl::Time deadline) {
  if (absl::Status s = grant.Check(Role::kAdmin, ""); !s.ok()) return s;
  if (!http.query.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("query parameter \"", http.query.front().first,
                     "\": /api/v1/cluster takes none"));
  }
  if (cluster == nullptr) return std::string(R"({"mode":"single"})");
  v1::ClusterMap map = cluster->Map();
  std::vector<LagError> errors;
  AddLagFromPrimaries(*cluster, http, deadline, map, errors);
  std::sort(
      errors.begin(), errors.end(),
      [](const LagError& a, const LagError& b) { return a.shard < b.shard; });
  absl::StatusOr<std::string> shards = ArrayJson(map.shards());
  if (!shards.ok()) return shards.status();
  absl::StatusOr<std::string> pins = ArrayJson(map.pins());
  if (!pins.ok()) return pins.status();
  std::vector<std::string> lag_errors;
  for (const LagError& e : errors) {
    lag_errors.push_back(absl::StrCat(R"({"shard":)", e.shard, R"(,"primary":)",
                                      JsonString(e.primary), R"(,"message":)",
                                      JsonString(e.message), "}"));
  }
  return absl::StrCat(
      R"({"mode":"cluster","cluster":)", JsonString(map.cluster()),
      R"(,"node":)", JsonString(map.node()), R"(,"controller":)",
      JsonString(map.controller()), R"(,"hash":)", JsonString(map.hash()),
      R"(,"shardCount":)", map.shard_count(), R"(,"nodes":)", NodesJson(map),
      R"(,"shards":)", *shards, R"(,"pins":)", *pins, R"(,"lagErrors":[)",
      absl::StrJoin(lag_errors, ","), "]}");
}

}  // namespace hourglass::api::admin_http_internal
