#ifndef HOURGLASS_CMD_HOURGLASS_COMMAND_H_
#define HOURGLASS_CMD_HOURGLASS_COMMAND_H_

#include <functional>
#include <string>
#include <utility>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
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

// The subcommands, by file.
void AddPublishCommand(Registry& registry);    // publish_command.cc
void AddSubscribeCommand(Registry& registry);  // subscribe_command.cc
// cancel, reschedule, ls, show: message_commands.cc
void AddMessageCommands(Registry& registry);
// stats, topics, groups, dlq, purge: topic_commands.cc
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

}  // namespace hourglass::cli

#endif  // HOURGLASS_CMD_HOURGLASS_COMMAND_H_
