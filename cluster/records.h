#ifndef HOURGLASS_CLUSTER_RECORDS_H_
#define HOURGLASS_CLUSTER_RECORDS_H_

#include <compare>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace hourglass::cluster {

// The values of the keys in keys.h. In etcd they are protobuf's JSON
// mapping of cluster/records.proto (readable with `etcdctl get`); these
// structs are the same fields.

// Where a copy of a shard's log ends: the epoch and index of its last
// entry (replication::LogPosition, which cluster/ does not depend on).
// Ordered by epoch, then index: the copy with the higher end holds more of
// the newest history.
struct LogEnd {
  int64_t epoch = 0;
  int64_t index = 0;

  friend bool operator==(const LogEnd&, const LogEnd&) = default;
  friend auto operator<=>(const LogEnd&, const LogEnd&) = default;
};

// shards/<n>: who holds a shard. Changed only by compare-and-set: the
// controller changes epoch, primary, replicas and transfer_to; the primary
// the ISR and the eligible copies, at its epoch, and gives the shard back
// (primary emptied) when it restarts at an epoch its copy accepted, or
// cannot get its writes acknowledged: the controller then promotes a copy
// at the next epoch.
struct ShardRecord {
  int64_t epoch = 0;  // +1 at each change of primary; from 1
  // A node id; empty while the shard has been given back by its primary
  // (the controller then promotes a copy, as when the primary is gone).
  std::string primary;
  std::vector<std::string> replicas;  // every holder, the primary first
  std::vector<std::string> isr;       // the in-sync set, the primary first
  // A leader transfer under way to this in-sync backup; empty if none.
  std::string transfer_to;
  // Replicas outside the in-sync set that still hold every write ever
  // acknowledged (the idea of Kafka's KIP-966 "eligible leader replicas"):
  // each left the in-sync set when that left it smaller than --min_insync,
  // and since then nothing could be acknowledged. Promoted, best first,
  // when no in-sync copy is alive. Empty whenever the in-sync set has
  // --min_insync members or more (KeepEligible, placement.h).
  std::vector<std::string> eligible;
  // The highest entry the primary knew acknowledged (durable on its whole
  // in-sync set) when it last wrote the record: what an operator's
  // recovery from a copy that ends before it surely loses. Only grows
  // within a history; {0, 0} while none is known.
  LogEnd acknowledged;

  bool InIsr(std::string_view node) const;
  bool IsReplica(std::string_view node) const;
  bool IsEligible(std::string_view node) const;

  friend bool operator==(const ShardRecord&, const ShardRecord&) = default;
};

// Where a replica's copy of a shard's log ends (`last_epoch`, `index`), as
// reported under the shard record's `epoch`.
struct Position {
  int64_t epoch = 0;
  int64_t index = 0;
  // The epoch of the copy's last entry; 0 in a report that does not rank
  // copies (a primary's hand-over).
  int64_t last_epoch = 0;

  LogEnd end() const { return {last_epoch, index}; }

  friend bool operator==(const Position&, const Position&) = default;
};

// nodes/<node_id>: a live node.
struct NodeRecord {
  std::string address;               // --advertise
  std::map<int, Position> positions;  // by shard, reported on failover
  std::string zone;                   // --zone; empty: zones not used

  friend bool operator==(const NodeRecord&, const NodeRecord&) = default;
};

std::string EncodeShardRecord(const ShardRecord& record);
// INVALID_ARGUMENT, with the parser's reason, for what is not one.
absl::StatusOr<ShardRecord> DecodeShardRecord(std::string_view json);

std::string EncodeNodeRecord(const NodeRecord& record);
absl::StatusOr<NodeRecord> DecodeNodeRecord(std::string_view json);

}  // namespace hourglass::cluster

#endif  // HOURGLASS_CLUSTER_RECORDS_H_
