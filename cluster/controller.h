#ifndef HOURGLASS_CLUSTER_CONTROLLER_H_
#define HOURGLASS_CLUSTER_CONTROLLER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "cluster/records.h"
#include "cluster/view.h"

namespace hourglass::cluster {

struct ControllerOptions {
  // The cluster's shard count: the shards the controller creates.
  int shards = 1;
  // --replication_factor and --min_insync. Defaults: 3 and 2.
  int replication_factor = 3;
  int min_insync = 2;
  // How long to wait, after a shard's primary is gone, for its in-sync (or
  // eligible) copies to report where they end before promoting the most
  // advanced of those that did. Default: 3 s (the lease TTL).
  absl::Duration position_wait = absl::Seconds(3);
};

// One write the controller decided: shard `shard`'s record becomes
// `record`, by compare-and-set on `mod_revision` (nullopt: created, if the
// key does not exist), fenced by the controller's term.
struct ControllerWrite {
  int shard = 0;
  std::optional<int64_t> mod_revision;
  ShardRecord record;
  std::string reason;  // for the log
};

// The controller's decisions (the cluster's configuration manager), apart
// from their effects: given the cluster as the leading node reads it, which
// shard records to write. Member runs it while its node leads the
// election and carries the writes out; the replication simulation
// (tests/replication/simulation.h) runs the same class over its simulated
// etcd. No I/O, no clock of its own: the caller says what time it is.
//
// Not thread-safe: one caller (the member's thread, or the simulation).
class Controller {
 public:
  explicit Controller(ControllerOptions options);

  struct Decision {
    // PlanShard's change of each shard that needs one (created, promoted,
    // replicas repaired, a transfer finished or given up), in shard order;
    // or, when no shard needs any and none waits, one PlanRebalance step.
    std::vector<ControllerWrite> writes;
    // What a shard waits for, the first time each reason is met.
    std::vector<std::string> waiting;
    // When to decide again at the latest, with no change in the view: when
    // a position wait ends.
    absl::Time next = absl::InfiniteFuture();
  };
  // Decides for `view` at `now`. Call again with every view that changes
  // and by `next`. Writes the caller fails to make are decided again from
  // the next view.
  Decision Decide(const ClusterView& view, absl::Time now);

  // Forgets the position waits under way and the reasons logged: the node
  // no longer leads (another controller decides meanwhile).
  void Reset();

 private:
  const ControllerOptions options_;
  // Since when each shard's primary has been seen gone, at the shard's
  // epoch: the start of its position wait.
  std::map<int, std::pair<int64_t, absl::Time>> primary_gone_since_;
  // The last reason logged per shard.
  std::map<int, std::string> logged_;
};

}  // namespace hourglass::cluster

#endif  // HOURGLASS_CLUSTER_CONTROLLER_H_
