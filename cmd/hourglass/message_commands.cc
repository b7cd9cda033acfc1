// Subcommands about single messages and lists of them: cancel, reschedule,
// messages, show and dlq (with redrive); ls, dlq list: their old names.

#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

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
#include "cmd/hourglass/message_format.h"
#include "cmd/hourglass/output.pb.h"
#include "hourglass/v1/admin.pb.h"
#include "hourglass/v1/broker.pb.h"

namespace hourglass::cli {
namespace {

using hourglass::v1::ListMessagesRequest;
using hourglass::v1::ListMessagesResponse;

struct MessageOptions {
  std::string topic;
  std::string id;
};

absl::Status Cancel(const GlobalOptions& globals,
                    const MessageOptions& options) {
  absl::StatusOr<std::unique_ptr<Connection>> connection =
      Connection::Open(globals);
  if (!connection.ok()) return connection.status();
  const absl::Status status =
      (*connection)->publisher().Cancel(options.topic, options.id);
  if (!status.ok()) return (*connection)->Check(status);
  if (globals.json) {
    CancelOutput output;
    output.set_topic(options.topic);
    output.set_id(options.id);
    output.set_cancelled(true);
    return PrintJson(output);
  } else {
    std::cout << "cancelled " << options.id << " in " << options.topic
              << std::endl;
  }
  return absl::OkStatus();
}

struct RescheduleOptions {
  std::string topic;
  std::string id;
  std::string delay;
  std::string at;
};

absl::Status Reschedule(const GlobalOptions& globals,
                        const RescheduleOptions& options) {
  hourglass::v1::RescheduleRequest request;
  request.set_topic(options.topic);
  request.set_id(options.id);
  if (!options.delay.empty()) {
    absl::StatusOr<absl::Duration> delay = ParseDuration(options.delay);
    if (!delay.ok()) return UsageError("--delay", delay.status().message());
    *request.mutable_delay() = ToProto(*delay);
  } else if (!options.at.empty()) {
    absl::StatusOr<absl::Time> at = ParseTime(options.at, absl::Now());
    if (!at.ok()) return UsageError("--at", at.status().message());
    *request.mutable_deliver_at() = ToProto(*at);
  } else {
    return UsageError("give the new due time with --delay or --at");
  }
  absl::StatusOr<std::unique_ptr<Connection>> connection =
      Connection::Open(globals);
  if (!connection.ok()) return connection.status();
  absl::StatusOr<hourglass::v1::Receipt> receipt =
      (*connection)->admin().Reschedule(request);
  if (!receipt.ok()) return (*connection)->Check(receipt.status());
  if (globals.json) return PrintJson(*receipt);
  Table table({"ID", "DELIVER_AT"});
  table.AddRow({receipt->id(), Rfc3339(FromProto(receipt->deliver_at()))});
  std::cout << table.Render() << std::flush;
  return absl::OkStatus();
}

struct ListOptions {
  std::string topic;
  std::string state = "scheduled";
  std::string group;
  std::string from;
  std::string to;
  uint32_t limit = 100;
  std::string page_token;
};

// Calls ListMessages and prints the page. Unless --json, an empty page
// prints `no MESSAGES` and a page with more after it prints, on stderr, the
// command line for the next page: `next_page` followed by
// --page-token=TOKEN.
absl::Status ListPage(const GlobalOptions& globals,
                      const ListMessagesRequest& request,
                      absl::string_view messages,
                      const std::string& next_page) {
  absl::StatusOr<std::unique_ptr<Connection>> connection =
      Connection::Open(globals);
  if (!connection.ok()) return connection.status();
  absl::StatusOr<ListMessagesResponse> listed =
      (*connection)->admin().ListMessages(request);
  if (!listed.ok()) return (*connection)->Check(listed.status());
  const ListMessagesResponse& page = *listed;
  if (globals.json) return PrintJson(page);
  if (page.messages_size() == 0 && request.page_token().empty()) {
    std::cout << "no " << messages << std::endl;
  } else {
    const bool per_group =
        request.state() == hourglass::v1::MESSAGE_STATE_READY ||
        request.state() == hourglass::v1::MESSAGE_STATE_IN_FLIGHT;
    std::cout << MessagesTable(page, per_group) << std::flush;
  }
  if (!page.next_page_token().empty()) {
    std::cerr << "next page: " << next_page
              << " --page-token=" << ShellQuote(page.next_page_token())
              << std::endl;
  }
  return absl::OkStatus();
}

absl::Status List(const GlobalOptions& globals, const ListOptions& options) {
  ListMessagesRequest request;
  request.set_topic(options.topic);
  absl::StatusOr<hourglass::v1::MessageState> state = ParseState(options.state);
  if (!state.ok()) return UsageError("--state", state.status().message());
  request.set_state(*state);
  request.set_group(options.group);
  request.set_page_size(options.limit);
  request.set_page_token(options.page_token);
  // The next page must repeat the range exactly: relative times become
  // absolute in the hint, from a now in whole milliseconds (the broker's
  // precision), and times print in full.
  const absl::Time now = absl::FromUnixMillis(absl::ToUnixMillis(absl::Now()));
  auto exact = [](absl::Time time) {
    return absl::FormatTime("%Y-%m-%dT%H:%M:%E*SZ", time, absl::UTCTimeZone());
  };
  std::string next_page =
      absl::StrCat("hourglass --addr=", ShellQuote(globals.addr),
                   " messages --topic=", ShellQuote(options.topic),
                   " --state=", StateName(*state));
  if (!options.group.empty()) {
    absl::StrAppend(&next_page, " --group=", ShellQuote(options.group));
  }
  if (!options.from.empty()) {
    absl::StatusOr<absl::Time> from = ParseTime(options.from, now);
    if (!from.ok()) return UsageError("--from", from.status().message());
    *request.mutable_due_from() = ToProto(*from);
    absl::StrAppend(&next_page, " --from=", exact(*from));
  }
  if (!options.to.empty()) {
    absl::StatusOr<absl::Time> to = ParseTime(options.to, now);
    if (!to.ok()) return UsageError("--to", to.status().message());
    *request.mutable_due_to() = ToProto(*to);
    absl::StrAppend(&next_page, " --to=", exact(*to));
  }
  absl::StrAppend(&next_page, " --limit=", options.limit);
  return ListPage(
      globals, request,
      absl::StrCat(StateName(*state), " messages in ", options.topic),
      next_page);
}

struct ShowOptions {
  std::string topic;
  std::string id;
  uint32_t preview = 256;
};

absl::Status Show(const GlobalOptions& globals, const ShowOptions& options) {
  absl::StatusOr<std::unique_ptr<Connection>> connection =
      Connection::Open(globals);
  if (!connection.ok()) return connection.status();
  hourglass::v1::GetMessageRequest request;
  request.set_topic(options.topic);
  request.set_id(options.id);
  request.set_preview_bytes(options.preview);
  absl::StatusOr<hourglass::v1::MessageInfo> message =
      (*connection)->admin().GetMessage(request);
  if (!message.ok()) return (*connection)->Check(message.status());
  if (globals.json) return PrintJson(*message);
  std::cout << MessageDetails(*message) << std::flush;
  return absl::OkStatus();
}

struct DeadLetterListOptions {
  std::string topic;
  uint32_t limit = 100;
  std::string page_token;
};

absl::Status ListDeadLetters(const GlobalOptions& globals,
                             const DeadLetterListOptions& options) {
  ListMessagesRequest request;
  request.set_topic(options.topic);
  request.set_state(hourglass::v1::MESSAGE_STATE_DEAD);
  request.set_page_size(options.limit);
  request.set_page_token(options.page_token);
  return ListPage(globals, request,
                  absl::StrCat("dead letters of ", options.topic),
                  absl::StrCat("hourglass --addr=", ShellQuote(globals.addr),
                               " dlq --topic=", ShellQuote(options.topic),
                               " --limit=", options.limit));
}

struct RedriveOptions {
  std::string topic;
  std::vector<std::string> ids;
};

absl::Status Redrive(const GlobalOptions& globals,
                     const RedriveOptions& options) {
  absl::StatusOr<std::unique_ptr<Connection>> connection =
      Connection::Open(globals);
  if (!connection.ok()) return connection.status();
  hourglass::v1::RedriveDeadLettersRequest request;
  request.set_topic(options.topic);
  for (const std::string& id : options.ids) request.add_ids(id);
  absl::StatusOr<hourglass::v1::RedriveDeadLettersResponse> response =
      (*connection)->admin().RedriveDeadLetters(request);
  if (!response.ok()) return (*connection)->Check(response.status());
  if (globals.json) return PrintJson(*response);
  std::cout << "redrove " << response->redriven() << " dead letters from "
            << options.topic << ".dlq to " << options.topic << std::endl;
  return absl::OkStatus();
}

void AddCancel(Registry& registry) {
  auto options = std::make_shared<MessageOptions>();
  CLI::App* cancel = registry.app().add_subcommand(
      "cancel", "Cancel a scheduled message that is not yet due");
  cancel->add_option("--topic", options->topic, "Topic of the message")
      ->required();
  cancel->add_option("--id", options->id, "Id from the message's receipt")
      ->required();
  cancel->footer(R"(
Fails with NOT_FOUND (exit 1) unless the message is scheduled and not yet
due: never published, already due, already cancelled or acknowledged.

Example:
  hourglass cancel --topic=orders --id=order-42)");
  registry.SetAction(cancel, [&globals = registry.globals(), options] {
    return Cancel(globals, *options);
  });
}

void AddReschedule(Registry& registry) {
  auto options = std::make_shared<RescheduleOptions>();
  CLI::App* reschedule = registry.app().add_subcommand(
      "reschedule", "Move a scheduled message to a new due time");
  reschedule->add_option("--topic", options->topic, "Topic of the message")
      ->required();
  reschedule->add_option("--id", options->id, "Id of the message")->required();
  CLI::Option* delay = reschedule->add_option(
      "--delay", options->delay, "Due this long from now: 30s, 15m, 2h, 3d");
  reschedule
      ->add_option("--at", options->at,
                   "Due at this time: RFC 3339 (2026-01-02T15:04:05Z), +30m")
      ->excludes(delay);
  reschedule->footer(R"(
Atomically moves a scheduled, not-yet-due message; prints its id and new
due time. NOT_FOUND under the same rules as cancel.

Examples:
  hourglass reschedule --topic=orders --id=order-42 --delay=1h
  hourglass reschedule --topic=orders --id=order-42 --at=2026-01-02T09:00:00Z)");
  registry.SetAction(reschedule, [&globals = registry.globals(), options] {
    return Reschedule(globals, *options);
  });
}

// The options of `messages` (and of `ls`), into `options`.
void AddListOptions(CLI::App* command, ListOptions& options) {
  command->add_option("--topic", options.topic, "Topic to list")->required();
  command
      ->add_option("--state", options.state,
                   "scheduled, ready, in-flight or dead")
      ->capture_default_str();
  command->add_option("--group", options.group,
                      "With ready or in-flight: only this group");
  command->add_option("--from", options.from,
                      "Due at or after: RFC 3339, now, +1h, -30m");
  command->add_option("--to", options.to,
                      "Due before: RFC 3339, now, +1h, -30m");
  command->add_option("--limit", options.limit, "Messages per page, 1 to 1000")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  command->add_option("--page-token", options.page_token,
                      "Page to show, from the previous page's hint");
}

void AddList(Registry& registry) {
  auto options = std::make_shared<ListOptions>();
  CLI::App* messages = registry.app().add_subcommand(
      "messages", "List messages of a topic by state and due time");
  AddListOptions(messages, *options);
  messages->footer(R"(
Prints a table in due-time order: ID, TOPIC, DUE (UTC), STATE, ATTEMPTS and
SIZE (payload bytes). Ready and in-flight messages are listed group after
group, with a GROUP column ("-": due on a topic that has no group yet).
When more messages follow, the command for the next page goes to stderr.
With --json, the ListMessagesResponse (its next_page_token included).

Examples:
  hourglass messages --topic=orders
  hourglass messages --topic=orders --from=now --to=+1h --limit=20
  hourglass messages --topic=orders --state=in-flight --group=billing)");
  registry.SetAction(messages, [&globals = registry.globals(), options] {
    return List(globals, *options);
  });

  // The old name, for one release.
  CLI::App* ls = registry.app().add_subcommand(
      "ls", "Old name of messages; it goes in the next release");
  ls->group("");  // Not listed in --help, nor completed.
  AddListOptions(ls, *options);
  ls->footer(R"(
The old name of hourglass messages (see hourglass messages --help); it goes
in the next release.)");
  registry.SetAction(ls, [&globals = registry.globals(), options] {
    NoteRenamed("ls", "messages");
    return List(globals, *options);
  });
}

void AddShow(Registry& registry) {
  auto options = std::make_shared<ShowOptions>();
  CLI::App* show = registry.app().add_subcommand(
      "show", "Show one message and its state in each group");
  show->add_option("--topic", options->topic, "Topic of the message")
      ->required();
  show->add_option("--id", options->id, "Id of the message")->required();
  show->add_option("--preview", options->preview,
                   "Payload bytes to show (0: the broker's default, 256)")
      ->capture_default_str();
  show->footer(R"(
Example:
  hourglass show --topic=orders --id=order-42)");
  registry.SetAction(show, [&globals = registry.globals(), options] {
    return Show(globals, *options);
  });
}

// The options of `dlq` that list (and of `dlq list`), into `options`.
void AddDeadLetterListOptions(CLI::App* command,
                              DeadLetterListOptions& options) {
  command->add_option("--topic", options.topic, "The original topic");
  command->add_option("--limit", options.limit, "Messages per page, 1 to 1000")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  command->add_option("--page-token", options.page_token,
                      "Page to show, from the previous page's hint");
}

void AddDeadLetters(Registry& registry) {
  CLI::App* dlq = registry.app().add_subcommand(
      "dlq", "List a topic's dead letters (<topic>.dlq), or redrive them");
  // Lists with no subcommand; the flags of the list go before any.
  dlq->require_subcommand(0, 1);
  auto list_options = std::make_shared<DeadLetterListOptions>();
  AddDeadLetterListOptions(dlq, *list_options);
  dlq->footer(R"(
A message delivered --max_attempts times without an ack moves to the topic
<topic>.dlq. dlq lists them, as messages --state=dead does; redrive
publishes them back. Both take the original topic.

Examples:
  hourglass dlq --topic=orders
  hourglass dlq redrive --topic=orders --id=order-42 --id=order-43
  hourglass dlq redrive --topic=orders)");

  auto redrive_options = std::make_shared<RedriveOptions>();
  CLI::App* redrive = dlq->add_subcommand(
      "redrive", "Publish dead letters back to their topic, due now");
  redrive->add_option("--topic", redrive_options->topic, "The original topic")
      ->required();
  redrive->add_option("--id", redrive_options->ids,
                      "Dead letter to redrive; repeat for more (default: all)");

  // The old name of dlq with no subcommand, for one release.
  CLI::App* list = dlq->add_subcommand(
      "list", "Old name of dlq; it goes in the next release");
  list->group("");  // Not listed in --help, nor completed.
  AddDeadLetterListOptions(list, *list_options);
  list->get_option("--topic")->required();

  // One action for all three, as the subcommands' callbacks run before
  // their parent's.
  registry.SetAction(
      dlq,
      [&globals = registry.globals(), dlq, list_options, redrive,
       redrive_options, list]() -> absl::Status {
        if (redrive->parsed()) {
          for (const char* flag : {"--limit", "--page-token"}) {
            if (dlq->get_option(flag)->count() > 0) {
              return UsageError(flag,
                                "is for listing dead letters, not for redrive");
            }
          }
          return Redrive(globals, *redrive_options);
        }
        if (list->parsed()) {
          NoteRenamed("dlq list", "dlq");
        } else if (list_options->topic.empty()) {
          return UsageError("--topic is required (see hourglass dlq --help)");
        }
        return ListDeadLetters(globals, *list_options);
      });
}

}  // namespace

void AddMessageCommands(Registry& registry) {
  AddCancel(registry);
  AddReschedule(registry);
  AddList(registry);
  AddShow(registry);
  AddDeadLetters(registry);
}

}  // namespace hourglass::cli
