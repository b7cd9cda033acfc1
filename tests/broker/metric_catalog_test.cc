#include "broker/metric_catalog.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "broker/metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/check_names.h"

namespace hourglass::metrics {
namespace {

using ::testing::HasSubstr;

TEST(MetricCatalogTest, IsInIdOrderAndInNameOrder) {
  const std::vector<MetricInfo>& catalog = Catalog();
  for (size_t i = 0; i < catalog.size(); ++i) {
    EXPECT_EQ(static_cast<size_t>(catalog[i].id), i) << catalog[i].name;
    EXPECT_EQ(&Info(catalog[i].id), &catalog[i]);
    EXPECT_EQ(FindInfo(catalog[i].name), &catalog[i]);
    if (i > 0) EXPECT_LT(catalog[i - 1].name, catalog[i].name);
  }
  EXPECT_EQ(FindInfo("hourglass_nothing"), nullptr);
}

TEST(MetricCatalogTest, NamesLabelsAndBucketsAreValid) {
  for (const MetricInfo& info : Catalog()) {
    SCOPED_TRACE(info.name);
    EXPECT_TRUE(prometheus::CheckMetricName(info.name));
    EXPECT_TRUE(absl::StartsWith(info.name, "hourglass_"));
    EXPECT_EQ(absl::EndsWith(info.name, "_total"),
              info.type == MetricType::kCounter);
    EXPECT_FALSE(info.help.empty());
    EXPECT_TRUE(absl::EndsWith(info.help, "."));
    for (const std::string& label : info.labels) {
      EXPECT_TRUE(prometheus::CheckLabelName(label)) << label;
      EXPECT_NE(label, "le");
    }
    if (info.type == MetricType::kHistogram) {
      ASSERT_FALSE(info.buckets.empty());
      for (size_t i = 1; i < info.buckets.size(); ++i) {
        EXPECT_LT(info.buckets[i - 1], info.buckets[i]);
      }
    } else {
      EXPECT_TRUE(info.buckets.empty());
    }
  }
}

// Every entry registers as its type and renders with its help.
TEST(MetricCatalogTest, EveryMetricRegistersAndRendersWithItsHelp) {
  Registry registry;
  for (const MetricInfo& info : Catalog()) {
    const std::vector<std::string_view> values(info.labels.size(), "x");
    switch (info.type) {
      case MetricType::kCounter:
        registry.Counters(info.id).Add(values);
        break;
      case MetricType::kGauge:
        registry.Gauges(info.id).Add(values);
        break;
      case MetricType::kHistogram:
        registry.Histograms(info.id).Add(values);
        break;
    }
  }
  const std::string text = registry.Render();
  for (const MetricInfo& info : Catalog()) {
    EXPECT_THAT(
        text, HasSubstr(absl::StrCat("# HELP ", info.name, " ", info.help,
                                     "\n# TYPE ", info.name, " ",
                                     std::string(TypeName(info.type)), "\n")));
  }
}

// docs/metrics.md's table, as the catalog says it should read.
std::string ExpectedDocTable() {
  std::string table =
      "| metric | type | labels | help |\n"
      "| --- | --- | --- | --- |\n";
  for (const MetricInfo& info : Catalog()) {
    std::vector<std::string> labels;
    for (const std::string& label : info.labels) {
      labels.push_back(absl::StrCat("`", label, "`"));
    }
    std::string help;
    for (const char c : info.help) {
      if (c == '<') {
        help += "&lt;";
      } else if (c == '>') {
        help += "&gt;";
      } else {
        help += c;
      }
    }
    absl::StrAppend(&table, "| `", info.name, "` | ",
                    std::string(TypeName(info.type)), " | ",
                    absl::StrJoin(labels, ", "), " | ", help, " |\n");
  }
  return table;
}

TEST(MetricCatalogTest, DocListsExactlyTheCatalog) {
  std::ifstream file(HOURGLASS_METRICS_DOC);
  ASSERT_TRUE(file.good()) << HOURGLASS_METRICS_DOC;
  std::stringstream doc;
  doc << file.rdbuf();
  const std::string text = doc.str();
  const std::string begin = "<!-- metric catalog: begin -->\n";
  const std::string end = "<!-- metric catalog: end -->\n";
  const size_t from = text.find(begin);
  const size_t to = text.find(end);
  ASSERT_NE(from, std::string::npos) << "docs/metrics.md has no " << begin;
  ASSERT_NE(to, std::string::npos) << "docs/metrics.md has no " << end;
  EXPECT_EQ(text.substr(from + begin.size(), to - from - begin.size()),
            ExpectedDocTable())
      << "docs/metrics.md's table should read, between the markers:\n"
      << ExpectedDocTable();
}

}  // namespace
}  // namespace hourglass::metrics
