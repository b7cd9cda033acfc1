#ifndef HOURGLASS_CMD_COMMON_FLAGS_H_
#define HOURGLASS_CMD_COMMON_FLAGS_H_

#include <string>

#include "CLI/CLI.hpp"
#include "cmd/common/connection.h"

namespace hourglass::cli {

// Adds the options every program of ours takes to `app`, filling `globals`:
// --addr, --timeout, --json, --tls, --tls-ca, --tls-cert, --tls-key,
// --tls-server-name and --token (--addr and the last five also from
// HOURGLASS_ADDR, HOURGLASS_TLS_CA, HOURGLASS_TLS_CERT, HOURGLASS_TLS_KEY,
// HOURGLASS_TLS_SERVER_NAME and HOURGLASS_TOKEN; a flag on the command line
// wins over its variable).
void AddGlobalFlags(CLI::App& app, GlobalOptions& globals);

// "PROGRAM: WHAT (see PROGRAM [SUB ...] --help)\n" for a command line CLI11
// could not parse, naming the subcommand it got to; for CLI::App's
// failure_message.
std::string UsageFailure(const std::string& program, const CLI::App* app,
                         const CLI::Error& error);

// Silences gRPC's own log lines (such as a failed TLS handshake), which
// would break our one-line errors; GRPC_VERBOSITY or GRPC_TRACE bring them
// back. Call first in main.
void QuietGrpcLogs();

}  // namespace hourglass::cli

#endif  // HOURGLASS_CMD_COMMON_FLAGS_H_
