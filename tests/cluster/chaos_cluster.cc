#include "tests/cluster/chaos_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cluster/shard_hash.h"
#include "grpcpp/grpcpp.h"
#include "hourglass/v1/admin.grpc.pb.h"
#include "hourglass/v1/cluster.grpc.pb.h"
#include "tests/testing/peer_secret.h"

namespace hourglass::testing {
namespace {

constexpr absl::Duration kCallTimeout = absl::Seconds(2);
constexpr size_t kLogTail = 3000;
// How often AwaitHealthy says what it still waits for.
constexpr absl::Duration kSlowHeal = absl::Seconds(15);

// The end of `log`, after the lines anywhere in it that say why a process
// died (an assertion, a sanitizer's report, a critical line).
std::string Tail(const std::string& log) {
  std::string why;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (absl::StrContains(line, "Assertion") ||
        absl::StrContains(line, "Sanitizer") ||
        absl::StrContains(line, "terminate") ||
        absl::StrContains(line, " critical ")) {
      absl::StrAppend(&why, line, "\n");
    }
  }
  return why +
         (log.size() <= kLogTail ? log : log.substr(log.size() - kLogTail));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ChaosCluster>> ChaosCluster::Start(
    Options options) {
  std::unique_ptr<ChaosCluster> cluster(new ChaosCluster(std::move(options)));
  const int shards = cluster->options_.shards;
  if (shards == 1) {
    cluster->topics_ = {"chaos"};
  } else {
    cluster->topics_.resize(shards);
    for (int i = 0, found = 0; found < shards; ++i) {
      const std::string topic = absl::StrCat("chaos-", i);
      std::string& slot =
          cluster->topics_[hourglass::cluster::ShardOf(topic, shards)];
      if (slot.empty()) {
        slot = topic;
        ++found;
      }
    }
  }
  absl::StatusOr<std::unique_ptr<EtcdServer>> etcd = EtcdServer::Start();
  if (!etcd.ok()) return etcd.status();
  cluster->etcd_ = *std::move(etcd);
  for (const std::string& id : cluster->options_.ids) {
    Node& node = cluster->nodes_[id];
    node.mount = cluster->dir_.path() + "/" + id;
    node.data_dir = node.mount + "/data";
    std::filesystem::create_directories(node.mount);
    absl::StatusOr<std::unique_ptr<Subprocess>> disk = Subprocess::Start(
        {"/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh",
         "-c",
         absl::StrCat("mount -t tmpfs -o size=", cluster->options_.disk,
                      " hourglass-chaos ", node.mount,
                      " && echo mounted && exec sleep infinity")});
    if (!disk.ok()) return disk.status();
    node.disk = *std::move(disk);
    if (!node.disk->WaitForOutput("mounted\n", absl::Seconds(10))) {
      return absl::FailedPreconditionError(absl::StrCat(
          "no tmpfs for node ", id,
          " (the chaos harness needs root): ", node.disk->output()));
    }
    // The inbound proxy serves nothing until the node listens.
    absl::StatusOr<std::unique_ptr<TcpProxy>> inbound = TcpProxy::Start(0);
    if (!inbound.ok()) return inbound.status();
    node.inbound = *std::move(inbound);
    absl::StatusOr<std::unique_ptr<TcpProxy>> link =
        TcpProxy::Start(cluster->etcd_->client_port());
    if (!link.ok()) return link.status();
    node.etcd_link = *std::move(link);
  }
  for (const std::string& id : cluster->options_.ids) {
    if (absl::Status s = cluster->Launch(id); !s.ok()) return s;
  }
  return cluster;
}

ChaosCluster::~ChaosCluster() {
  // Processes first: a proxy cannot stop while it forwards to a paused one.
  for (auto& [id, node] : nodes_) {
    if (node.daemon != nullptr) {
      node.daemon->process().Signal(SIGCONT);
      node.daemon->Kill();
      KeepLog(id, node.daemon->process().output());
      node.daemon.reset();
    }
  }
  nodes_.clear();
  etcd_.reset();
}

absl::Status ChaosCluster::Launch(const std::string& id) {
  Node& node = nodes_.at(id);
  std::vector<std::string> flags = {
      absl::StrCat("--etcd=127.0.0.1:", node.etcd_link->port()),
      "--node_id=" + id,
      absl::StrCat("--advertise=127.0.0.1:", node.inbound->port()),
      absl::StrCat(
          "--lease_ttl=", absl::ToInt64Milliseconds(options_.lease_ttl), "ms"),
      absl::StrCat("--shards=", options_.shards),
      absl::StrCat("--replication_factor=", options_.replication_factor),
      PeerSecretFlag(dir_.path())};
  flags.insert(flags.end(), options_.flags.begin(), options_.flags.end());
  absl::StatusOr<std::unique_ptr<Daemon>> daemon = Daemon::Start(
      options_.hourglassd, node.data_dir, flags,
      {"/usr/bin/nsenter",
       absl::StrCat("--mount=/proc/", node.disk->pid(), "/ns/mnt"), "--"});
  if (!daemon.ok()) {
    return absl::Status(
        daemon.status().code(),
        absl::StrCat("node ", id, ": ", daemon.status().message()));
  }
  node.daemon = *std::move(daemon);
  node.inbound->SetTarget(node.daemon->port());
  return absl::OkStatus();
}

std::string ChaosCluster::ClientAddresses() const {
  std::vector<std::string> addresses;
  for (const auto& [id, node] : nodes_) {
    addresses.push_back(absl::StrCat("127.0.0.1:", node.inbound->port()));
  }
  return absl::StrJoin(addresses, ",");
}

void ChaosCluster::Reap(Node& node) {
  node.exit_code = node.daemon->process().Wait(absl::Seconds(10));
  node.last_log = Tail(node.daemon->process().output());
  for (const auto& [id, n] : nodes_) {
    if (&n == &node) KeepLog(id, node.daemon->process().output());
  }
  node.daemon.reset();
}

void ChaosCluster::PauseEtcd() { etcd_->Pause(); }

std::string ChaosCluster::EtcdState() {
  const absl::Status probe = etcd_->Probe(absl::Seconds(2));
  return absl::StrCat(
      probe.ok() ? "etcd answers on its own port" : probe.ToString(),
      "; its log ends:", etcd_->LogTail());
}

void ChaosCluster::ResumeEtcd() { etcd_->Resume(); }

void ChaosCluster::KeepLog(const std::string& id, const std::string& log) {
  const char* dir = std::getenv("HOURGLASS_CHAOS_LOGS");
  if (dir == nullptr) return;
  std::ofstream out(absl::StrCat(dir, "/", id, ".log"), std::ios::app);
  out << log;
}

bool ChaosCluster::Running(const std::string& id) {
  Node& node = nodes_.at(id);
  if (node.daemon == nullptr) return false;
  node.daemon->process().ReadUntil(absl::Now() + absl::Milliseconds(1));
  if (!node.daemon->process().Exited()) return true;
  Reap(node);
  return false;
}

void ChaosCluster::Kill(const std::string& id) {
  if (!Running(id)) return;
  Node& node = nodes_.at(id);
  node.daemon->process().Signal(SIGCONT);  // If paused: SIGKILL works anyway.
  node.daemon->Kill();
  Reap(node);
}

void ChaosCluster::Pause(const std::string& id) {
  if (Running(id)) nodes_.at(id).daemon->process().Signal(SIGSTOP);
}

void ChaosCluster::Resume(const std::string& id) {
  if (Running(id)) nodes_.at(id).daemon->process().Signal(SIGCONT);
}

int ChaosCluster::AwaitExit(const std::string& id, absl::Duration timeout) {
  // The others' logs are read meanwhile, so that none blocks on them.
  const absl::Time deadline = absl::Now() + timeout;
  while (Running(id) && absl::Now() < deadline) Hold(absl::Milliseconds(50));
  Node& node = nodes_.at(id);
  if (node.daemon != nullptr) Reap(node);
  return node.exit_code;
}

std::string ChaosCluster::Outside(const std::string& id,
                                  const std::string& path) {
  return absl::StrCat("/proc/", nodes_.at(id).disk->pid(), "/root", path);
}

void ChaosCluster::Wipe(const std::string& id) {
  std::error_code error;
  std::filesystem::remove_all(Outside(id, nodes_.at(id).data_dir), error);
}

absl::Status ChaosCluster::FillDisk(const std::string& id) {
  const std::string filler = Outside(id, nodes_.at(id).mount + "/filler");
  const int fd = open(filler.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return absl::InternalError(absl::StrCat("open ", filler));
  // All that is free, then halves of what is left, to the last page.
  absl::Status status = absl::OkStatus();
  struct statvfs disk;
  struct stat file;
  off_t size = fstat(fd, &file) == 0 ? file.st_size : 0;
  off_t chunk = fstatvfs(fd, &disk) == 0
                    ? static_cast<off_t>(disk.f_bavail * disk.f_frsize)
                    : 0;
  while (chunk >= 4096) {
    const int error = posix_fallocate(fd, size, chunk);
    if (error == 0) {
      size += chunk;
    } else if (error == ENOSPC) {
      chunk /= 2;
    } else {
      status = absl::InternalError(
          absl::StrCat("fallocate ", filler, ": ", std::strerror(error)));
      break;
    }
  }
  close(fd);
  return status;
}

void ChaosCluster::FreeDisk(const std::string& id) {
  unlink(Outside(id, nodes_.at(id).mount + "/filler").c_str());
}

absl::Status ChaosCluster::Restart(const std::string& id) {
  if (Running(id)) {
    return absl::FailedPreconditionError(
        absl::StrCat("node ", id, " runs already"));
  }
  return Launch(id);
}

void ChaosCluster::Remove(const std::string& id) {
  Kill(id);
  Wipe(id);
  nodes_.at(id).removed = true;
}

absl::Status ChaosCluster::Join(const std::string& id) {
  if (absl::Status s = Restart(id); !s.ok()) return s;
  nodes_.at(id).removed = false;
  return absl::OkStatus();
}

std::vector<std::string> ChaosCluster::Members() const {
  std::vector<std::string> members;
  for (const std::string& id : options_.ids) {
    if (!nodes_.at(id).removed) members.push_back(id);
  }
  return members;
}

void ChaosCluster::CutInbound(const std::string& id) {
  nodes_.at(id).inbound->Freeze();
}

void ChaosCluster::CutEtcd(const std::string& id) {
  nodes_.at(id).etcd_link->Freeze();
}

void ChaosCluster::Heal(const std::string& id) {
  nodes_.at(id).inbound->Thaw();
  nodes_.at(id).etcd_link->Thaw();
}

std::shared_ptr<grpc::Channel> ChaosCluster::ChannelTo(const std::string& id) {
  return grpc::CreateChannel(nodes_.at(id).daemon->address(),
                             grpc::InsecureChannelCredentials());
}

absl::StatusOr<v1::ClusterMap> ChaosCluster::MapOf(const std::string& id) {
  auto stub = v1::Cluster::NewStub(ChannelTo(id));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kCallTimeout));
  v1::ClusterMap map;
  const grpc::Status status =
      stub->GetClusterMap(&context, v1::GetClusterMapRequest(), &map);
  if (!status.ok()) {
    return absl::UnavailableError(
        absl::StrCat("node ", id, ": ", status.error_message()));
  }
  return map;
}

absl::StatusOr<v1::ClusterMap> ChaosCluster::Map() {
  absl::Status last = absl::UnavailableError("no node runs");
  for (const std::string& id : options_.ids) {
    if (!Running(id)) continue;
    absl::StatusOr<v1::ClusterMap> map = MapOf(id);
    if (map.ok()) return map;
    last = map.status();
  }
  return last;
}

std::string ChaosCluster::Primary(int shard) {
  absl::StatusOr<v1::ClusterMap> map = Map();
  if (!map.ok() || map->shards_size() <= shard) return "";
  return map->shards(shard).primary();
}

std::vector<std::string> ChaosCluster::Replicas(int shard) {
  absl::StatusOr<v1::ClusterMap> map = Map();
  if (!map.ok() || map->shards_size() <= shard) return {};
  return {map->shards(shard).replicas().begin(),
          map->shards(shard).replicas().end()};
}

std::string ChaosCluster::Controller() {
  absl::StatusOr<v1::ClusterMap> map = Map();
  return map.ok() ? map->controller() : "";
}

absl::Status ChaosCluster::LookHealthy() {
  const std::vector<std::string> members = Members();
  for (const std::string& id : members) {
    if (Running(id)) continue;
    return absl::InternalError(absl::StrCat("node ", id, " exited with ",
                                            nodes_.at(id).exit_code, ":\n",
                                            LogTail(id)));
  }
  // Every member's map; the first one's is described, the others' where
  // they differ from it.
  const std::set<std::string> live(members.begin(), members.end());
  const size_t need =
      std::min<size_t>(options_.replication_factor, members.size());
  std::optional<v1::ClusterMap> first;
  std::string seen;
  for (const std::string& id : members) {
    absl::StatusOr<v1::ClusterMap> map = MapOf(id);
    if (!map.ok() || map->shards_size() != options_.shards) {
      return absl::UnavailableError(
          absl::StrCat(id, " has no map of ", options_.shards, " shards (",
                       map.ok() ? absl::StrCat(map->shards_size(), " shards")
                                : std::string(map.status().message()),
                       ")"));
    }
    if (!first.has_value()) {
      first = *map;
      for (const v1::ShardInfo& shard : map->shards()) {
        absl::StrAppend(&seen, id, " sees shard ", shard.shard(), " at epoch ",
                        shard.epoch(), " primary ", shard.primary(), " isr ",
                        absl::StrJoin(shard.isr(), ","), "; ");
      }
      continue;
    }
    for (int n = 0; n < options_.shards; ++n) {
      const v1::ShardInfo& shard = map->shards(n);
      const v1::ShardInfo& other = first->shards(n);
      if (shard.epoch() != other.epoch() ||
          shard.primary() != other.primary()) {
        return absl::UnavailableError(
            absl::StrCat(seen, "but ", id, " sees shard ", n, " at epoch ",
                         shard.epoch(), " primary ", shard.primary()));
      }
    }
  }
  for (const v1::ShardInfo& shard : first->shards()) {
    const std::set<std::string> isr(shard.isr().begin(), shard.isr().end());
    const bool isr_live = std::all_of(
        isr.begin(), isr.end(),
        [&live](const std::string& id) { return live.contains(id); });
    if (!live.contains(shard.primary()) || !isr.contains(shard.primary()) ||
        !isr_live || isr.size() < need) {
      return absl::UnavailableError(absl::StrCat(seen, "shard ", shard.shard(),
                                                 " wants a live primary and ",
                                                 need, " members in sync"));
    }
  }
  // Each primary serves its shard.
  for (const v1::ShardInfo& shard : first->shards()) {
    auto stub = v1::Admin::NewStub(ChannelTo(shard.primary()));
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + kCallTimeout));
    v1::GetStatsRequest request;
    request.set_topic(topics_.at(shard.shard()));
    v1::GetStatsResponse stats;
    const grpc::Status status = stub->GetStats(&context, request, &stats);
    if (!status.ok() && status.error_code() != grpc::StatusCode::NOT_FOUND) {
      return absl::UnavailableError(absl::StrCat(
          seen, "primary ", shard.primary(), " of shard ", shard.shard(),
          " does not serve: ", status.error_message()));
    }
  }
  return absl::OkStatus();
}

absl::Status ChaosCluster::AwaitHealthy(absl::Duration timeout) {
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + timeout;
  absl::Time report = start + kSlowHeal;
  while (true) {
    const absl::Status look = LookHealthy();
    if (look.ok() || absl::IsInternal(look)) return look;
    if (absl::Now() >= report) {
      std::cout << "chaos: still not healed after "
                << absl::FormatDuration(
                       absl::Trunc(absl::Now() - start, absl::Seconds(1)))
                << ": " << look.message() << std::endl;
      if (report == start + kSlowHeal) {  // The first time: the logs too.
        for (const std::string& id : Members()) {
          std::cout << "--- " << id << "\n" << LogTail(id) << std::endl;
        }
        std::cout << "--- etcd: " << EtcdState() << std::endl;
      }
      report += kSlowHeal;
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("the cluster did not heal within ",
                       absl::FormatDuration(timeout), ": ", look.message()));
    }
    // Each node's log is read meanwhile (Running), so none blocks on it.
    for (const std::string& id : options_.ids) {
      if (nodes_.at(id).daemon != nullptr) {
        nodes_.at(id).daemon->process().ReadUntil(absl::Now() +
                                                  absl::Milliseconds(30));
      }
    }
  }
}

void ChaosCluster::Hold(absl::Duration duration) {
  const absl::Time end = absl::Now() + duration;
  while (absl::Now() < end) {
    // Every node gets its turn each round, however short the hold and
    // however much the ones before it log: a node whose log is not read
    // blocks on it once the pipe is full, with every thread that logs
    // (its lease keeper's renewals too).
    for (auto& [id, node] : nodes_) {
      if (node.daemon == nullptr) continue;
      node.daemon->process().ReadUntil(absl::Now() + absl::Milliseconds(5));
    }
    if (std::all_of(nodes_.begin(), nodes_.end(), [](const auto& kv) {
          return kv.second.daemon == nullptr;
        })) {
      absl::SleepFor(end - absl::Now());  // Nothing to read: only time passes.
    }
  }
}

size_t ChaosCluster::LogSize(const std::string& id) {
  Subprocess& process = nodes_.at(id).daemon->process();
  process.ReadUntil(absl::Now() + absl::Milliseconds(1));
  return process.output().size();
}

bool ChaosCluster::AwaitLog(const std::string& id, std::string_view text,
                            size_t from, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  Subprocess& process = nodes_.at(id).daemon->process();
  while (process.output().find(text, from) == std::string::npos) {
    if (absl::Now() >= deadline) return false;
    // The others' logs are read meanwhile, so that none blocks on it.
    Hold(absl::Milliseconds(50));
  }
  return true;
}

std::string ChaosCluster::LogTail(const std::string& id) {
  Node& node = nodes_.at(id);
  if (node.daemon == nullptr) return node.last_log;
  node.daemon->process().ReadUntil(absl::Now() + absl::Milliseconds(1));
  return Tail(node.daemon->process().output());
}

}  // namespace hourglass::testing
