#include "broker/metrics.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace hourglass::metrics {
namespace {

// Renders a double so that Prometheus (Go's strconv.ParseFloat) reads it
// back exactly: integers without a fraction or exponent, other values in
// their shortest round-trip form, and NaN, +Inf, -Inf by name.
std::string FormatDouble(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // Below 2^53 every integer is exact, and the int64 cast cannot overflow.
  if (value == std::trunc(value) && std::fabs(value) < 0x1p53) {
    return absl::StrCat(static_cast<int64_t>(value));
  }
  char buffer[64];
  const std::to_chars_result result =
      std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

// HELP text escapes backslash and newline.
void AppendEscapedHelp(std::string& out, std::string_view help) {
  for (const char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
}

// Label values escape backslash, double quote and newline.
void AppendEscapedLabelValue(std::string& out, std::string_view value) {
  for (const char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
}

// Appends `{name="value",...}`, with `le="<le>"` last if `le` is given, or
// nothing if there are no labels at all.
void AppendLabels(std::string& out, const std::vector<std::string>& names,
                  const std::vector<std::string>& values,
                  const std::string* le = nullptr) {
  if (names.empty() && le == nullptr) return;
  out += '{';
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += ',';
    absl::StrAppend(&out, names[i], "=\"");
    AppendEscapedLabelValue(out, values[i]);
    out += '"';
  }
  if (le != nullptr) {
    if (!names.empty()) out += ',';
    absl::StrAppend(&out, "le=\"", *le, "\"");
  }
  out += '}';
}

template <typename A, typename B>
bool LexicographicallyLess(absl::Span<const A> a, absl::Span<const B> b) {
  return std::lexicographical_compare(
      a.begin(), a.end(), b.begin(), b.end(),
      [](std::string_view x, std::string_view y) { return x < y; });
}

bool ValidMetricName(std::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    c == '_' || c == ':' || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

bool ValidLabelName(std::string_view name) {
  if (name.empty() || name.substr(0, 2) == "__") return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    c == '_' || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

const char* TypeName(MetricType type) {
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

std::string DescribeBounds(const std::vector<double>& bounds) {
  return absl::StrJoin(bounds, ", ", [](std::string* out, double bound) {
    out->append(FormatDouble(bound));
  });
}

}  // namespace

bool LabelValuesLess::operator()(absl::Span<const std::string> a,
                                 absl::Span<const std::string> b) const {
  return LexicographicallyLess(a, b);
}
bool LabelValuesLess::operator()(absl::Span<const std::string> a,
                                 absl::Span<const std::string_view> b) const {
  return LexicographicallyLess(a, b);
}
bool LabelValuesLess::operator()(absl::Span<const std::string_view> a,
                                 absl::Span<const std::string> b) const {
  return LexicographicallyLess(a, b);
}

Histogram::Histogram(std::shared_ptr<const std::vector<double>> bounds)
    : bounds_(std::move(bounds)),
      counts_(new std::atomic<uint64_t>[bounds_->size() + 1]) {
  for (size_t i = 0; i <= bounds_->size(); ++i) {
    counts_[i].store(0, std::memory_order_relaxed);
  }
}

void Histogram::Observe(double value) {
  const std::vector<double>& bounds = *bounds_;
  // The first bound >= value; NaN compares false with everything, so it
  // would land in the first bucket without the explicit check.
  const size_t bucket =
      std::isnan(value)
          ? bounds.size()
          : std::lower_bound(bounds.begin(), bounds.end(), value) -
                bounds.begin();
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot snapshot;
  snapshot.cumulative.resize(bounds_->size() + 1);
  uint64_t total = 0;
  for (size_t i = 0; i <= bounds_->size(); ++i) {
    total += counts_[i].load(std::memory_order_relaxed);
    snapshot.cumulative[i] = total;
  }
  snapshot.count = total;
  snapshot.sum = sum_.load(std::memory_order_relaxed);
  return snapshot;
}

template <typename Metric>
std::shared_ptr<Metric> Family<Metric>::NewChild() const {
  if constexpr (std::is_same_v<Metric, Histogram>) {
    return std::make_shared<Histogram>(bounds_);
  } else {
    return std::make_shared<Metric>();
  }
}

template <typename Metric>
std::shared_ptr<Metric> Family<Metric>::WithLabels(
    absl::Span<const std::string_view> label_values) {
  assert(label_values.size() == label_names().size() &&
         "WithLabels: wrong number of label values");
  const size_t n = std::min(label_values.size(), label_names().size());
  label_values = label_values.subspan(0, n);
  {
    absl::ReaderMutexLock lock(&mu_);
    auto it = children_.find(label_values);
    if (it != children_.end()) return it->second;
  }
  std::vector<std::string> key(label_values.begin(), label_values.end());
  key.resize(label_names().size());
  absl::MutexLock lock(&mu_);
  auto [it, added] = children_.try_emplace(std::move(key), nullptr);
  if (added) it->second = NewChild();
  return it->second;
}

template <typename Metric>
bool Family<Metric>::Remove(absl::Span<const std::string_view> label_values) {
  absl::MutexLock lock(&mu_);
  auto it = children_.find(label_values);
  if (it == children_.end()) return false;
  children_.erase(it);
  return true;
}

template <typename Metric>
size_t Family<Metric>::RemoveIf(
    absl::FunctionRef<bool(absl::Span<const std::string>)> matches) {
  absl::MutexLock lock(&mu_);
  size_t removed = 0;
  for (auto it = children_.begin(); it != children_.end();) {
    if (matches(it->first)) {
      it = children_.erase(it);
      ++removed;
    } else {
      ++it;
    }
  }
  return removed;
}

template <typename Metric>
void Family<Metric>::Clear() {
  absl::MutexLock lock(&mu_);
  children_.clear();
}

template <typename Metric>
size_t Family<Metric>::size() const {
  absl::ReaderMutexLock lock(&mu_);
  return children_.size();
}

template <typename Metric>
void Family<Metric>::Render(std::string& out) const {
  absl::ReaderMutexLock lock(&mu_);
  if (children_.empty()) return;
  out += "# HELP ";
  out += name();
  out += ' ';
  AppendEscapedHelp(out, help());
  absl::StrAppend(&out, "\n# TYPE ", name(), " ", TypeName(type()), "\n");
  for (const auto& [values, child] : children_) {
    if constexpr (std::is_same_v<Metric, Counter>) {
      out += name();
      AppendLabels(out, label_names(), values);
      absl::StrAppend(&out, " ", child->Value(), "\n");
    } else if constexpr (std::is_same_v<Metric, Gauge>) {
      out += name();
      AppendLabels(out, label_names(), values);
      absl::StrAppend(&out, " ", FormatDouble(child->Value()), "\n");
    } else {
      const Histogram::Snapshot snapshot = child->Read();
      const std::vector<double>& bounds = child->bounds();
      for (size_t i = 0; i <= bounds.size(); ++i) {
        const std::string le =
            i < bounds.size() ? FormatDouble(bounds[i]) : "+Inf";
        absl::StrAppend(&out, name(), "_bucket");
        AppendLabels(out, label_names(), values, &le);
        absl::StrAppend(&out, " ", snapshot.cumulative[i], "\n");
      }
      absl::StrAppend(&out, name(), "_sum");
      AppendLabels(out, label_names(), values);
      absl::StrAppend(&out, " ", FormatDouble(snapshot.sum), "\n");
      absl::StrAppend(&out, name(), "_count");
      AppendLabels(out, label_names(), values);
      absl::StrAppend(&out, " ", snapshot.count, "\n");
    }
  }
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

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

Registry::~Registry() = default;

absl::StatusOr<FamilyBase*> Registry::Add(
    MetricType type, std::string_view name, std::string_view help,
    std::vector<std::string> label_names,
    std::shared_ptr<const std::vector<double>> bounds) {
  // absl::StrCat takes absl::string_view, which is not std::string_view in
  // Debian's abseil.
  std::string name_string(name);
  std::string help_string(help);
  if (!ValidMetricName(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("metric name \"", name_string,
                     "\" does not match [a-zA-Z_:][a-zA-Z0-9_:]*"));
  }
  for (size_t i = 0; i < label_names.size(); ++i) {
    const std::string& label = label_names[i];
    if (!ValidLabelName(label)) {
      return absl::InvalidArgumentError(
          absl::StrCat("metric ", name_string, ": label name \"", label,
                       "\" does not match [a-zA-Z_][a-zA-Z0-9_]* or starts "
                       "with __"));
    }
    if (type == MetricType::kHistogram && label == "le") {
      return absl::InvalidArgumentError(
          absl::StrCat("metric ", name_string,
                       ": label name \"le\" is reserved for buckets"));
    }
    for (size_t j = 0; j < i; ++j) {
      if (label_names[j] == label) {
        return absl::InvalidArgumentError(absl::StrCat("metric ", name_string,
                                                       ": label name \"", label,
                                                       "\" appears twice"));
      }
    }
  }
  if (bounds != nullptr) {
    for (size_t i = 0; i < bounds->size(); ++i) {
      if (!std::isfinite((*bounds)[i]) ||
          (i > 0 && !((*bounds)[i - 1] < (*bounds)[i]))) {
        return absl::InvalidArgumentError(absl::StrCat(
            "metric ", name_string,
            ": bucket bounds must be finite and strictly increasing, not ",
            DescribeBounds(*bounds)));
      }
    }
  }

  absl::MutexLock lock(&mu_);
  auto it = families_.find(name);
  if (it != families_.end()) {
    const FamilyBase& existing = *it->second;
    bool same = existing.type() == type && existing.help() == help &&
                existing.label_names() == label_names;
    if (same && type == MetricType::kHistogram) {
      same = *static_cast<const HistogramFamily&>(existing).bounds_ == *bounds;
    }
    if (!same) {
      return absl::AlreadyExistsError(
          absl::StrCat("metric ", name_string, " is already registered as a ",
                       TypeName(existing.type()), " with labels {",
                       absl::StrJoin(existing.label_names(), ","),
                       "} and different help, labels, type or buckets"));
    }
    return it->second.get();
  }

  std::unique_ptr<FamilyBase> family;
  const bool unlabeled = label_names.empty();
  switch (type) {
    case MetricType::kCounter: {
      auto* counters =
          new CounterFamily(std::move(name_string), std::move(help_string),
                            type, std::move(label_names), nullptr);
      family.reset(counters);
      if (unlabeled) counters->WithLabels({});
      break;
    }
    case MetricType::kGauge: {
      auto* gauges =
          new GaugeFamily(std::move(name_string), std::move(help_string), type,
                          std::move(label_names), nullptr);
      family.reset(gauges);
      if (unlabeled) gauges->WithLabels({});
      break;
    }
    case MetricType::kHistogram: {
      auto* histograms =
          new HistogramFamily(std::move(name_string), std::move(help_string),
                              type, std::move(label_names), std::move(bounds));
      family.reset(histograms);
      if (unlabeled) histograms->WithLabels({});
      break;
    }
  }
  FamilyBase* result = family.get();
  families_.emplace(result->name(), std::move(family));
  return result;
}

absl::StatusOr<CounterFamily*> Registry::AddCounter(
    std::string_view name, std::string_view help,
    std::vector<std::string> label_names) {
  absl::StatusOr<FamilyBase*> family =
      Add(MetricType::kCounter, name, help, std::move(label_names), nullptr);
  if (!family.ok()) return family.status();
  return static_cast<CounterFamily*>(*family);
}

absl::StatusOr<GaugeFamily*> Registry::AddGauge(
    std::string_view name, std::string_view help,
    std::vector<std::string> label_names) {
  absl::StatusOr<FamilyBase*> family =
      Add(MetricType::kGauge, name, help, std::move(label_names), nullptr);
  if (!family.ok()) return family.status();
  return static_cast<GaugeFamily*>(*family);
}

absl::StatusOr<HistogramFamily*> Registry::AddHistogram(
    std::string_view name, std::string_view help,
    std::vector<std::string> label_names, std::vector<double> bounds) {
  absl::StatusOr<FamilyBase*> family =
      Add(MetricType::kHistogram, name, help, std::move(label_names),
          std::make_shared<const std::vector<double>>(std::move(bounds)));
  if (!family.ok()) return family.status();
  return static_cast<HistogramFamily*>(*family);
}

Registry::CollectorId Registry::AddCollector(std::function<void()> collect) {
  absl::MutexLock lock(&collect_mu_);
  const CollectorId id = next_collector_id_++;
  collectors_.emplace(id, std::move(collect));
  return id;
}

void Registry::RemoveCollector(CollectorId id) {
  absl::MutexLock lock(&collect_mu_);
  collectors_.erase(id);
}

std::string Registry::Render() {
  absl::MutexLock collect_lock(&collect_mu_);
  for (const auto& [id, collect] : collectors_) collect();

  // Families are never removed, so the pointers outlive the lock.
  std::vector<const FamilyBase*> families;
  {
    absl::ReaderMutexLock lock(&mu_);
    families.reserve(families_.size());
    for (const auto& [name, family] : families_)
      families.push_back(family.get());
  }
  std::string out;
  for (const FamilyBase* family : families) family->Render(out);
  return out;
}

}  // namespace hourglass::metrics
