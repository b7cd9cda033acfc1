#ifndef HOURGLASS_TESTS_CLUSTER_CHAOS_CLUSTER_H_
#define HOURGLASS_TESTS_CLUSTER_CHAOS_CLUSTER_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "hourglass/v1/cluster.pb.h"
#include "tests/testing/daemon.h"
#include "tests/testing/etcd_server.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/tcp_proxy.h"
#include "tests/testing/temp_dir.h"

namespace hourglass::testing {

// One etcd and three (or more) real hourglassd on loopback, hosting one
// shard or many, wired so that
// a test can break any part of it: every node is reached by clients and
// peers through a TCP proxy of its own (its --advertise address), and
// reaches etcd through another; freezing the first cuts the node off from
// clients and peers, freezing the second cuts it off from etcd. Nodes can
// be killed, paused, restarted on their data, or wiped; or removed from
// the cluster and made to join it again, empty.
//
// Each node's data dir is a tmpfs of its own (Options::disk), mounted in a
// private mount namespace that a holder process keeps (unshare(1), so the
// test needs CAP_SYS_ADMIN: root) and entered by the node's every process
// (nsenter(1)): FillDisk makes it full, as a disk is, and nothing of it is
// seen or left behind outside. tmpfs makes fsync free, which chaos does not
// need: a killed process's writes stay in the page cache all the same.
//
// Not thread-safe: one test thread drives it (clients use the addresses it
// gives from any thread).
class ChaosCluster {
 public:
  struct Options {
    std::string hourglassd;  // the binary
    std::vector<std::string> ids = {"a", "b", "c"};
    // Every node's --shards (the cluster's shard count) and
    // --replication_factor. Defaults: 1, 3.
    int shards = 1;
    int replication_factor = 3;
    absl::Duration lease_ttl = absl::Seconds(2);
    // Besides --etcd, --node_id, --advertise, --lease_ttl, --shards,
    // --replication_factor.
    std::vector<std::string> flags;
    // The size of each node's disk, as mount(8)'s tmpfs size= takes it.
    std::string disk = "1g";
  };

  // Starts etcd and every node, in id order.
  static absl::StatusOr<std::unique_ptr<ChaosCluster>> Start(Options options);
  // Kills every node, then etcd.
  ~ChaosCluster();

  const std::vector<std::string>& ids() const { return options_.ids; }
  int shards() const { return options_.shards; }
  int replication_factor() const { return options_.replication_factor; }
  // A topic in each shard, by shard number: "chaos" with one shard,
  // "chaos-<i>" with many (the first i that falls in each shard).
  const std::vector<std::string>& topics() const { return topics_; }
  absl::Duration lease_ttl() const { return options_.lease_ttl; }
  // Every node's advertised address (its proxy), comma-separated: what
  // clients are given.
  std::string ClientAddresses() const;

  // Whether node `id`'s process runs (false once it exited or was killed).
  bool Running(const std::string& id);
  // SIGKILL; nothing if it is not running.
  void Kill(const std::string& id);
  // SIGSTOP / SIGCONT; nothing if it is not running.
  void Pause(const std::string& id);
  void Resume(const std::string& id);
  // Waits until node `id` exits by itself, at most `timeout` (reading every
  // node's log meanwhile); its exit code
  // (128 + 9 if it had to be killed; its last one if it had exited).
  int AwaitExit(const std::string& id, absl::Duration timeout);
  // Removes everything in node `id`'s data dir. REQUIRES: !Running(id).
  void Wipe(const std::string& id);
  // Fills node `id`'s disk to the last byte (a file beside its data dir,
  // grown from its size: a second call takes what was freed since), or
  // frees that space again.
  absl::Status FillDisk(const std::string& id);
  void FreeDisk(const std::string& id);
  // Starts node `id` again on its data dir. REQUIRES: !Running(id).
  absl::Status Restart(const std::string& id);
  // Takes node `id` out of the cluster for good, as a lost machine: kill
  // -9 and wipe its data. AwaitHealthy then expects the cluster to heal
  // without it (its copies made again on the others), until Join(id)
  // starts it again, empty: a new node joins.
  void Remove(const std::string& id);
  absl::Status Join(const std::string& id);
  // The nodes not removed, in id order: those AwaitHealthy expects to run.
  std::vector<std::string> Members() const;
  // SIGSTOP and SIGCONT of etcd: no node can renew its lease or change a
  // record meanwhile.
  void PauseEtcd();
  void ResumeEtcd();
  // Cuts node `id` off from clients and peers (everything sent to its
  // advertised address), or from etcd; Heal ends both cuts.
  void CutInbound(const std::string& id);
  void CutEtcd(const std::string& id);
  void Heal(const std::string& id);

  // Lets `duration` pass (a fault's length), reading the nodes' logs
  // meanwhile, each in turn, so that none blocks on a full pipe.
  void Hold(absl::Duration duration);

  // The cluster map as running node `id` sees it.
  absl::StatusOr<v1::ClusterMap> MapOf(const std::string& id);
  // The cluster map as the first running node that answers sees it.
  absl::StatusOr<v1::ClusterMap> Map();
  // Shard `shard`'s primary, its replicas (the primary first), or the
  // controller, per Map() ("" or none if there are none).
  std::string Primary(int shard = 0);
  std::vector<std::string> Replicas(int shard);
  std::string Controller();

  // Waits until the cluster has healed: every member (the nodes not
  // removed) runs; all see every shard at one epoch with one primary, a
  // member; each shard's ISR holds members only, the primary among them,
  // and at least min(replication factor, members) of them (with three
  // nodes and one shard: every node in the ISR); and each primary serves
  // its shard (Admin.GetStats of the shard's topic answers OK or
  // NOT_FOUND). OK, or DEADLINE_EXCEEDED with what was last seen; every
  // 15 s meanwhile, it prints what it waits for (the first time, with the
  // end of each member's log).
  //
  // A member that is not running (it exited by itself, or was killed and
  // not restarted) is an INTERNAL error: nodes stay up through lease
  // losses and etcd outages.
  absl::Status AwaitHealthy(absl::Duration timeout);

  // How much node `id`'s running process has logged; and whether it logs
  // `text` after the first `from` bytes, waiting at most `timeout`.
  // REQUIRES: Running(id).
  size_t LogSize(const std::string& id);
  bool AwaitLog(const std::string& id, std::string_view text, size_t from,
                absl::Duration timeout);

  // The end of node `id`'s log, for failure messages.
  std::string LogTail(const std::string& id);
  // Whether etcd answers on its own port, bypassing the nodes' links to
  // it, and the end of its log: for failure messages.
  std::string EtcdState();

 private:
  struct Node {
    std::unique_ptr<Subprocess> disk;     // holds the namespace with the tmpfs
    std::string mount;                    // where the tmpfs is, in it
    std::string data_dir;                 // mount + "/data", in it
    std::unique_ptr<TcpProxy> inbound;    // its --advertise address
    std::unique_ptr<TcpProxy> etcd_link;  // its --etcd address
    std::unique_ptr<Daemon> daemon;       // null while not started
    std::string last_log;                 // of the previous process
    int exit_code = -1;                   // of the previous process
    bool removed = false;                 // by Remove, until Join
  };

  explicit ChaosCluster(Options options) : options_(std::move(options)) {}
  absl::Status Launch(const std::string& id);
  // Reads the rest of its exited (or killed) process's log and forgets it.
  void Reap(Node& node);
  // With HOURGLASS_CHAOS_LOGS=DIR, appends `log`, a whole process's output,
  // to DIR/<id>.log: every node's full logs of a run, for a replay.
  static void KeepLog(const std::string& id, const std::string& log);
  // `path` (in node `id`'s namespace) as the test sees it.
  std::string Outside(const std::string& id, const std::string& path);
  // A channel to running node `id`'s own port. Not Daemon::Channel, which
  // waits up to a minute to connect: a node on its way out (its lease
  // lost, it shuts down) would hold the harness, and with it the reading
  // of every node's log, that long.
  std::shared_ptr<grpc::Channel> ChannelTo(const std::string& id);
  // One look at the cluster for AwaitHealthy: OK if it has healed;
  // INTERNAL if a node exited otherwise than by losing its lease;
  // UNAVAILABLE saying what is not yet right. Restarts a member that lost
  // its lease.
  absl::Status LookHealthy();

  const Options options_;
  TempDir dir_;
  std::unique_ptr<EtcdServer> etcd_;
  std::vector<std::string> topics_;
  std::map<std::string, Node> nodes_;
};

}  // namespace hourglass::testing

#endif  // HOURGLASS_TESTS_CLUSTER_CHAOS_CLUSTER_H_
