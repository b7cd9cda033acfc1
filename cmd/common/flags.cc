#include "cmd/common/flags.h"

#include <cstdlib>
#include <vector>

#include "grpc/support/log.h"

namespace hourglass::cli {

void AddGlobalFlags(CLI::App& app, GlobalOptions& globals) {
  app.add_option("--addr", globals.addr,
                 "Broker address: host:port, a gRPC target such as "
                 "unix:/path, or a cluster's nodes separated by commas")
      ->capture_default_str()
      ->envname("HOURGLASS_ADDR");
  app.add_option("--timeout", globals.timeout,
                 "How long to wait for the connection and for each call")
      ->capture_default_str();
  app.add_flag("--json", globals.json,
               "Print JSON (protobuf's JSON mapping, .proto field names) "
               "instead of tables");
  app.add_flag("--tls", globals.tls,
               "Connect with TLS, trusting the system's CAs unless --tls-ca "
               "is given");
  app.add_option("--tls-ca", globals.tls_ca,
                 "PEM file of the CAs that sign the broker's certificate "
                 "(turns TLS on)")
      ->envname("HOURGLASS_TLS_CA");
  app.add_option("--tls-cert", globals.tls_cert,
                 "PEM client certificate, for a broker that wants mutual TLS")
      ->envname("HOURGLASS_TLS_CERT");
  app.add_option("--tls-key", globals.tls_key, "PEM private key of --tls-cert")
      ->envname("HOURGLASS_TLS_KEY");
  app.add_option("--tls-server-name", globals.tls_server_name,
                 "Name the broker's certificate must have, if not the host "
                 "of --addr")
      ->envname("HOURGLASS_TLS_SERVER_NAME");
  app.add_option("--token", globals.token,
                 "Bearer token sent on every call (better in the environment, "
                 "where ps cannot see it)")
      ->envname("HOURGLASS_TOKEN");
}

std::string UsageFailure(const std::string& program, const CLI::App* app,
                         const CLI::Error& error) {
  std::string command = program;
  const CLI::App* at = app;
  while (!at->get_subcommands().empty()) {
    at = at->get_subcommands().front();
    command += " " + at->get_name();
  }
  std::string what = error.what();
  // CLI11 reads an unknown subcommand as a missing one, and with fallthrough
  // leaves the word with a parent: look from the deepest command up. Where
  // the subcommand is optional (hourglass groups), the word is an argument
  // it did not expect.
  const bool required = what == "A subcommand is required";
  const bool optional =
      error.get_exit_code() == static_cast<int>(CLI::ExitCodes::ExtrasError) &&
      !at->get_subcommands([](const CLI::App* subcommand) {
           return !subcommand->get_name().empty();
         }).empty();
  if (required || optional) {
    for (const CLI::App* a = at; a != nullptr; a = a->get_parent()) {
      if (const std::vector<std::string> extra = a->remaining();
          !extra.empty()) {
        if (required || extra.front().rfind('-', 0) != 0) {
          what = "unknown subcommand \"" + extra.front() + "\"";
        }
        break;
      }
    }
  }
  return program + ": " + what + " (see " + command + " --help)\n";
}

void QuietGrpcLogs() {
  if (std::getenv("GRPC_VERBOSITY") == nullptr &&
      std::getenv("GRPC_TRACE") == nullptr) {
    gpr_set_log_function([](gpr_log_func_args*) {});
  }
}

}  // namespace hourglass::cli
