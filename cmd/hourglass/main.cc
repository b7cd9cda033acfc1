// hourglass: the operator's command line of the Hourglass broker.
//
//   hourglass [--addr=127.0.0.1:7070] [--timeout=10s] [--json] SUBCOMMAND ...
//
// This file wires the global options and the subcommands together; each
// group of subcommands lives in a file of its own (cmd/hourglass/command.h).

#include <iostream>
#include <map>
#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/channel.h"
#include "cmd/common/connection.h"
#include "cmd/common/errors.h"
#include "cmd/common/flags.h"
#include "cmd/common/output.h"
#include "cmd/hourglass/command.h"
#include "cmd/hourglass/output.pb.h"

namespace {

constexpr char kFooter[] = R"(
Global options (--addr, --timeout, --json, --tls*, --token) may come before
or after the subcommand. Every subcommand has --help with examples. Times
are UTC, in RFC 3339. Durations are like 500ms, 30s, 15m, 2h, 3d or 1h30m.
The address, the token and the TLS files may come from the environment
instead, a flag on the command line winning: HOURGLASS_ADDR (one address or
several separated by commas, as --addr), HOURGLASS_TOKEN, HOURGLASS_TLS_CA,
HOURGLASS_TLS_CERT, HOURGLASS_TLS_KEY, HOURGLASS_TLS_SERVER_NAME.

Renamed: ls is now messages, groups list is now groups, dlq list is now dlq;
the old names work until the next release.

Exit status: 0 on success; 1 when the broker refused the request or could
not be reached; 2 when the command line is wrong. Errors are one line on
stderr, e.g.
  hourglass: cannot reach 127.0.0.1:7070: connection refused
  hourglass: NOT_FOUND: no scheduled message with id "x" in topic "t"

Examples:
  hourglass publish --topic=orders --delay=30m --id=order-42 --data='{"order":42}'
  hourglass subscribe --topic=orders --group=billing
  hourglass cancel --topic=orders --id=order-42
  hourglass messages --topic=orders --from=now --to=+1h
  HOURGLASS_ADDR=broker.internal:7070 hourglass stats --json
  hourglass --addr=node1:7070,node2:7070,node3:7070 cluster
  source <(hourglass completion bash))";

// Help names the value of each option the same way in every subcommand.
void NameValues(CLI::App* app) {
  static const auto* const kValueNames = new std::map<std::string, std::string>{
      {"--addr", "HOST:PORT"},
      {"--timeout", "DURATION"},
      {"--topic", "TOPIC"},
      {"--group", "GROUP"},
      {"--id", "ID"},
      {"--data", "TEXT"},
      {"--file", "FILE"},
      {"--delay", "DURATION"},
      {"--at", "TIME"},
      {"--header", "KEY=VALUE"},
      {"--count", "N"},
      {"--batch", "N"},
      {"--ack", "MODE"},
      {"--max-in-flight", "N"},
      {"--ack-timeout", "DURATION"},
      {"--state", "STATE"},
      {"--from", "TIME"},
      {"--to", "TIME"},
      {"--limit", "N"},
      {"--page-token", "TOKEN"},
      {"--preview", "BYTES"},
      {"--tls-ca", "FILE"},
      {"--tls-cert", "FILE"},
      {"--tls-key", "FILE"},
      {"--tls-server-name", "NAME"},
      {"--token", "TOKEN"},
      {"--service", "SERVICE"},
      {"--cron", "EXPR"},
      {"--every", "DURATION"},
      {"--tz", "ZONE"},
      {"--on_gap", "fire|skip"},
      {"--on_overlap", "auto|both"},
      {"--start_at", "TIME"},
      {"--end_at", "TIME"},
  };
  for (CLI::Option* option : app->get_options({})) {
    const auto name = kValueNames->find(option->get_name());
    if (name != kValueNames->end()) option->type_name(name->second);
  }
  for (CLI::App* subcommand : app->get_subcommands({})) NameValues(subcommand);
}

// hourglass health: for Docker's HEALTHCHECK and other probes.
void AddHealthCommand(hourglass::cli::Registry& registry) {
  CLI::App* health = registry.app().add_subcommand(
      "health",
      "Checks that the broker serves (grpc.health.v1): prints SERVING and "
      "exits 0, else prints the status and exits 1");
  // Shared with the action, which the app keeps.
  auto service = std::make_shared<std::string>();
  health->add_option("--service", *service,
                     "Service to check, e.g. hourglass.v1.Broker; default: "
                     "the whole broker");
  health->footer(R"(
Examples:
  hourglass health
  hourglass --addr=broker:7070 --tls-ca=ca.pem health)");
  registry.SetAction(
      health, [&globals = registry.globals(), service]() -> absl::Status {
        absl::StatusOr<std::unique_ptr<hourglass::cli::Connection>> connection =
            hourglass::cli::Connection::Open(globals);
        if (!connection.ok()) return connection.status();
        absl::StatusOr<std::string> status =
            (*connection)->admin().Health(*service);
        if (!status.ok()) return (*connection)->Check(status.status());
        if (globals.json) {
          hourglass::cli::HealthOutput output;
          output.set_status(*status);
          if (absl::Status s = hourglass::cli::PrintJson(output); !s.ok()) {
            return s;
          }
        } else {
          std::cout << *status << std::endl;
        }
        if (*status != "SERVING") {
          return absl::UnavailableError(
              absl::StrCat("broker at ", globals.addr, " is ", *status));
        }
        return absl::OkStatus();
      });
}

// `hourglass bench`, the load generator, is a program of its own now,
// hourglass-bench, so that the operator's CLI stays an operator's tool. The
// subcommand stays, hidden from help, so that scripts from before fail with
// a pointer to the new command rather than "unknown subcommand".
void AddMovedBenchCommand(hourglass::cli::Registry& registry) {
  CLI::App* bench = registry.app().add_subcommand(
      "bench", "Moved: the load generator is hourglass-bench");
  bench->group("");           // Not listed in --help.
  bench->fallthrough(false);  // Its flags stay its own: they are ignored.
  bench->prefix_command();
  bench->allow_extras();
  registry.SetAction(bench, [] {
    return hourglass::cli::UsageError(
        "bench moved to a program of its own: run hourglass-bench with the "
        "same flags (see hourglass-bench --help)");
  });
}

}  // namespace

int main(int argc, char** argv) {
  hourglass::cli::QuietGrpcLogs();
  hourglass::cli::GlobalOptions globals;
  CLI::App app(
      "hourglass: publish, consume, inspect and repair messages of an "
      "Hourglass delayed-message broker.",
      "hourglass");
  // Subcommands made after this pass options they do not know (the global
  // ones) up to their parent, so those may follow the subcommand too.
  app.fallthrough();
  app.require_subcommand(1);
  app.failure_message([](const CLI::App* app, const CLI::Error& error) {
    return hourglass::cli::UsageFailure("hourglass", app, error);
  });
  app.set_version_flag("--version", "hourglass " HOURGLASS_VERSION);
  hourglass::cli::AddGlobalFlags(app, globals);
  app.footer(kFooter);

  hourglass::cli::Registry registry(app, globals);
  hourglass::cli::AddPublishCommand(registry);
  hourglass::cli::AddSubscribeCommand(registry);
  hourglass::cli::AddMessageCommands(registry);
  hourglass::cli::AddTopicCommands(registry);
  hourglass::cli::AddScheduleCommand(registry);
  hourglass::cli::AddSnapshotCommand(registry);
  hourglass::cli::AddClusterCommand(registry);
  hourglass::cli::AddRecurringCommand(registry);
  AddHealthCommand(registry);
  AddMovedBenchCommand(registry);
  hourglass::cli::AddCompletionCommand(registry);
  NameValues(&app);
  app.get_formatter()->column_width(34);

  // CLI11 reports parse errors and --help by exceptions; they stop here.
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : hourglass::cli::kExitUsage;
  }
  const absl::Status status = registry.chosen()();
  if (!status.ok()) std::cerr << "hourglass: " << status.message() << std::endl;
  // The command's channels are gone; gRPC may still be tearing them down.
  hourglass::client::AwaitGrpcShutdown(absl::Seconds(5));
  return hourglass::cli::ExitCode(status);
}
