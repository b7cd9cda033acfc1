#include "broker/metrics.h"

#include <algorithm>
#include <cassert>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "prometheus/client_metric.h"
#include "prometheus/labels.h"
#include "prometheus/metric_family.h"
#include "prometheus/text_serializer.h"

namespace hourglass::metrics {
namespace {

prometheus::Labels ToLabels(const MetricInfo& info,
                            absl::Span<const std::string_view> values) {
  assert(values.size() == info.labels.size() &&
         "Family::Add: wrong number of label values");
  prometheus::Labels labels;
  for (size_t i = 0; i < values.size() && i < info.labels.size(); ++i) {
    labels.emplace(info.labels[i], std::string(values[i]));
  }
  return labels;
}

// Puts the labels of each sample in the catalog's order (prometheus-cpp
// keeps them in name order), then the samples in label value order.
void OrderSamples(prometheus::MetricFamily& family) {
  const MetricInfo* info = FindInfo(family.name);
  if (info != nullptr && info->labels.size() > 1) {
    auto rank = [&](const prometheus::ClientMetric::Label& label) {
      return std::find(info->labels.begin(), info->labels.end(), label.name) -
             info->labels.begin();
    };
    for (prometheus::ClientMetric& metric : family.metric) {
      std::stable_sort(
          metric.label.begin(), metric.label.end(),
          [&](const auto& a, const auto& b) { return rank(a) < rank(b); });
    }
  }
  std::sort(
      family.metric.begin(), family.metric.end(),
      [](const prometheus::ClientMetric& a, const prometheus::ClientMetric& b) {
        return std::lexicographical_compare(
            a.label.begin(), a.label.end(), b.label.begin(), b.label.end(),
            [](const auto& x, const auto& y) { return x.value < y.value; });
      });
}

}  // namespace

template <typename T>
T& Family<T>::Add(absl::Span<const std::string_view> label_values) {
  if constexpr (std::is_same_v<T, prometheus::Histogram>) {
    return family_->Add(ToLabels(*info_, label_values), info_->buckets);
  } else {
    return family_->Add(ToLabels(*info_, label_values));
  }
}

template class Family<prometheus::Counter>;
template class Family<prometheus::Gauge>;
template class Family<prometheus::Histogram>;

Registry::~Registry() = default;

CounterFamily Registry::Counters(Metric metric) {
  const MetricInfo& info = Info(metric);
  assert(info.type == MetricType::kCounter);
  CounterFamily family(
      &prometheus::BuildCounter().Name(info.name).Help(info.help).Register(
          registry_),
      &info);
  if (info.labels.empty()) family.Add({});
  return family;
}

GaugeFamily Registry::Gauges(Metric metric) {
  const MetricInfo& info = Info(metric);
  assert(info.type == MetricType::kGauge);
  GaugeFamily family(
      &prometheus::BuildGauge().Name(info.name).Help(info.help).Register(
          registry_),
      &info);
  if (info.labels.empty()) family.Add({});
  return family;
}

HistogramFamily Registry::Histograms(Metric metric) {
  const MetricInfo& info = Info(metric);
  assert(info.type == MetricType::kHistogram);
  HistogramFamily family(
      &prometheus::BuildHistogram().Name(info.name).Help(info.help).Register(
          registry_),
      &info);
  if (info.labels.empty()) family.Add({});
  return family;
}

Registry::CollectorId Registry::AddCollector(std::function<void()> collect) {
  absl::MutexLock lock(&collect_mu_);
  const CollectorId id = next_collector_id_++;
  collectors_.emplace(id, std::move(collect));
  return id;
}

Registry::CollectorId Registry::AddSource(
    std::function<std::vector<prometheus::MetricFamily>()> source) {
  absl::MutexLock lock(&collect_mu_);
  const CollectorId id = next_collector_id_++;
  sources_.emplace(id, std::move(source));
  return id;
}

void Registry::RemoveCollector(CollectorId id) {
  absl::MutexLock lock(&collect_mu_);
  collectors_.erase(id);
  sources_.erase(id);
}

prometheus::MetricFamily NewFamily(Metric metric) {
  const MetricInfo& info = Info(metric);
  prometheus::MetricFamily family;
  family.name = info.name;
  family.help = info.help;
  switch (info.type) {
    case MetricType::kCounter:
      family.type = prometheus::MetricType::Counter;
      break;
    case MetricType::kGauge:
      family.type = prometheus::MetricType::Gauge;
      break;
    case MetricType::kHistogram:
      family.type = prometheus::MetricType::Histogram;
      break;
  }
  return family;
}

std::string Registry::Render() {
  return prometheus::TextSerializer().Serialize(Families());
}

std::vector<prometheus::MetricFamily> Registry::Families() {
  absl::MutexLock collect_lock(&collect_mu_);
  for (const auto& [id, collect] : collectors_) collect();

  std::vector<prometheus::MetricFamily> families = registry_.Collect();
  for (const auto& [id, source] : sources_) {
    std::vector<prometheus::MetricFamily> more = source();
    std::move(more.begin(), more.end(), std::back_inserter(families));
  }
  std::erase_if(families, [](const prometheus::MetricFamily& family) {
    return family.metric.empty();
  });
  std::sort(families.begin(), families.end(),
            [](const prometheus::MetricFamily& a,
               const prometheus::MetricFamily& b) { return a.name < b.name; });
  // Sources may hand the same family (a cluster node runs an engine per
  // shard it is the primary of, each with its topics): one family each in
  // the text, or the scrape is refused.
  std::vector<prometheus::MetricFamily> merged;
  for (prometheus::MetricFamily& family : families) {
    if (!merged.empty() && merged.back().name == family.name) {
      std::move(family.metric.begin(), family.metric.end(),
                std::back_inserter(merged.back().metric));
    } else {
      merged.push_back(std::move(family));
    }
  }
  for (prometheus::MetricFamily& family : merged) OrderSamples(family);
  return merged;
}

prometheus::ClientMetric& AddSample(
    prometheus::MetricFamily& family,
    std::initializer_list<std::string_view> label_values) {
  const MetricInfo* info = FindInfo(family.name);
  assert(info != nullptr && info->labels.size() == label_values.size() &&
         "AddSample: a family outside the catalog, or wrong label values");
  prometheus::ClientMetric& sample = family.metric.emplace_back();
  if (info == nullptr) return sample;
  size_t i = 0;
  for (std::string_view value : label_values) {
    if (i == info->labels.size()) break;
    sample.label.push_back({info->labels[i++], std::string(value)});
  }
  return sample;
}

}  // namespace hourglass::metrics
