"""Cluster mode: the client follows the primary. First how it decides
(``hourglass._cluster.Router``, no broker needed); then against a real etcd
and three real hourglassd nodes (a, b, c) holding one shard.

Node a becomes the primary once all three joined; b and c then refuse every
call with UNAVAILABLE and the trailer ``hourglass-primary: <a's address>``.
Killed (SIGKILL), a loses its 2 s lease and b or c takes over at epoch 2.
Waits poll with deadlines (``eventually``); every delivery is checked never
early. HOURGLASS_ETCD names etcd (default: /usr/bin/etcd, Debian's
etcd-server, which deploy/setup.sh installs); without it these tests fail.
"""

from __future__ import annotations

import asyncio
import os
import time
from datetime import timedelta
from pathlib import Path
from typing import (Callable, Dict, Iterator, List, Optional, Sequence, Set,
                    Tuple)

import grpc
import pytest

import hourglass
import hourglass.aio
from hourglass import Message, _cluster, _protocol, errors
from hourglass.shards import shard_of
from hourglass.v1 import (admin_pb2, admin_pb2_grpc, broker_pb2, cluster_pb2,
                          cluster_pb2_grpc)
from helpers import (WAIT, Daemon, Etcd, check_not_early, eventually, ids,
                     stored, take, write_private)

#: How long one look at a node (GetStats, GetClusterMap) may take.
ASK_TIMEOUT = 5.0


# --- How the client decides (no broker) --------------------------------------


def redirect(primary: str) -> errors.Error:
    """What a node that is not the primary answers (api/redirect.h)."""
    return errors.Unavailable(
        "node b is not the primary of shard 0",
        trailing_metadata=[("hourglass-primary", primary),
                           ("hourglass-epoch", "1")])


def cluster_map(node: str, primary: str,
                nodes: Dict[str, str]) -> cluster_pb2.ClusterMap:
    """A map from `node` with shard 0 on `primary`, and live `nodes` (id:
    address)."""
    return cluster_pb2.ClusterMap(
        node=node,
        nodes=[cluster_pb2.ClusterNode(id=i, address=a)
               for i, a in nodes.items()],
        shards=[cluster_pb2.ShardInfo(shard=0, epoch=2, primary=primary,
                                      replicas=list(nodes))])


def test_addr_is_one_address_or_several_separated_by_commas() -> None:
    assert _protocol.addresses_of("h:1") == ("h:1",)
    assert _protocol.addresses_of(" a:1, b:2 ,,c:3") == ("a:1", "b:2", "c:3")
    with pytest.raises(ValueError, match="addr ' , ' names no address"):
        hourglass.Client(" , ")
    with hourglass.Client("a:1,b:2") as client:
        assert client.address == "a:1,b:2"
        assert client._router.current().address == "a:1"


def test_only_a_publish_whose_messages_all_have_ids_is_repeatable() -> None:
    assert _protocol.repeatable(_protocol.publish_request(
        [Message("t", id="1"), Message("t", id="2")]))
    assert not _protocol.repeatable(_protocol.publish_request(
        [Message("t", id="1"), Message("t")]))
    assert not _protocol.repeatable(broker_pb2.PublishRequest(
        messages=[broker_pb2.Message(topic="t")]))


def test_the_router_follows_redirects_and_the_primaries_of_maps() -> None:
    settings = _protocol.channel_settings("a:1,b:2", None, None,
                                          hourglass.Backoff())
    router = _cluster.Router(settings, grpc)
    a = router.current()
    assert a.address == "a:1"
    assert router.endpoint("a:1") is a  # One channel per address.

    # Only an UNAVAILABLE with the trailer is a redirect; one to the node
    # itself is not followed.
    assert router.follow(a, errors.NotFound(
        "x", trailing_metadata=[("hourglass-primary", "c:3")])) is None
    assert router.follow(a, errors.Unavailable("socket closed")) is None
    assert router.follow(a, redirect("a:1")) is None
    assert router.current() is a
    c = router.follow(a, redirect("c:3"))
    assert c is not None and c.address == "c:3" and router.current() is c

    # Asked for the map: where calls go, the node that failed, the
    # addresses given, then the nodes of the last map.
    assert router.candidates(a) == ["c:3", "a:1", "b:2"]
    d = router.learn(cluster_map("b", "d", {"b": "b:2", "d": "d:4"}), c)
    assert d is not None and d.address == "d:4" and router.current() is d
    assert router.candidates(d) == ["d:4", "a:1", "b:2"]

    # A map that names the node that failed (older than its death), or no
    # live primary (a failover under way), moves nothing.
    assert router.learn(cluster_map("b", "d", {"b": "b:2", "d": "d:4"}),
                        d) is None
    assert router.learn(cluster_map("b", "gone", {"b": "b:2"}), d) is None
    assert router.current() is d
    assert router.candidates(d) == ["d:4", "a:1", "b:2"]
    assert sorted(e.address for e in (a, c, d)) == ["a:1", "c:3", "d:4"]
    assert len(router.channels()) == 3
    for channel in router.channels():
        channel.close()


def test_a_new_stream_waits_for_its_node_only_outside_a_cluster() -> None:
    def router(addr: str) -> _cluster.Router:
        return _cluster.Router(_protocol.channel_settings(
            addr, None, None, hourglass.Backoff()), grpc)

    single = router("a:1")
    assert single.wait_for_ready() is True
    single.follow(single.current(), redirect("c:3"))
    assert single.wait_for_ready() is False
    mapped = router("a:1")
    mapped.learn(cluster_map("a", "a", {"a": "a:1"}), mapped.current())
    assert mapped.wait_for_ready() is False
    several = router("a:1,b:2")
    assert several.wait_for_ready() is False
    for r in (single, mapped, several):
        for channel in r.channels():
            channel.close()


# --- Against a real cluster --------------------------------------------------


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[Etcd]:
    """A real etcd on free loopback ports, stopped after the test."""
    binary = os.environ.get("HOURGLASS_ETCD") or "/usr/bin/etcd"
    if not os.access(binary, os.X_OK):
        pytest.fail(f"no etcd at {binary}: install etcd-server "
                    f"(deploy/setup.sh does) or set HOURGLASS_ETCD")
    server = Etcd(binary, tmp_path / "etcd")
    server.start()
    yield server
    server.stop()


class Cluster:
    """hourglassd nodes of one cluster on `etcd`, by id, each with its data
    in a directory of its own and `flags` beside the cluster's own (e.g.
    ``--shards=4``). One test drives it from one thread."""

    def __init__(self, hourglassd: str, etcd: Etcd, directory: Path,
                 flags: Sequence[str] = ()) -> None:
        self._hourglassd = hourglassd
        self._etcd = etcd
        self._directory = directory
        self._flags = list(flags)
        self.nodes: Dict[str, Daemon] = {}
        self.killed: Set[str] = set()

    def start(self, *node_ids: str) -> None:
        """Starts the nodes in order, each once it listens, sharing a peer
        secret (--peer_token_file)."""
        secret = self._directory / "peer-secret"
        if not secret.exists():
            write_private(secret, "python-test-peer-secret-0123456789abcdef\n")
        for node_id in node_ids:
            node = Daemon(self._hourglassd, self._directory / node_id,
                          [f"--etcd={self._etcd.endpoint}",
                           f"--node_id={node_id}", "--lease_ttl=2s",
                           f"--peer_token_file={secret}", *self._flags])
            self.nodes[node_id] = node
            node.start()

    def kill(self, node_id: str) -> None:
        """SIGKILL, as a crash."""
        self.killed.add(node_id)
        self.nodes[node_id].kill()

    def stats(self, node_id: str, topic: str = ""
              ) -> Tuple[grpc.StatusCode, Dict[str, str]]:
        """What `node_id` answers to Admin GetStats (of `topic`; "" for
        every topic): its code, and its trailing metadata."""
        channel = grpc.insecure_channel(self.nodes[node_id].address)
        with channel:
            stub = admin_pb2_grpc.AdminStub(channel)
            try:
                _, call = stub.GetStats.with_call(
                    admin_pb2.GetStatsRequest(topic=topic),
                    timeout=ASK_TIMEOUT)
                return call.code(), dict(call.trailing_metadata() or ())
            except grpc.RpcError as e:
                return e.code(), dict(e.trailing_metadata() or ())

    def cluster_map(self, node_id: str) -> Optional[cluster_pb2.ClusterMap]:
        """`node_id`'s cluster map; None if it does not answer."""
        channel = grpc.insecure_channel(self.nodes[node_id].address)
        with channel:
            stub = cluster_pb2_grpc.ClusterStub(channel)
            try:
                return stub.GetClusterMap(cluster_pb2.GetClusterMapRequest(),
                                          timeout=ASK_TIMEOUT)
            except grpc.RpcError:
                return None

    def await_primary(self, candidates: Sequence[str]) -> str:
        """The node among `candidates` that serves (GetStats OK), once one
        does."""
        serving: List[str] = []

        def one_serves() -> bool:
            serving[:] = [n for n in candidates
                          if self.stats(n)[0] == grpc.StatusCode.OK]
            return bool(serving)

        eventually(one_serves, f"one of {list(candidates)} serves")
        assert len(serving) == 1, f"two primaries: {serving}"
        return serving[0]

    def await_everyone_sees(self, node_ids: Sequence[str], epoch: int,
                            primary: str) -> None:
        """Waits until every node of `node_ids` has shard 0 at `epoch` with
        `primary` in its map."""
        def sees(node_id: str) -> bool:
            m = self.cluster_map(node_id)
            return (m is not None and len(m.shards) == 1
                    and m.shards[0].shard == 0 and m.shards[0].epoch == epoch
                    and m.shards[0].primary == primary)

        eventually(lambda: all(sees(n) for n in node_ids),
                   f"{list(node_ids)} see {primary} primary at epoch {epoch}")

    def await_shards(self, node_ids: Sequence[str], topics: Sequence[str]
                     ) -> List[str]:
        """Each shard's primary, by shard, once every node of `node_ids`
        sees len(topics) shards at epoch 1 with the same primaries and
        every node in each in-sync set, and each primary serves its shard's
        topic, topics[n] (GetStats answers other than UNAVAILABLE)."""
        primaries: List[str] = []

        def settled() -> bool:
            seen: Dict[int, str] = {}
            for node_id in node_ids:
                m = self.cluster_map(node_id)
                if m is None or len(m.shards) != len(topics):
                    return False
                for shard in m.shards:
                    if (shard.epoch != 1
                            or seen.setdefault(shard.shard,
                                               shard.primary) != shard.primary
                            or set(node_ids) - set(shard.isr)):
                        return False
            primaries[:] = [seen[n] for n in range(len(topics))]
            return all(p in self.nodes and self.stats(p, topics[n])[0]
                       != grpc.StatusCode.UNAVAILABLE
                       for n, p in enumerate(primaries))

        eventually(settled, f"{list(node_ids)} settle {len(topics)} shards")
        return primaries

    def stop(self) -> Dict[str, int]:
        """Stops every node started and not killed (SIGTERM); their exit
        codes."""
        return {node_id: node.stop() for node_id, node in self.nodes.items()
                if node_id not in self.killed and node.process is not None}


def running(nodes: Cluster, settle: Callable[[], None]) -> Iterator[Cluster]:
    """A fixture's body: starts nodes a, b and c, waits for `settle`,
    yields `nodes`; then stops them and fails the test unless each that was
    not killed exits 0."""
    try:
        nodes.start("a", "b", "c")
        settle()
    except BaseException:
        nodes.stop()
        raise
    yield nodes
    codes = nodes.stop()
    assert all(code == 0 for code in codes.values()), (
        f"exit codes {codes}:\n" + "\n".join(
            f"--- {n}:\n{nodes.nodes[n].output()}" for n in codes))


@pytest.fixture
def cluster(hourglassd: str, etcd: Etcd, tmp_path: Path) -> Iterator[Cluster]:
    """Nodes a, b and c of one shard (``--shards=1``), a primary at epoch 1
    as b and c see it too."""
    nodes = Cluster(hourglassd, etcd, tmp_path, ["--shards=1"])

    def settle() -> None:
        # The shard is made once all three joined, with the first id as
        # its primary.
        assert nodes.await_primary(["a", "b", "c"]) == "a"
        nodes.await_everyone_sees(["a", "b", "c"], 1, "a")

    yield from running(nodes, settle)


def test_calls_through_any_node_go_to_the_primary(cluster: Cluster) -> None:
    a, b, c = (cluster.nodes[n] for n in "abc")
    # What the client follows: b refuses, naming a and its epoch.
    code, trailers = cluster.stats("b")
    assert code == grpc.StatusCode.UNAVAILABLE
    assert (trailers.get("hourglass-primary"),
            trailers.get("hourglass-epoch")) == (a.address, "1")

    with hourglass.Client(b.address) as client:
        receipt = client.publish("orders", b"x", delay=timedelta(minutes=5),
                                 id="o1")
        assert (receipt.id, receipt.duplicate) == ("o1", False)
        assert client._router.current().address == a.address  # Later calls.
        assert stored(a, "orders", "o1")
        # The primary's answers keep their exact codes and messages.
        with pytest.raises(hourglass.NotFound) as not_found:
            client.cancel("orders", "nope")
        assert not_found.value.code == grpc.StatusCode.NOT_FOUND
        assert not_found.value.message == (
            'no scheduled message with id "nope" in topic "orders" '
            '(unknown, already due, or cancelled)')
        with pytest.raises(hourglass.InvalidArgument) as invalid:
            client.publish("a b", b"x", id="o9")
        assert invalid.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert invalid.value.message == 'message 0: topic "a b" has a space'

    # Admin calls through c: the package's one unary path (GetStats has no
    # method of its own), and Reschedule.
    with hourglass.Client(c.address) as client:
        stats = client._unary(lambda e: e.admin.GetStats,
                              admin_pb2.GetStatsRequest())
        assert [(t.topic, t.scheduled) for t in stats.topics] == [
            ("orders", 1)]
        moved = client.reschedule("orders", "o1",
                                  delay=timedelta(minutes=10))
        assert (moved.id, moved.deliver_at > receipt.deliver_at) == (
            "o1", True)
        client.cancel("orders", "o1")  # Refused by c; done by a, once.
        assert not stored(a, "orders", "o1")

    # publish_async through b: b answers the request on its PublishStream
    # with a's address, and the message goes again on a stream to a.
    with hourglass.Client(b.address) as client:
        streamed = client.publish_async("orders", b"s",
                                        delay=timedelta(minutes=5),
                                        id="o-stream").result(WAIT)
        assert (streamed.id, streamed.duplicate) == ("o-stream", False)
        assert sorted(client._publisher._streams) == sorted(
            [a.address, b.address])
        assert client._publisher.retries == 0
        assert stored(a, "orders", "o-stream")

    # A first subscription refused by c follows it to a.
    with hourglass.Client(c.address) as client:
        with client.subscribe("orders", "g") as sub:
            client.publish_many([hourglass.Message("orders", b"now",
                                                   id="o2")])
            [d] = take(sub)
            assert (d.id, d.attempt, d.payload) == ("o2", 1, b"now")
            assert d.ack() is True
            assert sub.reconnects == 0

    async def through_b_with_asyncio() -> None:
        async with hourglass.aio.Client(b.address) as client:
            streamed = await client.publish_async(
                "orders", b"s", delay=timedelta(minutes=5), id="o3-stream")
            assert (streamed.id, streamed.duplicate) == ("o3-stream", False)
            assert sorted(client._publisher._streams) == sorted(
                [a.address, b.address])
            async with await client.subscribe("orders", "aio") as sub:
                receipt = await client.publish("orders", b"aio", id="o3")
                assert (receipt.id, receipt.duplicate) == ("o3", False)
                d = await sub.receive(WAIT)
                assert d is not None and (d.id, d.attempt) == ("o3", 1)
                check_not_early([d])
                assert d.ack() is True
            assert client._router.current().address == a.address

    asyncio.run(through_b_with_asyncio())


def test_a_client_of_b_and_c_follows_the_primary_when_it_dies(
        cluster: Cluster) -> None:
    a, b, c = (cluster.nodes[n] for n in "abc")
    b_and_c = f"{b.address},{c.address}"

    # One coroutine, so that an asyncio client lives through the failover
    # beside the threaded ones. Threaded calls block the loop: its
    # subscription catches up at the next await.
    async def scenario() -> None:
        with hourglass.Client(b_and_c) as client, \
                hourglass.Client(b_and_c) as without_ids:
            async with hourglass.aio.Client(b_and_c) as aio_client:
                with client.subscribe("orders", "g",
                                      ack_timeout=timedelta(seconds=1)) as sub:
                    # Its acks cannot go out while threaded calls block the
                    # loop (seconds, while "before" comes due): a short ack
                    # timeout would redeliver what it already holds.
                    async with await aio_client.subscribe(
                            "orders", "aio",
                            ack_timeout=timedelta(seconds=30)) as aio_sub:
                        await killed_and_replaced(client, sub, without_ids,
                                                  aio_client, aio_sub)

    async def killed_and_replaced(client: hourglass.Client,
                                  sub: hourglass.Subscription,
                                  without_ids: hourglass.Client,
                                  aio_client: hourglass.aio.Client,
                                  aio_sub: hourglass.aio.Subscription
                                  ) -> None:
        before = client.publish("orders", b"before",
                                delay=timedelta(seconds=3), id="before")
        assert (before.id, before.duplicate) == ("before", False)
        # A client with a PublishStream to a (b sent its first message
        # there), which breaks when a dies.
        streaming = hourglass.Client(b_and_c)
        streaming.publish_async("orders", b"x", delay=timedelta(hours=1),
                                id="stream-to-a").result(WAIT)
        # Each client was sent to a by b.
        without_ids._unary(lambda e: e.admin.GetStats,
                           admin_pb2.GetStatsRequest())
        await aio_client._unary(lambda e: e.admin.GetStats,
                                admin_pb2.GetStatsRequest())
        for router in (client._router, without_ids._router,
                       aio_client._router, streaming._router):
            assert router.current().address == a.address

        cluster.kill("a")
        # a's lease ends within 2 s; the controller promotes b or c.
        primary = cluster.await_primary(["b", "c"])
        cluster.await_everyone_sees(["b", "c"], 2, primary)
        new_primary = cluster.nodes[primary].address

        # a does not answer: a message with an id on a new stream to a
        # fails at once; the client asks b and c where the primary is and
        # sends it there. One without an id fails.
        with streaming:
            streamed = streaming.publish_async(
                "orders", b"streamed", id="after-stream").result(WAIT)
            assert (streamed.id, streamed.duplicate) == (
                "after-stream", False)
            assert streaming._publisher.retries == 1
            assert streaming._publisher._streams.keys() == {
                a.address, b.address, new_primary}
            assert streaming._router.current().address == new_primary
        error = without_ids.publish_async("other", b"y").exception(WAIT)
        assert isinstance(error, hourglass.Unavailable)
        assert without_ids._publisher.retries == 0
        # So does a publish call: each client asks b and c where the
        # primary is, and repeats a publish there if it has an id ...
        after = client.publish("orders", b"after", id="after")
        assert (after.id, after.duplicate) == ("after", False)
        receipt = await aio_client.publish("orders", b"aio", id="after-aio")
        assert (receipt.id, receipt.duplicate) == ("after-aio", False)
        # ... but not one without (its outcome on a is unknown): that one
        # fails, and the next call goes to the new primary.
        with pytest.raises(hourglass.Unavailable) as unavailable:
            without_ids.publish("other", b"x")
        assert unavailable.value.code == grpc.StatusCode.UNAVAILABLE
        for router in (client._router, without_ids._router,
                       aio_client._router):
            assert router.current().address == new_primary
        stats = without_ids._unary(lambda e: e.admin.GetStats,
                                   admin_pb2.GetStatsRequest())
        assert "other" not in [t.topic for t in stats.topics]
        assert without_ids.publish("other", b"x").id.startswith("hg-")

        # The subscriber found it too: each message once, never early,
        # "before" at its due time. Each is acked as it comes: the ack
        # timeout is 1 s, and "before" comes due later than the others.
        got: List[hourglass.Delivery] = []
        deadline = time.monotonic() + WAIT
        while len(got) < 4:
            d = sub.receive(max(0.0, deadline - time.monotonic()))
            assert d is not None, f"within {WAIT} s: {ids(got)}"
            assert sub.ack([d]) == 1
            got.append(d)
        check_not_early(got)
        assert sorted(ids(got)) == ["after-aio@1", "after-stream@1",
                                    "after@1", "before@1"]
        assert {d.id: d.payload for d in got} == {
            "before": b"before", "after": b"after", "after-aio": b"aio",
            "after-stream": b"streamed"}
        assert [d.deliver_at for d in got if d.id == "before"] == [
            before.deliver_at]
        # So did the asyncio subscriber, of its own group.
        aio_got: List[hourglass.Delivery] = []
        deadline = time.monotonic() + WAIT
        while len(aio_got) < 4:
            d = await aio_sub.receive(max(0.0, deadline - time.monotonic()))
            assert d is not None, f"within {WAIT} s: {ids(aio_got)}"
            assert aio_sub.ack([d]) == 1
            aio_got.append(d)
        check_not_early(aio_got)
        assert sorted(ids(aio_got)) == ["after-aio@1", "after-stream@1",
                                        "after@1", "before@1"]

        # From here on the loop must run (to send the asyncio acks, and to
        # read what may come): the threaded waits go to threads.
        node = cluster.nodes[primary]
        await asyncio.to_thread(
            eventually, lambda: not any(
                stored(node, "orders", i)
                for i in ("before", "after", "after-aio", "after-stream")),
            "the acks took")
        # Unacked, any of the threaded subscriber's would come again after
        # its 1 s ack timeout; the acks of both took (nothing is stored).
        assert await asyncio.gather(asyncio.to_thread(sub.receive, 2.0),
                                    aio_sub.receive(2.0)) == [None, None]
        assert sub.reconnects >= 1 and aio_sub.reconnects >= 1

    asyncio.run(scenario())


# --- Many shards --------------------------------------------------------------

#: The shard count of the ``four_shards`` cluster.
SHARDS = 4


def topic_of_shard(shard: int) -> str:
    """The first topic orders-<i> in `shard` of SHARDS."""
    return next(t for t in (f"orders-{i}" for i in range(100))
                if shard_of(t, SHARDS) == shard)


@pytest.fixture
def four_shards(hourglassd: str, etcd: Etcd,
                tmp_path: Path) -> Iterator[Tuple[Cluster, List[str]]]:
    """Nodes a, b and c holding four shards (``--shards=4``), each shard's
    primary serving; with those primaries' ids, by shard."""
    nodes = Cluster(hourglassd, etcd, tmp_path, ["--shards=4"])
    primaries: List[str] = []

    def settle() -> None:
        primaries[:] = nodes.await_shards(
            ["a", "b", "c"], [topic_of_shard(n) for n in range(SHARDS)])

    for running_nodes in running(nodes, settle):
        yield running_nodes, primaries


def test_a_client_of_one_node_routes_by_shard_and_splits_batches(
        four_shards: Tuple[Cluster, List[str]]) -> None:
    cluster, primary = four_shards
    topics = [topic_of_shard(n) for n in range(SHARDS)]
    at = [cluster.nodes[primary[n]].address for n in range(SHARDS)]
    a = cluster.nodes["a"]
    # Eight messages over the four shards, each shard's apart in the batch.
    shard_of_message = [(3 * k) % SHARDS for k in range(8)]

    def batch(prefix: str) -> List[Message]:
        return [Message(topics[n], b"x", delay=timedelta(hours=1),
                        id=f"{prefix}-{k}")
                for k, n in enumerate(shard_of_message)]

    def get(client: hourglass.Client, topic: str, id_: str
            ) -> admin_pb2.MessageInfo:
        return client._unary(lambda e: e.admin.GetMessage,
                             admin_pb2.GetMessageRequest(topic=topic, id=id_))

    # A client given a knows no shards: its batch goes whole to a, which
    # refuses it (or redirects it, then the primary does), giving the
    # count; the parts go to a, and on to their primaries.
    with hourglass.Client(a.address) as client:
        receipts = client.publish_many(batch("sync"))
        assert [(r.id, r.duplicate) for r in receipts] == [
            (f"sync-{k}", False) for k in range(8)]
        assert client._router.shard_count() == SHARDS
        assert [client._router.route(t).address for t in topics] == at
        assert client._router.current().address == a.address
        for k, n in enumerate(shard_of_message):
            assert stored(cluster.nodes[primary[n]], topics[n], f"sync-{k}")
            # Admin calls about the topic, and the cancel, reach the
            # shard's primary.
            info = get(client, topics[n], f"sync-{k}")
            assert (info.id, info.topic) == (f"sync-{k}", topics[n])
            client.cancel(topics[n], f"sync-{k}")
            with pytest.raises(hourglass.NotFound):
                get(client, topics[n], f"sync-{k}")

        # Knowing the shards, a part that fails fails alone.
        part = [Message(topics[n], b"x" * (1 << 20) + b"x" * (n == 1),
                        delay=timedelta(hours=1), id=f"part-{n}")
                for n in range(3)]
        with pytest.raises(hourglass.InvalidArgument) as failed:
            client.publish_many(part)
        assert failed.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert failed.value.message == (
            "shard 1 (message 1) failed: message 1: payload is 1048577 "
            "bytes; the limit is 1048576 (--max_payload_bytes); the batch "
            "spans shards 0, 1, 2 and is all-or-nothing within each shard "
            "only: messages 0, 2 were stored")
        assert [stored(cluster.nodes[primary[n]], topics[n], f"part-{n}")
                for n in range(3)] == [True, False, True]

        # A subscription goes to its topic's primary.
        n = next(n for n in range(SHARDS) if primary[n] != "a")
        with client.subscribe(topics[n], "g") as sub:
            assert sub._stream is not None
            assert sub._stream.endpoint.address == at[n]
            client.publish(topics[n], b"now", id="now")
            [d] = take(sub)
            assert (d.id, d.topic, d.attempt) == ("now", topics[n], 1)
            assert d.ack() is True

    # publish_async from a client given a: a answers each request of
    # another shard with its primary and the shard count; the message goes
    # again on a stream to that primary, where later ones of the shard go.
    with hourglass.Client(a.address) as client:
        futures = [client.publish_async(topics[n], b"s",
                                        delay=timedelta(hours=1),
                                        id=f"stream-{n}")
                   for n in range(SHARDS)]
        assert [f.result(WAIT).id for f in futures] == [
            f"stream-{n}" for n in range(SHARDS)]
        assert client._router.shard_count() == SHARDS
        assert client._publisher._streams.keys() == {a.address, *at}
        assert client._publisher.retries == 0
        assert all(stored(cluster.nodes[primary[n]], topics[n],
                          f"stream-{n}") for n in range(SHARDS))
        second = [client.publish_async(topics[n], b"s",
                                       delay=timedelta(hours=1),
                                       id=f"stream-{n}")
                  for n in range(SHARDS)]
        assert [f.result(WAIT).duplicate for f in second] == [True] * SHARDS

    async def with_asyncio() -> None:
        async with hourglass.aio.Client(a.address) as client:
            streamed = await asyncio.gather(*(
                client.publish_async(topics[n], b"s",
                                     delay=timedelta(hours=1),
                                     id=f"aio-stream-{n}")
                for n in range(SHARDS)))
            assert [(r.id, r.duplicate) for r in streamed] == [
                (f"aio-stream-{n}", False) for n in range(SHARDS)]
            assert client._publisher._streams.keys() == {a.address, *at}
            receipts = await client.publish_many(batch("aio"))
            assert [(r.id, r.duplicate) for r in receipts] == [
                (f"aio-{k}", False) for k in range(8)]
            assert [client._router.route(t).address for t in topics] == at
            for k, n in enumerate(shard_of_message):
                info = await client._unary(
                    lambda e: e.admin.GetMessage,
                    admin_pb2.GetMessageRequest(topic=topics[n],
                                                id=f"aio-{k}"))
                assert (info.id, info.topic) == (f"aio-{k}", topics[n])
                await client.cancel(topics[n], f"aio-{k}")

    asyncio.run(with_asyncio())
    assert not any(stored(cluster.nodes[primary[n]], topics[n], f"aio-{k}")
                   for k, n in enumerate(shard_of_message))
    assert all(stored(cluster.nodes[primary[n]], topics[n],
                      f"aio-stream-{n}") for n in range(SHARDS))
