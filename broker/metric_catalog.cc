#include "broker/metric_catalog.h"

#include <algorithm>
#include <cassert>
#include <string>
#include <string_view>
#include <vector>

namespace hourglass::metrics {

std::vector<double> LatencySecondsBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
          0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30,    60};
}

std::vector<double> ExponentialBuckets(double start, double factor,
                                       size_t count) {
  assert(start > 0 && factor > 1 && count >= 1);
  std::vector<double> bounds;
  bounds.reserve(count);
  double bound = start;
  for (size_t i = 0; i < count; ++i) {
    bounds.push_back(bound);
    bound *= factor;
  }
  return bounds;
}

const std::vector<MetricInfo>& Catalog() {
  using enum MetricType;
  static const std::vector<MetricInfo>* const catalog =
      new std::vector<MetricInfo>{
          {Metric::kAckedTotal,
           "hourglass_acked_total",
           kCounter,
           {"topic"},
           {},
           "Acknowledged deliveries."},
          {Metric::kBuildInfo,
           "hourglass_build_info",
           kGauge,
           {"version"},
           {},
           "Always 1; the labels say which hourglassd this is."},
          {Metric::kCallsRefusedTotal,
           "hourglass_calls_refused_total",
           kCounter,
           {"reason"},
           {},
           "gRPC calls refused, by reason: disk_full (the store's disk is "
           "full), unavailable (the store failed, or the broker is shutting "
           "down), limit (a configured limit: streams, publish queue, "
           "groups, request size), busy (ABORTED: a change of the same "
           "message is in progress), unauthenticated, permission_denied."},
          {Metric::kCancelledTotal,
           "hourglass_cancelled_total",
           kCounter,
           {"topic"},
           {},
           "Scheduled messages cancelled."},
          {Metric::kClusterController,
           "hourglass_cluster_controller",
           kGauge,
           {},
           {},
           "Cluster mode: 1 while this node is the cluster's controller."},
          {Metric::kClusterEligibleCopies,
           "hourglass_cluster_eligible_copies",
           kGauge,
           {"shard"},
           {},
           "Cluster mode: replicas of the shard outside its in-sync set that "
           "still hold every acknowledged write (they left it below "
           "--min_insync), one of which is promoted if no in-sync copy is "
           "alive; as this node last read them from etcd."},
          {Metric::kClusterEpoch,
           "hourglass_cluster_epoch",
           kGauge,
           {"shard"},
           {},
           "Cluster mode: the shard's epoch, as this node last read it from "
           "etcd; +1 at each change of primary."},
          {Metric::kClusterEtcdReachable,
           "hourglass_cluster_etcd_reachable",
           kGauge,
           {},
           {},
           "Cluster mode: 1 while etcd answers this node; 0 while the "
           "renewals of its lease are overdue (etcd unreachable or "
           "stalled). Shards keep their roles meanwhile, but nothing can "
           "fail over."},
          {Metric::kClusterInSync,
           "hourglass_cluster_in_sync",
           kGauge,
           {"shard"},
           {},
           "Cluster mode: members of the shard's in-sync set, the primary "
           "counted; below --min_insync the shard refuses writes."},
          {Metric::kClusterPromotionsTotal,
           "hourglass_cluster_promotions_total",
           kCounter,
           {"shard"},
           {},
           "Cluster mode: times this node became the shard's primary (at "
           "creation or by failover)."},
          {Metric::kClusterRole,
           "hourglass_cluster_role",
           kGauge,
           {"shard", "role"},
           {},
           "Cluster mode: 1 for the role this node plays for the shard "
           "(primary, backup: in the in-sync set, learner: a replica "
           "catching up, or none), 0 for the others."},
          {Metric::kClusterUnderMinInsync,
           "hourglass_cluster_under_min_insync",
           kGauge,
           {},
           {},
           "Cluster mode: shards of the cluster whose in-sync set has fewer "
           "members than --min_insync (they refuse writes until a backup "
           "catches up), as this node last read them from etcd."},
          {Metric::kConsumers,
           "hourglass_consumers",
           kGauge,
           {"topic", "group"},
           {},
           "Connected consumer streams."},
          {Metric::kDeadLetteredTotal,
           "hourglass_dead_lettered_total",
           kCounter,
           {"topic"},
           {},
           "Messages moved to <topic>.dlq after --max_attempts."},
          {Metric::kDeliveredTotal,
           "hourglass_delivered_total",
           kCounter,
           {"topic"},
           {},
           "First deliveries of messages to a group."},
          {Metric::kDeliveryLatenessSeconds,
           "hourglass_delivery_lateness_seconds",
           kHistogram,
           {},
           LatencySecondsBuckets(),
           "First delivery time minus deliver_at."},
          {Metric::kDueBacklog,
           "hourglass_due_backlog",
           kGauge,
           {},
           {},
           "Messages that came due and wait to be moved to ready."},
          {Metric::kExpiredTotal,
           "hourglass_expired_total",
           kCounter,
           {"topic"},
           {},
           "Messages that reached their deadline (expire_at, ttl) in a "
           "group before it received them: dropped, or moved to <topic>.dlq "
           "(on_expire); one per group."},
          {Metric::kGrpcCallSeconds,
           "hourglass_grpc_call_seconds",
           kHistogram,
           {"method"},
           LatencySecondsBuckets(),
           "Time from a gRPC call's start to its status, by full method "
           "name; a stream's whole life."},
          {Metric::kGrpcCallsTotal,
           "hourglass_grpc_calls_total",
           kCounter,
           {"method", "code"},
           {},
           "gRPC calls answered, by full method name and status code (OK, "
           "INVALID_ARGUMENT, ...)."},
          {Metric::kInFlight,
           "hourglass_in_flight",
           kGauge,
           {"topic", "group"},
           {},
           "Deliveries of a group not yet acknowledged (with a consumer, or "
           "due again)."},
          {Metric::kLoaderLagSeconds,
           "hourglass_loader_lag_seconds",
           kGauge,
           {},
           {},
           "How far the loader is behind now plus the horizon (0 when on "
           "time)."},
          {Metric::kMetricsHttpRefusedTotal,
           "hourglass_metrics_http_refused_total",
           kCounter,
           {},
           {},
           "Connections to the metrics endpoint answered 503 at once: every "
           "worker busy and --metrics_max_queued_connections waiting."},
          {Metric::kMetricsHttpTimedOutTotal,
           "hourglass_metrics_http_timed_out_total",
           kCounter,
           {},
           {},
           "Connections to the metrics endpoint closed at "
           "--metrics_request_timeout, before their answer was written."},
          {Metric::kNackedTotal,
           "hourglass_nacked_total",
           kCounter,
           {"topic"},
           {},
           "Nacked deliveries."},
          {Metric::kPublishLatencySeconds,
           "hourglass_publish_latency_seconds",
           kHistogram,
           {},
           LatencySecondsBuckets(),
           "Time from a Publish reaching the engine to its answer."},
          {Metric::kPublishedTotal,
           "hourglass_published_total",
           kCounter,
           {"topic"},
           {},
           "Messages published (stored)."},
          {Metric::kReady,
           "hourglass_ready",
           kGauge,
           {"topic", "group"},
           {},
           "Due messages waiting in a group."},
          {Metric::kRedeliveredTotal,
           "hourglass_redelivered_total",
           kCounter,
           {"topic"},
           {},
           "Deliveries after the first: ack timeouts, nacks, disconnects."},
          {Metric::kReplicationCheckpointsTotal,
           "hourglass_replication_checkpoints_total",
           kCounter,
           {"shard", "direction"},
           {},
           "Cluster mode: checkpoints of the shard's store sent to backups "
           "being rebuilt (direction sent, on the primary) and copies "
           "rebuilt from one (received)."},
          {Metric::kReplicationLagBytes,
           "hourglass_replication_lag_bytes",
           kGauge,
           {"shard", "backup"},
           {},
           "Cluster mode, on a shard's primary: bytes of its log the backup "
           "has not applied."},
          {Metric::kReplicationLagEntries,
           "hourglass_replication_lag_entries",
           kGauge,
           {"shard", "backup"},
           {},
           "Cluster mode, on a shard's primary: entries of its log the "
           "backup has not applied."},
          {Metric::kReplicationLagSeconds,
           "hourglass_replication_lag_seconds",
           kGauge,
           {"shard", "backup"},
           {},
           "Cluster mode, on a shard's primary: while the backup is behind, "
           "seconds since it last answered; 0 when it has every entry."},
          {Metric::kReplicationPosition,
           "hourglass_replication_position",
           kGauge,
           {"shard"},
           {},
           "Cluster mode: the index of the last log entry this node's copy "
           "of the shard holds."},
          {Metric::kReplicationRefusedTotal,
           "hourglass_replication_refused_total",
           kCounter,
           {},
           {},
           "Cluster mode with TLS: calls to the Replication service refused "
           "because the caller's certificate is not signed by --tls_peer_ca "
           "(or it presented none)."},
          {Metric::kScheduled,
           "hourglass_scheduled",
           kGauge,
           {"topic"},
           {},
           "Messages published and not yet due."},
          {Metric::kServing,
           "hourglass_serving",
           kGauge,
           {},
           {},
           "1 while the store takes writes (gRPC health SERVING), 0 while "
           "it refuses them (NOT_SERVING; the log says why)."},
          {Metric::kStartTimeSeconds,
           "hourglass_start_time_seconds",
           kGauge,
           {},
           {},
           "When hourglassd started, in seconds since the Unix epoch."},
          {Metric::kStoreDiskBytes,
           "hourglass_store_disk_bytes",
           kGauge,
           {},
           {},
           "Bytes of table and blob files and of the write-ahead log."},
          {Metric::kStoreErrorsTotal,
           "hourglass_store_errors_total",
           kCounter,
           {"op"},
           {},
           "Failed store operations of the broker's background work, by "
           "operation: write and sync (the commit queue's group commits), "
           "load (the loader), dispatch (due messages to ready), deliver (a "
           "dispatcher step). "
           "Each is also logged as an ERROR, at most once every 10 s per "
           "operation."},
          {Metric::kStoreLiveDataBytes,
           "hourglass_store_live_data_bytes",
           kGauge,
           {},
           {},
           "RocksDB's estimate of live data."},
          {Metric::kStorePendingCompactionBytes,
           "hourglass_store_pending_compaction_bytes",
           kGauge,
           {},
           {},
           "RocksDB's estimate of bytes compaction still has to rewrite."},
          {Metric::kStoreSyncSeconds,
           "hourglass_store_sync_seconds",
           kHistogram,
           {},
           LatencySecondsBuckets(),
           "Time of one log sync (fsync); it makes every write before it "
           "durable."},
          {Metric::kStoreWriteBatches,
           "hourglass_store_write_batches",
           kHistogram,
           {},
           ExponentialBuckets(1, 2, 12),
           "Batches (publishes, dispatches, steps) sharing one store write."},
          {Metric::kStoreWriteSeconds,
           "hourglass_store_write_seconds",
           kHistogram,
           {},
           LatencySecondsBuckets(),
           "Time of one group commit's write to the store, without its log "
           "sync."},
      };
  return *catalog;
}

const MetricInfo& Info(Metric metric) {
  const MetricInfo& info = Catalog()[static_cast<size_t>(metric)];
  assert(info.id == metric && "Catalog() is out of Metric order");
  return info;
}

const MetricInfo* FindInfo(std::string_view name) {
  const std::vector<MetricInfo>& catalog = Catalog();
  // In name order (metric_catalog_test checks it).
  auto it = std::lower_bound(
      catalog.begin(), catalog.end(), name,
      [](const MetricInfo& info, std::string_view n) { return info.name < n; });
  return it != catalog.end() && it->name == name ? &*it : nullptr;
}

std::string_view TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

}  // namespace hourglass::metrics
