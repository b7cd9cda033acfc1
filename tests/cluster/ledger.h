#ifndef HOURGLASS_TESTS_CLUSTER_LEDGER_H_
#define HOURGLASS_TESTS_CLUSTER_LEDGER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace hourglass::testing {

// What the chaos harness's clients saw, and the broker's promises checked
// against it (docs/cluster.md):
//   lost             acknowledged publishes never delivered, though not
//                    cancelled (must be 0 once the cluster has healed and
//                    every due time has passed);
//   after_cancel     deliveries of the acknowledged copy of a message whose
//                    cancel was acknowledged (must be 0; whenever read: a
//                    cancel succeeds only while its message is scheduled,
//                    so nothing of it may ever be delivered);
//   early            deliveries read before the deliver_at the broker
//                    stamped on them (must be 0);
//   cancel_missing   cancels answered NOT_FOUND before the acknowledged
//                    message came due: it was gone though it should not be
//                    (must be 0);
//   duplicates       deliveries beyond the first of a message (allowed:
//                    at-least-once; reported);
//   other_copies     deliveries of another copy than the acknowledged one
//                    (allowed; reported). Ids dedupe only while pending
//                    (README): a publish retried (by the client library,
//                    its first answer lost in a failover) after its first
//                    copy was delivered and acked stores a second copy, due
//                    later, which the receipt names. Copies are told apart
//                    by their deliver_at, which a delivery carries.
// An outcome the client could not learn (a call that failed with an error
// after which the write may or may not have happened) is recorded as
// uncertain, and excuses the message from `lost` and `after_cancel`.
//
// Times are this machine's clock, which the broker's processes share.
// Thread-safe: publishers, cancellers and consumers record concurrently.
class Ledger {
 public:
  struct Report {
    int64_t acknowledged = 0;  // publishes acknowledged
    int64_t uncertain = 0;     // publishes with an unknown outcome
    int64_t cancelled = 0;     // cancels acknowledged
    int64_t delivered = 0;     // distinct messages delivered
    int64_t deliveries = 0;    // deliveries read, duplicates included
    int64_t lost = 0;
    int64_t after_cancel = 0;
    int64_t early = 0;
    int64_t cancel_missing = 0;
    int64_t duplicates = 0;
    int64_t other_copies = 0;
    // Up to 10 ids of each kind of violation, for the failure message.
    std::vector<std::string> examples;

    bool Holds() const {
      return lost == 0 && after_cancel == 0 && early == 0 &&
             cancel_missing == 0;
    }
    // One line: every count, then the examples.
    std::string ToString() const;
  };

  // A publish of `id` was acknowledged, due at `deliver_at` (the receipt's).
  void Published(const std::string& id, absl::Time deliver_at);
  // A publish of `id` failed; it may have been stored.
  void PublishUncertain(const std::string& id);
  // A cancel of `id` was acknowledged.
  void Cancelled(const std::string& id);
  // A cancel of `id` failed; it may have been applied.
  void CancelUncertain(const std::string& id);
  // A cancel of acknowledged `id` answered NOT_FOUND at `answered_at`.
  void CancelNotFound(const std::string& id, absl::Time answered_at);
  // A consumer read a delivery of `id` at `received_at`, stamped due at
  // `deliver_at`.
  void Delivered(const std::string& id, absl::Time received_at,
                 absl::Time deliver_at);

  // How many acknowledged, uncancelled messages have not been delivered:
  // what the end of a run waits for.
  int64_t Outstanding() const;
  // The latest due time acknowledged (InfinitePast if none).
  absl::Time LastDue() const;

  Report Check() const;

  // What the ledger holds of `id`, in a line (when acknowledged, due,
  // whether an attempt failed first), for failure messages.
  std::string Describe(const std::string& id) const;

 private:
  struct Entry {
    bool acknowledged = false;
    bool publish_uncertain = false;
    absl::Time acknowledged_at = absl::InfinitePast();
    absl::Time deliver_at = absl::InfinitePast();
    bool cancel_acknowledged = false;
    bool cancel_uncertain = false;
    bool cancel_missing = false;
    struct Delivery {
      absl::Time received_at;
      absl::Time deliver_at;
    };
    std::vector<Delivery> deliveries;
  };

  // Whether `e` must be delivered: acknowledged and not (maybe) cancelled.
  static bool Owed(const Entry& e);

  mutable absl::Mutex mu_;
  std::map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hourglass::testing

#endif  // HOURGLASS_TESTS_CLUSTER_LEDGER_H_
