// ClusterNode's metrics (cluster_node.h): the shards' engines' families,
// labelled by shard, and the cluster's gauges and counters, collected at
// each scrape. Apart from cluster_node.cc, which opens, joins and runs the
// node.

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "broker/metrics.h"
#include "cluster/member.h"
#include "cluster/view.h"
#include "node/cluster_node.h"
#include "node/shard_host.h"
#include "prometheus/metric_family.h"
#include "replication/replication_service.h"

namespace hourglass::node {

std::vector<prometheus::MetricFamily> ClusterNode::ShardFamilies() {
  std::vector<std::pair<int, metrics::Registry*>> primaries;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [shard, host] : hosts_) {
      auto registry = shard_metrics_.find(shard);
      if (registry != shard_metrics_.end() &&
          host->role() == ShardHost::Role::kPrimary) {
        primaries.emplace_back(shard, registry->second.get());
      }
    }
  }
  // Outside mu_: the engines' collectors run (the registries live as long
  // as the node).
  std::vector<prometheus::MetricFamily> families;
  for (const auto& [shard, registry] : primaries) {
    const std::string value = std::to_string(shard);
    for (prometheus::MetricFamily& family : registry->Families()) {
      for (prometheus::ClientMetric& sample : family.metric) {
        sample.label.push_back({"shard", value});
      }
      families.push_back(std::move(family));
    }
  }
  return families;
}

void ClusterNode::CollectMetrics() {
  metrics::Registry& registry = *options_.engine.metrics;
  absl::MutexLock lock(&mu_);
  std::optional<cluster::ClusterView> view;
  if (member_ != nullptr) {
    view = member_->view();
    registry.Gauges(metrics::Metric::kClusterController)
        .Add({})
        .Set(view->controller == options_.node_id ? 1 : 0);
    registry.Gauges(metrics::Metric::kClusterEtcdReachable)
        .Add({})
        .Set(member_->etcd_reachable() ? 1 : 0);
    int under = 0;
    for (const auto& [number, shard] : view->shards) {
      under += static_cast<int>(shard.record.isr.size()) < options_.min_insync;
    }
    registry.Gauges(metrics::Metric::kClusterUnderMinInsync).Add({}).Set(under);
  }
  for (const auto& [shard, host] : hosts_) {
    CollectShard(shard, *host, view.has_value() ? &*view : nullptr);
  }
}

void ClusterNode::CollectShard(int shard_number, ShardHost& host,
                               const cluster::ClusterView* view) {
  metrics::Registry& registry = *options_.engine.metrics;
  const std::string shard = std::to_string(shard_number);
  const ShardHost::Role role = host.role();
  for (const auto& [name, value] :
       {std::pair{"primary", ShardHost::Role::kPrimary},
        std::pair{"backup", ShardHost::Role::kBackup},
        std::pair{"learner", ShardHost::Role::kLearner},
        std::pair{"none", ShardHost::Role::kNone}}) {
    registry.Gauges(metrics::Metric::kClusterRole)
        .Add({shard, name})
        .Set(role == value ? 1 : 0);
  }
  registry.Gauges(metrics::Metric::kReplicationPosition)
      .Add({shard})
      .Set(static_cast<double>(host.position()));
  const uint64_t sent = replication_->checkpoints_sent(shard_number);
  registry.Counters(metrics::Metric::kReplicationCheckpointsTotal)
      .Add({shard, "sent"})
      .Increment(static_cast<double>(sent - checkpoints_sent_[shard_number]));
  checkpoints_sent_[shard_number] = sent;
  if (view != nullptr) {
    auto record = view->shards.find(shard_number);
    if (record != view->shards.end()) {
      registry.Gauges(metrics::Metric::kClusterEpoch)
          .Add({shard})
          .Set(static_cast<double>(record->second.record.epoch));
      registry.Gauges(metrics::Metric::kClusterInSync)
          .Add({shard})
          .Set(static_cast<double>(record->second.record.isr.size()));
      registry.Gauges(metrics::Metric::kClusterEligibleCopies)
          .Add({shard})
          .Set(static_cast<double>(record->second.record.eligible.size()));
    }
  }
  // Lag, from the primary only; a backup no longer reported reads 0.
  std::vector<std::string> reported;
  const absl::Time now = absl::Now();
  if (std::optional<ShardHost::Progress> progress = host.progress()) {
    for (const ShardHost::BackupProgress& b : progress->backups) {
      const int64_t behind =
          std::max<int64_t>(0, progress->last_index - b.applied_index);
      registry.Gauges(metrics::Metric::kReplicationLagEntries)
          .Add({shard, b.node})
          .Set(static_cast<double>(behind));
      registry.Gauges(metrics::Metric::kReplicationLagBytes)
          .Add({shard, b.node})
          .Set(static_cast<double>(b.lag_bytes));
      double seconds = 0;
      if (behind > 0) {
        seconds = b.last_heard == absl::InfinitePast()
                      ? 0
                      : absl::ToDoubleSeconds(now - b.last_heard);
      }
      registry.Gauges(metrics::Metric::kReplicationLagSeconds)
          .Add({shard, b.node})
          .Set(seconds);
      reported.push_back(b.node);
    }
  }
  for (const std::string& gone : lag_backups_[shard_number]) {
    if (std::find(reported.begin(), reported.end(), gone) != reported.end()) {
      continue;
    }
    for (metrics::Metric m : {metrics::Metric::kReplicationLagEntries,
                              metrics::Metric::kReplicationLagBytes,
                              metrics::Metric::kReplicationLagSeconds}) {
      registry.Gauges(m).Add({shard, gone}).Set(0);
    }
  }
  lag_backups_[shard_number] = std::move(reported);
}

}  // namespace hourglass::node
