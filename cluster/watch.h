#ifndef HOURGLASS_CLUSTER_WATCH_H_
#define HOURGLASS_CLUSTER_WATCH_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cluster/etcd_client.h"

namespace hourglass::cluster {

// One change to a key, as a watch reports it.
struct WatchEvent {
  enum class Type { kPut, kDelete };
  Type type = Type::kPut;
  // kPut: the key as written. kDelete: the key and, as mod_revision, the
  // revision of the delete; the value is empty and the other fields 0.
  KeyValue kv;
  // The key as it was before the change, when WatchOptions::prev_kv asked
  // for it and etcd still had it; otherwise nullopt.
  std::optional<KeyValue> prev;
};

struct WatchOptions {
  // The key to watch, or with `prefix` the beginning of the keys to watch.
  // Required.
  std::string key;
  // Watch every key that begins with `key`. Default: false.
  bool prefix = false;
  // The first revision whose changes are reported: changes at this revision
  // and later ones, including those made before the watch started, as long
  // as etcd has not compacted them away. The revision after a read's
  // (GetResult::revision + 1) reports exactly what follows that read.
  // Default: 0, the changes after the revision at which etcd creates the
  // watch (so changes made while it is being created may be missed).
  int64_t from_revision = 0;
  // Report each change's previous key-value too. Default: false.
  bool prev_kv = false;
};

// A watch of one key or one prefix in etcd over the Watch service's stream
// (one stream per Watch): it reports each change in revision order, and its
// end. It does not reconnect: when it ends, its owner starts another from
// next_revision(), after re-reading what it needs if the end was
// OUT_OF_RANGE.
//
// Thread-safe. The callbacks run on gRPC's threads, one at a time, never
// after the destructor returns; they must not block (start no EtcdClient
// call in them: hand the work to a thread of your own) and must not destroy
// the Watch.
class Watch {
 public:
  struct Callbacks {
    // Each change, in revision order (several changes of one transaction
    // share a revision, in the transaction's order). The next response is
    // read when it returns. Required.
    absl::AnyInvocable<void(const WatchEvent& event)> on_event;
    // Once, last, when the watch ends other than by its destruction:
    //   OUT_OF_RANGE  `from_revision` (or the revision it had reached) was
    //                 compacted away; the message names the oldest revision
    //                 etcd keeps. Read the keys again and watch from after
    //                 that read.
    //   UNAVAILABLE   the stream broke (etcd stopped, restarted, or became
    //                 unreachable; the client's keepalive pings notice a
    //                 silent one within 15 s), or etcd ended the watch for
    //                 another reason, which the message names.
    //   other codes   as etcd sent them (PERMISSION_DENIED, ...).
    // May be empty.
    absl::AnyInvocable<void(absl::Status status)> on_end;
  };

  // Starts watching over `client`'s current endpoint, which must outlive
  // the Watch. Returns at once: etcd confirms the watch later
  // (WaitCreated); if it cannot be reached, on_end reports UNAVAILABLE.
  // Errors: INVALID_ARGUMENT if options.key is empty, from_revision is
  // negative or on_event is empty.
  static absl::StatusOr<std::unique_ptr<Watch>> Start(EtcdClient& client,
                                                      WatchOptions options,
                                                      Callbacks callbacks);

  // Ends the watch (cancels its stream) and waits until its last callback
  // has returned. REQUIRES: not called from inside its own callbacks.
  ~Watch();
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;

  // Waits until etcd has confirmed the watch, or it ended, at most until
  // `deadline`; whether it was confirmed. Once confirmed, every change from
  // the start revision on will be reported, in order.
  bool WaitCreated(absl::Time deadline);

  // Waits until the watch has ended, at most until `deadline`: the status
  // on_end was (or is being) given, or nullopt if it has not ended.
  std::optional<absl::Status> WaitEnded(absl::Time deadline);

  // The revision a new watch would start from to go on where this one is:
  // one past the last change reported or, before any, from_revision (for a
  // watch from 0, once etcd confirmed it: one past the store's revision
  // then; 0 before).
  int64_t next_revision() const;

 private:
  class Reactor;
  explicit Watch(std::unique_ptr<Reactor> reactor);

  const std::unique_ptr<Reactor> reactor_;
};

}  // namespace hourglass::cluster

#endif  // HOURGLASS_CLUSTER_WATCH_H_
