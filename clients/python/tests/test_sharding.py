"""Cluster mode with many shards, decided without a broker: where the
``Router`` sends each call by its topic.
"""

from __future__ import annotations

from typing import Dict, Iterator, List, Sequence

import grpc
import pytest

import hourglass
from hourglass import Message, _cluster, _protocol, errors
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
    # A bad or missing count is none.
    for value in ("x", "0", "-2"):
        assert _cluster.shard_count_of(errors.FailedPrecondition(
            "", trailing_metadata=[("hourglass-shards", value)])) == 0
    assert _cluster.shard_count_of(errors.Unavailable("")) == 0


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
