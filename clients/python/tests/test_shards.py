"""The topic-to-shard rule against the fixed vectors the C++ side shares
(tests/cluster/shard_hash_test.cc)."""

import pytest

from hourglass.shards import shard_of, topic_hash


def test_is_fnv1a_64_of_the_topics_bytes() -> None:
    assert topic_hash("") == 0xCBF29CE484222325
    assert topic_hash("a") == 0xAF63DC4C8601EC8C
    assert topic_hash("foobar") == 0x85944171F73967E8
    assert topic_hash("orders") == 0x00125D9250BE8B4C
    assert topic_hash("payments") == 0xE17AC5686623DB26


def test_a_topic_and_its_dead_letter_topic_share_a_shard() -> None:
    assert topic_hash("orders.dlq") == topic_hash("orders")
    assert shard_of("orders.dlq", 16) == shard_of("orders", 16) == 12
    assert topic_hash("a.dlq") == topic_hash("a")
    assert topic_hash("a.dlq.dlq") == 0xF53FF7B50977075D


def test_shards_are_the_hash_modulo_the_count() -> None:
    assert shard_of("payments", 16) == 6
    assert shard_of("payments", 1) == 0
    assert shard_of("", 16) == 5
    assert shard_of("foobar", 16) == 8


def test_a_shard_count_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="shard_count must be at least 1, not 0"):
        shard_of("orders", 0)
