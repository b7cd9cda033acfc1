#ifndef HOURGLASS_CLUSTER_LEASE_KEEPER_H_
#define HOURGLASS_CLUSTER_LEASE_KEEPER_H_

#include <cstdint>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cluster/etcd_client.h"

namespace hourglass::cluster {

// Keeps an etcd lease alive, on a thread of its own, by renewing it over
// the Lease service's keep-alive stream every third of its TTL, and says
// when its renewals are overdue and when it is lost. A node's lease is what
// makes it a member of the cluster (its nodes/<id> key and its controller
// candidacy hang on it).
//
// Overdue is not lost: while etcd cannot be reached, the keeper goes on
// trying, and a renewal that gets through later (etcd kept the lease, as it
// does across its own restart, or while it was paused) ends the overdue
// spell. Lost is final: etcd said the lease no longer exists; the keeper
// renews no more, and its owner grants a new one.
//
// When the keep-alive stream breaks (etcd restarts, or an endpoint goes
// away), a new one is opened, on the next endpoint if that one failed.
//
// Thread-safe. on_change runs on the keeper's thread, without the keeper's
// lock; it must not destroy the keeper or call Abandon.
class LeaseKeeper {
 public:
  // Called, in order, each time the lease's standing changes:
  //   UNAVAILABLE  no renewal was confirmed before alive_until() passed
  //                (etcd is unreachable or silent): the rest of the cluster
  //                may take the lease as expired. The keeper goes on trying.
  //   OK           a renewal was confirmed again after an UNAVAILABLE.
  //   NOT_FOUND    etcd says the lease does not exist any more (it expired,
  //                or someone revoked it): lost, the last call.
  using LostCallback = absl::AnyInvocable<void(absl::Status status)>;

  // Starts keeping `lease` (from client.GrantLease) alive over `client`,
  // which must outlive the keeper. `on_change` may be empty.
  static std::unique_ptr<LeaseKeeper> Start(EtcdClient& client, Lease lease,
                                            LostCallback on_change);

  // Stops renewing and, unless the lease was lost or abandoned, revokes it
  // (at most the client's call_timeout; a failure is ignored: the lease
  // then ends a TTL after its last renewal), which deletes every key
  // attached to it at once. REQUIRES: not called from on_lost.
  ~LeaseKeeper();
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  // Stops renewing without revoking: the lease ends a TTL after its last
  // renewal, as if this process had died. No on_lost follows. REQUIRES: not
  // called from on_lost.
  void Abandon();

  int64_t id() const { return lease_.id; }
  absl::Duration ttl() const { return lease_.ttl; }

  // Whether the lease was lost (etcd said it no longer exists).
  bool lost() const;
  // Whether no renewal was confirmed before alive_until() passed, and none
  // has been since.
  bool overdue() const;

  // Until when, on this machine's clock, the lease is certainly alive: the
  // time the last confirmed renewal (or the grant) was sent, plus the TTL
  // etcd answered with.
  absl::Time alive_until() const;

  // Waits until alive_until() is at least `time`, at most until `deadline`;
  // whether it is. False at once if the lease is lost.
  bool AwaitAliveUntil(absl::Time time, absl::Time deadline);

  // Renewals etcd confirmed so far.
  int64_t renewals() const;

 private:
  class Stream;

  LeaseKeeper(EtcdClient& client, Lease lease, LostCallback on_lost);

  void Run();
  // Stops the thread; true if this call stopped it (it ran, and had not
  // been stopped before).
  bool Stop();
  // From the stream, on gRPC's threads.
  void OnRenewed(absl::Time sent, int64_t ttl_seconds);
  void OnStreamDone(const absl::Status& status);

  // Constant after construction.
  EtcdClient& client_;
  const Lease lease_;
  const absl::Duration interval_;
  LostCallback on_change_;  // The thread's.

  mutable absl::Mutex mu_;
  absl::Time alive_until_ ABSL_GUARDED_BY(mu_);
  int64_t renewals_ ABSL_GUARDED_BY(mu_) = 0;
  // Set when etcd said the lease is gone (TTL 0).
  bool gone_ ABSL_GUARDED_BY(mu_) = false;
  bool lost_ ABSL_GUARDED_BY(mu_) = false;
  bool overdue_ ABSL_GUARDED_BY(mu_) = false;
  // The current stream ended; the thread opens another.
  bool stream_ended_ ABSL_GUARDED_BY(mu_) = false;
  // Why the last stream ended, for the loss's message.
  absl::Status last_error_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool abandoned_ ABSL_GUARDED_BY(mu_) = false;

  std::thread thread_;
};

}  // namespace hourglass::cluster

#endif  // HOURGLASS_CLUSTER_LEASE_KEEPER_H_
