#include "cmd/hourglassd/web_console.h"

#include <memory>
#include <string>

#include "absl/strings/str_split.h"
#include "grpcpp/channel.h"

namespace hourglass::hourglassd {

WebConsole MountWebConsole(const WebConsoleOptions& options,
                           api::MetricsServer& server) {
  WebConsole web;
  web.calls = std::make_unique<api::AdminCalls>(
      options.broker, options.clock, options.limits, options.started_at);
  if (options.cluster_node != nullptr) {
    node::ClusterNode* node = options.cluster_node;
    web.cluster = std::make_unique<api::ClusterAccess>(
        [node] { return node->Map(); },
        [node](const std::string& address) {
          return node->PeerChannel(address);
        });
  }
  web.console = std::make_unique<console::Console>(
      web.calls.get(), options.authorizer,
      api::AdminHttp::Options{.timeout = options.timeout,
                              .publisher = options.publisher,
                              .cluster = web.cluster.get()},
      console::GuardOptions{
          .port = options.port,
          .allowed_hosts = absl::StrSplit(options.allowed_hosts, ',',
                                          absl::SkipWhitespace())});
  server.Mount(web.console.get());
  return web;
}

}  // namespace hourglass::hourglassd
