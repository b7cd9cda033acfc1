// The schedule subcommand: a topic's schedule histogram (Admin.GetSchedule)
// as a text bar chart.

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cmd/common/connection.h"
#include "cmd/common/duration.h"
#include "cmd/common/errors.h"
#include "cmd/common/output.h"
#include "cmd/hourglass/command.h"
#include "hourglass/v1/admin.pb.h"

namespace hourglass::cli {

std::string ScheduleChart(const hourglass::v1::GetScheduleResponse& response,
                          absl::Duration bucket, int width) {
  uint64_t largest = 0;
  for (const hourglass::v1::ScheduleBucket& b : response.buckets()) {
    largest = std::max(largest, b.count());
  }
  // Whole minutes: buckets start on them.
  const char* format = bucket % absl::Hours(24) == absl::ZeroDuration()
                           ? "%Y-%m-%d"
                           : "%Y-%m-%dT%H:%MZ";
  Table table({"START", "COUNT", "SCHEDULED"});
  table.AlignRight(1);
  for (const hourglass::v1::ScheduleBucket& b : response.buckets()) {
    // Scaled to the largest bucket; any count > 0 gets at least one mark.
    size_t marks = 0;
    if (b.count() > 0) {
      marks = std::max<size_t>(
          1, static_cast<size_t>(
                 (b.count() * static_cast<uint64_t>(width) + largest / 2) /
                 largest));
    }
    table.AddRow(
        {absl::FormatTime(format, FromProto(b.start()), absl::UTCTimeZone()),
         absl::StrCat(b.count()), std::string(marks, '#')});
  }
  return absl::StrCat(table.Render(), response.total(), " scheduled in ",
                      response.buckets_size(), " buckets of ",
                      HumanDuration(bucket), "\n");
}

namespace {

struct ScheduleOptions {
  std::string topic;
  std::string from = "now";
  std::string to = "+24h";
  std::string bucket = "1h";
  int width = 50;
};

absl::Status Schedule(const GlobalOptions& globals,
                      const ScheduleOptions& options) {
  const absl::Time now = absl::Now();
  absl::StatusOr<absl::Time> from = ParseTime(options.from, now);
  if (!from.ok()) return UsageError("--from", from.status().message());
  absl::StatusOr<absl::Time> to = ParseTime(options.to, now);
  if (!to.ok()) return UsageError("--to", to.status().message());
  absl::StatusOr<absl::Duration> bucket = ParseDuration(options.bucket);
  if (!bucket.ok()) return UsageError("--bucket", bucket.status().message());
  hourglass::v1::GetScheduleRequest request;
  request.set_topic(options.topic);
  *request.mutable_from() = ToProto(*from);
  *request.mutable_to() = ToProto(*to);
  *request.mutable_bucket() = ToProto(*bucket);

  absl::StatusOr<std::unique_ptr<Connection>> connection =
      Connection::Open(globals);
  if (!connection.ok()) return connection.status();
  absl::StatusOr<hourglass::v1::GetScheduleResponse> schedule =
      (*connection)->admin().GetSchedule(request);
  if (!schedule.ok()) return (*connection)->Check(schedule.status());
  if (globals.json) return PrintJson(*schedule);
  std::cout << ScheduleChart(*schedule, *bucket, options.width) << std::flush;
  return absl::OkStatus();
}

}  // namespace

void AddScheduleCommand(Registry& registry) {
  auto options = std::make_shared<ScheduleOptions>();
  CLI::App* schedule = registry.app().add_subcommand(
      "schedule", "Chart how many scheduled messages come due when");
  schedule->add_option("--topic", options->topic, "Topic to chart")->required();
  schedule
      ->add_option("--from", options->from,
                   "Start of the range: RFC 3339, now, +1h, -30m")
      ->capture_default_str();
  schedule
      ->add_option("--to", options->to,
                   "End of the range (exclusive): RFC 3339, now, +24h")
      ->capture_default_str();
  schedule
      ->add_option("--bucket", options->bucket,
                   "Length of each bar: whole minutes, e.g. 1m, 15m, 1h, 1d")
      ->capture_default_str();
  schedule
      ->add_option("--width", options->width,
                   "Characters of the longest bar, 10 to 200")
      ->capture_default_str()
      ->check(CLI::Range(10, 200));
  schedule->footer(R"(
One line per bucket: its start (UTC), how many scheduled messages of the
topic come due in it, and a bar scaled to the largest bucket; then the
total. Buckets are aligned to whole multiples of --bucket since the Unix
epoch (1h buckets start on the hour, 1d buckets at midnight UTC), from the
one holding --from to the one holding the instant before --to. The counts
are exact and cheap: the broker keeps them per minute, hour and day. At
most 10,000 buckets. With --json, the GetScheduleResponse.

Examples:
  hourglass schedule --topic=orders
  hourglass schedule --topic=orders --from=now --to=+24h --bucket=1h
  hourglass schedule --topic=reminders --to=+365d --bucket=1d --json)");
  registry.SetAction(schedule, [&globals = registry.globals(), options] {
    return Schedule(globals, *options);
  });
}

}  // namespace hourglass::cli
