#ifndef HOURGLASS_BROKER_METRICS_H_
#define HOURGLASS_BROKER_METRICS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"

// Prometheus metrics: a registry of metric families that renders the text
// exposition format 0.0.4 (what GET /metrics serves, api/metrics_http.h).
//
// There is no global registry: hourglassd owns one Registry and passes it to
// whatever records metrics. Typical use:
//
//   absl::StatusOr<metrics::CounterFamily*> published = registry->AddCounter(
//       "hourglass_published_total", "Messages published.", {"topic"});
//   if (!published.ok()) return published.status();
//   std::shared_ptr<metrics::Counter> orders =
//       (*published)->WithLabels({"orders"});  // keep it for the hot path
//   orders->Inc();
//
// Recording (Counter::Inc, Gauge::Set/Add, Histogram::Observe) is a few
// relaxed atomic operations and takes no lock; finding or creating a child
// (Family::WithLabels) takes the family's lock.
namespace hourglass::metrics {

// A count that only goes up: messages published, bytes written.
//
// Thread-safe; Inc is one relaxed atomic add.
class Counter {
 public:
  Counter() = default;
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;

  void Inc(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

// A value that goes up and down: messages scheduled, bytes on disk. Holds a
// double, so integers are exact up to 2^53 (and render without a fraction).
//
// Thread-safe; each method is one relaxed atomic operation.
class Gauge {
 public:
  Gauge() = default;
  Gauge(const Gauge&) = delete;
  Gauge& operator=(const Gauge&) = delete;

  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Add(double delta) { value_.fetch_add(delta, std::memory_order_relaxed); }
  void Inc() { Add(1); }
  void Dec() { Add(-1); }
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// A distribution over fixed buckets: latencies, batch sizes. Bucket i counts
// observations v with bounds[i-1] < v <= bounds[i]; one more bucket (+Inf)
// counts the rest, NaN included.
//
// Thread-safe; Observe is a binary search and two relaxed atomic adds. A
// Read concurrent with Observe may see an observation in its bucket but not
// yet in the sum; count always equals the +Inf bucket.
class Histogram {
 public:
  // REQUIRES: `bounds` is finite and strictly increasing (Registry checks
  // this for histograms it creates).
  explicit Histogram(std::shared_ptr<const std::vector<double>> bounds);
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  void Observe(double value);

  struct Snapshot {
    // Cumulative counts: cumulative[i] observations were <= bounds[i]; the
    // last entry (index bounds.size()) is the +Inf bucket, equal to count.
    std::vector<uint64_t> cumulative;
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot Read() const;

  const std::vector<double>& bounds() const { return *bounds_; }

 private:
  const std::shared_ptr<const std::vector<double>> bounds_;
  // Per bucket, not cumulative; bounds_->size() + 1 of them.
  const std::unique_ptr<std::atomic<uint64_t>[]> counts_;
  std::atomic<double> sum_{0};
};

enum class MetricType { kCounter, kGauge, kHistogram };

// What every family has: a name, help text, a type and fixed label names.
// Families are created by a Registry and live as long as it does.
class FamilyBase {
 public:
  FamilyBase(const FamilyBase&) = delete;
  FamilyBase& operator=(const FamilyBase&) = delete;
  virtual ~FamilyBase() = default;

  // Constant after construction.
  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  MetricType type() const { return type_; }
  const std::vector<std::string>& label_names() const { return label_names_; }

 protected:
  FamilyBase(std::string name, std::string help, MetricType type,
             std::vector<std::string> label_names)
      : name_(std::move(name)),
        help_(std::move(help)),
        type_(type),
        label_names_(std::move(label_names)) {}

 private:
  friend class Registry;

  // Appends the family in the text format: # HELP, # TYPE and one sample
  // per child (a histogram's _bucket, _sum and _count), children in label
  // value order. Appends nothing if the family has no children.
  virtual void Render(std::string& out) const = 0;

  const std::string name_;
  const std::string help_;
  const MetricType type_;
  const std::vector<std::string> label_names_;
};

// Orders label value tuples lexicographically; compares stored tuples with
// the views callers pass, so lookups do not allocate.
struct LabelValuesLess {
  using is_transparent = void;
  bool operator()(absl::Span<const std::string> a,
                  absl::Span<const std::string> b) const;
  bool operator()(absl::Span<const std::string> a,
                  absl::Span<const std::string_view> b) const;
  bool operator()(absl::Span<const std::string_view> a,
                  absl::Span<const std::string> b) const;
};

// A metric family: one child metric per tuple of label values, created at
// zero on first use. An unlabeled family has exactly one child (the empty
// tuple), created with the family.
//
// Children are shared: a caller may keep the pointer WithLabels returns and
// record into it without further lookups. Removing a child (Remove, RemoveIf,
// Clear) takes it out of the rendered output; pointers callers still hold
// stay valid but are no longer rendered, and a later WithLabels with the same
// values creates a fresh child at zero.
//
// Thread-safe: every method may be called from any thread.
template <typename Metric>
class Family final : public FamilyBase {
 public:
  // The child for `label_values`, in label_names() order; created at zero if
  // it does not exist. REQUIRES: label_values.size() == label_names().size()
  // (asserted; without assertions missing values are empty, extra ones
  // dropped).
  std::shared_ptr<Metric> WithLabels(
      absl::Span<const std::string_view> label_values);

  // Removes the child for `label_values`. Returns whether there was one.
  bool Remove(absl::Span<const std::string_view> label_values);
  // Removes every child whose label values (in label_names() order) match;
  // returns how many. `matches` runs under the family's lock and must not
  // call back into this family.
  size_t RemoveIf(
      absl::FunctionRef<bool(absl::Span<const std::string> label_values)>
          matches);
  // Removes every child (the unlabeled child too).
  void Clear();

  // How many children the family has.
  size_t size() const;

 private:
  friend class Registry;

  Family(std::string name, std::string help, MetricType type,
         std::vector<std::string> label_names,
         std::shared_ptr<const std::vector<double>> bounds)
      : FamilyBase(std::move(name), std::move(help), type,
                   std::move(label_names)),
        bounds_(std::move(bounds)) {}

  void Render(std::string& out) const override;
  std::shared_ptr<Metric> NewChild() const;

  // Histogram bucket bounds; null for other types. Constant after
  // construction.
  const std::shared_ptr<const std::vector<double>> bounds_;

  mutable absl::Mutex mu_;
  absl::btree_map<std::vector<std::string>, std::shared_ptr<Metric>,
                  LabelValuesLess>
      children_ ABSL_GUARDED_BY(mu_);
};

using CounterFamily = Family<Counter>;
using GaugeFamily = Family<Gauge>;
using HistogramFamily = Family<Histogram>;

extern template class Family<Counter>;
extern template class Family<Gauge>;
extern template class Family<Histogram>;

// Histogram bucket bounds for latencies in seconds, 100 µs to 60 s.
std::vector<double> LatencySecondsBuckets();
// `count` bounds start, start * factor, start * factor^2, ...
// REQUIRES: start > 0, factor > 1, count >= 1.
std::vector<double> ExponentialBuckets(double start, double factor,
                                       size_t count);

// The metric families of one process, and the collectors that refresh them
// when scraped.
//
// Families are never removed: a family pointer Add* returns is valid for the
// registry's lifetime. Children may outlive it (they are shared).
//
// Thread-safe: every method may be called from any thread, except as noted
// for collectors.
class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;
  ~Registry();

  // Adds a family, or returns the existing one if a family of that name has
  // the same type, help and label names (and, for histograms, bounds), so
  // that two parts of the process may both ask for it.
  //
  // Names must match [a-zA-Z_:][a-zA-Z0-9_:]*; label names
  // [a-zA-Z_][a-zA-Z0-9_]*, not starting with "__", distinct, and for
  // histograms not "le". Counter names should end in "_total" (not
  // enforced). Histogram bounds must be finite and strictly increasing; the
  // +Inf bucket is implicit.
  //
  // Returns INVALID_ARGUMENT for a bad name, label name or bounds, and
  // ALREADY_EXISTS if the name is taken by a different family.
  absl::StatusOr<CounterFamily*> AddCounter(
      std::string_view name, std::string_view help,
      std::vector<std::string> label_names = {});
  absl::StatusOr<GaugeFamily*> AddGauge(
      std::string_view name, std::string_view help,
      std::vector<std::string> label_names = {});
  absl::StatusOr<HistogramFamily*> AddHistogram(
      std::string_view name, std::string_view help,
      std::vector<std::string> label_names, std::vector<double> bounds);

  using CollectorId = uint64_t;
  // Adds a collector: Render calls it before rendering, so that it sets
  // gauges (or removes children) from current state: queue depths, RocksDB
  // sizes. Collectors run one at a time, in the order added, on the thread
  // that renders (an HTTP worker for /metrics); they may use families and
  // Add* but must not call AddCollector, RemoveCollector or Render. Returns
  // the id that RemoveCollector takes.
  CollectorId AddCollector(std::function<void()> collect);
  // Removes a collector. Once it returns, the collector is not running and
  // will not run again, so what it refers to may be destroyed. Unknown ids
  // are ignored. REQUIRES: not called from a collector.
  void RemoveCollector(CollectorId id);

  // Runs the collectors, then renders every family in the Prometheus text
  // exposition format 0.0.4: families in name order, each with # HELP and
  // # TYPE, children in label value order. Families without children are
  // left out. Scrapes are serialised: a second Render waits for the first.
  std::string Render();

 private:
  // Validates and finds or adds a family. `bounds` is null unless `type` is
  // kHistogram.
  absl::StatusOr<FamilyBase*> Add(
      MetricType type, std::string_view name, std::string_view help,
      std::vector<std::string> label_names,
      std::shared_ptr<const std::vector<double>> bounds);

  // Held while collectors run and while rendering, so collectors never run
  // concurrently and RemoveCollector can wait for a running one.
  absl::Mutex collect_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  std::map<CollectorId, std::function<void()>> collectors_
      ABSL_GUARDED_BY(collect_mu_);
  CollectorId next_collector_id_ ABSL_GUARDED_BY(collect_mu_) = 1;

  mutable absl::Mutex mu_;
  // By name, so rendering walks them in name order.
  std::map<std::string, std::unique_ptr<FamilyBase>, std::less<>> families_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace hourglass::metrics

#endif  // HOURGLASS_BROKER_METRICS_H_
