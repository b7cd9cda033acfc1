#include "cmd/hourglassd/cluster_join.h"

#include <time.h>

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cluster/etcd_client.h"
#include "cmd/hourglassd/cluster_flags.h"
#include "spdlog/spdlog.h"

namespace hourglass::hourglassd {
namespace {

// Calls `attempt` until it returns other than etcd's silence (UNAVAILABLE,
// DEADLINE_EXCEEDED), waiting between tries from 0.5 s up to 5 s and
// logging each failure as a node of `cluster` that cannot join yet. A
// SIGTERM or SIGINT among `signals` ends the wait and is returned; a
// SIGHUP is taken and ignored. Returns nullopt once `attempt` succeeds;
// its error otherwise.
absl::StatusOr<std::optional<int>> RetryWhileEtcdIsSilent(
    const std::string& cluster, const sigset_t& signals,
    absl::FunctionRef<absl::Status()> attempt) {
  absl::Duration wait = absl::Milliseconds(500);
  while (true) {
    const absl::Status status = attempt();
    if (status.ok()) return std::nullopt;
    if (status.code() != absl::StatusCode::kUnavailable &&
        status.code() != absl::StatusCode::kDeadlineExceeded) {
      return status;
    }
    spdlog::warn(
        "hourglassd cannot join cluster {} yet: {}; trying again in {}",
        cluster, std::string(status.message()), absl::FormatDuration(wait));
    const absl::Time until = absl::Now() + wait;
    for (absl::Duration left = wait; left > absl::ZeroDuration();
         left = until - absl::Now()) {
      const timespec timeout = absl::ToTimespec(left);
      const int signal = sigtimedwait(&signals, nullptr, &timeout);
      if (signal == SIGTERM || signal == SIGINT) return signal;
      // SIGHUP (tokens reload once joined), EINTR or EAGAIN (the wait's end).
    }
    wait = std::min(wait * 2, absl::Seconds(5));
  }
}

}  // namespace

absl::StatusOr<AgreedShards> AgreeOnShardCount(
    const node::ClusterNodeOptions& options, std::optional<int> given,
    const sigset_t& signals) {
  absl::StatusOr<std::unique_ptr<cluster::EtcdClient>> etcd =
      cluster::EtcdClient::Create(cluster::EtcdOptions{
          .endpoints = options.etcd, .tls = options.etcd_tls});
  if (!etcd.ok()) return etcd.status();
  AgreedShards agreed;
  absl::StatusOr<std::optional<int>> waited =
      RetryWhileEtcdIsSilent(options.cluster, signals, [&] {
        absl::StatusOr<cluster::ShardCount> count =
            cluster::AgreeOnShardCount(**etcd, options.cluster, given);
        if (!count.ok()) return count.status();
        agreed.shards = *count;
        return absl::OkStatus();
      });
  if (!waited.ok()) return waited.status();
  agreed.signal = *waited;
  if (agreed.signal.has_value()) return agreed;
  const int count = agreed.shards.count;
  if (agreed.shards.created) {
    spdlog::info("hourglassd created cluster {} with {} shards{}",
                 options.cluster, count,
                 given.has_value() ? " (--shards)"
                                   : " (the default; --shards gives another "
                                     "count to a new cluster)");
  } else if (!given.has_value()) {
    spdlog::info(
        "hourglassd takes cluster {}'s shard count, {}, fixed when it was "
        "created",
        options.cluster, count);
  }
  return agreed;
}

absl::StatusOr<std::optional<int>> JoinCluster(node::ClusterNode& node,
                                               const std::string& advertise,
                                               const sigset_t& signals) {
  return RetryWhileEtcdIsSilent(node.cluster(), signals,
                                [&] { return node.Join(advertise); });
}

absl::StatusOr<std::unique_ptr<node::ClusterNode>> OpenClusterNode(
    node::ClusterNodeOptions options, std::optional<int> given,
    const sigset_t& signals) {
  // The node builds a gate per shard: it needs the count before it opens.
  // A restore takes it from its snapshot, and creates the cluster as it
  // joins (ClusterNodeOptions::restore_from).
  if (options.restore_from.empty()) {
    absl::StatusOr<AgreedShards> agreed =
        AgreeOnShardCount(options, given, signals);
    if (!agreed.ok()) return agreed.status();
    if (agreed->signal.has_value()) {
      spdlog::info(
          "hourglassd received {} while waiting for etcd, shutting down",
          *agreed->signal == SIGTERM ? "SIGTERM" : "SIGINT");
      return nullptr;
    }
    options.shards = agreed->shards.count;
  } else {
    options.shards = given.value_or(0);
  }
  const std::string tls_summary = TlsSummary(options);
  const std::string etcd = absl::StrJoin(options.etcd, ",");
  const absl::Time open_start = absl::Now();
  absl::StatusOr<std::unique_ptr<node::ClusterNode>> node =
      node::ClusterNode::Open(std::move(options));
  if (!node.ok()) return node.status();
  spdlog::info(
      "hourglassd opened the stores of shards [{}] in {}/shards in {}; "
      "cluster {} of {} shards on etcd {} as node {}; {}; peers prove who "
      "they are by {}",
      absl::StrJoin((*node)->hosted_shards(), ","), (*node)->data_dir(),
      absl::FormatDuration(absl::Now() - open_start), (*node)->cluster(),
      (*node)->shard_count(), etcd, (*node)->node_id(), tls_summary,
      (*node)->PeerAuthSummary());
  return node;
}

}  // namespace hourglass::hourglassd
