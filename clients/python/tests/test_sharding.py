"""Cluster mode with many shards, decided without a broker: where the
``Router`` sends each call by its topic, and how ``_split`` splits a batch
by shard, gathers its receipts and words a failed part. test_cluster.py
runs the same against real nodes with ``--shards=4``.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from typing import Dict, Iterator, List, Sequence, Tuple

import grpc
import pytest

import hourglass
from hourglass import Message, _cluster, _protocol, _split, errors
from hourglass.shards import shard_of
from hourglass.v1 import admin_pb2, broker_pb2, cluster_pb2

#: topic(n) is in shard n of 4 (orders-3, orders-0, orders-1, orders-2).
SHARDS = 4


def topic(shard: int, count: int = SHARDS) -> str:
    """The first topic orders-<i> of `shard` among `count`."""
    return next(t for t in (f"orders-{i}" for i in range(100))
                if shard_of(t, count) == shard)


def refusal(primary: str, shards: int) -> errors.Error:
    """A node's refusal of a call about a shard it is no primary of."""
    return errors.Unavailable(
        "not the primary", trailing_metadata=[
            ("hourglass-primary", primary), ("hourglass-epoch", "1"),
            ("hourglass-shards", str(shards))])


def spans(shards: int) -> errors.Error:
    """A node's refusal of a publish that spans shards."""
    return errors.FailedPrecondition(
        "the messages of a publish fall in shards 0, 1 ...",
        trailing_metadata=[("hourglass-shards", str(shards))])


def sharded_map(node: str, nodes: Dict[str, str],
                primaries: Sequence[str]) -> cluster_pb2.ClusterMap:
    """A map from `node` of len(primaries) shards, shard n on
    primaries[n], and live `nodes` (id: address)."""
    return cluster_pb2.ClusterMap(
        node=node, shard_count=len(primaries),
        nodes=[cluster_pb2.ClusterNode(id=i, address=a)
               for i, a in nodes.items()],
        shards=[cluster_pb2.ShardInfo(shard=n, epoch=1, primary=p)
                for n, p in enumerate(primaries)])


@pytest.fixture
def router() -> Iterator[_cluster.Router]:
    """A router given a:1 and b:2; its channels closed afterwards."""
    r = _cluster.Router(_protocol.channel_settings(
        "a:1,b:2", None, None, hourglass.Backoff()), grpc)
    yield r
    for channel in r.channels():
        channel.close()


def routes(router: _cluster.Router) -> List[str]:
    """Where calls about each shard's topic go, by shard."""
    return [router.route(topic(n)).address for n in range(SHARDS)]


def test_topics_used_here_are_one_per_shard() -> None:
    assert [topic(n) for n in range(SHARDS)] == [
        "orders-3", "orders-0", "orders-1", "orders-2"]


def test_a_request_is_about_its_topic_a_publish_about_its_first() -> None:
    publish = _protocol.publish_request([Message(topic(2)), Message("x")])
    assert _cluster.topic_of(publish) == topic(2)
    assert _cluster.topic_of(broker_pb2.PublishRequest()) == ""
    assert _cluster.topic_of(_protocol.cancel_request("t", "1")) == "t"
    assert _cluster.topic_of(admin_pb2.GetMessageRequest(
        topic="t.dlq", id="1")) == "t.dlq"
    assert _cluster.topic_of(admin_pb2.PurgeTopicRequest(topic="p")) == "p"
    # Stats of every topic, or the map: about no topic.
    assert _cluster.topic_of(admin_pb2.GetStatsRequest()) == ""
    assert _cluster.topic_of(cluster_pb2.GetClusterMapRequest()) == ""


def test_before_the_shard_count_is_known_every_call_goes_to_the_current(
        router: _cluster.Router) -> None:
    assert router.shard_count() == 0
    assert routes(router) == ["a:1"] * SHARDS
    # A redirect without the count moves the current node, as before.
    c = router.follow(router.current(), errors.Unavailable(
        "x", trailing_metadata=[("hourglass-primary", "c:3")]), topic(1))
    assert c is not None and router.current() is c
    assert router.shard_count() == 0
    assert routes(router) == ["c:3"] * SHARDS


def test_a_redirect_gives_the_count_and_moves_its_topics_shard_only(
        router: _cluster.Router) -> None:
    a = router.current()
    c = router.follow(a, refusal("c:3", SHARDS), topic(1))
    assert c is not None and c.address == "c:3"
    assert router.shard_count() == SHARDS
    assert routes(router) == ["a:1", "c:3", "a:1", "a:1"]
    assert router.current() is a  # Calls about no topic stay.
    assert router.route("") is a
    # A dead-letter topic is in its topic's shard.
    assert router.route(f"{topic(1)}.dlq") is c
    d = router.follow(a, refusal("d:4", SHARDS), topic(3))
    assert d is not None
    assert routes(router) == ["a:1", "c:3", "a:1", "d:4"]
    # The map is asked where the call would go first.
    assert router.candidates(d, topic(3)) == ["d:4", "a:1", "b:2"]
    assert router.candidates(a, topic(1)) == ["c:3", "a:1", "b:2"]


def test_any_refusal_with_the_trailer_gives_the_count(
        router: _cluster.Router) -> None:
    assert router.follow(router.current(), spans(SHARDS), topic(0)) is None
    assert router.shard_count() == SHARDS
    assert routes(router) == ["a:1"] * SHARDS
    # A bad or missing count is none; so is one no cluster has, which
    # would size the client's table of routes (a hostile server's).
    for value in ("x", "0", "-2", "4097", "99999999999"):
        assert _cluster.shard_count_of(errors.FailedPrecondition(
            "", trailing_metadata=[("hourglass-shards", value)])) == 0
    assert _cluster.shard_count_of(errors.Unavailable("")) == 0
    assert _cluster.shard_count_of(errors.FailedPrecondition(
        "", trailing_metadata=[("hourglass-shards", "4096")])) == 4096


def test_one_shard_routes_every_call_to_the_current_node(
        router: _cluster.Router) -> None:
    c = router.follow(router.current(), refusal("c:3", 1), topic(1))
    assert c is not None and router.current() is c
    assert router.shard_count() == 1
    assert routes(router) == ["c:3"] * SHARDS


def test_a_map_sets_every_shards_primary_and_the_current_to_shard_0s(
        router: _cluster.Router) -> None:
    nodes = {"a": "a:1", "b": "b:2", "c": "c:3"}
    got = router.learn(sharded_map("b", nodes, ["b", "c", "a", "b"]),
                       router.endpoint("x:9"), topic(1))
    assert got is not None and got.address == "c:3"
    assert router.shard_count() == SHARDS
    assert routes(router) == ["b:2", "c:3", "a:1", "b:2"]
    assert router.current().address == "b:2"
    # The node that failed is not taken from an older map, nor a primary
    # that is not live; the other shards move.
    c = router.route(topic(1))
    got = router.learn(sharded_map("b", {"a": "a:1", "b": "b:2"},
                                   ["a", "c", "b", "a"]), c, topic(1))
    assert got is None
    assert routes(router) == ["a:1", "c:3", "b:2", "a:1"]
    assert router.current().address == "a:1"
    assert router.learn(sharded_map("a", nodes, ["a", "b", "b", "a"]), c,
                        topic(1)).address == "b:2"
    # A new shard count forgets the shards' primaries.
    router.follow(c, refusal("c:3", 8), topic(1))
    assert router.shard_count() == 8
    assert [router.route(topic(n, 8)).address for n in range(8)] == [
        "a:1"] * 8


def test_only_a_batch_of_several_shards_is_split() -> None:
    request = _protocol.publish_request(
        [Message(topic(n)) for n in (2, 0, 2, 3)])
    assert _split.parts(request, 0) == {}
    assert _split.parts(request, 1) == {}
    assert _split.parts(request, SHARDS) == {0: [1], 2: [0, 2], 3: [3]}
    assert list(_split.parts(request, SHARDS)) == [0, 2, 3]
    assert _split.parts(_protocol.publish_request(
        [Message(topic(1)), Message(f"{topic(1)}.dlq")]), SHARDS) == {}
    assert [m.topic for m in _split.part_request(request, [0, 2]).messages
            ] == [topic(2), topic(2)]
    assert _split.spanned(spans(SHARDS)) == SHARDS
    assert _split.spanned(spans(1)) == 0
    assert _split.spanned(refusal("c:3", SHARDS)) == 0
    assert _split.spanned(errors.FailedPrecondition("x")) == 0


def test_index_lists_are_short_and_a_parts_message_is_renumbered() -> None:
    assert _split.describe_indices([3]) == "3"
    assert _split.describe_indices([0, 4, 5]) == "0, 4, 5"
    assert _split.describe_indices(list(range(12))) == (
        "0, 1, 2, 3, 4, 5, 6, 7, ... (12 in all)")
    assert _split.describe_indices(list(range(8))) == "0, 1, 2, 3, 4, 5, 6, 7"
    assert _split.numbered_in_batch("message 1: bad", [3, 7]) == (
        "message 7: bad")
    assert _split.numbered_in_batch("message 2: bad", [3, 7]) == (
        "message 2: bad")
    assert _split.numbered_in_batch("disk full", [3]) == "disk full"


def receipts(*ids: str) -> List[hourglass.Receipt]:
    at = datetime(2026, 11, 27, tzinfo=timezone.utc)
    return [hourglass.Receipt(i, at, False) for i in ids]


def test_parts_receipts_come_in_the_batchs_order() -> None:
    by_shard = {0: [1], 2: [0, 2], 3: [3]}
    got = _split.gather(4, by_shard, {0: receipts("m1"),
                                      2: receipts("m0", "m2"),
                                      3: receipts("m3")})
    assert [r.id for r in got] == ["m0", "m1", "m2", "m3"]


def test_a_failed_part_names_what_failed_and_what_was_stored() -> None:
    too_big = errors.InvalidArgument(
        "message 0: payload is 1048577 bytes; the limit is 1048576 "
        "(--max_payload_bytes)", trailing_metadata=[("k", "v")])
    with pytest.raises(hourglass.InvalidArgument) as failed:
        _split.gather(3, {0: [0], 1: [1], 2: [2]},
                      {0: receipts("m0"), 1: too_big, 2: receipts("m2")})
    assert failed.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert failed.value.message == (
        "shard 1 (message 1) failed: message 1: payload is 1048577 bytes; "
        "the limit is 1048576 (--max_payload_bytes); the batch spans shards "
        "0, 1, 2 and is all-or-nothing within each shard only: messages 0, "
        "2 were stored")
    assert failed.value.trailing_metadata == (("k", "v"),)
    assert failed.value.__cause__ is too_big

    # The first failed shard's class; every failed part named.
    unavailable = errors.Unavailable("socket closed")
    with pytest.raises(hourglass.Unavailable) as both:
        _split.gather(4, {0: [0, 2], 1: [1], 3: [3]},
                      {0: unavailable, 1: receipts("m1"), 3: too_big})
    assert both.value.message == (
        "shard 0 (messages 0, 2) failed: socket closed; shard 3 (message 3) "
        "failed: message 3: payload is 1048577 bytes; the limit is 1048576 "
        "(--max_payload_bytes); the batch spans shards 0, 1, 3 and is "
        "all-or-nothing within each shard only: message 1 was stored")
    with pytest.raises(hourglass.Unavailable) as none:
        _split.gather(2, {0: [0], 1: [1]}, {0: unavailable, 1: unavailable})
    assert none.value.message.endswith(
        "the batch spans shards 0, 1 and is all-or-nothing within each "
        "shard only: none of its messages were stored")
    # A part answered with too few receipts failed.
    with pytest.raises(hourglass.Internal) as short:
        _split.gather(2, {0: [0], 1: [1]}, {0: receipts(), 1: receipts("x")})
    assert short.value.message.startswith(
        "shard 0 (message 0) failed: the broker answered 0 receipts to a "
        "publish of 1 messages; ")


class Node:
    """A fake send of Publish: refuses a batch of several shards as a
    node does, else answers receipts named after the messages' ids; logs
    the ids of each request."""

    def __init__(self, refuse_parts: bool = False) -> None:
        self.sent: List[Tuple[str, ...]] = []
        self.refuse_parts = refuse_parts

    def __call__(self, request: broker_pb2.PublishRequest
                 ) -> List[hourglass.Receipt]:
        ids = tuple(m.id for m in request.messages)
        self.sent.append(ids)
        if self.refuse_parts or len(_split.parts(request, SHARDS)) > 1:
            raise spans(SHARDS)
        return receipts(*ids)


def batch(*shards: int) -> broker_pb2.PublishRequest:
    return _protocol.publish_request(
        [Message(topic(n), id=f"m{i}") for i, n in enumerate(shards)])


def test_a_batch_goes_whole_until_a_node_refuses_it_then_by_shard() -> None:
    node = Node()
    got = _split.publish(batch(1, 0, 1, 3), 0, node)
    assert [r.id for r in got] == ["m0", "m1", "m2", "m3"]
    assert node.sent[0] == ("m0", "m1", "m2", "m3")
    assert sorted(node.sent[1:]) == [("m0", "m2"), ("m1",), ("m3",)]
    # Knowing the count, it goes split at once; one shard's, whole.
    node = Node()
    assert len(_split.publish(batch(3, 2), SHARDS, node)) == 2
    assert sorted(node.sent) == [("m0",), ("m1",)]
    node = Node()
    assert len(_split.publish(batch(2, 2), SHARDS, node)) == 2
    assert node.sent == [("m0", "m1")]


def test_a_part_is_split_once_only() -> None:
    node = Node(refuse_parts=True)
    with pytest.raises(hourglass.FailedPrecondition) as failed:
        _split.publish(batch(0, 1), 0, node)
    assert len(node.sent) == 3
    assert failed.value.message.startswith("shard 0 (message 0) failed: ")
    with pytest.raises(hourglass.FailedPrecondition):
        _split.publish(batch(0, 0), 0, node)  # One shard: nothing to split.
    assert len(node.sent) == 4


def test_asyncio_splits_the_same_way() -> None:
    node = Node()

    async def send(request: broker_pb2.PublishRequest
                   ) -> List[hourglass.Receipt]:
        return node(request)

    got = asyncio.run(_split.publish_async(batch(1, 0, 1, 3), 0, send))
    assert [r.id for r in got] == ["m0", "m1", "m2", "m3"]
    assert node.sent[0] == ("m0", "m1", "m2", "m3")
    assert sorted(node.sent[1:]) == [("m0", "m2"), ("m1",), ("m3",)]

    async def refused(request: broker_pb2.PublishRequest
                      ) -> List[hourglass.Receipt]:
        raise errors.Unavailable(f"{len(request.messages)} refused")

    with pytest.raises(hourglass.Unavailable) as failed:
        asyncio.run(_split.publish_async(batch(0, 1, 1), SHARDS, refused))
    assert failed.value.message == (
        "shard 0 (message 0) failed: 1 refused; shard 1 (messages 1, 2) "
        "failed: 2 refused; the batch spans shards 0, 1 and is "
        "all-or-nothing within each shard only: none of its messages were "
        "stored")
