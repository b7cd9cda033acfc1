// Which metrics a real hourglassd exports: every family's name, type and
// label names, scraped from /metrics of a broker holding topics, groups,
// consumers and dead letters, compared with a written-down list. A metric
// renamed, retyped or relabelled breaks dashboards and alerts; this test
// makes such a change visible.

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/broker_client.h"
#include "tests/testing/daemon.h"
#include "tests/testing/eventually.h"
#include "tests/testing/temp_dir.h"

namespace hourglass {
namespace {

using ::testing::ElementsAreArray;
using ::testing::SizeIs;

constexpr absl::Duration kTimeout = absl::Seconds(30);

// Every family /metrics exports, as "name type label,label" (label names in
// the order the samples carry them, without a histogram's "le"), sorted.
const std::vector<std::string> kExported = {
    "hourglass_acked_total counter topic",
    "hourglass_build_info gauge version",
    "hourglass_calls_refused_total counter reason",
    "hourglass_cancelled_total counter topic",
    "hourglass_consumers gauge topic,group",
    "hourglass_dead_lettered_total counter topic",
    "hourglass_delivered_total counter topic",
    "hourglass_delivery_lateness_seconds histogram ",
    "hourglass_due_backlog gauge ",
    "hourglass_expired_total counter topic",
    "hourglass_grpc_call_seconds histogram method",
    "hourglass_grpc_calls_total counter method,code",
    "hourglass_in_flight gauge topic,group",
    "hourglass_loader_lag_seconds gauge ",
    "hourglass_metrics_http_refused_total counter ",
    "hourglass_metrics_http_timed_out_total counter ",
    "hourglass_nacked_total counter topic",
    "hourglass_publish_latency_seconds histogram ",
    "hourglass_published_total counter topic",
    "hourglass_ready gauge topic,group",
    "hourglass_redelivered_total counter topic",
    "hourglass_scheduled gauge topic",
    "hourglass_serving gauge ",
    "hourglass_start_time_seconds gauge ",
    "hourglass_store_disk_bytes gauge ",
    "hourglass_store_errors_total counter op",
    "hourglass_store_live_data_bytes gauge ",
    "hourglass_store_pending_compaction_bytes gauge ",
    "hourglass_store_sync_seconds histogram ",
    "hourglass_store_write_batches histogram ",
    "hourglass_store_write_seconds histogram ",
};

// The label names of a sample line such as `name{a="x",b="y"} 1`, in order;
// label values are quoted and may hold escaped quotes and commas.
std::vector<std::string> LabelNames(absl::string_view line) {
  std::vector<std::string> names;
  const size_t open = line.find('{');
  if (open == absl::string_view::npos) return names;
  size_t i = open + 1;
  while (i < line.size() && line[i] != '}') {
    const size_t equals = line.find('=', i);
    if (equals == absl::string_view::npos) break;
    names.emplace_back(line.substr(i, equals - i));
    i = equals + 2;  // Past ="
    while (i < line.size() && line[i] != '"') i += line[i] == '\\' ? 2 : 1;
    ++i;  // Past the closing quote.
    if (i < line.size() && line[i] == ',') ++i;
  }
  return names;
}

// The families of a scrape as kExported lists them, or an error line for
// a sample whose labels differ from its family's other samples.
std::vector<std::string> Families(const std::string& text) {
  std::map<std::string, std::string> types;  // By family name.
  std::map<std::string, std::set<std::string>> labels;
  std::string family;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.empty() || absl::StartsWith(line, "# HELP ")) continue;
    if (absl::StartsWith(line, "# TYPE ")) {
      std::vector<std::string> parts = absl::StrSplit(line, ' ');
      if (parts.size() != 4) return {absl::StrCat("bad line: ", line)};
      family = parts[2];
      types[family] = parts[3];
      continue;
    }
    const absl::string_view name = line.substr(0, line.find_first_of("{ "));
    if (!absl::StartsWith(name, family)) {
      return {absl::StrCat("sample outside its family: ", line)};
    }
    std::vector<std::string> names = LabelNames(line);
    if (absl::EndsWith(name, "_bucket") && types[family] == "histogram") {
      if (names.empty() || names.back() != "le") {
        return {absl::StrCat("bucket without le last: ", line)};
      }
      names.pop_back();
    }
    labels[family].insert(absl::StrJoin(names, ","));
  }
  std::vector<std::string> families;
  for (const auto& [name, type] : types) {
    for (const std::string& names : labels[name]) {
      families.push_back(absl::StrCat(name, " ", type, " ", names));
    }
  }
  return families;
}

TEST(MetricsNamesTest, AScrapeExportsExactlyTheListedFamilies) {
  testing::TempDir dir;
  // One attempt: the nack below dead-letters its message.
  auto daemon = testing::Daemon::Start(HOURGLASSD_PATH, dir.path() + "/data",
                                       {"--max_attempts=1"});
  ASSERT_TRUE(daemon.ok()) << daemon.status();

  testing::BrokerClient client((*daemon)->Channel());
  // A group with a consumer, and a second group without one.
  std::unique_ptr<testing::Subscription> billing =
      client.Subscribe("orders", "billing", /*max_in_flight=*/10);
  std::unique_ptr<testing::Subscription> audit =
      client.Subscribe("orders", "audit");
  ASSERT_TRUE(audit->Close().ok());
  // Acked, nacked into orders.dlq, scheduled, cancelled.
  ASSERT_TRUE(client.Publish("orders", "a", absl::ZeroDuration(), "a").ok());
  ASSERT_TRUE(client.Publish("orders", "n", absl::ZeroDuration(), "n").ok());
  ASSERT_TRUE(client.Publish("orders", "s", absl::Hours(1), "s").ok());
  ASSERT_TRUE(client.Publish("orders", "c", absl::Hours(1), "c").ok());
  ASSERT_TRUE(client.Cancel("orders", "c").ok());
  std::vector<testing::Received> received = billing->Take(2, kTimeout);
  ASSERT_THAT(received, SizeIs(2));
  ASSERT_TRUE(billing->Ack({"a"}));
  ASSERT_TRUE(billing->Nack("n", absl::ZeroDuration()));

  std::string text;
  ASSERT_TRUE(testing::Eventually(
      [&] {
        text = (*daemon)->ScrapeMetrics();
        return absl::StrContains(
                   text,
                   "hourglass_dead_lettered_total{topic=\"orders\"} 1\n") &&
               absl::StrContains(
                   text,
                   "hourglass_ready{topic=\"orders.dlq\",group=\"\"} 1\n") &&
               absl::StrContains(text,
                                 "hourglass_acked_total{topic=\"orders\"} 1\n");
      },
      kTimeout))
      << text;
  EXPECT_THAT(Families(text), ElementsAreArray(kExported)) << text;

  EXPECT_EQ((*daemon)->Stop(kTimeout), 0) << (*daemon)->process().output();
}

}  // namespace
}  // namespace hourglass
