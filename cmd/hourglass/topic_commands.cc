// Subcommands about topics and groups: stats, topics, groups (with create
// and delete; groups list: its old name) and purge.

#include <unistd.h>

#include <iostream>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cmd/common/connection.h"
#include "cmd/common/duration.h"
#include "cmd/common/errors.h"
#include "cmd/common/output.h"
#include "cmd/hourglass/command.h"
#include "hourglass/v1/admin.pb.h"

namespace hourglass::cli {
namespace {

std::string Rate(double per_second) {
  return absl::StrFormat("%.1f", per_second);
}

std::string Lateness(const google::protobuf::Duration& d) {
  return HumanDuration(FromProto(d));
}

struct StatsOptions {
  std::string topic;
};

absl::Status Stats(const GlobalOptions& globals, const StatsOptions& options) {
  absl::StatusOr<std::unique_ptr<Connection>> connection =
      Connection::Open(globals);
  if (!connection.ok()) return connection.status();
  hourglass::v1::GetStatsRequest request;
  request.set_topic(options.topic);
  absl::StatusOr<hourglass::v1::GetStatsResponse> got =
      (*connection)->admin().GetStats(request);
  if (!got.ok()) return (*connection)->Check(got.status());
  const hourglass::v1::GetStatsResponse& stats = *got;
  if (globals.json) return PrintJson(stats);

  const absl::Time started = FromProto(stats.started_at());
  std::cout << "broker started " << Rfc3339(started) << " (up "
            << HumanDuration(
                   absl::Trunc(absl::Now() - started, absl::Seconds(1)))
            << ")";
  if (!stats.version().empty()) {  // Older brokers leave these out.
    std::cout << ", hourglassd " << stats.version() << ", data format "
              << stats.format_version() << ", store " << stats.store_id();
  }
  std::cout << "\n";
  if (!stats.version().empty() && !stats.serving()) {
    std::cout << "NOT SERVING: the store refuses writes: "
              << stats.not_serving_reason() << "\n";
  }
  std::cout << "\n";
  if (stats.topics_size() == 0) {
    std::cout << "no topics" << std::endl;
    return absl::OkStatus();
  }
  Table topics({"TOPIC", "SCHEDULED", "READY", "IN_FLIGHT", "DEAD", "PUBLISH/S",
                "DELIVER/S", "LATE_P50", "LATE_P90", "LATE_P99", "LATE_MAX"});
  for (size_t i = 1; i < 11; ++i) topics.AlignRight(i);
  Table groups({"TOPIC", "GROUP", "READY", "IN_FLIGHT", "CONSUMERS", "ACK/S"});
  for (size_t i = 2; i < 6; ++i) groups.AlignRight(i);
  for (const auto& t : stats.topics()) {
    topics.AddRow({t.topic(), absl::StrCat(t.scheduled()),
                   absl::StrCat(t.ready()), absl::StrCat(t.in_flight()),
                   absl::StrCat(t.dead_lettered()), Rate(t.publish_rate()),
                   Rate(t.delivery_rate()), Lateness(t.lateness().p50()),
                   Lateness(t.lateness().p90()), Lateness(t.lateness().p99()),
                   Lateness(t.lateness().max())});
    for (const auto& g : t.groups()) {
      groups.AddRow({t.topic(), g.group(), absl::StrCat(g.ready()),
                     absl::StrCat(g.in_flight()), absl::StrCat(g.consumers()),
                     Rate(g.ack_rate())});
    }
  }
  std::cout << topics.Render();
  if (!groups.empty()) std::cout << "\n" << groups.Render();
  std::cout << std::flush;
  return absl::OkStatus();
}

absl::Status Topics(const GlobalOptions& globals) {
  absl::StatusOr<std::unique_ptr<Connection>> connection =
      Connection::Open(globals);
  if (!connection.ok()) return connection.status();
  absl::StatusOr<hourglass::v1::ListTopicsResponse> listed =
      (*connection)->admin().ListTopics();
  if (!listed.ok()) return (*connection)->Check(listed.status());
  const hourglass::v1::ListTopicsResponse& response = *listed;
  if (globals.json) return PrintJson(response);
  if (response.topics_size() == 0) {
    std::cout << "no topics" << std::endl;
    return absl::OkStatus();
  }
  Table table({"TOPIC", "SCHEDULED", "READY", "IN_FLIGHT", "DEAD", "GROUPS"});
  for (size_t i = 1; i < 6; ++i) table.AlignRight(i);
  for (const auto& t : response.topics()) {
    table.AddRow({t.name(), absl::StrCat(t.scheduled()),
                  absl::StrCat(t.ready()), absl::StrCat(t.in_flight()),
                  absl::StrCat(t.dead_lettered()), absl::StrCat(t.groups())});
  }
  std::cout << table.Render() << std::flush;
  return absl::OkStatus();
}

struct GroupOptions {
  std::string topic;
  std::string group;
};

absl::Status ListGroups(const GlobalOptions& globals,
                        const GroupOptions& options) {
  absl::StatusOr<std::unique_ptr<Connection>> connection =
      Connection::Open(globals);
  if (!connection.ok()) return connection.status();
  hourglass::v1::ListGroupsRequest request;
  request.set_topic(options.topic);
  absl::StatusOr<hourglass::v1::ListGroupsResponse> listed =
      (*connection)->admin().ListGroups(request);
  if (!listed.ok()) return (*connection)->Check(listed.status());
  const hourglass::v1::ListGroupsResponse& response = *listed;
  if (globals.json) return PrintJson(response);
  if (response.groups_size() == 0) {
    std::cout << "no groups on " << options.topic << std::endl;
    return absl::OkStatus();
  }
  Table table({"GROUP", "CREATED", "READY", "IN_FLIGHT", "CONSUMERS"});
  for (size_t i = 2; i < 5; ++i) table.AlignRight(i);
  for (const auto& g : response.groups()) {
    table.AddRow({g.name(), Rfc3339(FromProto(g.created_at())),
                  absl::StrCat(g.ready()), absl::StrCat(g.in_flight()),
                  absl::StrCat(g.consumers())});
  }
  std::cout << table.Render() << std::flush;
  return absl::OkStatus();
}

absl::Status CreateGroup(const GlobalOptions& globals,
                         const GroupOptions& options) {
  absl::StatusOr<std::unique_ptr<Connection>> connection =
      Connection::Open(globals);
  if (!connection.ok()) return connection.status();
  hourglass::v1::CreateGroupRequest request;
  request.set_topic(options.topic);
  request.set_group(options.group);
  absl::StatusOr<hourglass::v1::Group> group =
      (*connection)->admin().CreateGroup(request);
  if (!group.ok()) return (*connection)->Check(group.status());
  if (globals.json) return PrintJson(*group);
  std::cout << "created group " << group->name() << " on " << group->topic()
            << std::endl;
  return absl::OkStatus();
}

absl::Status DeleteGroup(const GlobalOptions& globals,
                         const GroupOptions& options) {
  absl::StatusOr<std::unique_ptr<Connection>> connection =
      Connection::Open(globals);
  if (!connection.ok()) return connection.status();
  hourglass::v1::DeleteGroupRequest request;
  request.set_topic(options.topic);
  request.set_group(options.group);
  absl::StatusOr<hourglass::v1::DeleteGroupResponse> response =
      (*connection)->admin().DeleteGroup(request);
  if (!response.ok()) return (*connection)->Check(response.status());
  if (globals.json) return PrintJson(*response);
  std::cout << "deleted group " << options.group << " of " << options.topic
            << " (" << response->removed()
            << " ready and in-flight entries removed)" << std::endl;
  return absl::OkStatus();
}

struct PurgeOptions {
  std::string topic;
  bool scheduled = false;
  bool ready = false;
  bool yes = false;
};

// Asks on the terminal whether to go on; true for "y" or "yes".
bool Confirm(const std::string& question) {
  std::cerr << question << " [y/N] " << std::flush;
  std::string answer;
  if (!std::getline(std::cin, answer)) return false;
  answer = absl::AsciiStrToLower(absl::StripAsciiWhitespace(answer));
  return answer == "y" || answer == "yes";
}

absl::Status Purge(const GlobalOptions& globals, const PurgeOptions& options) {
  hourglass::v1::PurgeTopicRequest request;
  request.set_topic(options.topic);
  // Neither flag means both.
  request.set_scheduled(options.scheduled || !options.ready);
  request.set_ready(options.ready || !options.scheduled);
  const std::string what = request.scheduled() && request.ready()
                               ? "scheduled and ready"
                           : request.scheduled() ? "scheduled"
                                                 : "ready";
  if (!options.yes) {
    if (!isatty(STDIN_FILENO)) {
      return UsageError(absl::StrCat("refusing to purge ", options.topic,
                                     " without --yes (stdin is not a "
                                     "terminal to confirm on)"));
    }
    if (!Confirm(absl::StrCat("Delete every ", what, " message of ",
                              options.topic, "?"))) {
      return absl::CancelledError("purge cancelled; nothing was deleted");
    }
  }
  absl::StatusOr<std::unique_ptr<Connection>> connection =
      Connection::Open(globals);
  if (!connection.ok()) return connection.status();
  absl::StatusOr<hourglass::v1::PurgeTopicResponse> response =
      (*connection)->admin().PurgeTopic(request);
  if (!response.ok()) return (*connection)->Check(response.status());
  if (globals.json) return PrintJson(*response);
  std::cout << "purged " << response->purged() << " " << what << " messages of "
            << options.topic << std::endl;
  return absl::OkStatus();
}

void AddStats(Registry& registry) {
  auto options = std::make_shared<StatsOptions>();
  CLI::App* stats = registry.app().add_subcommand(
      "stats", "Counts, rates and lateness per topic and group");
  stats->add_option("--topic", options->topic, "Only this topic");
  stats->footer(R"(
Per topic: messages scheduled, ready, in flight and dead-lettered;
publishes and deliveries per second over the last minute; lateness
(delivery time minus due time) percentiles over the last minute. Per group:
ready, in flight, connected consumers, acks per second.

Examples:
  hourglass stats
  hourglass stats --topic=orders --json)");
  registry.SetAction(stats, [&globals = registry.globals(), options] {
    return Stats(globals, *options);
  });
}

void AddTopics(Registry& registry) {
  CLI::App* topics = registry.app().add_subcommand(
      "topics", "List topics with their message counts and groups");
  topics->footer(R"(
Per topic: messages scheduled, ready, in flight and dead-lettered (held in
<topic>.dlq), and the number of groups. Topics are those with pending
messages or groups, in name order; <topic>.dlq is a topic of its own.

Example:
  hourglass topics)");
  registry.SetAction(
      topics, [&globals = registry.globals()] { return Topics(globals); });
}

void AddGroups(Registry& registry) {
  CLI::App* groups = registry.app().add_subcommand(
      "groups", "List a topic's consumer groups, or create and delete one");
  // Lists with no subcommand; its --topic goes before any.
  groups->require_subcommand(0, 1);
  auto list_options = std::make_shared<GroupOptions>();
  groups->add_option("--topic", list_options->topic,
                     "Topic whose groups to list");
  groups->footer(R"(
A group receives every message of its topic that comes due after it was
registered (by create, or by its first subscriber). Deleting a group drops
its ready and in-flight messages and ends its consumers' streams.

Examples:
  hourglass groups --topic=orders
  hourglass groups create --topic=orders --group=billing
  hourglass groups delete --topic=orders --group=billing)");

  auto create_options = std::make_shared<GroupOptions>();
  CLI::App* create = groups->add_subcommand(
      "create", "Register a group before any consumer subscribes");
  create->add_option("--topic", create_options->topic, "Topic")->required();
  create->add_option("--group", create_options->group, "Group")->required();

  auto delete_options = std::make_shared<GroupOptions>();
  CLI::App* remove = groups->add_subcommand(
      "delete", "Delete a group with its ready and in-flight messages");
  remove->add_option("--topic", delete_options->topic, "Topic")->required();
  remove->add_option("--group", delete_options->group, "Group")->required();

  // The old name of groups with no subcommand, for one release.
  CLI::App* list = groups->add_subcommand(
      "list", "Old name of groups; it goes in the next release");
  list->group("");  // Not listed in --help, nor completed.
  list->add_option("--topic", list_options->topic, "Topic")->required();

  // One action for all, as the subcommands' callbacks run before their
  // parent's.
  registry.SetAction(
      groups,
      [&globals = registry.globals(), list_options, create, create_options,
       remove, delete_options, list]() -> absl::Status {
        if (create->parsed()) return CreateGroup(globals, *create_options);
        if (remove->parsed()) return DeleteGroup(globals, *delete_options);
        if (list->parsed()) {
          NoteRenamed("groups list", "groups");
        } else if (list_options->topic.empty()) {
          return UsageError(
              "--topic is required (see hourglass groups --help)");
        }
        return ListGroups(globals, *list_options);
      });
}

void AddPurge(Registry& registry) {
  auto options = std::make_shared<PurgeOptions>();
  CLI::App* purge = registry.app().add_subcommand(
      "purge", "Delete a topic's scheduled and/or ready messages");
  purge->add_option("--topic", options->topic, "Topic to purge")->required();
  purge->add_flag("--scheduled", options->scheduled,
                  "Delete scheduled (not yet due) messages");
  purge->add_flag("--ready", options->ready,
                  "Delete ready (due, waiting in groups) messages");
  purge->add_flag("--yes,-y", options->yes, "Do not ask for confirmation");
  purge->footer(R"(
Without --scheduled or --ready, deletes both. Asks for confirmation on a
terminal; without one (scripts, pipes), refuses unless --yes is given.

Examples:
  hourglass purge --topic=load-test
  hourglass purge --topic=orders --scheduled --yes)");
  registry.SetAction(purge, [&globals = registry.globals(), options] {
    return Purge(globals, *options);
  });
}

}  // namespace

void AddTopicCommands(Registry& registry) {
  AddStats(registry);
  AddTopics(registry);
  AddGroups(registry);
  AddPurge(registry);
}

}  // namespace hourglass::cli
