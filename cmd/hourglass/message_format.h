#ifndef HOURGLASS_CMD_HOURGLASS_MESSAGE_FORMAT_H_
#define HOURGLASS_CMD_HOURGLASS_MESSAGE_FORMAT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "hourglass/v1/admin.pb.h"

namespace hourglass::cli {

// How the CLI names message states: "scheduled", "ready", "in-flight",
// "dead" ("-" for UNSPECIFIED).
std::string StateName(hourglass::v1::MessageState state);

// The state a --state flag names: one of StateName's names ("in_flight"
// also works). Errors: INVALID_ARGUMENT `"x" is not a state (use scheduled,
// ready, in-flight or dead)`.
absl::StatusOr<hourglass::v1::MessageState> ParseState(absl::string_view name);

// How the CLI names a group: the name, or "-" for "" (a topic's waiting
// area, where due messages wait for the topic's first group).
std::string GroupName(const std::string& group);

// A page of messages as a table: ID, TOPIC, DUE, STATE, ATTEMPTS, SIZE
// (payload bytes). With `per_group`, for READY and IN_FLIGHT listings, where
// a row is a message in one group and one message may have a row in each
// group, also GROUP (GroupName of the row's group) after TOPIC.
std::string MessagesTable(const hourglass::v1::ListMessagesResponse& page,
                          bool per_group);

// One message in detail: its fields one per line, its headers, a payload
// preview and, once due, a table of its state in each group (GroupName).
std::string MessageDetails(const hourglass::v1::MessageInfo& message);

}  // namespace hourglass::cli

#endif  // HOURGLASS_CMD_HOURGLASS_MESSAGE_FORMAT_H_
