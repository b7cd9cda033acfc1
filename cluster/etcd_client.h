#ifndef HOURGLASS_CLUSTER_ETCD_CLIENT_H_
#define HOURGLASS_CLUSTER_ETCD_CLIENT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/tls.h"

namespace grpc {
class ChannelCredentials;
}  // namespace grpc

namespace hourglass::cluster {

namespace internal {
class Connection;
}  // namespace internal

// One key as etcd holds it. Revisions are etcd's: the store's revision
// grows by one with every write (a transaction is one write), and each key
// records the revision that created it and the one that last changed it.
struct KeyValue {
  std::string key;
  std::string value;
  // The revision of the write that created the key (since it last did not
  // exist).
  int64_t create_revision = 0;
  // The revision of the write that last changed it: what compare-and-set
  // compares.
  int64_t mod_revision = 0;
  // Writes to the key since it was created, from 1.
  int64_t version = 0;
  // The lease the key is attached to; 0 for none.
  int64_t lease = 0;

  friend bool operator==(const KeyValue&, const KeyValue&) = default;
};

// What Get read.
struct GetResult {
  std::optional<KeyValue> kv;  // nullopt: the key does not exist.
  int64_t revision = 0;        // The store's revision the read saw.
};

// What GetPrefix read.
struct RangeResult {
  std::vector<KeyValue> kvs;  // In key order.
  int64_t revision = 0;       // The store's revision the read saw.
};

// What Delete did.
struct DeleteResult {
  bool deleted = false;  // Whether the key existed.
  int64_t revision = 0;  // The store's revision after the call.
};

// A second condition of a compare-and-set: that `key` exists and its
// create_revision is `create_revision`. A controller fences its writes with
// the election key and its term (Leader::term), so that once deposed its
// writes fail even if it has not noticed.
struct Fence {
  std::string key;
  int64_t create_revision = 0;
};

// What a compare-and-set did.
struct TxnResult {
  // Whether the comparison held and the write was made.
  bool succeeded = false;
  // Whether a fence was given and did not hold (so the write was not made
  // whatever the key's revision).
  bool fenced_out = false;
  // The store's revision after the call: when `succeeded`, the revision of
  // the write, which is the key's mod_revision now (for a put).
  int64_t revision = 0;
  // When not `succeeded`: the key as it is at `revision`, nullopt if it
  // does not exist. Always nullopt when `succeeded`.
  std::optional<KeyValue> current;
};

// A lease granted by etcd.
struct Lease {
  int64_t id = 0;
  // The time to live etcd granted (whole seconds).
  absl::Duration ttl;
  // Until when, on this machine's clock, the lease is certainly alive if it
  // is not renewed (nor revoked): the time the grant was sent plus `ttl`.
  absl::Time alive_until;
};

struct EtcdOptions {
  // host:port of each etcd member to use (ParseEtcdEndpoints reads the
  // --etcd flag). Required: at least one.
  std::vector<std::string> endpoints;
  // The deadline of each call, over every endpoint it tries. Default: 5 s.
  absl::Duration call_timeout = absl::Seconds(5);
  // TLS to every endpoint (hourglassd's --etcd_ca, --etcd_cert,
  // --etcd_key, as etcdctl's --cacert, --cert, --key): etcd's certificate is
  // verified against tls.ca_file, and tls.cert_file is presented to an etcd
  // that wants client certificates (--client-cert-auth). Default:
  // plaintext.
  client::TlsOptions tls;
};

// The endpoints of a --etcd flag: "host:port[,host:port...]", spaces around
// each ignored. INVALID_ARGUMENT, naming the bad part, if it is empty or a
// part is not a host and a port from 1 to 65535.
absl::StatusOr<std::vector<std::string>> ParseEtcdEndpoints(
    std::string_view flag);

// The end of the key range that holds every key beginning with `prefix`:
// `prefix` with its last byte below 0xff incremented and what follows it
// dropped. "\0" (meaning no end) when `prefix` is empty or all 0xff.
std::string PrefixRangeEnd(std::string_view prefix);

// A client of etcd's v3 gRPC API (etcd 3.4 and later, over plaintext or
// TLS, without etcd's user authentication): reads, writes and compare-and-set
// transactions on keys, and leases. Keeping a lease alive is LeaseKeeper's
// (lease_keeper.h); watching keys is Watch's (watch.h); both run over an
// EtcdClient, which must outlive them.
//
// Every call has a deadline (EtcdOptions::call_timeout) and blocks at most
// until it. A call goes first to the endpoint that last answered; when that
// endpoint cannot be connected to (an attempt to connect fails; one whose
// last attempt failed gets 250 ms to connect anew) or, for a read, answers
// UNAVAILABLE, the next is tried, each at most once, until the deadline. A
// write is sent to a second endpoint only if the first could not be
// connected to, so that it is never applied twice. So while etcd is down,
// calls fail within about 250 ms per endpoint.
//
// Errors common to every call:
//   UNAVAILABLE        no endpoint answered: none could be connected to,
//                      or those reached had no etcd leader. The message
//                      names each endpoint's failure.
//   DEADLINE_EXCEEDED  an endpoint was reached but did not answer before the
//                      deadline.
// A write (Put, Delete, the compare-and-sets, GrantLease, RevokeLease) that
// fails with either may or may not have been applied; a caller that must
// know reads the key again.
//
// Thread-safe: every method may be called concurrently from any thread, but
// not from inside a Watch's callbacks (they run on gRPC's threads, which
// must not block). LeaseKeeper's on_lost runs on a thread of its own and
// may call it.
class EtcdClient {
 public:
  // A client of `options.endpoints`. Does not connect: each endpoint is
  // connected to on its first call. INVALID_ARGUMENT if there is no
  // endpoint, call_timeout is not positive, or a TLS file cannot be read
  // (client::TlsCredentials's error, e.g. `tls.ca_file: cannot read
  // "ca.pem": no such file or directory`).
  static absl::StatusOr<std::unique_ptr<EtcdClient>> Create(
      EtcdOptions options);

  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  const EtcdOptions& options() const { return options_; }

  // Reads `key` (linearizable: it sees every write that returned before the
  // call). Errors: INVALID_ARGUMENT if `key` is empty.
  absl::StatusOr<GetResult> Get(std::string_view key);

  // Reads every key that begins with `prefix`, in key order, in one
  // linearizable read. Errors: INVALID_ARGUMENT if `prefix` is empty.
  absl::StatusOr<RangeResult> GetPrefix(std::string_view prefix);

  // Writes `value` at `key`, attached to `lease` (0: none; a key attached
  // to a lease is deleted when the lease ends). Returns the revision of the
  // write, the key's mod_revision now. Errors:
  //   INVALID_ARGUMENT    `key` is empty, or the request is larger than
  //                       etcd accepts (1.5 MiB by default).
  //   NOT_FOUND           `lease` does not exist (expired or revoked).
  //   RESOURCE_EXHAUSTED  etcd's space quota is used up.
  absl::StatusOr<int64_t> Put(std::string_view key, std::string_view value,
                              int64_t lease = 0);

  // Deletes `key` if it exists. Errors: INVALID_ARGUMENT if `key` is empty.
  absl::StatusOr<DeleteResult> Delete(std::string_view key);

  // Compare-and-set: writes `value` at `key` (attached to `lease`, 0 for
  // none) only if the key exists and its mod_revision is `mod_revision`.
  // Not succeeding is not an error: the result says so and carries the key
  // as it is. Errors as Put's (NOT_FOUND for an unknown lease only when
  // the comparison holds, since only then is the put made);
  // INVALID_ARGUMENT if
  // `mod_revision` is not positive (CreateIfAbsent writes a key that does
  // not exist). With a `fence`, the fence must hold too.
  absl::StatusOr<TxnResult> PutIfModRevision(
      std::string_view key, std::string_view value, int64_t mod_revision,
      int64_t lease = 0, const std::optional<Fence>& fence = std::nullopt);

  // Writes `value` at `key` (attached to `lease`, 0 for none) only if the
  // key does not exist (its create_revision is 0) and `fence`, if given,
  // holds. Otherwise the result carries the key as it is. Errors as
  // PutIfModRevision's.
  absl::StatusOr<TxnResult> CreateIfAbsent(
      std::string_view key, std::string_view value, int64_t lease = 0,
      const std::optional<Fence>& fence = std::nullopt);

  // Writes `value` at `key` and each of `more` (key, value; no lease), in
  // one transaction, only if `key` does not exist: all of them or none.
  // Otherwise the result carries `key` as it is. Errors as
  // CreateIfAbsent's, INVALID_ARGUMENT for an empty key in `more`.
  absl::StatusOr<TxnResult> CreateIfAbsentWith(
      std::string_view key, std::string_view value,
      const std::vector<std::pair<std::string, std::string>>& more);

  // Deletes `key` only if it exists and its mod_revision is `mod_revision`.
  // Otherwise the result carries the key as it is (nullopt if absent).
  // Errors: INVALID_ARGUMENT if `key` is empty or `mod_revision` is not
  // positive.
  absl::StatusOr<TxnResult> DeleteIfModRevision(std::string_view key,
                                                int64_t mod_revision);

  // Grants a new lease of `ttl` (rounded up to whole seconds; etcd may
  // grant more, never less: its minimum is about 1.5 × its election
  // timeout). It ends `ttl` after it was last granted or renewed unless
  // renewed again (LeaseKeeper) or revoked. Errors:
  //   INVALID_ARGUMENT    `ttl` is not positive.
  //   OUT_OF_RANGE        `ttl` is more than etcd allows (9,000,000,000 s).
  //   RESOURCE_EXHAUSTED  etcd's space quota is used up.
  absl::StatusOr<Lease> GrantLease(absl::Duration ttl);

  // Ends lease `id` now and deletes every key attached to it. Errors:
  //   NOT_FOUND  no such lease (it expired, or was revoked already).
  absl::Status RevokeLease(int64_t id);

  // How long lease `id` has left, rounded down to whole seconds (it ends
  // within that plus one second unless renewed). Errors:
  //   NOT_FOUND  no such lease (it expired, or was revoked).
  absl::StatusOr<absl::Duration> LeaseTimeToLive(int64_t id);

 private:
  friend class LeaseKeeper;
  friend class Watch;

  EtcdClient(EtcdOptions options,
             std::shared_ptr<grpc::ChannelCredentials> credentials);

  // Makes one call (`invoke`, given an endpoint and a context prepared with
  // the call's deadline), trying the endpoints as the class comment says;
  // `is_write` keeps a write from a second endpoint once it may have been
  // sent. `what` describes the call for error messages.
  template <typename Invoke>
  absl::Status Call(std::string_view what, bool is_write, Invoke invoke);
  // Runs the transaction `request` (an etcdserverpb::TxnRequest that
  // GuardedTxn began), a write; `what` names it in errors.
  template <typename Request>
  absl::StatusOr<TxnResult> Txn(const std::string& what, const Request& request,
                                const std::optional<Fence>& fence);
  // Reads the keys in [key, range_end) (only `key` if range_end is empty),
  // after checking `key`; `what` names the call in errors.
  absl::StatusOr<RangeResult> Range(const std::string& what,
                                    std::string_view key,
                                    std::string range_end);

  const EtcdOptions options_;
  const std::unique_ptr<internal::Connection> connection_;
};

}  // namespace hourglass::cluster

#endif  // HOURGLASS_CLUSTER_ETCD_CLIENT_H_
