#include "cmd/hourglass-bench/report.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cmd/common/duration.h"
#include "cmd/common/output.h"
#include "cmd/hourglass-bench/report.pb.h"

namespace hourglass::bench {
namespace {

std::string Plural(uint64_t n, const char* one, const char* many) {
  return absl::StrCat(n, " ", n == 1 ? one : many);
}

std::string Workload(const BenchResult& r) {
  const bool stream = r.publish_rpc == "PublishStream";
  std::string text = absl::StrCat(
      "batches of ", r.batch, ", ", r.payload_bytes, "-byte payloads, ",
      stream ? Plural(r.concurrency, "request", "requests")
             : Plural(r.concurrency, "call", "calls"),
      " in flight on ",
      stream ? Plural(r.producers, "PublishStream", "PublishStreams")
             : Plural(r.producers, "connection", "connections"),
      ", ");
  if (r.rate > 0) {
    absl::StrAppendFormat(&text, "%.0f msg/s", r.rate);
  } else {
    text += "as fast as possible";
  }
  absl::StrAppend(&text, ", delay ", r.delay.ToString(), ", ",
                  Plural(r.consumers, "consumer", "consumers"));
  if (r.consumers > 0) absl::StrAppend(&text, " (", r.consumer_rpc, ")");
  return text;
}

// `value` rounded to `decimals` places, so the JSON stays short.
double Round(double value, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return std::round(value * scale) / scale;
}

// Milliseconds with microsecond precision, for JSON.
double Millis(absl::Duration d) {
  return Round(absl::ToDoubleMilliseconds(d), 3);
}

// A count for the report (report.proto says why 32 bits).
uint32_t Count(uint64_t n) {
  return static_cast<uint32_t>(std::min<uint64_t>(n, UINT32_MAX));
}

}  // namespace

double Rate(uint64_t count, absl::Duration time) {
  const double seconds = absl::ToDoubleSeconds(time);
  return seconds > 0 ? static_cast<double>(count) / seconds : 0;
}

std::string HumanReport(const BenchResult& r) {
  std::vector<std::pair<std::string, std::string>> lines;
  lines.emplace_back("topic", r.topic);
  lines.emplace_back("durability", r.durability);
  lines.emplace_back("workload", Workload(r));
  lines.emplace_back(
      "published",
      absl::StrFormat("%d msgs in %d %s in %s = %.0f msg/s; %s p50 %s "
                      "p99 %s max %s",
                      r.published, r.publish_calls,
                      r.publish_rpc == "PublishStream" ? "requests" : "calls",
                      cli::HumanDuration(r.publish_time),
                      Rate(r.published, r.publish_time),
                      r.publish_rpc == "PublishStream" ? "request" : "call",
                      cli::HumanDuration(r.call_latency.Percentile(50)),
                      cli::HumanDuration(r.call_latency.Percentile(99)),
                      cli::HumanDuration(r.call_latency.max())));
  if (r.consumers > 0) {
    lines.emplace_back(
        "delivered",
        absl::StrFormat("%d of %d in %s = %.0f msg/s", r.delivered, r.published,
                        cli::HumanDuration(r.delivery_time),
                        Rate(r.delivered, r.delivery_time)));
    const LatencyHistogram& l = r.lateness;
    lines.emplace_back(
        "lateness",
        absl::StrCat("p50 ", cli::HumanDuration(l.Percentile(50)), " p90 ",
                     cli::HumanDuration(l.Percentile(90)), " p99 ",
                     cli::HumanDuration(l.Percentile(99)), " p99.9 ",
                     cli::HumanDuration(l.Percentile(99.9)), " max ",
                     cli::HumanDuration(l.max())));
  } else {
    lines.emplace_back("delivered", "- (no consumers)");
    lines.emplace_back("lateness", "-");
  }
  lines.emplace_back("early", absl::StrCat(r.early));
  lines.emplace_back("duplicates", absl::StrCat(r.duplicates));
  lines.emplace_back("undelivered", absl::StrCat(r.undelivered));
  std::string errors = absl::StrCat(r.errors + r.stream_errors);
  if (!r.first_error.empty())
    absl::StrAppend(&errors, " (", r.first_error, ")");
  lines.emplace_back("errors", errors);
  if (r.foreign > 0) {
    lines.emplace_back("foreign", absl::StrCat(r.foreign,
                                               " deliveries not "
                                               "published by this run"));
  }
  if (r.interrupted) lines.emplace_back("interrupted", "yes");

  size_t width = 0;
  for (const auto& [name, value] : lines) width = std::max(width, name.size());
  std::string out;
  for (const auto& [name, value] : lines) {
    absl::StrAppend(&out, name, std::string(width - name.size() + 2, ' '),
                    value, "\n");
  }
  return out;
}

std::string JsonReport(const BenchResult& r) {
  const LatencyHistogram& c = r.call_latency;
  const LatencyHistogram& l = r.lateness;
  BenchReport report;
  report.set_topic(r.topic);
  report.set_group(r.group);
  report.set_durability(r.durability);
  report.set_producers(static_cast<uint32_t>(r.producers));
  report.set_publish_rpc(r.publish_rpc);
  report.set_consumers(static_cast<uint32_t>(r.consumers));
  report.set_consumer_rpc(r.consumer_rpc);
  report.set_concurrency(static_cast<uint32_t>(r.concurrency));
  report.set_batch(r.batch);
  report.set_payload_bytes(static_cast<uint32_t>(r.payload_bytes));
  report.set_delay(r.delay.ToString());
  report.set_rate(Round(r.rate, 0));
  report.set_published(Count(r.published));
  report.set_publish_calls(Count(r.publish_calls));
  report.set_publish_seconds(Round(absl::ToDoubleSeconds(r.publish_time), 6));
  report.set_publish_rate(Round(Rate(r.published, r.publish_time), 1));
  CallLatencyMs& call = *report.mutable_publish_call_ms();
  call.set_p50(Millis(c.Percentile(50)));
  call.set_p99(Millis(c.Percentile(99)));
  call.set_max(Millis(c.max()));
  report.set_delivered(Count(r.delivered));
  report.set_delivery_seconds(Round(absl::ToDoubleSeconds(r.delivery_time), 6));
  report.set_delivery_rate(Round(Rate(r.delivered, r.delivery_time), 1));
  LatenessMs& lateness = *report.mutable_lateness_ms();
  lateness.set_p50(Millis(l.Percentile(50)));
  lateness.set_p90(Millis(l.Percentile(90)));
  lateness.set_p99(Millis(l.Percentile(99)));
  lateness.set_p99_9(Millis(l.Percentile(99.9)));
  lateness.set_max(Millis(l.max()));
  report.set_early(Count(r.early));
  report.set_duplicates(Count(r.duplicates));
  report.set_foreign(Count(r.foreign));
  report.set_undelivered(Count(r.undelivered));
  report.set_errors(Count(r.errors));
  report.set_failed_messages(Count(r.failed_messages));
  report.set_stream_errors(Count(r.stream_errors));
  report.set_first_error(r.first_error);
  report.set_interrupted(r.interrupted);
  absl::StatusOr<std::string> json = cli::ToJson(report);
  // A message of plain fields always prints; say so if it ever does not.
  return json.ok()
             ? *json + "\n"
             : absl::StrCat("{\"error\":",
                            cli::JsonQuote(json.status().ToString()), "}\n");
}

}  // namespace hourglass::bench
