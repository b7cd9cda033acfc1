#ifndef HOURGLASS_CMD_HOURGLASSD_WEB_CONSOLE_H_
#define HOURGLASS_CMD_HOURGLASSD_WEB_CONSOLE_H_

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "api/admin_calls.h"
#include "api/auth.h"
#include "api/broker_service.h"
#include "api/cluster_access.h"
#include "api/metrics_http.h"
#include "api/validation.h"
#include "broker/broker.h"
#include "broker/clock.h"
#include "console/console.h"
#include "node/cluster_node.h"

namespace hourglass::hourglassd {

// The web console (console/console.h) with what it needs, alive together:
// its Admin calls over the broker and, in cluster mode, its access to the
// cluster (the map, and channels to the other nodes, for the cluster page
// and for forwarding calls about topics other nodes lead).
struct WebConsole {
  std::unique_ptr<api::AdminCalls> calls;
  std::unique_ptr<api::ClusterAccess> cluster;
  std::unique_ptr<console::Console> console;
};

struct WebConsoleOptions {
  broker::Broker* broker = nullptr;
  broker::Clock* clock = nullptr;
  api::Limits limits;
  absl::Time started_at;
  // Authorizer::Disabled() when tokens are off.
  const api::Authorizer* authorizer = nullptr;
  // What the console's publish goes through: the gRPC Broker service's
  // checks and limits.
  api::BrokerService* publisher = nullptr;
  // Null for a single node.
  node::ClusterNode* cluster_node = nullptr;
  // How long an API call may take (--metrics_request_timeout).
  absl::Duration timeout = absl::Seconds(5);
  // The listener's port and --console_allowed_hosts, comma-separated.
  int port = 0;
  std::string allowed_hosts;
};

// Makes the web console and mounts it on `server`, which answers its
// paths from then on. REQUIRES: the pointers in `options` and `server`
// outlive the console; the server stops serving it (Shutdown) before it
// goes.
WebConsole MountWebConsole(const WebConsoleOptions& options,
                           api::MetricsServer& server);

}  // namespace hourglass::hourglassd

#endif  // HOURGLASS_CMD_HOURGLASSD_WEB_CONSOLE_H_
