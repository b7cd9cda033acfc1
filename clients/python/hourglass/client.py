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
from typing import (Any, Generic, Iterable, Iterator, List, Mapping, Optional,
                    TypeVar)

import grpc

from hourglass import _protocol, errors
from hourglass._protocol import (DEFAULT_CLOSE_TIMEOUT, DEFAULT_TIMEOUT,
                                 TlsArg)
from hourglass.types import Backoff, Delivery, Message, Payload, Receipt
from hourglass.v1 import admin_pb2_grpc, broker_pb2, broker_pb2_grpc

_log = logging.getLogger("hourglass")

T = TypeVar("T")
Request = broker_pb2.SubscribeRequest

# Queued after a subscription's last deliveries.
_END = object()


class Client:
    """A connection to one hourglassd: publish, cancel, reschedule, consume.

    One gRPC channel carries every call and subscription of the client; gRPC
    connects it on first use and reconnects it after it breaks. Unary calls
    (``publish``, ``publish_many``, ``cancel``, ``reschedule``) each have a
    deadline of ``timeout`` and are not retried: after ``Unavailable`` or
    ``DeadlineExceeded`` a publish's outcome is unknown, so retry it yourself
    with ids set (the broker answers an id still pending with its first
    receipt, ``duplicate`` set, and stores nothing). Subscriptions reconnect
    by themselves (see ``subscribe``).

    Thread-safe. ``close`` (or leaving a ``with`` block) closes the
    subscriptions and the channel; nothing may be called afterwards.

    Every call here is made through ``_unary`` or a subscription's stream:
    the two places that, in cluster mode, will follow the broker's
    ``hourglass-primary`` redirects (errors keep their trailing metadata for
    it).
    """

    def __init__(self, addr: str, token: Optional[str] = None,
                 tls: TlsArg = None, *,
                 timeout: Optional[float] = DEFAULT_TIMEOUT,
                 backoff: Backoff = Backoff()) -> None:
        """Creates the client; it connects on first use.

        Args:
            addr: The broker's gRPC address, host:port (``--listen``).
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
            ValueError, TypeError: a bad argument (see ``Tls``).
            OSError: a PEM file of `tls` cannot be read.
        """
        self._settings = _protocol.channel_settings(addr, token, tls, backoff)
        self._timeout = timeout
        self._backoff = backoff
        if self._settings.credentials is None:
            self._channel = grpc.insecure_channel(
                addr, options=self._settings.options)
        else:
            self._channel = grpc.secure_channel(
                addr, self._settings.credentials,
                options=self._settings.options)
        self._broker = broker_pb2_grpc.BrokerStub(self._channel)
        self._admin = admin_pb2_grpc.AdminStub(self._channel)
        self._lock = threading.Lock()
        # Protected by _lock.
        self._subscriptions: "weakref.WeakSet[_Subscription[Any]]" = (
            weakref.WeakSet())

    @property
    def address(self) -> str:
        """The broker's address, as given."""
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
            Unavailable, DeadlineExceeded: the outcome is unknown.
            Unauthenticated, PermissionDenied: see the token file.
            ValueError: both `delay` and `deliver_at`, or a naive
                `deliver_at`.
            TypeError: `delay`, `deliver_at` or `payload` of the wrong type.
        """
        request = broker_pb2.PublishRequest(messages=[_protocol.message(
            Message(topic, payload, delay, deliver_at, id, headers),
            "publish")])
        response = self._unary(self._broker.Publish, request)
        return _protocol.receipt(response.receipts[0])

    def publish_many(self, messages: Iterable[Message]) -> List[Receipt]:
        """Stores every message durably, or none: one Publish call.

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
            Others: as ``publish``.
        """
        response = self._unary(self._broker.Publish,
                               _protocol.publish_request(messages))
        return [_protocol.receipt(r) for r in response.receipts]

    def cancel(self, topic: str, id: str) -> None:
        """Cancels a message that is scheduled and not yet due.

        When a cancel races with the message coming due exactly one wins: a
        cancelled message is never delivered.

        Raises:
            NotFound: no scheduled, not-yet-due message with this id in the
                topic (never published, already due, cancelled or acked).
            InvalidArgument: a malformed topic, or an empty id.
        """
        self._unary(self._broker.Cancel, _protocol.cancel_request(topic, id))

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
        response = self._unary(self._admin.Reschedule,
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
                subscription is not retried).
            DeadlineExceeded: no answer within the client's timeout.
            Unauthenticated, PermissionDenied, ResourceExhausted: see the
                broker's README.
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
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def _unary(self, method: grpc.UnaryUnaryMultiCallable,
               request: Any) -> Any:
        """Calls `method` with the client's deadline and metadata.

        Raises:
            hourglass.Error: the call failed; its code and message.
        """
        try:
            return method(request, timeout=self._timeout,
                          metadata=self._settings.metadata)
        except grpc.RpcError as e:
            raise _protocol.error(e) from e


class _Stream:
    """One Subscribe (or SubscribeBatches) call and its outbox.

    gRPC's writer thread reads `requests()` until the outbox closes.
    """

    def __init__(self, open_request: broker_pb2.SubscribeRequest) -> None:
        self._requests: "queue.SimpleQueue[Optional[Request]]" = (
            queue.SimpleQueue())
        self.outbox = _protocol.Outbox(self._requests.put)
        self.outbox.send(open_request)
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
    and come again). Thread-safe: iterate from one thread, ack and close
    from any.
    """

    def __init__(self, client: Client, topic: str, group: str,
                 max_in_flight: int, ack_timeout: Optional[timedelta],
                 reconnect: bool, batches: bool) -> None:
        self._open_request = _protocol.open_request(
            topic, group, max_in_flight, ack_timeout)
        self._name = _protocol.describe(topic, group)
        self._method = getattr(client._broker,
                               _protocol.subscribe_method(batches))
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
        """Opens a stream and makes it the current one; None once closing."""
        with self._lock:
            if self._closing.is_set():
                return None
            stream = _Stream(self._open_request)
            stream.call = self._method(stream.requests(),
                                       metadata=self._metadata,
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
        while stream is not None:
            failure = self._serve(stream)
            if self._closing.is_set():
                break
            again, error = _protocol.after_stream(
                failure, opened=self._first_answer.is_set(),
                reconnect=self._reconnect)
            if not again:
                self._error = error
                self._first_answer.set()
                break
            wait = next(self._waits)
            _log.warning("%s: stream ended (%s); subscribing again in %.3f s",
                         self._name, error, wait)
            if self._closing.wait(wait):
                break
            stream = self._start(wait_for_ready=True)
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
