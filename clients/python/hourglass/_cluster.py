"""Cluster mode, for both clients: which node a client's calls go to.

A cluster (``hourglassd --etcd``) keeps each of its shards (``--shards``) on
three nodes, and only the shard's primary serves the shard's topics. Every
other node answers a Broker or Admin call about such a topic with
UNAVAILABLE and the trailing metadata ``hourglass-primary: host:port``
(and ``hourglass-epoch: n``, ``hourglass-shards: N``), having done nothing;
a node that died answers nothing at all. Calls about no topic (stats of all
topics) are answered by any node. Every node of a cluster serves
``Cluster.GetClusterMap``, which has the shard count and each shard's
primary; a single hourglassd answers it UNIMPLEMENTED.

So a client keeps one gRPC channel per node address it has used (an
``Endpoint``), all made with the same credentials and options, and a
``Router`` that says which one each call goes to now:

- The shard count, once a node gave it (the ``hourglass-shards`` trailer of
  any refusal, or a map), is kept; from then on, with more than one shard,
  calls about a topic go to the primary of its shard
  (``hourglass.shards.shard_of``) once the client knows it, and to the
  current node before. Calls about no topic, and every call before the
  count is known, go to the current node (``Router.route``).
- A call refused with the ``hourglass-primary`` trailer is repeated at once
  at that address, which later calls about the same shard use too
  (``Router.follow``).
- A call that failed UNAVAILABLE without it (the node died, or knows no
  primary yet) makes the client ask the nodes it knows for the cluster map,
  where the call would go first, then the node that failed, then the
  addresses it was given, then those of the last map read; a map sets every
  shard's primary, and the current node to shard 0's
  (``Router.candidates``, ``Router.learn``). The call is repeated at its
  shard's primary only if repeating it is safe (its outcome on the node
  that did not answer is unknown): a publish whose messages all have ids.
- A call is redirected at most ``MAX_REDIRECTS`` times: a longer chain is a
  cluster changing primaries, and the caller's error says UNAVAILABLE.

A publish of messages in several shards is split by shard
(``hourglass._split``).

This module decides; the clients (``hourglass.client``, ``hourglass.aio``)
make the calls, each in its own way of waiting, as with ``_protocol``.

Mirrors the C++ client library (client/channel.h, and
client/internal/channel_state.h for the limits).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from typing import Any, Dict, List, Optional

import grpc

from hourglass import errors, shards
from hourglass._protocol import ChannelSettings
from hourglass.v1 import (admin_pb2_grpc, broker_pb2, broker_pb2_grpc,
                          cluster_pb2, cluster_pb2_grpc,
                          recurrences_pb2_grpc)

_log = logging.getLogger("hourglass")

#: Trailing metadata of an UNAVAILABLE from a node that is not the primary:
#: the primary's address, host:port (api/redirect.h). Its companion,
#: ``hourglass-epoch``, is not needed: a node named that is no longer the
#: primary redirects in turn, or does not answer and the maps are read.
PRIMARY_TRAILER = "hourglass-primary"
#: Trailing metadata, with any code, of a refusal that depends on the
#: shard: the cluster's shard count, in decimal (api/redirect.h).
SHARDS_TRAILER = "hourglass-shards"
#: The most shards a cluster has (hourglassd's --shards): a larger count
#: from a server is taken as none, since the client sizes a table by it.
MAX_SHARDS = 4096
#: Redirects (to a named primary, or to one a cluster map names) of one
#: call, and of opening a subscription, after its first attempt.
MAX_REDIRECTS = 3
#: How long each node may take to answer GetClusterMap, in seconds.
REDISCOVER_TIMEOUT = 2.0


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """One node's address, with the gRPC channel and the stubs to it.

    Attributes:
        address: host:port, as given or as the cluster named it.
        channel: A ``grpc.Channel``, or a ``grpc.aio.Channel`` in asyncio.
        broker, admin, cluster, recurrences: The stubs of the four
            services on it.
    """

    address: str
    channel: Any
    broker: broker_pb2_grpc.BrokerStub
    admin: admin_pb2_grpc.AdminStub
    cluster: cluster_pb2_grpc.ClusterStub
    recurrences: recurrences_pb2_grpc.RecurrencesStub


def make_endpoint(settings: ChannelSettings, address: str,
                  channels: Any) -> Endpoint:
    """An endpoint to `address` made as `settings` say: the one place a
    client's channels are made, for the nodes a cluster names too.

    Args:
        channels: The module whose ``insecure_channel`` and
            ``secure_channel`` make the channel: ``grpc``, or ``grpc.aio``.
    """
    if settings.credentials is None:
        channel = channels.insecure_channel(address, options=settings.options)
    else:
        channel = channels.secure_channel(address, settings.credentials,
                                          options=settings.options)
    return Endpoint(address, channel, broker_pb2_grpc.BrokerStub(channel),
                    admin_pb2_grpc.AdminStub(channel),
                    cluster_pb2_grpc.ClusterStub(channel),
                    recurrences_pb2_grpc.RecurrencesStub(channel))


def redirect_address(error: errors.Error) -> Optional[str]:
    """The primary a node sent the call to: the ``hourglass-primary``
    trailer of an UNAVAILABLE; None for any other error."""
    if error.code != grpc.StatusCode.UNAVAILABLE:
        return None
    for key, value in error.trailing_metadata:
        if key == PRIMARY_TRAILER and value:
            return value
    return None


def shard_count_of(error: errors.Error) -> int:
    """The cluster's shard count that a refusal gave (the
    ``hourglass-shards`` trailer, with any code); 0 if it gave none."""
    for key, value in error.trailing_metadata:
        if key == SHARDS_TRAILER:
            try:
                count = int(value)
            except ValueError:
                return 0
            return count if 0 < count <= MAX_SHARDS else 0
    return 0


def topic_of(request: Any) -> str:
    """The topic a request is about, which says where it goes in a cluster
    of many shards: a PublishRequest's first message's (a request goes to
    one shard), the ``topic`` field of others (Cancel, Reschedule, Admin
    calls about a topic); "" for none (a call about no topic, or about
    every topic)."""
    if isinstance(request, broker_pb2.PublishRequest):
        return request.messages[0].topic if request.messages else ""
    topic = getattr(request, "topic", "")
    return topic if isinstance(topic, str) else ""


def unavailable(error: Optional[errors.Error]) -> bool:
    """Whether a call or stream ended with UNAVAILABLE: the end after which
    a client looks for the primary (``follow``, then a cluster map)."""
    return error is not None and error.code == grpc.StatusCode.UNAVAILABLE


def not_a_cluster(rpc_error: grpc.RpcError) -> bool:
    """Whether a failed GetClusterMap says the node is a single hourglassd
    (UNIMPLEMENTED): then no node has a map to ask for."""
    code = getattr(rpc_error, "code", None)
    return callable(code) and code() == grpc.StatusCode.UNIMPLEMENTED


def map_request() -> cluster_pb2.GetClusterMapRequest:
    """The request of Cluster.GetClusterMap."""
    return cluster_pb2.GetClusterMapRequest()


def deadline(timeout: Optional[float]) -> Optional[float]:
    """The time.monotonic() at which `timeout` seconds from now end; None
    for none."""
    return None if timeout is None else time.monotonic() + timeout


def remaining(deadline_: Optional[float]) -> Optional[float]:
    """Seconds left until `deadline_` (0 once past); None for none."""
    if deadline_ is None:
        return None
    return max(0.0, deadline_ - time.monotonic())


def map_timeout(deadline_: Optional[float]) -> float:
    """How long one node may take to answer GetClusterMap within the
    deadline of the call that asks (0: no time left)."""
    left = remaining(deadline_)
    return REDISCOVER_TIMEOUT if left is None else min(REDISCOVER_TIMEOUT,
                                                       left)


class Router:
    """Which node each call of a client goes to, and the channels to the
    nodes.

    Keeps the current node, where calls about no topic go, and, once a node
    gave the cluster's shard count and it is more than one, the primary of
    each shard it has learned, where calls about the shard's topics go
    (``route``). Starts at the first address of ``settings.addresses``;
    moves a route when a node redirects (``follow``) or a cluster map names
    other primaries (``learn``). Keeps every endpoint it made until
    ``close``: few, the nodes of one cluster; a call or stream holds the
    endpoint it started on.

    Thread-safe; never blocks (the clients make the calls). In asyncio it is
    used from the event loop's thread only.
    """

    def __init__(self, settings: ChannelSettings, channels: Any) -> None:
        """Makes the endpoint of the first address; connects nothing.

        Args:
            channels: ``grpc`` or ``grpc.aio`` (see ``make_endpoint``).
        """
        self._settings = settings
        self._channels = channels
        self._lock = threading.Lock()
        # Protected by _lock.
        self._endpoints: Dict[str, Endpoint] = {}
        first = settings.addresses[0]
        self._endpoints[first] = make_endpoint(settings, first, channels)
        # Where calls about no topic go, and every call while the shard
        # count is unknown or 1.
        self._current = self._endpoints[first]
        # The cluster's shard count once a node gave it; 0 before.
        self._shard_count = 0
        # With more than one shard: the primary of each shard, by shard,
        # once known (None: calls about its topics go to _current).
        self._shards: List[Optional[Endpoint]] = []
        # The addresses of the last map read; the given ones before any.
        self._known: List[str] = list(settings.addresses)
        # Whether the client is known to talk to a cluster: several
        # addresses, a redirect, or a map read.
        self._cluster = len(settings.addresses) > 1

    def current(self) -> Endpoint:
        """Where calls about no topic go now (every call, while the client
        knows no shard count above 1)."""
        with self._lock:
            return self._current

    def route(self, topic: str = "") -> Endpoint:
        """Where calls about `topic` go now: the primary of its shard when
        the client knows the cluster has several shards and knows that
        primary; else, and for calls about no topic (""), the current
        node."""
        with self._lock:
            slot = self._slot_locked(topic)
            endpoint = self._shards[slot] if slot is not None else None
            return endpoint or self._current

    def shard_count(self) -> int:
        """The cluster's shard count once a node gave it; 0 before (and for
        a single hourglassd)."""
        with self._lock:
            return self._shard_count

    def wait_for_ready(self) -> bool:
        """Whether a new subscribe stream after a broken one should wait
        for its node to be reachable (gRPC's ``wait_for_ready``): yes for a
        single broker, which comes back where it was; no for a cluster,
        where waiting for a dead node would never end: the stream fails at
        once instead, and the nodes are asked where the primary is."""
        with self._lock:
            return not self._cluster

    def endpoint(self, address: str) -> Endpoint:
        """The endpoint of `address`, made now if new."""
        with self._lock:
            return self._endpoint_locked(address)

    def follow(self, failed: Endpoint, error: errors.Error, topic: str = ""
               ) -> Optional[Endpoint]:
        """After a call about `topic` on `failed` ended with `error` (any
        code): keeps the shard count it gave (``shard_count_of``), and if
        the node named the primary (``redirect_address``), later calls
        about `topic`'s shard go there (about no topic: the current node
        moves).

        Returns:
            The primary's endpoint, to repeat the call on at once; None if
            `error` names no primary, or names `failed` itself.
        """
        address = redirect_address(error)
        with self._lock:
            self._learn_count_locked(shard_count_of(error))
            if address is None or address == failed.address:
                return None
            self._cluster = True
            return self._switch_locked(self._slot_locked(topic), address,
                                       f"{failed.address} said so")

    def candidates(self, failed: Endpoint, topic: str = "") -> List[str]:
        """The nodes to ask for the cluster map after a call about `topic`
        on `failed` did not answer, in order, each once: where calls about
        `topic` go now (another call may have moved them from `failed`
        already), then `failed`, then the addresses the client was given,
        then those of the last map read."""
        route = self.route(topic)
        with self._lock:
            ordered = [route.address, failed.address,
                       *self._settings.addresses, *self._known]
        return list(dict.fromkeys(ordered))

    def learn(self, cluster_map: cluster_pb2.ClusterMap, failed: Endpoint,
              topic: str = "") -> Optional[Endpoint]:
        """Takes in a map a node answered: its shard count, its nodes (the
        ones to ask next time), and each shard's live primary: later calls
        about the shard's topics go there, and calls about no topic to
        shard 0's. A primary that is `failed` (the node that did not
        answer: the map is older than its death, so another node may know
        better) is not taken.

        Returns:
            Where calls about `topic` go now, to go on there; None if that
            is still `failed` (the map names no live primary of the shard,
            a failover under way, or names `failed`).
        """
        nodes = {node.id: node.address for node in cluster_map.nodes
                 if node.address}
        why = f"the cluster map of {cluster_map.node or '?'} says so"
        with self._lock:
            self._cluster = True
            if nodes:
                self._known = list(nodes.values())
            self._learn_count_locked(cluster_map.shard_count)
            for shard in cluster_map.shards:
                primary = nodes.get(shard.primary)
                if primary is None or primary == failed.address:
                    continue
                if shard.shard == 0:
                    self._switch_locked(None, primary, why)
                if shard.shard < len(self._shards):
                    self._switch_locked(shard.shard, primary, why)
            slot = self._slot_locked(topic)
            route = (self._shards[slot] if slot is not None else None
                     ) or self._current
        return None if route.address == failed.address else route

    def channels(self) -> List[Any]:
        """The channel of every endpoint made, to close."""
        with self._lock:
            return [e.channel for e in self._endpoints.values()]

    def _slot_locked(self, topic: str) -> Optional[int]:
        """The shard whose route calls about `topic` take; None for the
        current node's (no topic, or no shard count above 1 known).
        REQUIRES: _lock."""
        if not topic or self._shard_count <= 1:
            return None
        return shards.shard_of(topic, self._shard_count)

    def _learn_count_locked(self, count: int) -> None:
        """Keeps the shard count a node gave (0: none); a new count forgets
        the shards' primaries. REQUIRES: _lock."""
        if count <= 0 or count > MAX_SHARDS or count == self._shard_count:
            return
        _log.info("the cluster has %d shards", count)
        self._shard_count = count
        self._shards = [None] * count if count > 1 else []

    def _switch_locked(self, slot: Optional[int], address: str, why: str
                       ) -> Endpoint:
        """Sends later calls of route `slot` (a shard; None: the current
        node) to `address`; its endpoint. REQUIRES: _lock."""
        endpoint = self._endpoint_locked(address)
        if slot is None:
            if self._current is not endpoint:
                _log.info("calls go to %s, the primary, now: %s", address,
                          why)
                self._current = endpoint
        elif self._shards[slot] is not endpoint:
            _log.info("calls about shard %d go to %s, its primary, now: %s",
                      slot, address, why)
            self._shards[slot] = endpoint
        return endpoint

    def _endpoint_locked(self, address: str) -> Endpoint:
        """The endpoint of `address`, made now if new. REQUIRES: _lock."""
        endpoint = self._endpoints.get(address)
        if endpoint is None:
            endpoint = make_endpoint(self._settings, address, self._channels)
            self._endpoints[address] = endpoint
        return endpoint
