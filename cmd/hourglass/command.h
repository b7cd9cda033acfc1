#ifndef HOURGLASS_CMD_HOURGLASS_COMMAND_H_
#define HOURGLASS_CMD_HOURGLASS_COMMAND_H_

#include <functional>
#include <string>
#include <utility>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "cmd/common/connection.h"
#include "hourglass/v1/admin.pb.h"

namespace hourglass::cli {

// What a subcommand does once the command line has parsed. Returns the
// error main prints; see cmd/common/errors.h.
using Action = std::function<absl::Status()>;

// The subcommands of one command line. Each Add*Commands function adds its
// subcommands to app() with options that live as long as the app, and
// SetAction gives each one what it does. Parsing only records the chosen
// action; main runs it after CLI11 is done, so that no exception crosses
// our code. Used on main's thread only.
class Registry {
 public:
  Registry(CLI::App& app, const GlobalOptions& globals)
      : app_(app), globals_(globals) {}

  CLI::App& app() { return app_; }
  // The global options, filled in by the time an action runs.
  const GlobalOptions& globals() const { return globals_; }

  // When `subcommand` is on the command line, `action` is what runs.
  void SetAction(CLI::App* subcommand, Action action) {
    subcommand->callback(
        [this, action = std::move(action)] { chosen_ = action; });
  }

  // The action of the subcommand on the command line; empty before parsing
  // or when it named none.
  const Action& chosen() const { return chosen_; }

 private:
  CLI::App& app_;
  const GlobalOptions& globals_;
  Action chosen_;
};

// For the old name of a renamed subcommand, kept for one release: says on
// stderr, in one line, that `old_name` is now `new_name`, e.g.
//   hourglass: "ls" is now "messages"; the old name goes in the next release
// Stdout stays as the old name printed it, for the scripts that read it.
void NoteRenamed(absl::string_view old_name, absl::string_view new_name);

// The subcommands, by file.
void AddPublishCommand(Registry& registry);    // publish_command.cc
void AddSubscribeCommand(Registry& registry);  // subscribe_command.cc
// cancel, reschedule, messages (and its old name ls), show, dlq:
// message_commands.cc
void AddMessageCommands(Registry& registry);
// stats, topics, groups, purge: topic_commands.cc
void AddTopicCommands(Registry& registry);
// schedule: schedule_command.cc
void AddScheduleCommand(Registry& registry);
// The text bar chart of `response` (buckets of `bucket`): a line per
// bucket with its start (UTC; the date alone for whole days), count and a
// bar of up to `width` '#' scaled to the largest, then a total line.
std::string ScheduleChart(const hourglass::v1::GetScheduleResponse& response,
                          absl::Duration bucket, int width);
// snapshot: snapshot_command.cc
void AddSnapshotCommand(Registry& registry);
// cluster: cluster_command.cc
void AddClusterCommand(Registry& registry);
// recurring (next): recurring_command.cc
void AddRecurringCommand(Registry& registry);
// completion: completion_command.cc. Add it last: it prints what the app
// holds when it runs.
void AddCompletionCommand(Registry& registry);
// A bash completion script for `app` (the program named app.get_name()),
// made from its subcommands and options: subcommands listed in --help, at
// every depth; each command's long options with the program's (which may
// follow a subcommand); file names for options whose value is a FILE.
std::string BashCompletion(const CLI::App& app);

}  // namespace hourglass::cli

#endif  // HOURGLASS_CMD_HOURGLASS_COMMAND_H_
