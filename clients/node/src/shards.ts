/**
 * Which shard of a cluster holds a topic, computed as every node and client
 * computes it: the 64-bit FNV-1a hash of the topic's UTF-8 bytes, one
 * trailing ".dlq" removed first (a topic and its dead letters share a
 * shard), modulo the shard count. The cluster map names this hash "fnv1a-64".
 */

const OFFSET_BASIS = 0xcbf29ce484222325n;
const PRIME = 0x100000001b3n;
const MASK = 0xffffffffffffffffn;
const DEAD_LETTER_SUFFIX = '.dlq';

/** The FNV-1a 64 hash of `topic`, its ".dlq" suffix removed first. */
export function topicHash(topic: string): bigint {
  if (topic.endsWith(DEAD_LETTER_SUFFIX)) topic = topic.slice(0, -DEAD_LETTER_SUFFIX.length);
  let value = OFFSET_BASIS;
  for (const byte of Buffer.from(topic, 'utf8')) {
    value = ((value ^ BigInt(byte)) * PRIME) & MASK;
  }
  return value;
}

/** The shard of `topic` among `shardCount` (at least 1). */
export function shardOf(topic: string, shardCount: number): number {
  if (!Number.isInteger(shardCount) || shardCount < 1) {
    throw new RangeError(`shardCount must be at least 1, not ${shardCount}`);
  }
  return Number(topicHash(topic) % BigInt(shardCount));
}
