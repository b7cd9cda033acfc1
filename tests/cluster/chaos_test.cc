// Chaos with real processes: one etcd and three hourglassd on loopback
// (or five, hosting eight shards: HOURGLASS_CHAOS_NODES=5
// HOURGLASS_CHAOS_SHARDS=8) under continuous publishing, cancelling and
// consuming on a topic in each shard, while a seeded sequence of faults
// hits them: kill -9 of a shard's primary (of some shards, backup of
// others), of a backup, of the controller; the primary paused past its
// lease; the primary cut off from clients, peers and etcd; a backup's
// links cut; a backup cut off from etcd; a backup's data wiped; a backup's
// disk full; the primary drained (a leader transfer), alone or with a node
// killed during the hand-over; two at once: a shard's backups stopped past
// the lag timeout, then its primary killed with its data wiped (the double
// fault: the eligible copy must take over), and etcd stopped past every
// lease (nothing may fail, nothing may exit). With more nodes than the
// replication factor,
// also: a node drained until it holds nothing, undone then or a few faults
// later; a node removed (kill -9, wiped) and, once the cluster has healed
// without it, joining again empty. After each fault the cluster must heal
// (ChaosCluster::AwaitHealthy: every shard has a primary that serves and
// enough in-sync replicas), and at the end the ledger must hold: no
// acknowledged publish lost, nothing of an acknowledged cancel delivered,
// nothing early.
//
// HOURGLASS_CHAOS_SEED replays a run's sequence of faults (the processes'
// own timing still varies); HOURGLASS_CHAOS_FAULTS sets how many (default
// 6, what CI runs; BENCHMARKS.md records long runs);
// HOURGLASS_CHAOS_NODES and HOURGLASS_CHAOS_SHARDS the topology (default 3
// and 1; CI runs 5 and 8 too, with 3 faults: tests/CMakeLists.txt);
// HOURGLASS_CHAOS_ONLY=N makes every fault the Nth kind of enum Fault
// (from 0), to study one; HOURGLASS_CHAOS_HOURGLASSD runs another binary;
// HOURGLASS_CHAOS_LOGS=DIR keeps every node's whole log in DIR/<id>.log.

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/admin.h"
#include "client/channel.h"
#include "gtest/gtest.h"
#include "tests/cluster/chaos_cluster.h"
#include "tests/cluster/chaos_load.h"
#include "tests/cluster/ledger.h"

namespace hourglass {
namespace {

using ::hourglass::client::Admin;
using ::hourglass::client::Channel;
using ::hourglass::client::ChannelOptions;
using ::hourglass::testing::ChaosCluster;
using ::hourglass::testing::ChaosLoad;
using ::hourglass::testing::Ledger;

constexpr absl::Duration kHealTimeout = absl::Seconds(90);

uint64_t EnvOr(const char* name, uint64_t fallback) {
  const char* value = std::getenv(name);
  uint64_t parsed = 0;
  return value != nullptr && absl::SimpleAtoi(value, &parsed) ? parsed
                                                              : fallback;
}

enum class Fault {
  kKillPrimary,
  kKillBackup,
  kKillController,
  kPausePrimary,
  kIsolatePrimary,
  kCutBackupLinks,
  kCutBackupFromEtcd,
  kWipeBackup,
  kFillBackupsDisk,
  kDrainPrimary,
  kDrainPrimaryThenKill,
  // Two at once (issue 39):
  kStopBackupsThenLosePrimary,
  kPauseEtcd,
  // Only with more nodes than the replication factor (a spare to move to):
  kDrainNode,
  kNodeJoins,
};
constexpr int kFaultKinds = 15;
// The kinds for a cluster without spare nodes (three nodes, factor 3).
constexpr int kFaultKindsWithoutSpares = 13;

const char* Name(Fault fault) {
  switch (fault) {
    case Fault::kKillPrimary:
      return "kill -9 a shard's primary";
    case Fault::kKillBackup:
      return "kill -9 a shard's backup";
    case Fault::kKillController:
      return "kill -9 the controller";
    case Fault::kPausePrimary:
      return "SIGSTOP a shard's primary past its lease";
    case Fault::kIsolatePrimary:
      return "cut a shard's primary off from clients, peers and etcd";
    case Fault::kCutBackupLinks:
      return "cut a shard's backup off from the primary and clients";
    case Fault::kCutBackupFromEtcd:
      return "cut a shard's backup off from etcd";
    case Fault::kWipeBackup:
      return "kill -9 a shard's backup and wipe its data";
    case Fault::kFillBackupsDisk:
      return "fill a shard's backup's disk";
    case Fault::kDrainPrimary:
      return "drain a shard's primary (leader transfers)";
    case Fault::kDrainPrimaryThenKill:
      return "drain a shard's primary, kill -9 a node during the hand-over";
    case Fault::kStopBackupsThenLosePrimary:
      return "SIGSTOP a shard's backups, then kill -9 its primary and wipe "
             "its data, then resume them";
    case Fault::kPauseEtcd:
      return "SIGSTOP etcd past every lease, then SIGCONT";
    case Fault::kDrainNode:
      return "drain a node until it holds nothing (undone then or later)";
    case Fault::kNodeJoins:
      return "remove a node (kill -9, wipe), heal, then it joins empty";
  }
  return "?";
}

class ChaosTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ChaosCluster::Options options;
    // A copy elsewhere, for a long run while the build tree changes.
    const char* hourglassd = std::getenv("HOURGLASS_CHAOS_HOURGLASSD");
    options.hourglassd = hourglassd != nullptr ? hourglassd : HOURGLASSD_PATH;
    const int nodes = static_cast<int>(EnvOr("HOURGLASS_CHAOS_NODES", 3));
    ASSERT_GE(nodes, 3);
    ASSERT_LE(nodes, 26);
    options.ids.clear();
    for (int i = 0; i < nodes; ++i) {
      options.ids.push_back(std::string(1, static_cast<char>('a' + i)));
    }
    options.shards = static_cast<int>(EnvOr("HOURGLASS_CHAOS_SHARDS", 1));
    options.flags = {"--shutdown_grace=500ms"};
    absl::StatusOr<std::unique_ptr<ChaosCluster>> cluster =
        ChaosCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
  }

  // A uniformly random duration in [from, to].
  absl::Duration Between(absl::Duration from, absl::Duration to) {
    return from + absl::Milliseconds(std::uniform_int_distribution<int64_t>(
                      0, absl::ToInt64Milliseconds(to - from))(random_));
  }

  // A random one of `ids`. REQUIRES: !ids.empty().
  std::string AnyOf(const std::vector<std::string>& ids) {
    return ids[std::uniform_int_distribution<size_t>(0,
                                                     ids.size() - 1)(random_)];
  }

  // A random replica of `shard` that is not its primary `primary` (with
  // three nodes and one shard: a random other node).
  std::string Backup(int shard, const std::string& primary) {
    std::vector<std::string> replicas = cluster_->Replicas(shard);
    if (replicas.empty()) replicas = cluster_->ids();
    std::sort(replicas.begin(), replicas.end());
    std::vector<std::string> backups;
    for (const std::string& id : replicas) {
      if (id != primary) backups.push_back(id);
    }
    return AnyOf(backups);
  }

  // Kills `id`, leaves it down a while, and starts it again.
  void KillAndRestart(const std::string& id, bool wipe) {
    cluster_->Kill(id);
    cluster_->Hold(Between(absl::Milliseconds(200), absl::Seconds(3)));
    if (wipe) cluster_->Wipe(id);
    const absl::Status restarted = cluster_->Restart(id);
    ASSERT_TRUE(restarted.ok())
        << restarted << "\n--- etcd: " << cluster_->EtcdState();
  }

  // `id` was cut off (from etcd, or from everything) for `cut`, past its
  // lease: it stays up through it, and rejoins once the cut heals.
  void CutOffAndHeal(const std::string& id, absl::Duration cut) {
    cluster_->Hold(cut);
    EXPECT_TRUE(cluster_->Running(id))
        << id << " exited while it was cut off:\n"
        << cluster_->LogTail(id);
    cluster_->Heal(id);
  }

  // `hourglass cluster drain` of `id` (or its undo), through any node;
  // tried again while no node answers (one may just have been killed).
  void Drain(const std::string& id, bool drain) {
    ChannelOptions options;
    options.address = cluster_->ClientAddresses();
    absl::StatusOr<std::shared_ptr<Channel>> channel = Channel::Create(options);
    ASSERT_TRUE(channel.ok()) << channel.status();
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    absl::Status status = Admin(*channel).DrainNode(id, !drain);
    while ((absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status)) &&
           absl::Now() < deadline) {
      cluster_->Hold(absl::Milliseconds(200));
      status = Admin(*channel).DrainNode(id, !drain);
    }
    EXPECT_TRUE(status.ok()) << status;
  }

  // Whether, within `timeout`, the cluster map comes to satisfy `done`
  // (reading the nodes' logs meanwhile).
  template <typename Done>
  bool AwaitMap(Done done, absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (true) {
      absl::StatusOr<hourglass::v1::ClusterMap> map = cluster_->Map();
      if (map.ok() && done(*map)) return true;
      if (absl::Now() >= deadline) return false;
      cluster_->Hold(absl::Milliseconds(100));
    }
  }
  // Whether `id` leads a shard / holds a replica / is in an ISR in `map`.
  static bool Leads(const hourglass::v1::ClusterMap& map,
                    const std::string& id) {
    return std::any_of(
        map.shards().begin(), map.shards().end(),
        [&id](const hourglass::v1::ShardInfo& s) { return s.primary() == id; });
  }
  static bool Holds(const hourglass::v1::ClusterMap& map,
                    const std::string& id) {
    return std::any_of(map.shards().begin(), map.shards().end(),
                       [&id](const hourglass::v1::ShardInfo& s) {
                         return std::find(s.replicas().begin(),
                                          s.replicas().end(),
                                          id) != s.replicas().end();
                       });
  }
  // How many shards `id` holds an in-sync copy of in `map`.
  static int Copies(const hourglass::v1::ClusterMap& map,
                    const std::string& id) {
    return static_cast<int>(std::count_if(
        map.shards().begin(), map.shards().end(),
        [&id](const hourglass::v1::ShardInfo& s) {
          return std::find(s.isr().begin(), s.isr().end(), id) != s.isr().end();
        }));
  }
  static bool InSync(const hourglass::v1::ClusterMap& map,
                     const std::string& id) {
    return std::any_of(map.shards().begin(), map.shards().end(),
                       [&id](const hourglass::v1::ShardInfo& s) {
                         return std::find(s.isr().begin(), s.isr().end(), id) !=
                                s.isr().end();
                       });
  }

  // Ends the drain of `drained_`, if any.
  void UndoDrain() {
    if (drained_.empty()) return;
    std::cout << "chaos: the drain of " << drained_ << " ends" << std::endl;
    Drain(drained_, false);
    drained_.clear();
  }

  // Applies `fault` and undoes it (but perhaps a kDrainNode's drain, left
  // in drained_); returns the node it hit.
  std::string Inflict(Fault fault) {
    // A shard, and what the fault does to it: only drawn with many shards,
    // so that a seed of a one-shard run replays as before there were many.
    const int shard = cluster_->shards() == 1
                          ? 0
                          : std::uniform_int_distribution<int>(
                                0, cluster_->shards() - 1)(random_);
    const std::string primary = cluster_->Primary(shard);
    const absl::Duration past_lease =
        cluster_->lease_ttl() + Between(absl::Seconds(1), absl::Seconds(2));
    switch (fault) {
      case Fault::kKillPrimary:
        KillAndRestart(primary, /*wipe=*/false);
        return primary;
      case Fault::kKillBackup: {
        const std::string backup = Backup(shard, primary);
        KillAndRestart(backup, /*wipe=*/false);
        return backup;
      }
      case Fault::kKillController: {
        const std::string controller = cluster_->Controller();
        KillAndRestart(controller, /*wipe=*/false);
        return controller;
      }
      case Fault::kPausePrimary:
        cluster_->Pause(primary);
        cluster_->Hold(past_lease);
        cluster_->Resume(primary);
        return primary;
      case Fault::kIsolatePrimary:
        cluster_->CutInbound(primary);
        cluster_->CutEtcd(primary);
        CutOffAndHeal(primary, past_lease);
        return primary;
      case Fault::kCutBackupLinks: {
        // Shorter or longer than the primary's patience with a silent
        // backup (5 s): it stays in the ISR, or leaves and comes back.
        const std::string backup = Backup(shard, primary);
        cluster_->CutInbound(backup);
        cluster_->Hold(Between(absl::Seconds(1), absl::Seconds(8)));
        cluster_->Heal(backup);
        return backup;
      }
      case Fault::kCutBackupFromEtcd: {
        const std::string backup = Backup(shard, primary);
        cluster_->CutEtcd(backup);
        CutOffAndHeal(backup, past_lease);
        return backup;
      }
      case Fault::kWipeBackup: {
        const std::string backup = Backup(shard, primary);
        KillAndRestart(backup, /*wipe=*/true);
        return backup;
      }
      case Fault::kFillBackupsDisk: {
        // Until the backup finds its disk full (large messages make that
        // soon), and a while after.
        const std::string backup = Backup(shard, primary);
        const size_t logged = cluster_->LogSize(backup);
        const absl::Status filled = cluster_->FillDisk(backup);
        EXPECT_TRUE(filled.ok()) << filled;
        // With many shards, each takes a part of the load, and its log
        // fills that much slower: somewhat larger messages, and more
        // patience. (Much larger ones, 256 KiB, filled every node's 1 GiB
        // with data of its own within a minute: the backup chosen next
        // was full already and logged nothing new.)
        const bool many = cluster_->shards() > 1;
        load_->SetPayloadSize(many ? 128 << 10 : 64 << 10);
        // A copy the rebalancer moves away meanwhile frees its space (the
        // node removes it): the disk is filled again each second until the
        // backup finds it full.
        const absl::Time deadline =
            absl::Now() + (many ? absl::Seconds(120) : absl::Seconds(60));
        bool full = false;
        while (!full && absl::Now() < deadline) {
          full = cluster_->AwaitLog(backup, "No space left on device", logged,
                                    absl::Seconds(1));
          if (!full) {
            EXPECT_TRUE(cluster_->FillDisk(backup).ok());
          }
        }
        EXPECT_TRUE(full) << "(its log was " << logged << " bytes before, is "
                          << cluster_->LogSize(backup) << " now)\n"
                          << cluster_->LogTail(backup);
        load_->SetPayloadSize(0);
        cluster_->Hold(Between(absl::Seconds(0), absl::Seconds(6)));
        cluster_->FreeDisk(backup);
        return backup;
      }
      case Fault::kDrainPrimary: {
        // It hands its shards over to in-sync backups (with three nodes
        // its copies stay: none is spare); then the drain ends.
        Drain(primary, true);
        EXPECT_TRUE(AwaitMap(
            [&primary](const hourglass::v1::ClusterMap& map) {
              return map.shards_size() > 0 && !Leads(map, primary);
            },
            absl::Seconds(30)))
            << primary << " did not hand its shards over:\n"
            << cluster_->LogTail(primary);
        Drain(primary, false);
        return primary;
      }
      case Fault::kStopBackupsThenLosePrimary: {
        // The double fault: the primary takes its silent backups out of the
        // in-sync set (the last one out stays eligible), then dies with its
        // disk; the backups come back, and the eligible one must be
        // promoted with everything acknowledged.
        std::vector<std::string> backups = cluster_->Replicas(shard);
        std::erase(backups, primary);
        for (const std::string& backup : backups) cluster_->Pause(backup);
        cluster_->Hold(absl::Seconds(5) + cluster_->lease_ttl() +
                       Between(absl::Seconds(1), absl::Seconds(4)));
        cluster_->Kill(primary);
        cluster_->Wipe(primary);
        for (const std::string& backup : backups) cluster_->Resume(backup);
        const absl::Status restarted = cluster_->Restart(primary);
        EXPECT_TRUE(restarted.ok()) << restarted;
        return primary;
      }
      case Fault::kPauseEtcd:
        cluster_->PauseEtcd();
        cluster_->Hold(cluster_->lease_ttl() +
                       Between(absl::Seconds(2), absl::Seconds(12)));
        cluster_->ResumeEtcd();
        return "etcd";
      case Fault::kDrainPrimaryThenKill: {
        // The hand-over cut short, or just done: the old primary or a
        // backup (perhaps the one taking over) dies.
        Drain(primary, true);
        cluster_->Hold(Between(absl::Milliseconds(0), absl::Milliseconds(300)));
        const std::string victim =
            std::uniform_int_distribution<int>(0, 1)(random_) == 0
                ? primary
                : Backup(shard, primary);
        KillAndRestart(victim, /*wipe=*/false);
        Drain(primary, false);
        return victim;
      }
      case Fault::kDrainNode: {
        // One drain at a time: with five nodes, two drained and one killed
        // would leave fewer than the replication factor to move to.
        // A node that holds copies, since an undone drain leaves its node
        // empty until the rebalancing gives it some again.
        UndoDrain();
        std::vector<std::string> holders;
        absl::StatusOr<hourglass::v1::ClusterMap> map = cluster_->Map();
        for (const std::string& id : cluster_->Members()) {
          if (!map.ok() || Holds(*map, id)) holders.push_back(id);
        }
        const std::string node = AnyOf(holders);
        Drain(node, true);
        EXPECT_TRUE(AwaitMap(
            [&node](const hourglass::v1::ClusterMap& map) {
              return map.shards_size() > 0 && !Holds(map, node);
            },
            kHealTimeout))
            << node << " still holds replicas:\n"
            << cluster_->LogTail(node);
        drained_ = node;
        if (std::uniform_int_distribution<int>(0, 1)(random_) == 0) {
          UndoDrain();
        }
        return node;
      }
      case Fault::kNodeJoins: {
        // A node that holds copies (so that the cluster has something to
        // heal), but not one drained (whose drain would keep it empty).
        std::vector<std::string> candidates;
        absl::StatusOr<hourglass::v1::ClusterMap> map = cluster_->Map();
        for (const std::string& id : cluster_->Members()) {
          if (id != drained_ && (!map.ok() || Holds(*map, id))) {
            candidates.push_back(id);
          }
        }
        const std::string node = AnyOf(candidates);
        cluster_->Remove(node);
        const absl::Time removed = absl::Now();
        const absl::Status healed = cluster_->AwaitHealthy(kHealTimeout);
        EXPECT_TRUE(healed.ok()) << "without " << node << ": " << healed;
        inner_heal_ = absl::Now() - removed;
        std::cout << "chaos:   healed without " << node << " in "
                  << absl::FormatDuration(
                         absl::Trunc(inner_heal_, absl::Milliseconds(100)))
                  << std::endl;
        cluster_->Hold(Between(absl::Seconds(0), absl::Seconds(2)));
        const absl::Status joined = cluster_->Join(node);
        EXPECT_TRUE(joined.ok()) << joined;
        // It joined once a copy moved to it has caught up.
        EXPECT_TRUE(AwaitMap(
            [&node](const hourglass::v1::ClusterMap& map) {
              return InSync(map, node);
            },
            kHealTimeout))
            << node << " joined but got no copy in sync:\n"
            << cluster_->LogTail(node);
        return node;
      }
    }
    return "";
  }

  std::mt19937_64 random_;
  std::unique_ptr<ChaosCluster> cluster_;
  ChaosLoad* load_ = nullptr;
  // The node a kDrainNode left drained ("" if none).
  std::string drained_;
  // How long the cluster took to heal within the last fault, before it
  // ended (kNodeJoins: healing without the node removed), counted in its
  // heal time.
  absl::Duration inner_heal_;
};

TEST_F(ChaosTest, TheLedgerHoldsThroughASeededSequenceOfFaults) {
  const uint64_t seed = EnvOr("HOURGLASS_CHAOS_SEED", std::random_device()());
  const int faults = static_cast<int>(EnvOr("HOURGLASS_CHAOS_FAULTS", 6));
  const int kinds =
      static_cast<int>(cluster_->ids().size()) > cluster_->replication_factor()
          ? kFaultKinds
          : kFaultKindsWithoutSpares;
  const int only = static_cast<int>(EnvOr("HOURGLASS_CHAOS_ONLY", kinds));
  ASSERT_LE(only, kinds) << "HOURGLASS_CHAOS_ONLY: this topology has " << kinds
                         << " kinds of fault";
  std::cout << "chaos: seed " << seed
            << " (replay with HOURGLASS_CHAOS_SEED=" << seed << "), " << faults
            << " faults, " << cluster_->ids().size() << " nodes, "
            << cluster_->shards() << " shards" << std::endl;
  random_.seed(seed);
  const absl::Status healthy = cluster_->AwaitHealthy(kHealTimeout);
  ASSERT_TRUE(healthy.ok()) << healthy;
  // The shards are created on the first nodes to join; the load starts
  // once the others have their share of copies too.
  const int share = cluster_->shards() * cluster_->replication_factor() /
                    static_cast<int>(cluster_->ids().size());
  ASSERT_TRUE(AwaitMap(
      [this, share](const hourglass::v1::ClusterMap& map) {
        for (const std::string& id : cluster_->ids()) {
          if (Copies(map, id) < share) return false;
        }
        return true;
      },
      kHealTimeout))
      << "the copies did not spread out";

  Ledger ledger;
  ChaosLoad load(cluster_->ClientAddresses(), cluster_->topics(), seed, ledger);
  const absl::Status started = load.Start();
  ASSERT_TRUE(started.ok()) << started;
  load_ = &load;
  const absl::Time start = absl::Now();
  std::map<std::string, int> inflicted;
  std::vector<absl::Duration> heals;
  for (int i = 0; i < faults; ++i) {
    cluster_->Hold(Between(absl::Milliseconds(500), absl::Milliseconds(1500)));
    // A drain left in place ends, sooner or later.
    if (!drained_.empty() &&
        std::uniform_int_distribution<int>(0, 1)(random_) == 0) {
      UndoDrain();
    }
    const Fault fault =
        only < kinds ? static_cast<Fault>(only)
                     : static_cast<Fault>(std::uniform_int_distribution<int>(
                           0, kinds - 1)(random_));
    const absl::Time at = absl::Now();
    inner_heal_ = absl::ZeroDuration();
    const std::string node = Inflict(fault);
    ASSERT_FALSE(HasFatalFailure());
    const absl::Time undone = absl::Now();
    const absl::Status healed = cluster_->AwaitHealthy(kHealTimeout);
    ASSERT_TRUE(healed.ok())
        << "after fault " << i + 1 << " (" << Name(fault) << ", " << node
        << "): " << healed << "\n"
        << [&] {
             std::string logs;
             for (const std::string& id : cluster_->ids()) {
               absl::StrAppend(&logs, "--- ", id, "\n", cluster_->LogTail(id));
             }
             return logs;
           }();
    const absl::Duration heal = absl::Now() - undone + inner_heal_;
    heals.push_back(heal);
    ++inflicted[Name(fault)];
    std::cout << "chaos: fault " << i + 1 << "/" << faults << " at "
              << absl::FormatDuration(
                     absl::Trunc(at - start, absl::Milliseconds(100)))
              << ": " << Name(fault) << " (" << node << "), lasted "
              << absl::FormatDuration(
                     absl::Trunc(undone - at, absl::Milliseconds(100)))
              << ", healed in "
              << absl::FormatDuration(
                     absl::Trunc(heal, absl::Milliseconds(100)))
              << "; so far " << ledger.Check().acknowledged
              << " publishes acknowledged" << std::endl;
  }
  UndoDrain();
  load.StopPublishing();

  // Every acknowledged message comes due within 4 s of its publish; give
  // redeliveries (ack timeout 3 s) ample time besides.
  const absl::Time patience =
      std::max(ledger.LastDue(), absl::Now()) + absl::Seconds(60);
  while (ledger.Outstanding() > 0 && absl::Now() < patience) {
    cluster_->Hold(absl::Milliseconds(200));
  }
  load.Close();
  const Ledger::Report report = ledger.Check();
  std::sort(heals.begin(), heals.end());
  const absl::Duration p50 =
      heals.empty() ? absl::ZeroDuration() : heals[(heals.size() - 1) / 2];
  const absl::Duration longest =
      heals.empty() ? absl::ZeroDuration() : heals.back();
  std::cout << "chaos: seed " << seed << ", " << faults << " faults on "
            << cluster_->ids().size() << " nodes, " << cluster_->shards()
            << " shards in "
            << absl::FormatDuration(
                   absl::Trunc(absl::Now() - start, absl::Seconds(1)))
            << ", heal p50 "
            << absl::FormatDuration(absl::Trunc(p50, absl::Milliseconds(100)))
            << ", longest heal "
            << absl::FormatDuration(
                   absl::Trunc(longest, absl::Milliseconds(100)))
            << "; " << report.ToString() << std::endl;
  for (const auto& [name, count] : inflicted) {
    std::cout << "chaos:   " << count << " × " << name << std::endl;
  }
  // What the cluster holds of each message lost, for the failure message.
  if (report.lost > 0) {
    ChannelOptions options;
    options.address = cluster_->ClientAddresses();
    absl::StatusOr<std::shared_ptr<Channel>> channel = Channel::Create(options);
    for (const std::string& example : report.examples) {
      if (!example.starts_with("lost ") || !channel.ok()) continue;
      const std::string id = example.substr(5);
      std::cout << "chaos: " << ledger.Describe(id) << std::endl;
      std::vector<std::string> topics = cluster_->topics();
      for (const std::string& topic : cluster_->topics()) {
        topics.push_back(absl::StrCat(topic, ".dlq"));
      }
      for (const std::string& topic : topics) {
        hourglass::v1::GetMessageRequest get;
        get.set_topic(topic);
        get.set_id(id);
        absl::StatusOr<hourglass::v1::MessageInfo> info =
            Admin(*channel).GetMessage(get);
        std::cout << "chaos: lost " << id << " in " << topic << ": "
                  << (info.ok() ? info->ShortDebugString()
                                : info.status().ToString())
                  << std::endl;
      }
    }
  }
  EXPECT_TRUE(report.Holds()) << report.ToString();
  EXPECT_EQ(report.lost, 0);
  EXPECT_EQ(report.after_cancel, 0);
  EXPECT_EQ(report.early, 0);
  EXPECT_EQ(report.cancel_missing, 0);
  // The run did what it is for: clients got through between faults.
  EXPECT_GT(report.acknowledged, 100);
  EXPECT_GT(report.cancelled, 0);
}

}  // namespace
}  // namespace hourglass
