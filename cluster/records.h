#ifndef HOURGLASS_CLUSTER_RECORDS_H_
#define HOURGLASS_CLUSTER_RECORDS_H_

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

// shards/<n>: who holds a shard. Changed only by compare-and-set: the
// controller changes epoch, primary, replicas and transfer_to; the primary
// the ISR, at its epoch.
struct ShardRecord {
  int64_t epoch = 0;                  // +1 at each change of primary; from 1
  std::string primary;                // a node id
  std::vector<std::string> replicas;  // every holder, the primary first
  std::vector<std::string> isr;       // the in-sync set, the primary first
  // A leader transfer under way to this in-sync backup; empty if none.
  std::string transfer_to;

  bool InIsr(std::string_view node) const;
  bool IsReplica(std::string_view node) const;

  friend bool operator==(const ShardRecord&, const ShardRecord&) = default;
};

// Where a replica's copy of a shard's log ends, as reported under `epoch`.
struct Position {
  int64_t epoch = 0;
  int64_t index = 0;

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
