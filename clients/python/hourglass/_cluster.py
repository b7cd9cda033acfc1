"""Cluster mode, for both clients: which node a client's calls go to.

A cluster (``hourglassd --etcd``) keeps its shard on three nodes, and only the
shard's primary serves. Every other node answers each Broker and Admin call
with UNAVAILABLE and the trailing metadata ``hourglass-primary: host:port``
(and ``hourglass-epoch: n``), having done nothing; a node that died answers
nothing at all. Every node of a cluster serves ``Cluster.GetClusterMap``; a
single hourglassd answers it UNIMPLEMENTED.

So a client keeps one gRPC channel per node address it has used (an
``Endpoint``), all made with the same credentials and options, and a
``Router`` that says which one calls go to now:

- A call refused with the ``hourglass-primary`` trailer is repeated at once
  at that address, which later calls use too (``Router.follow``).
- A call that failed UNAVAILABLE without it (the node died, or knows no
  primary yet) makes the client ask the nodes it knows for the cluster map,
  the current one first, then those of the address it was given, then those
  of the last map read, and switch to the primary of shard 0 that a map
  names (``Router.candidates``, ``Router.learn``). The call is repeated there
  only if repeating it is safe (its outcome on the node that did not answer
  is unknown): a publish whose messages all have ids.
- A call is redirected at most ``MAX_REDIRECTS`` times: a longer chain is a
  cluster changing primaries, and the caller's error says UNAVAILABLE.

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

from hourglass import errors
from hourglass._protocol import ChannelSettings
from hourglass.v1 import (admin_pb2_grpc, broker_pb2_grpc, cluster_pb2,
                          cluster_pb2_grpc)

_log = logging.getLogger("hourglass")

#: Trailing metadata of an UNAVAILABLE from a node that is not the primary:
#: the primary's address, host:port (api/redirect.h). Its companion,
#: ``hourglass-epoch``, is not needed: a node named that is no longer the
#: primary redirects in turn, or does not answer and the maps are read.
PRIMARY_TRAILER = "hourglass-primary"
#: Redirects (to a named primary, or to one a cluster map names) of one
#: call, and of opening a subscription, after its first attempt.
MAX_REDIRECTS = 3
#: How long each node may take to answer GetClusterMap, in seconds.
REDISCOVER_TIMEOUT = 2.0
#: The shard this version of the cluster runs: every topic is in it.
SHARD = 0


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """One node's address, with the gRPC channel and the stubs to it.

    Attributes:
        address: host:port, as given or as the cluster named it.
        channel: A ``grpc.Channel``, or a ``grpc.aio.Channel`` in asyncio.
        broker, admin, cluster: The stubs of the three services on it.
    """

    address: str
    channel: Any
    broker: broker_pb2_grpc.BrokerStub
    admin: admin_pb2_grpc.AdminStub
    cluster: cluster_pb2_grpc.ClusterStub


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
                    cluster_pb2_grpc.ClusterStub(channel))


def redirect_address(error: errors.Error) -> Optional[str]:
    """The primary a node sent the call to: the ``hourglass-primary``
    trailer of an UNAVAILABLE; None for any other error."""
    if error.code != grpc.StatusCode.UNAVAILABLE:
        return None
    for key, value in error.trailing_metadata:
        if key == PRIMARY_TRAILER and value:
            return value
    return None


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
    """Which node a client's calls go to, and the channels to the nodes.

    Starts at the first address of ``settings.addresses``; moves when a node
    redirects (``follow``) or a cluster map names another primary
    (``learn``). Keeps every endpoint it made until ``close``: few, the
    nodes of one cluster; a call or stream holds the endpoint it started on.

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
        self._current = self._endpoints[first]
        # The addresses of the last map read; the given ones before any.
        self._known: List[str] = list(settings.addresses)
        # Whether the client is known to talk to a cluster: several
        # addresses, a redirect, or a map read.
        self._cluster = len(settings.addresses) > 1

    def current(self) -> Endpoint:
        """Where calls go now."""
        with self._lock:
            return self._current

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

    def follow(self, failed: Endpoint, error: errors.Error
               ) -> Optional[Endpoint]:
        """After a call on `failed` ended with `error`: if the node named
        the primary (``redirect_address``), later calls go there.

        Returns:
            The primary's endpoint, to repeat the call on at once; None if
            `error` names no primary, or names `failed` itself.
        """
        address = redirect_address(error)
        if address is None or address == failed.address:
            return None
        with self._lock:
            self._cluster = True
            return self._switch_locked(address, f"{failed.address} said so")

    def candidates(self, failed: Endpoint) -> List[str]:
        """The nodes to ask for the cluster map after `failed` did not
        answer, in order, each once: where calls go now (another call may
        have moved them from `failed` already), then the addresses the
        client was given, then those of the last map read."""
        with self._lock:
            ordered = [self._current.address, failed.address,
                       *self._settings.addresses, *self._known]
        return list(dict.fromkeys(ordered))

    def learn(self, cluster_map: cluster_pb2.ClusterMap, failed: Endpoint
              ) -> Optional[Endpoint]:
        """Takes in a map a node answered: its nodes become the ones to ask
        next time, and later calls go to the primary of shard 0 it names,
        unless that is `failed` (the node that did not answer: the map is
        older than its death, so another node may know better).

        Returns:
            The primary's endpoint, to go on there; None if the map names
            no live primary (a failover is under way) or names `failed`.
        """
        nodes = {node.id: node.address for node in cluster_map.nodes
                 if node.address}
        primary = None
        for shard in cluster_map.shards:
            if shard.shard == SHARD:
                primary = nodes.get(shard.primary)
        with self._lock:
            self._cluster = True
            if nodes:
                self._known = list(nodes.values())
            if primary is None or primary == failed.address:
                return None
            return self._switch_locked(
                primary, f"the cluster map of {cluster_map.node or '?'} "
                f"says so")

    def channels(self) -> List[Any]:
        """The channel of every endpoint made, to close."""
        with self._lock:
            return [e.channel for e in self._endpoints.values()]

    def _switch_locked(self, address: str, why: str) -> Endpoint:
        """Sends later calls to `address`; its endpoint. REQUIRES: _lock."""
        if self._current.address != address:
            _log.info("calls go to %s, the primary, now: %s", address, why)
            self._current = self._endpoint_locked(address)
        return self._current

    def _endpoint_locked(self, address: str) -> Endpoint:
        """The endpoint of `address`, made now if new. REQUIRES: _lock."""
        endpoint = self._endpoints.get(address)
        if endpoint is None:
            endpoint = make_endpoint(self._settings, address, self._channels)
            self._endpoints[address] = endpoint
        return endpoint
