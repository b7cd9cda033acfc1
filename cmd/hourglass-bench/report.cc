#include "cmd/hourglass-bench/report.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cmd/common/duration.h"
#include "cmd/common/output.h"

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

// Milliseconds with microsecond precision, for JSON.
std::string Millis(absl::Duration d) {
  return absl::StrFormat("%.3f", absl::ToDoubleMilliseconds(d));
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
  return absl::StrCat(
      "{\"topic\":", cli::JsonQuote(r.topic),
      ",\"group\":", cli::JsonQuote(r.group),
      ",\"durability\":", cli::JsonQuote(r.durability),
      ",\"producers\":", r.producers,
      ",\"publish_rpc\":", cli::JsonQuote(r.publish_rpc),
      ",\"consumers\":", r.consumers,
      ",\"consumer_rpc\":", cli::JsonQuote(r.consumer_rpc),
      ",\"concurrency\":", r.concurrency, ",\"batch\":", r.batch,
      ",\"payload_bytes\":", r.payload_bytes,
      ",\"delay\":", cli::JsonQuote(r.delay.ToString()),
      ",\"rate\":", absl::StrFormat("%.0f", r.rate),
      ",\"published\":", r.published, ",\"publish_calls\":", r.publish_calls,
      ",\"publish_seconds\":",
      absl::StrFormat("%.6f", absl::ToDoubleSeconds(r.publish_time)),
      ",\"publish_rate\":",
      absl::StrFormat("%.1f", Rate(r.published, r.publish_time)),
      ",\"publish_call_ms\":{\"p50\":", Millis(c.Percentile(50)),
      ",\"p99\":", Millis(c.Percentile(99)), ",\"max\":", Millis(c.max()),
      "},\"delivered\":", r.delivered, ",\"delivery_seconds\":",
      absl::StrFormat("%.6f", absl::ToDoubleSeconds(r.delivery_time)),
      ",\"delivery_rate\":",
      absl::StrFormat("%.1f", Rate(r.delivered, r.delivery_time)),
      ",\"lateness_ms\":{\"p50\":", Millis(l.Percentile(50)),
      ",\"p90\":", Millis(l.Percentile(90)),
      ",\"p99\":", Millis(l.Percentile(99)),
      ",\"p99_9\":", Millis(l.Percentile(99.9)), ",\"max\":", Millis(l.max()),
      "},\"early\":", r.early, ",\"duplicates\":", r.duplicates,
      ",\"foreign\":", r.foreign, ",\"undelivered\":", r.undelivered,
      ",\"errors\":", r.errors, ",\"failed_messages\":", r.failed_messages,
      ",\"stream_errors\":", r.stream_errors,
      ",\"first_error\":", cli::JsonQuote(r.first_error),
      ",\"interrupted\":", r.interrupted ? "true" : "false", "}\n");
}

}  // namespace hourglass::bench
