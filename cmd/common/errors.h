#ifndef HOURGLASS_CMD_COMMON_ERRORS_H_
#define HOURGLASS_CMD_COMMON_ERRORS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace hourglass::cli {

// How the command line reports errors: main prints "hourglass: " and the
// status message as one line, and exits with ExitCode(status).

// Exit codes: 0 success, 1 the operation failed (the broker refused it or
// could not be reached), 2 the command line is wrong.
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// An INVALID_ARGUMENT for a bad command line, found before anything was
// sent: `--flag: reason`, e.g. `--delay: "5x" is not a duration (...)`.
absl::Status UsageError(absl::string_view flag, absl::string_view reason);
// Same, for a reason that names no single flag.
absl::Status UsageError(absl::string_view reason);

// kExitUsage for a UsageError, kExitFailure for any other error, 0 for OK.
int ExitCode(const absl::Status& status);

// strerror's text for `error` with a lower-case first letter, to follow a
// colon: "connection refused", "no such file or directory".
std::string ErrnoText(int error);

}  // namespace hourglass::cli

#endif  // HOURGLASS_CMD_COMMON_ERRORS_H_
