#include "cmd/hourglassd/signals.h"

#include <pthread.h>

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api/auth.h"
#include "api/broker_service.h"
#include "cmd/hourglassd/startup_warnings.h"
#include "node/cluster_node.h"
#include "spdlog/spdlog.h"

namespace hourglass::hourglassd {
namespace {

// Reloads the cluster node's peer secret file, if it has one, logging the
// outcome; a bad file leaves the secrets as they were. Returns whether
// there was one.
bool ReloadPeerSecrets(node::ClusterNode* cluster_node) {
  if (cluster_node == nullptr) return false;
  absl::StatusOr<size_t> reloaded = cluster_node->ReloadPeerSecrets();
  if (absl::IsNotFound(reloaded.status())) return false;
  if (reloaded.ok()) {
    spdlog::info("hourglassd reloaded {} peer secret{} from --peer_token_file",
                 *reloaded, *reloaded == 1 ? "" : "s");
  } else {
    spdlog::error("hourglassd kept its peer secrets: reload failed: {}",
                  std::string(reloaded.status().message()));
  }
  return true;
}

}  // namespace

sigset_t BlockTerminationSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

int WaitForTerminationSignal(const sigset_t& signals,
                             api::Authorizer* authorizer, bool mutual_tls,
                             api::BrokerService& broker,
                             node::ClusterNode* cluster_node) {
  while (true) {
    int signal = 0;
    if (sigwait(&signals, &signal) != 0) continue;
    if (signal != SIGHUP) return signal;
    const bool peers = ReloadPeerSecrets(cluster_node);
    if (authorizer == nullptr) {
      if (!peers) spdlog::info("hourglassd received SIGHUP: nothing to reload");
      continue;
    }
    absl::StatusOr<api::Authorizer::Counts> counts = authorizer->Reload();
    if (counts.ok()) {
      spdlog::info("hourglassd reloaded {} tokens and {} cert lines from {}",
                   counts->tokens, counts->certificates, authorizer->origin());
      WarnIfCertLinesUnused(*authorizer, counts->certificates, mutual_tls);
      broker.RecheckStreams();
    } else {
      spdlog::error("hourglassd kept its tokens: reload failed: {}",
                    std::string(counts.status().message()));
    }
  }
}

}  // namespace hourglass::hourglassd
