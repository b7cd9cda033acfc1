#ifndef HOURGLASS_CLUSTER_ELECTION_H_
#define HOURGLASS_CLUSTER_ELECTION_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cluster/etcd_client.h"

namespace hourglass::cluster {

// Who leads an election, as its key in etcd says.
struct Leader {
  // The leader's value (its node id, for the controller election).
  std::string value;
  // The create_revision of the key: one number per term of leadership,
  // growing from term to term. A leader's writes elsewhere can be fenced
  // with it (a transaction that also compares the election key's
  // create_revision with its own fails once it has been deposed).
  int64_t term = 0;
  // The lease the key is attached to: the leader's node lease.
  int64_t lease = 0;

  friend bool operator==(const Leader&, const Leader&) = default;
};

struct ElectionOptions {
  // The election's key, e.g. ControllerKey(cluster). Required.
  std::string key;
  // This candidate's value, written at the key while it leads: its node id.
  // Required.
  std::string candidate;
  // The lease the key is written under: the node's, kept alive by its
  // LeaseKeeper. When it ends the key goes, and another candidate leads.
  // Required.
  int64_t lease = 0;
  // How long to wait before trying again after etcd failed a call or ended
  // a watch. Default: 500 ms.
  absl::Duration retry_delay = absl::Milliseconds(500);
};

// A candidate in a leader election on one etcd key (the `controller` key
// of cluster/keys.h), on a thread of its own. To campaign it creates the key
// with its value under its lease, if the key does not exist (compare-and-set on
// create_revision 0). Whoever created the key leads until the key is
// deleted: by the leader's resignation, or by etcd when the leader's lease
// ends. The others watch the key and campaign again when it is deleted.
//
// While etcd cannot be reached, every candidate keeps what it last saw: a
// leader leads on until its lease is lost. So the owner must take a loss
// reported by its LeaseKeeper as the end of its leadership too (and destroy
// the Election): it cannot learn it from etcd. Two candidates may both
// believe they lead for the short time between a leader's lease ending and
// it noticing; fence writes with Leader::term.
//
// Thread-safe. The callback runs on the election's thread, without its
// lock; it must not destroy the Election.
class Election {
 public:
  // Called on each change of what this candidate sees: whether it leads,
  // and who does (nullopt while the key does not exist, or before the first
  // answer from etcd). leading() and leader() show the change just before
  // the call.
  using ChangeCallback = absl::AnyInvocable<void(
      bool leading, const std::optional<Leader>& leader)>;

  // Starts campaigning over `client`, which must outlive the Election.
  // `on_change` may be empty. Errors: INVALID_ARGUMENT if options.key or
  // options.candidate is empty or options.lease is 0.
  static absl::StatusOr<std::unique_ptr<Election>> Start(
      EtcdClient& client, ElectionOptions options, ChangeCallback on_change);

  // Stops campaigning and, if this candidate leads, resigns: deletes the
  // key if it is still this term's (at most the client's call_timeout; if
  // that fails the key goes with the lease). No callback runs after it
  // returns. REQUIRES: not called from the callback.
  ~Election();
  Election(const Election&) = delete;
  Election& operator=(const Election&) = delete;

  // Whether this candidate leads, as far as it knows.
  // Stops campaigning without resigning, as a crash would: the key stays
  // until the lease ends (abandon the lease too). No callback runs after
  // it returns, and destroying the Election then does nothing more.
  // REQUIRES: not called from the callback.
  void Abandon();

  bool leading() const;
  // Who leads, as far as this candidate knows.
  std::optional<Leader> leader() const;

  // Waits until leading() is `leading`, at most until `deadline`; whether
  // it is.
  bool AwaitLeading(bool leading, absl::Time deadline);
  // Waits until leader() holds `value`, at most until `deadline`; whether
  // it does.
  bool AwaitLeader(const std::string& value, absl::Time deadline);

  // The last error etcd gave the election (OK if none since its last
  // success): for logs and tests.
  absl::Status last_error() const;

 private:
  Election(EtcdClient& client, ElectionOptions options,
           ChangeCallback on_change);

  void Run();
  // One campaign: creates the key, or learns who holds it. Returns the
  // revision to watch the key from, or the error.
  absl::StatusOr<int64_t> Campaign();
  // Sets what this candidate sees and calls on_change_ if it changed.
  void Update(std::optional<Leader> leader);
  // Waits, without the lock, until `deadline` or Stop.
  void WaitUntil(absl::Time deadline);

  // Constant after construction.
  EtcdClient& client_;
  const ElectionOptions options_;
  ChangeCallback on_change_;  // The thread's.

  mutable absl::Mutex mu_;
  std::optional<Leader> leader_ ABSL_GUARDED_BY(mu_);
  // This candidate's key's mod_revision while it leads, for resigning.
  int64_t mod_revision_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status last_error_ ABSL_GUARDED_BY(mu_);
  // Set by the watch when the key was deleted, or the watch ended.
  bool key_deleted_ ABSL_GUARDED_BY(mu_) = false;
  bool watch_ended_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool abandoned_ ABSL_GUARDED_BY(mu_) = false;

  std::thread thread_;
};

}  // namespace hourglass::cluster

#endif  // HOURGLASS_CLUSTER_ELECTION_H_
