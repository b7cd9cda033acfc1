#ifndef HOURGLASS_CLUSTER_SHARD_HASH_H_
#define HOURGLASS_CLUSTER_SHARD_HASH_H_

#include <cstdint>
#include <string_view>

namespace hourglass::cluster {

// Which shard holds a topic (docs/cluster.md "Words"), the rule every client
// and node computes alike: the 64-bit FNV-1a hash of the topic's bytes, with
// one trailing ".dlq" removed (a topic and its dead-letter topic share a
// shard), modulo the shard count. Cluster.GetClusterMap names it
// "fnv1a-64". FNV-1a 64: start from 14695981039346656037
// (0xcbf29ce484222325); for each byte, xor it in, then multiply by
// 1099511628211 (0x100000001b3) modulo 2^64.
//
// Fixed vectors (tests/cluster/shard_hash_test.cc, and the Python client's
// hourglass.shard_of): "" 0xcbf29ce484222325, "a" 0xaf63dc4c8601ec8c,
// "foobar" 0x85944171f73967e8; "orders" and "orders.dlq" both
// 0x00125d9250be8b4c, shard 12 of 16.

// The most shards a cluster has (hourglassd's --shards). A client takes a
// larger count from a server as no count at all: it sizes tables by it.
inline constexpr int kMaxShardCount = 4096;

// The hash of `topic` as above (".dlq" removed first).
uint64_t TopicHash(std::string_view topic);

// TopicHash(topic) mod shard_count. REQUIRES: shard_count >= 1.
int ShardOf(std::string_view topic, int shard_count);

}  // namespace hourglass::cluster

#endif  // HOURGLASS_CLUSTER_SHARD_HASH_H_
