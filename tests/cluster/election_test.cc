// The controller election against a real etcd on loopback ports.

#include "cluster/election.h"

#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cluster/etcd_client.h"
#include "cluster/keys.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/etcd_server.h"
#include "tests/testing/etcd_test.h"
#include "tests/testing/eventually.h"

namespace hourglass::cluster {
namespace {

using ::testing::ElementsAre;

constexpr absl::Duration kPatience = absl::Seconds(20);

// One on_change call.
struct Change {
  bool leading;
  std::optional<Leader> leader;
  friend bool operator==(const Change&, const Change&) = default;
};

void PrintTo(const Change& change, std::ostream* out) {
  *out << (change.leading ? "leading" : "not leading") << ", leader ";
  if (change.leader.has_value()) {
    *out << change.leader->value << " (term " << change.leader->term
         << ", lease " << change.leader->lease << ")";
  } else {
    *out << "none";
  }
}

// The on_change calls of one candidate.
class ChangeLog {
 public:
  Election::ChangeCallback Callback() {
    return [this](bool leading, const std::optional<Leader>& leader) {
      absl::MutexLock lock(&mu_);
      changes_.push_back(Change{leading, leader});
    };
  }
  // The changes once `last` is among them (or when the wait times out):
  // leading() and leader() change just before on_change is called.
  std::vector<Change> AwaitChange(const Change& last) {
    absl::MutexLock lock(&mu_);
    auto seen = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      for (const Change& change : changes_) {
        if (change == last) return true;
      }
      return false;
    };
    mu_.AwaitWithDeadline(absl::Condition(&seen), absl::Now() + kPatience);
    return changes_;
  }

 private:
  absl::Mutex mu_;
  std::vector<Change> changes_ ABSL_GUARDED_BY(mu_);
};

class ElectionTest : public testing::EtcdTest {
 protected:
  // A lease long enough for the test, without a keeper.
  int64_t NewLease() {
    absl::StatusOr<Lease> lease = client_->GrantLease(absl::Seconds(60));
    EXPECT_TRUE(lease.ok()) << lease.status();
    return lease.ok() ? lease->id : 0;
  }

  std::unique_ptr<Election> Candidate(const std::string& name, int64_t lease,
                                      ChangeLog& log) {
    absl::StatusOr<std::unique_ptr<Election>> election =
        Election::Start(*client_,
                        ElectionOptions{.key = key_,
                                        .candidate = name,
                                        .lease = lease,
                                        .retry_delay = absl::Milliseconds(100)},
                        log.Callback());
    EXPECT_TRUE(election.ok()) << election.status();
    return election.ok() ? *std::move(election) : nullptr;
  }

  // The election's key as etcd has it.
  std::optional<KeyValue> Key() {
    absl::StatusOr<GetResult> read = client_->Get(key_);
    EXPECT_TRUE(read.ok()) << read.status();
    return read.ok() ? read->kv : std::nullopt;
  }

  const std::string key_ = ControllerKey("test");
};

TEST_F(ElectionTest, StartRefusesMissingOptions) {
  ChangeLog log;
  EXPECT_EQ(
      Election::Start(*client_, ElectionOptions{.candidate = "a", .lease = 1},
                      log.Callback())
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Election::Start(*client_, ElectionOptions{.key = key_, .lease = 1},
                            log.Callback())
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      Election::Start(*client_, ElectionOptions{.key = key_, .candidate = "a"},
                      log.Callback())
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
}

TEST_F(ElectionTest, TheFirstCandidateLeadsAndTheSecondFollows) {
  const int64_t lease_a = NewLease();
  const int64_t lease_b = NewLease();
  ChangeLog log_a, log_b;
  std::unique_ptr<Election> a = Candidate("node-a", lease_a, log_a);
  ASSERT_TRUE(a->AwaitLeading(true, absl::Now() + kPatience));
  std::optional<KeyValue> key = Key();
  ASSERT_TRUE(key.has_value());
  EXPECT_EQ(key->value, "node-a");
  EXPECT_EQ(key->lease, lease_a);
  const Leader leader_a{"node-a", key->create_revision, lease_a};
  EXPECT_EQ(a->leader(), leader_a);

  std::unique_ptr<Election> b = Candidate("node-b", lease_b, log_b);
  ASSERT_TRUE(b->AwaitLeader("node-a", absl::Now() + kPatience));
  EXPECT_FALSE(b->leading());
  EXPECT_EQ(b->leader(), leader_a);
  EXPECT_TRUE(a->leading());
  // B's campaign changed nothing.
  EXPECT_EQ(Key(), key);

  EXPECT_THAT(log_a.AwaitChange(Change{true, leader_a}),
              ElementsAre(Change{true, leader_a}));
  EXPECT_THAT(log_b.AwaitChange(Change{false, leader_a}),
              ElementsAre(Change{false, leader_a}));
}

TEST_F(ElectionTest, TheFollowerTakesOverWhenTheLeadersLeaseIsRevoked) {
  const int64_t lease_a = NewLease();
  const int64_t lease_b = NewLease();
  ChangeLog log_a, log_b;
  std::unique_ptr<Election> a = Candidate("node-a", lease_a, log_a);
  ASSERT_TRUE(a->AwaitLeading(true, absl::Now() + kPatience));
  std::unique_ptr<Election> b = Candidate("node-b", lease_b, log_b);
  ASSERT_TRUE(b->AwaitLeader("node-a", absl::Now() + kPatience));
  const Leader leader_a = *a->leader();

  // A's node lease ends (as when A dies): etcd deletes the key, B wins the
  // next campaign, and A, whose lease is gone, cannot.
  ASSERT_TRUE(client_->RevokeLease(lease_a).ok());
  ASSERT_TRUE(b->AwaitLeading(true, absl::Now() + kPatience));
  ASSERT_TRUE(a->AwaitLeader("node-b", absl::Now() + kPatience));
  EXPECT_FALSE(a->leading());
  std::optional<KeyValue> key = Key();
  ASSERT_TRUE(key.has_value());
  EXPECT_EQ(key->value, "node-b");
  EXPECT_EQ(key->lease, lease_b);
  const Leader leader_b{"node-b", key->create_revision, lease_b};
  EXPECT_EQ(b->leader(), leader_b);
  EXPECT_EQ(a->leader(), leader_b);
  EXPECT_GT(leader_b.term, leader_a.term);

  // Each saw the key go (no leader), then B lead.
  EXPECT_THAT(log_b.AwaitChange(Change{true, leader_b}),
              ElementsAre(Change{false, leader_a}, Change{false, std::nullopt},
                          Change{true, leader_b}));
  const std::vector<Change> changes_a =
      log_a.AwaitChange(Change{false, leader_b});
  ASSERT_GE(changes_a.size(), 3u);
  EXPECT_EQ(changes_a.front(), (Change{true, leader_a}));
  EXPECT_EQ(changes_a[1], (Change{false, std::nullopt}));
  EXPECT_EQ(changes_a.back(), (Change{false, leader_b}));
  for (size_t i = 1; i < changes_a.size(); ++i) {
    EXPECT_FALSE(changes_a[i].leading) << i;
  }
}

TEST_F(ElectionTest, ALeaderResignsWhenDestroyed) {
  const int64_t lease_a = NewLease();
  const int64_t lease_b = NewLease();
  ChangeLog log_a, log_b;
  std::unique_ptr<Election> a = Candidate("node-a", lease_a, log_a);
  ASSERT_TRUE(a->AwaitLeading(true, absl::Now() + kPatience));
  std::unique_ptr<Election> b = Candidate("node-b", lease_b, log_b);
  ASSERT_TRUE(b->AwaitLeader("node-a", absl::Now() + kPatience));

  a.reset();
  ASSERT_TRUE(b->AwaitLeading(true, absl::Now() + kPatience));
  std::optional<KeyValue> key = Key();
  ASSERT_TRUE(key.has_value());
  EXPECT_EQ(key->value, "node-b");
  EXPECT_EQ(key->lease, lease_b);
  // A's lease lives on: only the key went.
  EXPECT_TRUE(client_->LeaseTimeToLive(lease_a).ok());
}

TEST_F(ElectionTest, ACandidateLeadsAgainWhenTheKeyHoldsItsLease) {
  // As after a restart of the election with the node's lease unchanged: the
  // key that an earlier campaign wrote is this candidate's term.
  const int64_t lease = NewLease();
  absl::StatusOr<TxnResult> created =
      client_->CreateIfAbsent(key_, "node-a", lease);
  ASSERT_TRUE(created.ok() && created->succeeded);
  ChangeLog log;
  std::unique_ptr<Election> a = Candidate("node-a", lease, log);
  ASSERT_TRUE(a->AwaitLeading(true, absl::Now() + kPatience));
  const Leader leader{"node-a", created->revision, lease};
  EXPECT_EQ(a->leader(), leader);
  EXPECT_THAT(log.AwaitChange(Change{true, leader}),
              ElementsAre(Change{true, leader}));

  a.reset();  // Resigns.
  EXPECT_EQ(Key(), std::nullopt);
}

TEST_F(ElectionTest, CandidatesKeepTheirViewWhileEtcdIsDownAndGoOnAfter) {
  const int64_t lease_a = NewLease();
  const int64_t lease_b = NewLease();
  ChangeLog log_a, log_b;
  std::unique_ptr<Election> a = Candidate("node-a", lease_a, log_a);
  ASSERT_TRUE(a->AwaitLeading(true, absl::Now() + kPatience));
  std::unique_ptr<Election> b = Candidate("node-b", lease_b, log_b);
  ASSERT_TRUE(b->AwaitLeader("node-a", absl::Now() + kPatience));
  const Leader leader_a = *a->leader();

  server_->Stop();
  // Both notice etcd is gone, and neither changes its mind for it.
  auto unavailable = [](Election& e) {
    return e.last_error().code() == absl::StatusCode::kUnavailable;
  };
  ASSERT_TRUE(hourglass::testing::Eventually([&] { return unavailable(*a); },
                                             kPatience));
  ASSERT_TRUE(hourglass::testing::Eventually([&] { return unavailable(*b); },
                                             kPatience));
  EXPECT_TRUE(a->leading());
  EXPECT_EQ(b->leader(), leader_a);

  ASSERT_TRUE(server_->Restart().ok()) << server_->LogTail();
  // etcd kept the key and the leases: A still leads, B still follows.
  std::optional<KeyValue> key = Key();
  ASSERT_TRUE(key.has_value());
  EXPECT_EQ(key->value, "node-a");
  EXPECT_TRUE(a->leading());
  EXPECT_EQ(b->leader(), leader_a);

  // And B watches again: it takes over when A's lease ends.
  ASSERT_TRUE(client_->RevokeLease(lease_a).ok());
  ASSERT_TRUE(b->AwaitLeading(true, absl::Now() + kPatience));
  // A hears of it through its own watch, a moment later.
  ASSERT_TRUE(a->AwaitLeader("node-b", absl::Now() + kPatience));
  EXPECT_FALSE(a->leading());
  EXPECT_EQ(log_a.AwaitChange(Change{true, leader_a}).front(),
            (Change{true, leader_a}));
  EXPECT_EQ(log_b.AwaitChange(Change{false, leader_a}).front(),
            (Change{false, leader_a}));
}

}  // namespace
}  // namespace hourglass::cluster
