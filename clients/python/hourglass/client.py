"""The Hourglass client for threaded code: ``hourglass.Client``.

``hourglass.aio`` has the same client for asyncio. Both build their requests,
read their answers and map their errors through ``hourglass._protocol``; this
module only adds how a thread waits.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import weakref
from datetime import datetime, timedelta
from typing import (Any, Callable, Generic, Iterable, Iterator, List, Mapping,
                    Optional, TypeVar)

import grpc

from hourglass import _cluster, _protocol, _split, errors
from hourglass._cluster import Endpoint
from hourglass._protocol import (DEFAULT_CLOSE_TIMEOUT, DEFAULT_TIMEOUT,
                                 TlsArg)
from hourglass.types import Backoff, Delivery, Message, Payload, Receipt
from hourglass.v1 import broker_pb2

_log = logging.getLogger("hourglass")

T = TypeVar("T")
Request = broker_pb2.SubscribeRequest

# Queued after a subscription's last deliveries.
_END = object()


class Client:
    """A connection to one hourglassd, or to a cluster of them: publish,
    cancel, reschedule, consume.

    One gRPC channel carries every call and subscription of the client to a
    broker; gRPC connects it on first use and reconnects it after it breaks.
    Unary calls (``publish``, ``publish_many``, ``cancel``, ``reschedule``)
    each have a deadline of ``timeout`` and are not retried: after
    ``Unavailable`` or ``DeadlineExceeded`` a publish's outcome is unknown,
    so retry it yourself with ids set (the broker answers an id still
    pending with its first receipt, ``duplicate`` set, and stores nothing).
    Subscriptions reconnect by themselves (see ``subscribe``).

    Cluster mode (``hourglass._cluster``): the client keeps one channel per
    node it has used, all with the same settings, and sends each call about
    a topic to its shard's primary once it knows it (before, to the node
    calls go to). A call that a node refused because it is not the primary
    is repeated at once at the primary it named, where later calls about
    that shard go. When the node a call went to does not answer
    (UNAVAILABLE), the client asks the nodes it knows for the cluster map
    and moves to the primaries it names; the failed call is repeated there
    only if that is safe (a publish whose messages all have ids), else it
    raises ``Unavailable`` and the next call goes to the new primary. A
    call moves at most 3 times, all within its one deadline.

    Thread-safe. ``close`` (or leaving a ``with`` block) closes the
    subscriptions and the channels; nothing may be called afterwards.

    Every call here is made through ``_unary`` or a subscription's stream
    (``_Subscription._start``): the two places that choose the node.
    """

    def __init__(self, addr: str, token: Optional[str] = None,
                 tls: TlsArg = None, *,
                 timeout: Optional[float] = DEFAULT_TIMEOUT,
                 backoff: Backoff = Backoff()) -> None:
        """Creates the client; it connects on first use.

        Args:
            addr: The broker's gRPC address, host:port (``--listen``). For
                a cluster, any of its nodes, or several separated by commas
                (``"10.0.0.1:7070,10.0.0.2:7070"``): calls start at the
                first; the others are asked where the primary is when the
                node calls go to does not answer.
            token: Bearer token sent with every call, for brokers with
                ``--auth_tokens``. None sends none.
            tls: None or False: plaintext. True: TLS trusting the system's
                CAs. PEM bytes, or a path (str or os.PathLike): TLS trusting
                those CAs. A ``hourglass.Tls`` for a server name override or
                a client certificate (mutual TLS).
            timeout: Deadline of each unary call, and of opening a
                subscription, in seconds (as gRPC and the standard library
                count timeouts); None waits without end. Default: 10.
            backoff: How subscriptions wait between attempts to subscribe
                again, and the bounds of gRPC's own waits between attempts
                to reconnect the channel. Default: ``Backoff()``, 50 ms
                doubling up to 5 s, with jitter.

        Raises:
            ValueError, TypeError: a bad argument: `addr` empty or only
                commas, a bad token, a bad `tls` (see ``Tls``).
            OSError: a PEM file of `tls` cannot be read.
        """
        self._settings = _protocol.channel_settings(addr, token, tls, backoff)
        self._timeout = timeout
        self._backoff = backoff
        self._router = _cluster.Router(self._settings, grpc)
        self._lock = threading.Lock()
        # Protected by _lock.
        self._subscriptions: "weakref.WeakSet[_Subscription[Any]]" = (
            weakref.WeakSet())

    @property
    def address(self) -> str:
        """The broker's address, as given (all of them, in cluster mode)."""
        return self._settings.target

    def publish(self, topic: str, payload: Payload = b"", *,
                delay: Optional[timedelta] = None,
                deliver_at: Optional[datetime] = None,
                id: Optional[str] = None,
                headers: Optional[Mapping[str, str]] = None) -> Receipt:
        """Stores one message durably, to be delivered when it comes due.

        The fields are those of ``hourglass.Message``. Answers after the
        broker made the message durable (fsynced, with its default
        ``--durability=sync``).

        Returns:
            The receipt: the message's id, its due time, and whether an
            earlier message with this id was pending (then nothing was
            stored and the receipt is that message's).

        Raises:
            InvalidArgument: a bad field (the message names it and its
                value); nothing is stored.
            ResourceExhausted: the disk is full or the broker's publish
                queue is at its limit; nothing is stored.
            Unavailable, DeadlineExceeded: the outcome is unknown. (In a
                cluster, a publish with an `id` whose node did not answer
                is first repeated at the primary the other nodes name; its
                receipt says ``duplicate`` if the first attempt was
                stored.)
            Unauthenticated, PermissionDenied: see the token file.
            ValueError: both `delay` and `deliver_at`, or a naive
                `deliver_at`.
            TypeError: `delay`, `deliver_at` or `payload` of the wrong type.
        """
        request = broker_pb2.PublishRequest(messages=[_protocol.message(
            Message(topic, payload, delay, deliver_at, id, headers),
            "publish")])
        return self._publish(request)[0]

    def publish_many(self, messages: Iterable[Message]) -> List[Receipt]:
        """Stores every message durably, or none: one Publish call.

        In a cluster of many shards, all-or-nothing holds per shard: a
        batch of several shards goes as one Publish per shard, each to its
        primary, concurrently (threads of the call's own, at most 16), once
        the client knows the shard count; before, the first node refuses it
        whole (FAILED_PRECONDITION with the count), and then it is split.

        Args:
            messages: 1 to the broker's ``--max_batch`` (10000) messages.

        Returns:
            One receipt per message, in order.

        Raises:
            InvalidArgument: no messages, too many, or a bad one; the
                message says which (``message 1: topic "a b" has a
                space``, counting from 0). Nothing is stored.
            ValueError, TypeError: a message is bad as ``publish`` says; the
                error names its index. Nothing is sent.
            Others: as ``publish``; for a split batch, the first failed
                part's, saying what was stored (``hourglass._split``). With
                ids on every message, publishing it again is safe.
        """
        return _split.publish(_protocol.publish_request(messages),
                              self._router.shard_count(), self._publish)

    def cancel(self, topic: str, id: str) -> None:
        """Cancels a message that is scheduled and not yet due.

        When a cancel races with the message coming due exactly one wins: a
        cancelled message is never delivered.

        Raises:
            NotFound: no scheduled, not-yet-due message with this id in the
                topic (never published, already due, cancelled or acked).
            InvalidArgument: a malformed topic, or an empty id.
        """
        self._unary(lambda e: e.broker.Cancel,
                    _protocol.cancel_request(topic, id))

    def reschedule(self, topic: str, id: str, *,
                   delay: Optional[timedelta] = None,
                   deliver_at: Optional[datetime] = None) -> Receipt:
        """Moves a scheduled, not-yet-due message to a new due time.

        This is the Admin service's Reschedule: with ``--auth_tokens`` the
        token needs the ``admin`` role for the topic.

        Args:
            delay: The new due time, from now on the broker's clock; or
            deliver_at: the new due time itself (timezone-aware). Exactly
                one of the two.

        Returns:
            The message's receipt with its new due time (``duplicate`` is
            False).

        Raises:
            NotFound: as ``cancel``.
            InvalidArgument: a negative delay, or one over ``--max_delay``.
            ValueError: neither or both of `delay` and `deliver_at`.
        """
        response = self._unary(lambda e: e.admin.Reschedule,
                               _protocol.reschedule_request(
                                   topic, id, delay, deliver_at))
        return _protocol.receipt(response)

    def subscribe(self, topic: str, group: str, *, max_in_flight: int = 0,
                  ack_timeout: Optional[timedelta] = None,
                  reconnect: bool = True) -> "Subscription":
        """Consumes `topic` as a member of `group`, one delivery at a time.

        Opens a Subscribe stream and returns once the broker accepted it:
        the group exists from then on (the first consumer of a group
        registers it; with tokens only an admin token may). Iterate over the
        subscription for its deliveries, and ack (or nack) each one.

        Within a group consumers compete: each message goes to one of them;
        every group of a topic gets every message. A stream never holds more
        than `max_in_flight` unacknowledged deliveries.

        If the stream breaks (the broker restarted or went away: UNAVAILABLE;
        CANCELLED; RESOURCE_EXHAUSTED), the subscription subscribes again
        after a jittered backoff (``Client(backoff=...)``), waiting for the
        broker to come back, until it works or the subscription is closed;
        the deliveries it had not acked went back to the group when the
        stream ended and come again. Other ends (NOT_FOUND: the group was
        deleted; PERMISSION_DENIED, UNAUTHENTICATED: the token changed) end
        the subscription: iterating raises that error.

        Args:
            max_in_flight: Credit, 0 for the broker's default (100); at most
                its ``--max_credit`` (10000).
            ack_timeout: A delivery not acked within this comes again. None
                for the broker's ``--ack_timeout`` (30 s).
            reconnect: False ends the subscription with the error of a
                broken stream instead.

        Raises:
            InvalidArgument: a bad topic, group or option.
            NotFound: the group does not exist and the token may not create
                it.
            Unavailable: the broker cannot be reached (the first
                subscription is not retried, but in a cluster it follows
                the primary as unary calls do).
            DeadlineExceeded: no answer within the client's timeout.
            Unauthenticated, PermissionDenied, ResourceExhausted: see the
                broker's docs/tls-and-tokens.md and docs/flags.md.
        """
        subscription = Subscription(self, topic, group, max_in_flight,
                                    ack_timeout, reconnect)
        with self._lock:
            self._subscriptions.add(subscription)
        return subscription

    def subscribe_batches(self, topic: str, group: str, *,
                          max_in_flight: int = 0,
                          ack_timeout: Optional[timedelta] = None,
                          reconnect: bool = True) -> "BatchSubscription":
        """As ``subscribe``, on a SubscribeBatches stream: it yields lists.

        Each list holds every delivery that was waiting for the stream when
        the broker wrote it, in delivery order (up to about 1 MiB; nothing
        is held back to fill a batch). ``BatchSubscription.ack(batch)`` acks
        a whole list in one request: the cheap way to drain a backlog.
        """
        subscription = BatchSubscription(self, topic, group, max_in_flight,
                                         ack_timeout, reconnect)
        with self._lock:
            self._subscriptions.add(subscription)
        return subscription

    def close(self, timeout: float = DEFAULT_CLOSE_TIMEOUT) -> None:
        """Closes every subscription of the client (see
        ``Subscription.close``), then the channel. Idempotent."""
        with self._lock:
            subscriptions = list(self._subscriptions)
        for subscription in subscriptions:
            subscription.close(timeout)
        for channel in self._router.channels():
            channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def _publish(self, request: broker_pb2.PublishRequest) -> List[Receipt]:
        """One Publish call of `request` (in one shard); its receipts."""
        response = self._unary(lambda e: e.broker.Publish, request,
                               repeatable=_protocol.repeatable(request))
        return [_protocol.receipt(r) for r in response.receipts]

    def _unary(self, method: Callable[[Endpoint], Any], request: Any, *,
               repeatable: bool = False) -> Any:
        """Calls `method` on the node calls about `request`'s topic go to
        (``_cluster.topic_of``), with the client's deadline and metadata;
        in cluster mode follows the primary (see the class comment), all
        attempts within the one deadline.

        Args:
            method: The stub's method on an endpoint, e.g.
                ``lambda e: e.broker.Publish``.
            repeatable: Whether `request` may be sent again after an
                unknown outcome (``_protocol.repeatable``). A node's
                redirect needs no such care: it did nothing.

        Raises:
            hourglass.Error: the call (its last attempt) failed; its code
                and message.
        """
        topic = _cluster.topic_of(request)
        deadline = _cluster.deadline(self._timeout)
        endpoint = self._router.route(topic)
        redirects = 0
        while True:
            try:
                return method(endpoint)(
                    request, timeout=_cluster.remaining(deadline),
                    metadata=self._settings.metadata)
            except grpc.RpcError as e:
                failure = _protocol.error(e)  # Its __cause__ is e.
            # Any refusal may give the shard count; a redirect, the primary.
            primary = self._router.follow(endpoint, failure, topic)
            if (failure.code != grpc.StatusCode.UNAVAILABLE
                    or redirects >= _cluster.MAX_REDIRECTS):
                raise failure
            if primary is None:
                # Later calls go to the primary found, even when this one
                # may not be repeated.
                found = self._rediscover(endpoint, deadline, topic=topic)
                primary = found if repeatable else None
            if primary is None or _cluster.remaining(deadline) == 0:
                raise failure
            redirects += 1
            endpoint = primary

    def _find_primary(self, failed: Endpoint, error: errors.Error,
                      deadline: Optional[float], stop: Callable[[], bool],
                      topic: str) -> Optional[Endpoint]:
        """After a call about `topic` on `failed` ended UNAVAILABLE with
        `error`: the primary's endpoint, named by the node or else by a map
        (``_rediscover``); later calls go there. None if none. Blocks."""
        return (self._router.follow(failed, error, topic)
                or self._rediscover(failed, deadline, stop, topic))

    def _rediscover(self, failed: Endpoint, deadline: Optional[float],
                    stop: Callable[[], bool] = lambda: False,
                    topic: str = "") -> Optional[Endpoint]:
        """Asks the nodes the client knows for the cluster map, in the
        order of ``Router.candidates``, each for at most 2 s and all before
        `deadline` (time.monotonic(); None for none), and moves later calls
        to the primaries a map names.

        Returns:
            Where calls about `topic` go now; None if no node named a
            primary of its shard other than `failed`, if a node is a single
            hourglassd (UNIMPLEMENTED), or once `stop()` holds. Blocks.
        """
        for address in self._router.candidates(failed, topic):
            timeout = _cluster.map_timeout(deadline)
            if timeout <= 0 or stop():
                return None
            stub = self._router.endpoint(address).cluster
            try:
                cluster_map = stub.GetClusterMap(
                    _cluster.map_request(), timeout=timeout,
                    metadata=self._settings.metadata)
            except grpc.RpcError as e:
                if _cluster.not_a_cluster(e):
                    return None
                continue
            primary = self._router.learn(cluster_map, failed, topic)
            if primary is not None:
                return primary
        return None


class _Stream:
    """One Subscribe (or SubscribeBatches) call and its outbox.

    gRPC's writer thread reads `requests()` until the outbox closes.
    """

    def __init__(self, open_request: broker_pb2.SubscribeRequest,
                 endpoint: Endpoint) -> None:
        self._requests: "queue.SimpleQueue[Optional[Request]]" = (
            queue.SimpleQueue())
        self.outbox = _protocol.Outbox(self._requests.put)
        self.outbox.send(open_request)
        self.endpoint = endpoint  # The node it goes to.
        self.call: Any = None  # Set once, right after construction.
        # Whether the broker accepted the open. Protected by the
        # subscription's _lock.
        self.accepted = False

    def requests(self) -> Iterator[broker_pb2.SubscribeRequest]:
        while True:
            request = self._requests.get()
            if request is None:
                return
            yield request


class _Subscription(Generic[T]):
    """A subscribe stream that reconnects: what Subscription and
    BatchSubscription share. `T` is what one step of iteration yields.

    A reader thread of its own reads the current stream into a queue, and
    opens the next stream after a break; iteration takes from the queue and
    skips deliveries of streams that have ended (they went back to the group
    and come again). Each stream goes where the client's calls about the
    topic go when it starts (in cluster mode, its shard's primary); the
    reader finds the primary before a new stream when the last one ended
    UNAVAILABLE (``Client._find_primary``).
    Thread-safe: iterate from one thread, ack and close from any.
    """

    def __init__(self, client: Client, topic: str, group: str,
                 max_in_flight: int, ack_timeout: Optional[timedelta],
                 reconnect: bool, batches: bool) -> None:
        self._open_request = _protocol.open_request(
            topic, group, max_in_flight, ack_timeout)
        self._name = _protocol.describe(topic, group)
        self._topic = topic
        self._client = client
        self._method_name = _protocol.subscribe_method(batches)
        self._metadata = client._settings.metadata
        self._backoff = client._backoff
        self._reconnect = reconnect
        self._items: "queue.SimpleQueue[Any]" = queue.SimpleQueue()
        self._first_answer = threading.Event()  # First stream opened/ended.
        self._closing = threading.Event()
        self._ended = threading.Event()  # Set before the end is queued.
        self._lock = threading.Lock()
        self._stream: Optional[_Stream] = None  # Protected by _lock.
        # Written by the reader thread only; read after _first_answer or the
        # end it queues.
        self._error: Optional[errors.Error] = None
        self._reconnects = 0
        self._waits = self._backoff.waits()
        # When the first stream must have been accepted, for finding the
        # primary meanwhile.
        self._open_deadline = _cluster.deadline(client._timeout)

        first = self._start(wait_for_ready=False)
        assert first is not None
        self._thread = threading.Thread(target=self._run, args=(first,),
                                        name=f"hourglass {self._name}",
                                        daemon=True)
        self._thread.start()
        if not self._first_answer.wait(client._timeout):
            self.close(timeout=0)
            raise errors.DeadlineExceeded(
                f"{self._name}: no answer from {client.address} within "
                f"{client._timeout} s")
        if self._error is not None:
            self._thread.join()
            raise self._error

    @property
    def reconnects(self) -> int:
        """How many times a stream was opened again after one broke."""
        return self._reconnects

    @property
    def error(self) -> Optional[errors.Error]:
        """The error the subscription ended with; None while it runs, or
        after a clean end."""
        return self._error if self._ended.is_set() else None

    @property
    def closed(self) -> bool:
        """Whether the subscription has ended (closed, or by an error)."""
        return self._ended.is_set()

    def ack(self, deliveries: Iterable[Delivery]) -> int:
        """Acks `deliveries` in one request per stream they came on.

        Returns:
            How many acks were queued; those of deliveries whose stream has
            ended are not (those messages come again).
        """
        return _protocol.ack_all(deliveries)

    def close(self, timeout: float = DEFAULT_CLOSE_TIMEOUT) -> None:
        """Ends the subscription cleanly; idempotent.

        Sends the acks and nacks already queued, ends the client's side of
        the stream, and waits up to `timeout` seconds for the broker to end
        it; then cancels it. Either way the broker hands the deliveries not
        acknowledged back to the group at once. Iteration then ends, after
        skipping what was still queued; acks after this return False.
        """
        with self._lock:
            self._closing.set()  # No stream starts after this.
            stream = self._stream
            accepted = stream is not None and stream.accepted
        if stream is None:  # Only before the first stream started.
            return
        if accepted:
            stream.outbox.close()
        else:
            # Not open (waiting for the broker to come back): nothing to
            # end cleanly, and nothing to wait for.
            stream.call.cancel()
        self._thread.join(timeout)
        if self._thread.is_alive():
            stream.call.cancel()
            self._thread.join()

    def __enter__(self: "_S") -> "_S":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __iter__(self: "_S") -> "_S":
        return self

    def __next__(self) -> T:
        item = self._take(None)
        if item is None:
            if self._error is not None:
                raise self._error
            raise StopIteration
        return item

    def receive(self, timeout: Optional[float] = None) -> Optional[T]:
        """The next step of iteration, waiting at most `timeout` seconds.

        Returns:
            What iteration yields next; None if `timeout` passed, or if the
            subscription was closed and nothing is left (``closed`` tells).

        Raises:
            hourglass.Error: the subscription ended with this error.
        """
        item = self._take(timeout)
        if item is None and self.closed and self._error is not None:
            raise self._error
        return item

    def _pick(self, deliveries: List[Delivery]) -> T:
        raise NotImplementedError

    def _take(self, timeout: Optional[float]) -> Optional[T]:
        """What the next response of an open stream holds; None at the end,
        or after `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            remaining = (None if deadline is None
                         else max(0.0, deadline - time.monotonic()))
            try:
                item = self._items.get(timeout=remaining)
            except queue.Empty:
                return None
            if item is _END:
                self._items.put(_END)  # For every later call.
                return None
            outbox, deliveries = item
            if outbox.open:
                return self._pick(deliveries)

    def _start(self, wait_for_ready: bool) -> Optional[_Stream]:
        """Opens a stream to the node calls about the topic go to now and
        makes it the current one; None once closing."""
        with self._lock:
            if self._closing.is_set():
                return None
            endpoint = self._client._router.route(self._topic)
            stream = _Stream(self._open_request, endpoint)
            method = getattr(endpoint.broker, self._method_name)
            stream.call = method(stream.requests(), metadata=self._metadata,
                                 wait_for_ready=wait_for_ready)
            self._stream = stream
            return stream

    def _serve(self, stream: _Stream) -> Optional[grpc.RpcError]:
        """Reads `stream` into the queue until it ends.

        Returns:
            None if it ended OK, else the error it ended with.
        """
        call = stream.call
        try:
            # Sent once the broker accepted the open, marked; a refusal
            # has none, and reading on raises its status.
            if _protocol.accepted(call.initial_metadata()):
                with self._lock:
                    stream.accepted = True
                self._waits = self._backoff.waits()
                if self._first_answer.is_set():
                    _log.info("%s: subscribed again", self._name)
                self._first_answer.set()
            for response in call:
                self._items.put(
                    (stream.outbox,
                     _protocol.deliveries(response, stream.outbox)))
            return None
        except grpc.RpcError as e:
            return e
        finally:
            stream.outbox.close()

    def _run(self, stream: Optional[_Stream]) -> None:
        """The reader thread: serves streams until the subscription ends."""
        redirects = 0
        while stream is not None:
            failure = self._serve(stream)
            if self._closing.is_set():
                break
            opened = self._first_answer.is_set()
            again, error = _protocol.after_stream(
                failure, opened=opened, reconnect=self._reconnect)
            if (not opened and _cluster.unavailable(error)
                    and redirects < _cluster.MAX_REDIRECTS):
                assert error is not None
                # Cluster mode: refused by a node that is not the primary,
                # or its node did not answer: open it where the primary is.
                if self._client._find_primary(
                        stream.endpoint, error, self._open_deadline,
                        self._closing.is_set, self._topic) is not None:
                    redirects += 1
                    stream = self._start(wait_for_ready=False)
                    continue
            if not again:
                self._error = error
                self._first_answer.set()
                break
            wait = next(self._waits)
            _log.warning("%s: stream ended (%s); subscribing again in %.3f s",
                         self._name, error, wait)
            if self._closing.wait(wait):
                break
            if _cluster.unavailable(error):
                # Cluster mode: its node died or stopped being the primary.
                assert error is not None
                self._client._find_primary(stream.endpoint, error, None,
                                           self._closing.is_set, self._topic)
            stream = self._start(
                wait_for_ready=self._client._router.wait_for_ready())
            if stream is not None:
                self._reconnects += 1
        self._ended.set()
        self._items.put(_END)


_S = TypeVar("_S", bound=_Subscription[Any])


class Subscription(_Subscription[Delivery]):
    """The deliveries of a Subscribe stream, one at a time: iterate over it.

    ``for delivery in subscription`` yields each delivery, and ends when the
    subscription is closed (or raises the error it ended with). Use it as a
    context manager, or call ``close``, to end it cleanly. Made by
    ``Client.subscribe``, which describes reconnecting.
    """

    def __init__(self, client: Client, topic: str, group: str,
                 max_in_flight: int, ack_timeout: Optional[timedelta],
                 reconnect: bool) -> None:
        super().__init__(client, topic, group, max_in_flight, ack_timeout,
                         reconnect, batches=False)

    def _pick(self, deliveries: List[Delivery]) -> Delivery:
        return deliveries[0]


class BatchSubscription(_Subscription[List[Delivery]]):
    """The deliveries of a SubscribeBatches stream, a list at a time.

    As ``Subscription``, but iteration yields non-empty lists of deliveries;
    ``ack(batch)`` acks one in a single request. Made by
    ``Client.subscribe_batches``.
    """

    def __init__(self, client: Client, topic: str, group: str,
                 max_in_flight: int, ack_timeout: Optional[timedelta],
                 reconnect: bool) -> None:
        super().__init__(client, topic, group, max_in_flight, ack_timeout,
                         reconnect, batches=True)

    def _pick(self, deliveries: List[Delivery]) -> List[Delivery]:
        return deliveries
