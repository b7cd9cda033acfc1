#include "tests/testing/daemon.h"

#include <signal.h>

#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "api/bearer_token.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "httplib.h"

namespace hourglass::testing {
namespace {

constexpr absl::Duration kStartTimeout = absl::Seconds(60);

// The port from the "listening on ... (port N)" log line, or 0.
int ListeningPort(const std::string& output) {
  const size_t at = output.find("(port ");
  if (at == std::string::npos) return 0;
  const size_t end = output.find(')', at);
  int port = 0;
  if (!absl::SimpleAtoi(output.substr(at + 6, end - at - 6), &port)) return 0;
  return port;
}

// The port from the "serving metrics on ... (port N)" log line, or 0.
int MetricsPort(const std::string& output) {
  const size_t at = output.find("serving metrics on");
  if (at == std::string::npos) return 0;
  const size_t open = output.find("(port ", at);
  const size_t close = output.find(')', open);
  int port = 0;
  if (open == std::string::npos || close == std::string::npos ||
      !absl::SimpleAtoi(output.substr(open + 6, close - open - 6), &port)) {
    return 0;
  }
  return port;
}

}  // namespace

int Daemon::metrics_port() {
  if (!process_->WaitForOutput("serving metrics on", kStartTimeout)) return 0;
  return MetricsPort(process_->output());
}

std::string Daemon::ScrapeMetrics() {
  if (!process_->WaitForOutput("serving metrics on", kStartTimeout)) return "";
  const int port = MetricsPort(process_->output());
  if (port == 0) return "";
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(absl::ToInt64Seconds(kStartTimeout), 0);
  client.set_read_timeout(absl::ToInt64Seconds(kStartTimeout), 0);
  httplib::Result result = client.Get("/metrics");
  if (!result || result->status != 200) return "";
  return result->body;
}

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(
    const std::string& hourglassd, const std::string& data_dir,
    std::vector<std::string> flags, const std::vector<std::string>& launcher) {
  std::vector<std::string> argv = launcher;
  argv.insert(argv.end(),
              {hourglassd, "--listen=127.0.0.1:0",
               "--metrics_listen=127.0.0.1:0", "--data_dir=" + data_dir});
  argv.insert(argv.end(), flags.begin(), flags.end());
  absl::StatusOr<std::unique_ptr<Subprocess>> process = Subprocess::Start(argv);
  if (!process.ok()) return process.status();
  if (!(*process)->WaitForOutput("listening on", kStartTimeout)) {
    return absl::UnavailableError(absl::StrCat(
        "hourglassd did not start listening: ", (*process)->output()));
  }
  const int port = ListeningPort((*process)->output());
  if (port == 0) {
    return absl::InternalError(
        absl::StrCat("no port in hourglassd's output: ", (*process)->output()));
  }
  return std::unique_ptr<Daemon>(new Daemon(*std::move(process), port));
}

std::string Daemon::address() const {
  return absl::StrCat("127.0.0.1:", port_);
}

std::shared_ptr<grpc::Channel> Daemon::Channel() const {
  return Channel(grpc::InsecureChannelCredentials());
}

std::shared_ptr<grpc::Channel> Daemon::Channel(
    std::shared_ptr<grpc::ChannelCredentials> credentials,
    const std::string& token) const {
  std::shared_ptr<grpc::Channel> channel =
      grpc::experimental::CreateCustomChannelWithInterceptors(
          address(), std::move(credentials), grpc::ChannelArguments(),
          api::BearerTokenInterceptors(token));
  channel->WaitForConnected(absl::ToChronoTime(absl::Now() + kStartTimeout));
  return channel;
}

int Daemon::Stop(absl::Duration timeout) {
  process_->Signal(SIGTERM);
  return process_->Wait(timeout);
}

void Daemon::Kill() {
  process_->Signal(SIGKILL);
  process_->Wait(kStartTimeout);
}

std::vector<std::string> Warnings(const std::string& output) {
  std::vector<std::string> warnings;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (!absl::StrContains(line, "WARNING")) continue;
    const size_t level = line.find(' ');
    warnings.emplace_back(
        level == absl::string_view::npos ? line : line.substr(level + 1));
  }
  return warnings;
}

}  // namespace hourglass::testing
