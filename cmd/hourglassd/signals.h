#ifndef HOURGLASS_CMD_HOURGLASSD_SIGNALS_H_
#define HOURGLASS_CMD_HOURGLASSD_SIGNALS_H_

#include <signal.h>

namespace hourglass::api {
class Authorizer;
class BrokerService;
}  // namespace hourglass::api

namespace hourglass::node {
class ClusterNode;
}  // namespace hourglass::node

namespace hourglass::hourglassd {

// Blocks SIGTERM, SIGINT and SIGHUP in the calling thread, and so in every
// thread started after it, so that WaitForTerminationSignal receives them
// synchronously. Call first in main, before any thread starts.
sigset_t BlockTerminationSignals();

// Waits for SIGTERM or SIGINT among `signals` and returns it. Each SIGHUP
// meanwhile reloads, logging the outcome of each:
//   - `authorizer`'s token file (if any), and has `broker` end the open
//     streams the new file no longer grants;
//   - `cluster_node`'s peer secret file (if any; null for a single node).
// A bad file leaves what was loaded before as it was.
int WaitForTerminationSignal(const sigset_t& signals,
                             api::Authorizer* authorizer, bool mutual_tls,
                             api::BrokerService& broker,
                             node::ClusterNode* cluster_node);

}  // namespace hourglass::hourglassd

#endif  // HOURGLASS_CMD_HOURGLASSD_SIGNALS_H_
