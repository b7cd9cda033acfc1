// The recurring subcommand: recurring messages (Recurrences service). So
// far `recurring next`, the fire times of a rule, computed by the broker.

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
#include "cmd/hourglass/output.pb.h"
#include "hourglass/v1/recurrences.pb.h"

namespace hourglass::cli {
namespace {

// The flags that make a rule (RecurrenceRule).
struct RuleOptions {
  std::string cron;
  std::string every;
  std::string tz;
  std::string on_gap;
  std::string on_overlap;
  std::string start_at;
  std::string end_at;
};

struct NextOptions {
  RuleOptions rule;
  std::string from = "now";
  int count = 10;
};

absl::StatusOr<hourglass::v1::RecurrenceRule> RuleOf(const RuleOptions& o,
                                                     absl::Time now) {
  hourglass::v1::RecurrenceRule rule;
  if (o.cron.empty() == o.every.empty()) {
    return UsageError("give exactly one of --cron and --every");
  }
  if (!o.cron.empty()) rule.set_cron(o.cron);
  if (!o.every.empty()) {
    absl::StatusOr<absl::Duration> every = ParseDuration(o.every);
    if (!every.ok()) return UsageError("--every", every.status().message());
    *rule.mutable_every() = ToProto(*every);
  }
  rule.set_time_zone(o.tz);
  rule.set_on_gap(o.on_gap);
  rule.set_on_overlap(o.on_overlap);
  if (!o.start_at.empty()) {
    absl::StatusOr<absl::Time> t = ParseTime(o.start_at, now);
    if (!t.ok()) return UsageError("--start_at", t.status().message());
    *rule.mutable_start_at() = ToProto(*t);
  }
  if (!o.end_at.empty()) {
    absl::StatusOr<absl::Time> t = ParseTime(o.end_at, now);
    if (!t.ok()) return UsageError("--end_at", t.status().message());
    *rule.mutable_end_at() = ToProto(*t);
  }
  return rule;
}

// RFC 3339 with "Z" (`zone` null: UTC) or in `zone` with its offset then
// ("2027-03-14T03:30:00-04:00"); a fraction of a second only when there is
// one.
std::string Rfc3339In(absl::Time t, const absl::TimeZone* zone) {
  if (zone == nullptr) {
    return absl::FormatTime("%Y-%m-%d%ET%H:%M:%E*SZ", t, absl::UTCTimeZone());
  }
  return absl::FormatTime("%Y-%m-%d%ET%H:%M:%E*S%Ez", t, *zone);
}

absl::Status Next(const GlobalOptions& globals, const NextOptions& options) {
  const absl::Time now = absl::Now();
  absl::StatusOr<hourglass::v1::RecurrenceRule> rule =
      RuleOf(options.rule, now);
  if (!rule.ok()) return rule.status();
  absl::StatusOr<absl::Time> from = ParseTime(options.from, now);
  if (!from.ok()) return UsageError("--from", from.status().message());
  if (options.count < 1 || options.count > 1000) {
    return UsageError(
        "--count", absl::StrCat(options.count, " is not between 1 and 1000"));
  }
  hourglass::v1::PreviewRecurrenceRequest request;
  *request.mutable_rule() = *std::move(rule);
  // "now" is the broker's: left unset.
  if (options.from != "now") *request.mutable_from() = ToProto(*from);
  request.set_count(static_cast<uint32_t>(options.count));

  absl::StatusOr<std::unique_ptr<Connection>> connection =
      Connection::Open(globals);
  if (!connection.ok()) return connection.status();
  absl::StatusOr<hourglass::v1::PreviewRecurrenceResponse> preview =
      (*connection)->admin().PreviewRecurrence(request);
  if (!preview.ok()) return (*connection)->Check(preview.status());

  // The broker accepted the zone; this machine's tzdata may lack it (then
  // the local column is left empty). No zone, or "UTC", is UTC.
  const bool utc = options.rule.tz.empty() || options.rule.tz == "UTC";
  absl::TimeZone zone;
  const bool zoned = utc || absl::LoadTimeZone(options.rule.tz, &zone);
  NextFireTimesOutput output;
  output.set_time_zone(options.rule.tz);
  for (const google::protobuf::Timestamp& fire : preview->fire_times()) {
    NextFireTimesOutput::FireTime* out = output.add_fire_times();
    out->set_utc(Rfc3339In(FromProto(fire), nullptr));
    if (zoned) {
      out->set_local(Rfc3339In(FromProto(fire), utc ? nullptr : &zone));
    }
  }
  if (globals.json) return PrintJson(output);
  Table table(
      {"FIRE TIME (UTC)",
       absl::StrCat("LOCAL (",
                    options.rule.tz.empty() ? "UTC" : options.rule.tz, ")")});
  for (const NextFireTimesOutput::FireTime& f : output.fire_times()) {
    table.AddRow({f.utc(), f.local()});
  }
  std::cout << table.Render();
  if (output.fire_times_size() == 0) {
    std::cout << "the rule never fires after --from" << std::endl;
  } else if (output.fire_times_size() < options.count) {
    std::cout << "the rule fires no more after these "
              << output.fire_times_size() << std::endl;
  }
  std::cout << std::flush;
  return absl::OkStatus();
}

void AddRuleOptions(CLI::App* command, RuleOptions& o) {
  command->add_option("--cron", o.cron,
                      "Cron rule: 5 fields (minute hour day-of-month month "
                      "day-of-week), 6 with seconds first, or @daily etc.");
  command->add_option("--every", o.every,
                      "Fixed period instead of --cron, at least 1s (e.g. 90s, "
                      "15m, 2h), in UTC from --start_at or the Unix epoch");
  command->add_option("--tz", o.tz,
                      "IANA time zone the cron rule is read in (default UTC)");
  command->add_option("--on_gap", o.on_gap,
                      "A local time skipped by DST: fire (default, at the end "
                      "of the gap) or skip");
  command->add_option("--on_overlap", o.on_overlap,
                      "A local time repeated by DST: auto (default: once for "
                      "fixed hours, twice for * or step hours) or both");
  command->add_option("--start_at", o.start_at,
                      "First instant the rule may fire (RFC 3339, now, +1h)");
  command->add_option("--end_at", o.end_at,
                      "The rule fires only before this instant");
}

}  // namespace

void AddRecurringCommand(Registry& registry) {
  CLI::App* recurring = registry.app().add_subcommand(
      "recurring", "Recurring messages: when a rule fires");
  recurring->require_subcommand(1);
  recurring->footer(R"(
A recurrence publishes a message from a template on a cron rule in a time
zone, or on a fixed period. So far the broker computes a rule's fire times
(recurring next); storing recurrences comes next.

Examples:
  hourglass recurring next --cron='0 9 * * MON-FRI' --tz=Europe/London)");

  auto next_options = std::make_shared<NextOptions>();
  CLI::App* next = recurring->add_subcommand(
      "next", "Print the next fire times of a rule, storing nothing");
  AddRuleOptions(next, next_options->rule);
  next->add_option("--from", next_options->from,
                   "Fire times strictly after this instant (RFC 3339, now, "
                   "+1h; default now)");
  next->add_option("--count", next_options->count,
                   "How many fire times, 1 to 1000 (default 10)");
  next->footer(R"(
The broker computes the times, with its time zone database. Each is printed
in UTC and in the rule's zone with the offset in force then. Around DST:
a local time the clocks skip fires at the end of the gap (--on_gap=skip:
not at all); a local time that happens twice fires once, at the first, when
the hour is fixed, and twice when the hour field is * or a step
(--on_overlap=both: always twice).

Examples:
  hourglass recurring next --cron='30 2 * * *' --tz=America/New_York \
      --from=2027-03-13T00:00:00Z --count=3
  hourglass recurring next --every=15m --start_at=2027-01-01T00:00:00Z
  hourglass --json recurring next --cron=@daily --tz=Europe/London)");
  registry.SetAction(next, [&globals = registry.globals(), next_options] {
    return Next(globals, *next_options);
  });
}

}  // namespace hourglass::cli
