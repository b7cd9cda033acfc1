"""Which shard of a cluster holds a topic: the rule every client and node
computes alike (cluster/shard_hash.h in C++).

The 64-bit FNV-1a hash of the topic's UTF-8 bytes, with one trailing
``.dlq`` removed (a topic and its dead-letter topic share a shard), modulo
the shard count. ``Cluster.GetClusterMap`` names this hash ``fnv1a-64``.
"""

_FNV_OFFSET_BASIS = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_DEAD_LETTER_SUFFIX = ".dlq"


def topic_hash(topic: str) -> int:
    """The FNV-1a 64 hash of ``topic``, its ``.dlq`` suffix removed first."""
    if topic.endswith(_DEAD_LETTER_SUFFIX):
        topic = topic[:-len(_DEAD_LETTER_SUFFIX)]
    value = _FNV_OFFSET_BASIS
    for byte in topic.encode("utf-8"):
        value = ((value ^ byte) * _FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return value


def shard_of(topic: str, shard_count: int) -> int:
    """The shard of ``topic`` among ``shard_count`` (at least 1)."""
    if shard_count < 1:
        raise ValueError(f"shard_count must be at least 1, not {shard_count}")
    return topic_hash(topic) % shard_count
