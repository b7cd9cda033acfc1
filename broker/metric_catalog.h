#ifndef HOURGLASS_BROKER_METRIC_CATALOG_H_
#define HOURGLASS_BROKER_METRIC_CATALOG_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

// Every metric hourglassd exports, in one table: name, type, label names,
// histogram buckets and help text. Code registers a metric only by its
// Metric id (metrics::Registry::Counters and friends, broker/metrics.h),
// so a name or a help text is written once, here; docs/metrics.md shows
// the same table (tests/broker/metric_catalog_test.cc compares them).
namespace hourglass::metrics {

enum class MetricType { kCounter, kGauge, kHistogram };

// One per family, in name order (the order of Catalog()).
enum class Metric {
  kAckedTotal,
  kBuildInfo,
  kCallsRefusedTotal,
  kCancelledTotal,
  kClusterController,
  kClusterEligibleCopies,
  kClusterEpoch,
  kClusterEtcdReachable,
  kClusterInSync,
  kClusterPromotionsTotal,
  kClusterRole,
  kClusterUnderMinInsync,
  kConsumers,
  kDeadLetteredTotal,
  kDeliveredTotal,
  kDeliveryLatenessSeconds,
  kDueBacklog,
  kExpiredTotal,
  kGrpcCallSeconds,
  kGrpcCallsTotal,
  kInFlight,
  kLoaderLagSeconds,
  kMetricsHttpRefusedTotal,
  kMetricsHttpTimedOutTotal,
  kNackedTotal,
  kPublishLatencySeconds,
  kPublishedTotal,
  kReady,
  kRedeliveredTotal,
  kReplicationCheckpointsTotal,
  kReplicationLagBytes,
  kReplicationLagEntries,
  kReplicationLagSeconds,
  kReplicationPosition,
  kReplicationRefusedTotal,
  kScheduled,
  kServing,
  kStartTimeSeconds,
  kStoreDiskBytes,
  kStoreErrorsTotal,
  kStoreLiveDataBytes,
  kStorePendingCompactionBytes,
  kStoreSyncSeconds,
  kStoreWriteBatches,
  kStoreWriteSeconds,
};

struct MetricInfo {
  Metric id;
  std::string name;
  MetricType type;
  // In the order a sample shows them.
  std::vector<std::string> labels;
  // Histograms only: the upper bounds of the buckets, increasing; the +Inf
  // bucket is implicit.
  std::vector<double> buckets;
  std::string help;
};

// The table, indexed by Metric.
const std::vector<MetricInfo>& Catalog();
const MetricInfo& Info(Metric metric);
// The entry named `name`, or null.
const MetricInfo* FindInfo(std::string_view name);

// "counter", "gauge" or "histogram", as Prometheus's # TYPE line says.
std::string_view TypeName(MetricType type);

// Histogram bucket bounds for latencies in seconds, 100 µs to 60 s.
std::vector<double> LatencySecondsBuckets();
// `count` bounds start, start * factor, start * factor^2, ...
// REQUIRES: start > 0, factor > 1, count >= 1.
std::vector<double> ExponentialBuckets(double start, double factor,
                                       size_t count);

}  // namespace hourglass::metrics

#endif  // HOURGLASS_BROKER_METRIC_CATALOG_H_
