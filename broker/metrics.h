#ifndef HOURGLASS_BROKER_METRICS_H_
#define HOURGLASS_BROKER_METRICS_H_

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "broker/metric_catalog.h"
#include "prometheus/client_metric.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"

// Prometheus metrics on prometheus-cpp: its registry, counters, gauges and
// histograms, and its text serializer for what GET /metrics serves
// (api/metrics_http.h). What is ours: metrics are registered by their id in
// the catalog (broker/metric_catalog.h), which holds every name, label
// name, bucket and help text; collectors that set gauges when scraped, and
// sources that hand a scrape whole families; and a stable order of the
// text. A family comes either from the registry or from one source, never
// both (the text would name it twice).
//
// There is no global registry: hourglassd owns one Registry and passes it to
// whatever records metrics. Typical use:
//
//   metrics::CounterFamily errors =
//       registry->Counters(metrics::Metric::kStoreErrorsTotal);
//   prometheus::Counter& writes = errors.Add({"write"});  // keep it
//   writes.Increment();
//
// Recording (Counter::Increment, Gauge::Set, Histogram::Observe) takes no
// lock of ours: a counter or gauge is an atomic double, a histogram takes
// a mutex of its own. Finding or creating a child (Family::Add) takes the
// family's lock.
namespace hourglass::metrics {

// A family of the catalog: one child metric per tuple of label values,
// created at zero on first Add. A family without labels has its one child
// from its registration on.
//
// A child lives until Remove or the registry's end: references that Add
// returns must not be used after either (prometheus-cpp frees the child).
//
// Thread-safe; a cheap handle, copied by value.
template <typename T>
class Family {
 public:
  Family() = default;

  // The child for `label_values`, in the catalog's label order; created at
  // zero if missing. REQUIRES: as many values as the catalog has labels.
  T& Add(std::initializer_list<std::string_view> label_values) {
    return Add(absl::MakeConstSpan(label_values.begin(), label_values.size()));
  }
  T& Add(absl::Span<const std::string_view> label_values);
  // Removes `child` (one Add returned) and frees it.
  void Remove(T* child) { family_->Remove(child); }

  const MetricInfo& info() const { return *info_; }

 private:
  friend class Registry;
  Family(prometheus::Family<T>* family, const MetricInfo* info)
      : family_(family), info_(info) {}

  prometheus::Family<T>* family_ = nullptr;
  const MetricInfo* info_ = nullptr;
};

using CounterFamily = Family<prometheus::Counter>;
using GaugeFamily = Family<prometheus::Gauge>;
using HistogramFamily = Family<prometheus::Histogram>;

extern template class Family<prometheus::Counter>;
extern template class Family<prometheus::Gauge>;
extern template class Family<prometheus::Histogram>;

// The metric families of one process, and the collectors that refresh them
// when scraped.
//
// Thread-safe: every method may be called from any thread, except as noted
// for collectors.
class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;
  ~Registry();

  // The family of `metric`, registered on first use; later calls return the
  // same family. REQUIRES: the catalog gives `metric` the type asked for
  // (asserted).
  CounterFamily Counters(Metric metric);
  GaugeFamily Gauges(Metric metric);
  HistogramFamily Histograms(Metric metric);

  using CollectorId = uint64_t;
  // Adds a collector: Render calls it before rendering, so that it sets
  // gauges (or removes children) from current state: queue depths, RocksDB
  // sizes. Collectors run one at a time, in the order added, on the thread
  // that renders (an HTTP worker for /metrics); they may use families but
  // must not call AddCollector, RemoveCollector or Render. Returns the id
  // that RemoveCollector takes.
  CollectorId AddCollector(std::function<void()> collect);
  // Adds a source of whole families, for counts that live elsewhere: the
  // per-topic totals Activity keeps under its own lock (prometheus-cpp's
  // Family::Remove searches every child, so removing the series of many
  // gone topics from a family would cost O(children) each). Render calls it
  // after the collectors, under the same rules, and renders what it returns
  // with the families of the registry; NewFamily starts a family of the
  // catalog. Returns the id that RemoveCollector takes.
  CollectorId AddSource(
      std::function<std::vector<prometheus::MetricFamily>()> source);
  // Removes a collector or a source. Once it returns, it is not running and
  // will not run again, so what it refers to may be destroyed. Unknown ids
  // are ignored. REQUIRES: not called from a collector or source.
  void RemoveCollector(CollectorId id);

  // Runs the collectors and sources, then renders every family in the
  // Prometheus text exposition format 0.0.4 with prometheus-cpp's
  // TextSerializer: families in name order, each with # HELP and # TYPE; a
  // sample's labels in the catalog's order; samples in the order of their label
  // values. Families without children are left out. Scrapes are serialised: a
  // second Render waits for the first.
  std::string Render();
  // What Render renders, as families: for a source of another registry
  // (a cluster node's registry of each shard's engine). REQUIRES: not
  // called from this registry's collectors or sources.
  std::vector<prometheus::MetricFamily> Families();

  // prometheus-cpp's registry under this one, for tests that need a family
  // outside the catalog; rendered as above, its labels in name order.
  prometheus::Registry& prometheus() { return registry_; }

 private:
  prometheus::Registry registry_;

  // Held while collectors run and while rendering, so collectors never run
  // concurrently and RemoveCollector can wait for a running one.
  absl::Mutex collect_mu_;
  std::map<CollectorId, std::function<void()>> collectors_
      ABSL_GUARDED_BY(collect_mu_);
  std::map<CollectorId, std::function<std::vector<prometheus::MetricFamily>()>>
      sources_ ABSL_GUARDED_BY(collect_mu_);
  CollectorId next_collector_id_ ABSL_GUARDED_BY(collect_mu_) = 1;
};

// An empty family of the catalog's `metric` (name, help, type), for a
// source to fill with AddSample.
prometheus::MetricFamily NewFamily(Metric metric);

// Appends a sample to `family` (one NewFamily made) with the catalog's label
// names and `label_values`, in the catalog's order; the caller sets its
// value. REQUIRES: as many values as the catalog has labels (asserted).
prometheus::ClientMetric& AddSample(
    prometheus::MetricFamily& family,
    std::initializer_list<std::string_view> label_values);

}  // namespace hourglass::metrics

#endif  // HOURGLASS_BROKER_METRICS_H_
