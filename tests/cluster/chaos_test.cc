// Chaos with real processes: one etcd and three hourglassd on loopback under
// continuous publishing, cancelling and consuming, while a seeded sequence
// of faults hits them: kill -9 of the primary, of a backup, of the
// controller; the primary paused past its lease; the primary cut off from
// clients, peers and etcd; a backup's links cut; a backup cut off from etcd;
// a backup's data wiped; a backup's disk full; the primary drained (a
// leader transfer), alone or with a node killed during the hand-over. After
// each fault the cluster must heal (every node back in the ISR), and at the
// end the ledger must hold: no acknowledged publish lost, nothing of an
// acknowledged cancel delivered, nothing early.
//
// HOURGLASS_CHAOS_SEED replays a run's sequence of faults (the processes'
// own timing still varies); HOURGLASS_CHAOS_FAULTS sets how many (default
// 6, what CI runs; BENCHMARKS.md records a long run);
// HOURGLASS_CHAOS_ONLY=N makes every fault the Nth kind of enum Fault
// (from 0), to study one; HOURGLASS_CHAOS_HOURGLASSD runs another binary.

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/admin.h"
#include "client/channel.h"
#include "client/consumer.h"
#include "client/publisher.h"
#include "gtest/gtest.h"
#include "tests/cluster/chaos_cluster.h"
#include "tests/cluster/ledger.h"

namespace hourglass {
namespace {

using ::hourglass::client::Admin;
using ::hourglass::client::Channel;
using ::hourglass::client::ChannelOptions;
using ::hourglass::client::Consumer;
using ::hourglass::client::ConsumerOptions;
using ::hourglass::client::Delivery;
using ::hourglass::client::Message;
using ::hourglass::client::Publisher;
using ::hourglass::client::Receipt;
using ::hourglass::testing::ChaosCluster;
using ::hourglass::testing::Ledger;

constexpr char kTopic[] = "chaos";
constexpr absl::Duration kHealTimeout = absl::Seconds(90);

uint64_t EnvOr(const char* name, uint64_t fallback) {
  const char* value = std::getenv(name);
  uint64_t parsed = 0;
  return value != nullptr && absl::SimpleAtoi(value, &parsed) ? parsed
                                                              : fallback;
}

// Clients at a steady pace: publishers (a fifth of their messages due in 2
// to 4 s, half of those cancelled at once), and one consumer acking all.
// Everything they learn goes to the ledger.
class Load {
 public:
  Load(std::string addresses, uint64_t seed, Ledger& ledger)
      : addresses_(std::move(addresses)), seed_(seed), ledger_(ledger) {}
  ~Load() {
    StopPublishing();
    Close();
  }

  absl::Status Start() {
    ChannelOptions options;
    options.address = addresses_;
    options.call_timeout = absl::Seconds(10);
    absl::StatusOr<std::shared_ptr<Channel>> channel = Channel::Create(options);
    if (!channel.ok()) return channel.status();
    channel_ = *std::move(channel);
    ConsumerOptions consumer;
    consumer.topic = kTopic;
    consumer.group = "ledger";
    consumer.ack_timeout = absl::Seconds(3);
    consumer.reconnect = true;
    absl::StatusOr<std::unique_ptr<Consumer>> subscribed = Consumer::Subscribe(
        channel_, consumer,
        [this](Consumer& c, std::vector<Delivery> deliveries) {
          for (const Delivery& d : deliveries) {
            ledger_.Delivered(d.id, d.received_at, d.deliver_at);
            (void)c.Ack(d.id);  // A lost ack only means a redelivery.
          }
        });
    if (!subscribed.ok()) return subscribed.status();
    consumer_ = *std::move(subscribed);
    for (int i = 0; i < 2; ++i) {
      threads_.emplace_back([this, i] { Publish(i); });
    }
    threads_.emplace_back([this] { CancelSome(); });
    return absl::OkStatus();
  }

  // Stops publishing and cancelling; the consumer goes on.
  void StopPublishing() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

  // From now on, payloads of `bytes` (at least the id): large ones make the
  // nodes' RocksDB flush and switch logs within seconds, which is when a
  // full disk shows (log space is allocated ahead).
  void SetPayloadSize(size_t bytes) { payload_bytes_.store(bytes); }

  void Close() {
    if (consumer_ != nullptr)
      (void)consumer_->Close(absl::Now() + absl::Seconds(5));
  }

 private:
  void Publish(int publisher) {
    std::mt19937_64 random(seed_ * 31 + static_cast<uint64_t>(publisher));
    Publisher client(channel_);
    for (int64_t n = 0;; ++n) {
      {
        absl::MutexLock lock(&mu_);
        // About 100 messages a second each: a load to check, not a benchmark.
        if (mu_.AwaitWithTimeout(absl::Condition(&stopping_),
                                 absl::Milliseconds(10))) {
          return;
        }
      }
      Message m;
      m.topic = kTopic;
      m.id = absl::StrCat("p", publisher, "-", n);
      m.payload = m.id;
      m.payload.resize(std::max(m.id.size(), payload_bytes_.load()), '.');
      const bool late = std::uniform_int_distribution<int>(0, 4)(random) == 0;
      m.delay = late ? absl::Milliseconds(std::uniform_int_distribution<int>(
                           2000, 4000)(random))
                     : absl::Milliseconds(
                           std::uniform_int_distribution<int>(0, 1500)(random));
      absl::StatusOr<Receipt> receipt = client.Publish(m);
      if (!receipt.ok()) {
        ledger_.PublishUncertain(m.id);
        continue;
      }
      ledger_.Published(m.id, receipt->deliver_at);
      if (late && std::uniform_int_distribution<int>(0, 1)(random) == 0) {
        absl::MutexLock lock(&mu_);
        to_cancel_.push_back(m.id);
      }
    }
  }

  void CancelSome() {
    Publisher client(channel_);
    while (true) {
      std::string id;
      {
        absl::MutexLock lock(&mu_);
        auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stopping_ || !to_cancel_.empty();
        };
        mu_.Await(absl::Condition(&ready));
        if (stopping_) return;
        id = to_cancel_.front();
        to_cancel_.pop_front();
      }
      const absl::Status status = client.Cancel(kTopic, id);
      if (status.ok()) {
        ledger_.Cancelled(id);
      } else if (absl::IsNotFound(status)) {
        ledger_.CancelNotFound(id, absl::Now());
      } else {
        ledger_.CancelUncertain(id);
      }
    }
  }

  const std::string addresses_;
  const uint64_t seed_;
  Ledger& ledger_;
  std::shared_ptr<Channel> channel_;
  std::unique_ptr<Consumer> consumer_;
  std::vector<std::thread> threads_;
  std::atomic<size_t> payload_bytes_{0};

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<std::string> to_cancel_ ABSL_GUARDED_BY(mu_);
};

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
};
constexpr int kFaultKinds = 11;

const char* Name(Fault fault) {
  switch (fault) {
    case Fault::kKillPrimary:
      return "kill -9 the primary";
    case Fault::kKillBackup:
      return "kill -9 a backup";
    case Fault::kKillController:
      return "kill -9 the controller";
    case Fault::kPausePrimary:
      return "SIGSTOP the primary past its lease";
    case Fault::kIsolatePrimary:
      return "cut the primary off from clients, peers and etcd";
    case Fault::kCutBackupLinks:
      return "cut a backup off from the primary and clients";
    case Fault::kCutBackupFromEtcd:
      return "cut a backup off from etcd";
    case Fault::kWipeBackup:
      return "kill -9 a backup and wipe its data";
    case Fault::kFillBackupsDisk:
      return "fill a backup's disk";
    case Fault::kDrainPrimary:
      return "drain the primary (a leader transfer)";
    case Fault::kDrainPrimaryThenKill:
      return "drain the primary, kill -9 a node during the hand-over";
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

  // A random node that is not the primary.
  std::string Backup(const std::string& primary) {
    std::vector<std::string> backups;
    for (const std::string& id : cluster_->ids()) {
      if (id != primary) backups.push_back(id);
    }
    return backups[std::uniform_int_distribution<size_t>(
        0, backups.size() - 1)(random_)];
  }

  // Kills `id`, leaves it down a while, and starts it again.
  void KillAndRestart(const std::string& id, bool wipe) {
    cluster_->Kill(id);
    cluster_->Hold(Between(absl::Milliseconds(200), absl::Seconds(3)));
    if (wipe) cluster_->Wipe(id);
    ASSERT_TRUE(cluster_->Restart(id).ok());
  }

  // `id` lost its lease while it could not renew it: it must stop serving
  // and exit with 3 by itself. Then it is started again.
  void ExpectLeaseLostExitAndRestart(const std::string& id) {
    EXPECT_EQ(cluster_->AwaitExit(id, absl::Seconds(30)), 3)
        << id << " did not exit with 3 after losing its lease:\n"
        << cluster_->LogTail(id);
    cluster_->Heal(id);
    ASSERT_TRUE(cluster_->Restart(id).ok());
  }

  // `hourglass cluster drain` of `id` (or its undo), through any node.
  void Drain(const std::string& id, bool drain) {
    ChannelOptions options;
    options.address = cluster_->ClientAddresses();
    absl::StatusOr<std::shared_ptr<Channel>> channel = Channel::Create(options);
    ASSERT_TRUE(channel.ok()) << channel.status();
    const absl::Status status = Admin(*channel).DrainNode(id, !drain);
    EXPECT_TRUE(status.ok()) << status;
  }

  // Applies `fault` and undoes it; returns the node it hit.
  std::string Inflict(Fault fault) {
    const std::string primary = cluster_->Primary();
    const absl::Duration past_lease =
        cluster_->lease_ttl() + Between(absl::Seconds(1), absl::Seconds(2));
    switch (fault) {
      case Fault::kKillPrimary:
        KillAndRestart(primary, /*wipe=*/false);
        return primary;
      case Fault::kKillBackup: {
        const std::string backup = Backup(primary);
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
        ExpectLeaseLostExitAndRestart(primary);
        return primary;
      case Fault::kIsolatePrimary:
        cluster_->CutInbound(primary);
        cluster_->CutEtcd(primary);
        ExpectLeaseLostExitAndRestart(primary);
        return primary;
      case Fault::kCutBackupLinks: {
        // Shorter or longer than the primary's patience with a silent
        // backup (5 s): it stays in the ISR, or leaves and comes back.
        const std::string backup = Backup(primary);
        cluster_->CutInbound(backup);
        cluster_->Hold(Between(absl::Seconds(1), absl::Seconds(8)));
        cluster_->Heal(backup);
        return backup;
      }
      case Fault::kCutBackupFromEtcd: {
        const std::string backup = Backup(primary);
        cluster_->CutEtcd(backup);
        ExpectLeaseLostExitAndRestart(backup);
        return backup;
      }
      case Fault::kWipeBackup: {
        const std::string backup = Backup(primary);
        KillAndRestart(backup, /*wipe=*/true);
        return backup;
      }
      case Fault::kFillBackupsDisk: {
        // Until the backup finds its disk full (large messages make that
        // soon), and a while after.
        const std::string backup = Backup(primary);
        const size_t logged = cluster_->LogSize(backup);
        const absl::Status filled = cluster_->FillDisk(backup);
        EXPECT_TRUE(filled.ok()) << filled;
        load_->SetPayloadSize(64 << 10);
        EXPECT_TRUE(cluster_->AwaitLog(backup, "No space left on device",
                                       logged, absl::Seconds(60)))
            << cluster_->LogTail(backup);
        load_->SetPayloadSize(0);
        cluster_->Hold(Between(absl::Seconds(0), absl::Seconds(6)));
        cluster_->FreeDisk(backup);
        return backup;
      }
      case Fault::kDrainPrimary: {
        // It hands the shard over to an in-sync backup (its copy stays:
        // with three nodes none is spare); then the drain ends.
        Drain(primary, true);
        const absl::Time deadline = absl::Now() + absl::Seconds(30);
        while (absl::Now() < deadline && (cluster_->Primary().empty() ||
                                          cluster_->Primary() == primary)) {
          cluster_->Hold(absl::Milliseconds(100));
        }
        EXPECT_NE(cluster_->Primary(), primary)
            << primary << " did not hand the shard over:\n"
            << cluster_->LogTail(primary);
        Drain(primary, false);
        return primary;
      }
      case Fault::kDrainPrimaryThenKill: {
        // The hand-over cut short, or just done: the old primary or a
        // backup (perhaps the one taking over) dies.
        Drain(primary, true);
        cluster_->Hold(Between(absl::Milliseconds(0), absl::Milliseconds(300)));
        const std::string victim =
            std::uniform_int_distribution<int>(0, 1)(random_) == 0
                ? primary
                : Backup(primary);
        KillAndRestart(victim, /*wipe=*/false);
        Drain(primary, false);
        return victim;
      }
    }
    return "";
  }

  std::mt19937_64 random_;
  std::unique_ptr<ChaosCluster> cluster_;
  Load* load_ = nullptr;
};

TEST_F(ChaosTest, TheLedgerHoldsThroughASeededSequenceOfFaults) {
  const uint64_t seed = EnvOr("HOURGLASS_CHAOS_SEED", std::random_device()());
  const int faults = static_cast<int>(EnvOr("HOURGLASS_CHAOS_FAULTS", 6));
  const int only = static_cast<int>(EnvOr("HOURGLASS_CHAOS_ONLY", kFaultKinds));
  std::cout << "chaos: seed " << seed
            << " (replay with HOURGLASS_CHAOS_SEED=" << seed << "), " << faults
            << " faults" << std::endl;
  random_.seed(seed);
  const absl::Status healthy = cluster_->AwaitHealthy(kHealTimeout);
  ASSERT_TRUE(healthy.ok()) << healthy;

  Ledger ledger;
  Load load(cluster_->ClientAddresses(), seed, ledger);
  const absl::Status started = load.Start();
  ASSERT_TRUE(started.ok()) << started;
  load_ = &load;
  const absl::Time start = absl::Now();
  std::map<std::string, int> inflicted;
  absl::Duration longest_heal;
  for (int i = 0; i < faults; ++i) {
    cluster_->Hold(Between(absl::Milliseconds(500), absl::Milliseconds(1500)));
    const Fault fault =
        only < kFaultKinds
            ? static_cast<Fault>(only)
            : static_cast<Fault>(std::uniform_int_distribution<int>(
                  0, kFaultKinds - 1)(random_));
    const absl::Time at = absl::Now();
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
    const absl::Duration heal = absl::Now() - undone;
    longest_heal = std::max(longest_heal, heal);
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
  std::cout << "chaos: seed " << seed << ", " << faults << " faults in "
            << absl::FormatDuration(
                   absl::Trunc(absl::Now() - start, absl::Seconds(1)))
            << ", longest heal "
            << absl::FormatDuration(
                   absl::Trunc(longest_heal, absl::Milliseconds(100)))
            << "; " << report.ToString() << std::endl;
  for (const auto& [name, count] : inflicted) {
    std::cout << "chaos:   " << count << " × " << name << std::endl;
  }
  std::cout << "chaos: besides, " << cluster_->restarts().size()
            << " nodes lost their lease on their own (a keep-alive too late "
               "under load), exited with 3 and were restarted: "
            << absl::StrJoin(cluster_->restarts(), ",") << std::endl;
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
