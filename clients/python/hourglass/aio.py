"""The Hourglass client for asyncio: ``hourglass.aio.Client``, on grpc.aio.

The same shape as ``hourglass.Client``: the same arguments, values
(``hourglass.types``) and errors (``hourglass.errors``), with coroutines
for calls and async iterators for subscriptions. Requests, answers and
errors go through ``hourglass._protocol``, as the threaded client's do;
this module only adds how a coroutine waits.

    async with hourglass.aio.Client("127.0.0.1:7070") as client:
        receipts = await asyncio.gather(*(
            client.publish_async("orders", b"...", id=f"order-{i}")
            for i in range(1000)))  # Many in flight on a PublishStream.
        async with await client.subscribe("orders", "billing") as sub:
            async for delivery in sub:
                ...
                delivery.ack()

Everything here runs on the event loop the client was created in; create
the client inside a coroutine. ``Delivery.ack`` and ``nack`` are plain
methods: they queue a request and never wait.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from datetime import datetime, timedelta
from typing import (Any, AsyncIterator, Callable, Dict, Generic, Iterable,
                    List, Mapping, Optional, Set, TypeVar)

import grpc
import grpc.aio

from hourglass import _cluster, _protocol, _publish, _split, errors
from hourglass._cluster import Endpoint
from hourglass._protocol import (DEFAULT_CLOSE_TIMEOUT, DEFAULT_TIMEOUT,
                                 TlsArg)
from hourglass._publish import DEFAULT_MAX_IN_FLIGHT, Pending, Step
from hourglass.types import (Backoff, Delivery, Group, Message, MessageInfo,
                             MessagePage, MessageState, OnExpire, Payload,
                             Receipt, Schedule, Snapshot, Stats, Topic)
from hourglass.v1 import admin_pb2, broker_pb2

__all__ = ["BatchSubscription", "Client", "Subscription"]

_log = logging.getLogger("hourglass")

T = TypeVar("T")
Request = broker_pb2.SubscribeRequest
PublishRequest = broker_pb2.PublishRequest

# Queued after a subscription's last deliveries.
_END = object()


class Client:
    """A connection to one hourglassd, or to a cluster of them, for asyncio
    code.

    As ``hourglass.Client`` (which documents each call in full, and how it
    follows a cluster's primary and which publishes it retries), with
    coroutines. Not thread-safe: use it from the event loop it was created
    in. ``await close()`` (or leaving an ``async with`` block) ends the
    PublishStreams, closes the subscriptions and the channels.
    """

    def __init__(self, addr: str, token: Optional[str] = None,
                 tls: TlsArg = None, *,
                 timeout: Optional[float] = DEFAULT_TIMEOUT,
                 backoff: Backoff = Backoff(),
                 max_publishes_in_flight: int = DEFAULT_MAX_IN_FLIGHT
                 ) -> None:
        """Creates the client; it connects on first use. Arguments as
        ``hourglass.Client``.

        Raises:
            RuntimeError: no event loop is running.
            ValueError, TypeError, OSError: as ``hourglass.Client``.
        """
        asyncio.get_running_loop()  # grpc.aio binds the channels to it.
        _publish.check_max_in_flight(max_publishes_in_flight)
        self._settings = _protocol.channel_settings(addr, token, tls, backoff)
        self._timeout = timeout
        self._backoff = backoff
        self._router = _cluster.Router(self._settings, grpc.aio)
        self._subscriptions: "weakref.WeakSet[_Subscription[Any]]" = (
            weakref.WeakSet())
        self._publisher = _Publisher(self, max_publishes_in_flight)

    @property
    def address(self) -> str:
        """The broker's address, as given (all of them, in cluster mode)."""
        return self._settings.target

    async def publish(self, topic: str, payload: Payload = b"", *,
                      delay: Optional[timedelta] = None,
                      deliver_at: Optional[datetime] = None,
                      id: Optional[str] = None,
                      headers: Optional[Mapping[str, str]] = None,
                      ttl: Optional[timedelta] = None,
                      expire_at: Optional[datetime] = None,
                      on_expire: OnExpire = "drop") -> Receipt:
        """Stores one message durably; as ``hourglass.Client.publish``."""
        request = broker_pb2.PublishRequest(messages=[_protocol.message(
            Message(topic, payload, delay, deliver_at, id, headers, ttl,
                    expire_at, on_expire),
            "publish")])
        return (await self._publish(request))[0]

    async def publish_many(self, messages: Iterable[Message]) -> List[Receipt]:
        """Stores every message durably, or none: one Publish call; as
        ``hourglass.Client.publish_many``. In a cluster of many shards, a
        batch of several shards goes as one Publish per shard, all at once
        on the event loop (``asyncio.gather``), each to its shard's
        primary; all-or-nothing holds within each shard only."""
        return await _split.publish_async(_protocol.publish_request(messages),
                                          self._router.shard_count(),
                                          self._publish)

    async def publish_async(self, topic: str, payload: Payload = b"", *,
                            delay: Optional[timedelta] = None,
                            deliver_at: Optional[datetime] = None,
                            id: Optional[str] = None,
                            headers: Optional[Mapping[str, str]] = None,
                            ttl: Optional[timedelta] = None,
                            expire_at: Optional[datetime] = None,
                            on_expire: OnExpire = "drop"
                            ) -> Receipt:
        """Publishes one message as a request on a PublishStream; its
        receipt. As ``hourglass.Client.publish_async`` (the streams, the
        deadline, which messages are retried: only those with an `id`),
        as a coroutine: run many at once (``asyncio.gather``, tasks) to
        keep many in flight on the stream::

            receipts = await asyncio.gather(*(
                client.publish_async("orders", body, id=key)
                for key, body in orders))

        Waits first while ``max_publishes_in_flight`` messages of the
        client are in flight. Cancelling the coroutine once the message is
        sent stops the wait, not the message.

        Raises:
            hourglass.Error: as ``publish``; ``Cancelled`` for a message
                still in flight when ``close`` gave up waiting for it, or
                sent after ``close``.
            ValueError, TypeError: a bad field; nothing is sent.
        """
        request = broker_pb2.PublishRequest(messages=[_protocol.message(
            Message(topic, payload, delay, deliver_at, id, headers, ttl,
                    expire_at, on_expire),
            "publish_async")])
        return await self._publisher.publish(request)

    async def cancel(self, topic: str, id: str) -> None:
        """Cancels a scheduled, not-yet-due message; as
        ``hourglass.Client.cancel``."""
        await self._unary(lambda e: e.broker.Cancel,
                          _protocol.cancel_request(topic, id))

    async def reschedule(self, topic: str, id: str, *,
                         delay: Optional[timedelta] = None,
                         deliver_at: Optional[datetime] = None) -> Receipt:
        """Moves a scheduled, not-yet-due message to a new due time; as
        ``hourglass.Client.reschedule`` (Admin service: role ``admin``)."""
        response = await self._unary(
            lambda e: e.admin.Reschedule,
            _protocol.reschedule_request(topic, id, delay, deliver_at))
        return _protocol.receipt(response)

    # --- The Admin service: as hourglass.Client's ----------------------------

    async def stats(self, topic: Optional[str] = None) -> Stats:
        """Counts, rates and lateness of every topic, or of one, and the
        broker's version and health; as ``hourglass.Client.stats``."""
        return _protocol.stats(await self._unary(
            lambda e: e.admin.GetStats,
            admin_pb2.GetStatsRequest(topic=topic or "")))

    async def topics(self) -> List[Topic]:
        """Every topic with messages or groups; as
        ``hourglass.Client.topics``."""
        return _protocol.topics(await self._unary(
            lambda e: e.admin.ListTopics, admin_pb2.ListTopicsRequest()))

    async def groups(self, topic: str) -> List[Group]:
        """The consumer groups of `topic`; as
        ``hourglass.Client.groups``."""
        response = await self._unary(lambda e: e.admin.ListGroups,
                                     admin_pb2.ListGroupsRequest(topic=topic))
        return [_protocol.group(g) for g in response.groups]

    async def create_group(self, topic: str, group: str) -> Group:
        """Registers a group; as ``hourglass.Client.create_group``."""
        return _protocol.group(await self._unary(
            lambda e: e.admin.CreateGroup,
            admin_pb2.CreateGroupRequest(topic=topic, group=group)))

    async def delete_group(self, topic: str, group: str) -> int:
        """Deletes a group; as ``hourglass.Client.delete_group``."""
        response = await self._unary(
            lambda e: e.admin.DeleteGroup,
            admin_pb2.DeleteGroupRequest(topic=topic, group=group))
        return response.removed

    async def list_messages(self, topic: str, state: MessageState, *,
                            group: Optional[str] = None,
                            due_from: Optional[datetime] = None,
                            due_to: Optional[datetime] = None,
                            page_size: int = 0,
                            page_token: Optional[str] = None) -> MessagePage:
        """One page of the messages of `topic` in `state`; as
        ``hourglass.Client.list_messages``."""
        return _protocol.message_page(await self._unary(
            lambda e: e.admin.ListMessages,
            _protocol.list_messages_request(topic, state, group, due_from,
                                            due_to, page_size, page_token)))

    async def get_message(self, topic: str, id: str, *,
                          preview_bytes: int = 0) -> MessageInfo:
        """One message with its state in every group; as
        ``hourglass.Client.get_message``."""
        return _protocol.message_info(await self._unary(
            lambda e: e.admin.GetMessage,
            admin_pb2.GetMessageRequest(topic=topic, id=id,
                                        preview_bytes=preview_bytes)))

    async def schedule_histogram(self, topic: str, start: datetime,
                                 end: datetime, bucket: timedelta
                                 ) -> Schedule:
        """The schedule histogram of `topic`; as
        ``hourglass.Client.schedule_histogram``."""
        return _protocol.schedule(await self._unary(
            lambda e: e.admin.GetSchedule,
            _protocol.schedule_request(topic, start, end, bucket)))

    async def redrive(self, topic: str, ids: Optional[Iterable[str]] = None
                      ) -> int:
        """Moves dead letters back to `topic`; as
        ``hourglass.Client.redrive``."""
        response = await self._unary(lambda e: e.admin.RedriveDeadLetters,
                                     _protocol.redrive_request(topic, ids))
        return response.redriven

    async def purge(self, topic: str, *, scheduled: bool = False,
                    ready: bool = False) -> int:
        """Deletes scheduled and/or ready messages; as
        ``hourglass.Client.purge``."""
        response = await self._unary(
            lambda e: e.admin.PurgeTopic,
            admin_pb2.PurgeTopicRequest(topic=topic, scheduled=scheduled,
                                        ready=ready))
        return response.purged

    async def create_snapshot(self, name: str) -> Snapshot:
        """Writes a snapshot of the broker's store; as
        ``hourglass.Client.create_snapshot``."""
        return _protocol.snapshot(await self._unary(
            lambda e: e.admin.CreateSnapshot,
            admin_pb2.CreateSnapshotRequest(dir=name)))

    # --- The Recurrences service: as hourglass.Client's ----------------------

    async def next_fire_times(self, *, cron: Optional[str] = None,
                              every: Optional[timedelta] = None,
                              time_zone: str = "", on_gap: str = "",
                              on_overlap: str = "",
                              start_at: Optional[datetime] = None,
                              end_at: Optional[datetime] = None,
                              after: Optional[datetime] = None,
                              count: int = 10) -> List[datetime]:
        """The next fire times of a recurring rule given here, as aware
        UTC datetimes; as ``hourglass.Client.next_fire_times``."""
        return _protocol.fire_times(await self._unary(
            lambda e: e.recurrences.PreviewRecurrence,
            _protocol.preview_request(cron, every, time_zone, on_gap,
                                      on_overlap, start_at, end_at, after,
                                      count)))

    async def subscribe(self, topic: str, group: str, *,
                        max_in_flight: int = 0,
                        ack_timeout: Optional[timedelta] = None,
                        reconnect: bool = True) -> "Subscription":
        """Consumes `topic` as a member of `group`, one delivery at a time;
        returns once the broker accepted the stream. As
        ``hourglass.Client.subscribe``, which describes reconnecting and
        the errors."""
        subscription = Subscription(self, topic, group, max_in_flight,
                                    ack_timeout, reconnect)
        await subscription._open(self._timeout)
        self._subscriptions.add(subscription)
        return subscription

    async def subscribe_batches(self, topic: str, group: str, *,
                                max_in_flight: int = 0,
                                ack_timeout: Optional[timedelta] = None,
                                reconnect: bool = True) -> "BatchSubscription":
        """As ``subscribe``, on a SubscribeBatches stream: it yields lists;
        see ``hourglass.Client.subscribe_batches``."""
        subscription = BatchSubscription(self, topic, group, max_in_flight,
                                         ack_timeout, reconnect)
        await subscription._open(self._timeout)
        self._subscriptions.add(subscription)
        return subscription

    async def close(self, timeout: float = DEFAULT_CLOSE_TIMEOUT) -> None:
        """Waits up to `timeout` for the messages of ``publish_async`` in
        flight and ends the PublishStreams, closes every subscription, then
        the channels; as ``hourglass.Client.close``. Idempotent."""
        await self._publisher.close(timeout)
        for subscription in list(self._subscriptions):
            await subscription.close(timeout)
        for channel in self._router.channels():
            await channel.close()

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.close()

    async def _publish(self, request: broker_pb2.PublishRequest
                       ) -> List[Receipt]:
        """One Publish call of `request` (in one shard); its receipts."""
        response = await self._unary(
            lambda e: e.broker.Publish, request,
            repeatable=_protocol.repeatable(request))
        return [_protocol.receipt(r) for r in response.receipts]

    async def _unary(self, method: Callable[[Endpoint], Any], request: Any,
                     *, repeatable: bool = False) -> Any:
        """Calls `method` on the node calls about `request`'s topic go to,
        with the client's deadline and metadata, following a cluster's
        primary; the one place unary calls go through. As
        ``hourglass.Client._unary``.

        Raises:
            hourglass.Error: the call (its last attempt) failed; its code
                and message.
        """
        topic = _cluster.topic_of(request)
        deadline = _cluster.deadline(self._timeout)
        endpoint = self._router.route(topic)
        redirects = 0
        failures = 0
        wait_for_ready = False  # Retries of a single broker wait for it.
        while True:
            try:
                return await method(endpoint)(
                    request, timeout=_cluster.remaining(deadline),
                    metadata=self._settings.metadata,
                    wait_for_ready=wait_for_ready)
            except grpc.RpcError as e:
                failure = _protocol.error(e)  # Its __cause__ is e.
            # Any refusal may give the shard count; a redirect, the primary.
            primary = self._router.follow(endpoint, failure, topic)
            if failure.code != grpc.StatusCode.UNAVAILABLE:
                raise failure
            if redirects < _cluster.MAX_REDIRECTS:
                if primary is None:
                    # Later calls go to the primary found, even when this
                    # one may not be repeated.
                    found = await self._rediscover(endpoint, deadline,
                                                   topic=topic)
                    primary = found if repeatable else None
                if primary is not None and _cluster.remaining(deadline) != 0:
                    redirects += 1
                    endpoint = primary
                    wait_for_ready = False
                    continue
            if not repeatable:
                raise failure
            # Its outcome is unknown, and repeating it is safe: again after
            # a backoff, where calls about its topic go now.
            failures += 1
            wait = _publish.retry_wait(self._backoff, failures)
            left = _cluster.remaining(deadline)
            if left is not None and wait >= left:
                raise failure
            _log.warning("a publish with ids to %s failed (%s); trying "
                         "again in %.3f s", endpoint.address, failure, wait)
            await asyncio.sleep(wait)
            endpoint = self._router.route(topic)
            wait_for_ready = self._router.wait_for_ready()

    async def _find_primary(self, failed: Endpoint, error: errors.Error,
                            deadline: Optional[float],
                            stop: Callable[[], bool],
                            topic: str) -> Optional[Endpoint]:
        """After a call about `topic` on `failed` ended UNAVAILABLE with
        `error`: the primary's endpoint; as
        ``hourglass.Client._find_primary``."""
        return (self._router.follow(failed, error, topic)
                or await self._rediscover(failed, deadline, stop, topic))

    async def _rediscover(self, failed: Endpoint, deadline: Optional[float],
                          stop: Callable[[], bool] = lambda: False,
                          topic: str = "") -> Optional[Endpoint]:
        """Asks the nodes the client knows for the cluster map and moves
        later calls to the primaries a map names; where calls about `topic`
        go now, as ``hourglass.Client._rediscover``."""
        for address in self._router.candidates(failed, topic):
            timeout = _cluster.map_timeout(deadline)
            if timeout <= 0 or stop():
                return None
            stub = self._router.endpoint(address).cluster
            try:
                cluster_map = await stub.GetClusterMap(
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


class _PublishStream:
    """One PublishStream call to one node: its requests, written by
    grpc.aio from a queue, and a reader task of its own matching the
    answers to them (``_Publisher._read``)."""

    def __init__(self, publisher: "_Publisher", endpoint: Endpoint,
                 wait_for_ready: bool, first: Pending) -> None:
        """Starts the call with `first` as its first request."""
        self.endpoint = endpoint
        self._requests: "asyncio.Queue[Optional[PublishRequest]]" = (
            asyncio.Queue())
        self.state = _publish.StreamState(self._requests.put_nowait,
                                          endpoint.address,
                                          publisher.timeout)
        sent = self.state.send(first)
        assert sent
        self.call: Any = endpoint.broker.PublishStream(
            self._requests_iter(), metadata=publisher.metadata,
            wait_for_ready=wait_for_ready)
        # The deadline check set (``_Publisher._watch``).
        self.check: Optional[asyncio.TimerHandle] = None
        self.task = asyncio.get_running_loop().create_task(
            publisher._read(self),
            name=f"hourglass publish stream to {endpoint.address}")

    async def _requests_iter(self) -> AsyncIterator[PublishRequest]:
        while True:
            request = await self._requests.get()
            if request is None:
                return
            yield request


class _Publisher:
    """The PublishStreams of a client and the messages of ``publish_async``
    on them, for asyncio; as the threaded client's ``_Publisher``, with a
    reader task per stream and the loop's timers."""

    def __init__(self, client: Client, max_in_flight: int) -> None:
        self._client = client
        self._router = client._router
        self._backoff = client._backoff
        self.metadata = client._settings.metadata
        self.timeout = client._timeout
        self._loop = asyncio.get_running_loop()
        self._slots = asyncio.Semaphore(max_in_flight)
        self._idle = asyncio.Event()  # No message in flight.
        self._idle.set()
        self._in_flight = 0
        # The stream messages to each node (by address) go on now.
        self._streams: Dict[str, _PublishStream] = {}
        # Every stream whose reader task may still run.
        self._all: List[_PublishStream] = []
        # The nodes a stream was opened to: a new one waits for its node.
        self._opened: Set[str] = set()
        # Messages waiting for their backoff, with their timers.
        self._retrying: Dict[Pending, asyncio.TimerHandle] = {}
        self._closed = False  # Takes no new messages.
        self._stopping = False  # Sends nothing more.
        #: Messages sent again after a failure, for tests.
        self.retries = 0

    async def publish(self, request: broker_pb2.PublishRequest) -> Receipt:
        """Sends `request` (of one message) on its stream; its receipt."""
        if self._closed:
            raise errors.Cancelled("publish_async: the client is closed")
        await self._slots.acquire()
        if self._closed:
            self._slots.release()
            raise errors.Cancelled("publish_async: the client is closed")
        self._in_flight += 1
        self._idle.clear()
        future: "asyncio.Future[Receipt]" = self._loop.create_future()
        # A caller that stopped waiting does not leave an error unread.
        future.add_done_callback(_read_outcome)
        self._send(_publish.pending(
            request, self.timeout,
            lambda outcome: _publish.complete(future, outcome)))
        return await asyncio.shield(future)

    async def close(self, timeout: float) -> None:
        """As the threaded ``_Publisher.close``."""
        deadline = time.monotonic() + timeout
        self._closed = True
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
            idle = True
        except asyncio.TimeoutError:
            idle = False
        self._stopping = True
        for message, handle in list(self._retrying.items()):
            handle.cancel()
            self._finish(message, errors.Cancelled("the client was closed"))
        streams = list(self._all)
        for stream in streams:
            if stream.check is not None:
                stream.check.cancel()
            if idle:
                stream.state.close_writes()
            else:
                stream.state.cancelling()
                stream.call.cancel()
        tasks = {stream.task for stream in streams}
        if tasks:
            _, running = await asyncio.wait(
                tasks, timeout=max(0.0, deadline - time.monotonic()))
            for stream in streams:
                if stream.task in running:
                    stream.state.cancelling()
                    stream.call.cancel()
            if running:
                await asyncio.wait(running)

    def _send(self, message: Pending) -> None:
        """Sends `message` on the stream to the node its topic goes to now,
        opening one (with `message` first) if there is none, or if it
        ended; as the threaded ``_Publisher._send``."""
        if message.done:
            return
        if self._stopping:
            self._finish(message, errors.Cancelled("the client was closed"))
            return
        endpoint = self._router.route(message.topic)
        stream = self._streams.get(endpoint.address)
        if stream is None or not stream.state.usable:
            wait = (endpoint.address in self._opened
                    and self._router.wait_for_ready())
            self._opened.add(endpoint.address)
            stream = _PublishStream(self, endpoint, wait, message)
            self._streams[endpoint.address] = stream
            self._all = [s for s in self._all if not s.task.done()]
            self._all.append(stream)
        else:
            sent = stream.state.send(message)
            assert sent  # A usable stream ends only on the loop's thread.
        self._watch(stream)

    async def _read(self, stream: _PublishStream) -> None:
        """A stream's reader task: settles each message answered, then the
        rest once the stream ended."""
        rpc_error: Optional[grpc.RpcError] = None
        try:
            async for response in stream.call:
                answered = stream.state.answered(response)
                if stream.state.too_many:
                    stream.call.cancel()
                self._watch(stream)
                for message, answer in answered:
                    outcome = _publish.outcome(answer)
                    if isinstance(outcome, errors.Error):
                        self._schedule(self._steps(
                            stream.endpoint, [message], outcome), outcome)
                    else:
                        self._finish(message, outcome)
        except grpc.RpcError as e:
            rpc_error = e
        except asyncio.CancelledError:
            # grpc.aio raises this for a call cancelled locally (a deadline
            # passed, too many answers, close): the state says which. A
            # cancellation of this task itself goes on.
            if not stream.call.cancelled():
                raise
        unanswered, error = stream.state.ended(rpc_error)
        retry = self._steps(stream.endpoint, unanswered, error)
        if retry:
            _log.warning("the PublishStream to %s ended (%s); %d messages "
                         "with ids are sent again", stream.endpoint.address,
                         error, len(retry))
            if _cluster.unavailable(error):
                # Cluster mode: its node may have died; the messages go
                # where the maps say the primaries are now.
                await self._client._rediscover(
                    stream.endpoint, _publish.latest_deadline(retry),
                    lambda: self._stopping, retry[0].topic)
        self._schedule(retry, error)

    def _steps(self, endpoint: Endpoint, messages: List[Pending],
               error: errors.Error) -> List[Pending]:
        """`messages` failed on `endpoint` with `error`: each is sent on,
        or failed, or returned to be retried (``_publish.next_step``)."""
        retry = []
        for message in messages:
            step = _publish.next_step(message, error, self._router, endpoint,
                                      self._stopping)
            if step is Step.RESEND:
                self._send(message)
            elif step is Step.RETRY:
                retry.append(message)
            else:
                self._finish(message, error)
        return retry

    def _schedule(self, messages: List[Pending], error: errors.Error
                  ) -> None:
        """Sends each of `messages` again after its backoff; fails it with
        `error` if its deadline comes first."""
        for message in messages:
            if message.done:
                continue
            wait = _publish.retry_wait(self._backoff, message.failures)
            if self._stopping:
                self._finish(message,
                             errors.Cancelled("the client was closed"))
            elif _publish.retry_at(message, wait) is None:
                self._finish(message, error)  # No time for another attempt.
            else:
                self._retrying[message] = self._loop.call_later(
                    wait, self._retry, message)
                self.retries += 1

    def _retry(self, message: Pending) -> None:
        """A timer: `message`'s backoff has passed."""
        self._retrying.pop(message, None)
        self._send(message)

    def _watch(self, stream: _PublishStream) -> None:
        """Sets the deadline check of `stream`'s oldest message, if due."""
        at = stream.state.watch()
        if at is not None:
            stream.check = self._loop.call_later(
                max(0.0, at - time.monotonic()), self._check, stream)

    def _check(self, stream: _PublishStream) -> None:
        """A timer: a deadline of `stream` may have passed."""
        stream.check = None
        cancel, again = stream.state.check()
        if cancel:
            stream.call.cancel()  # Its reader fails what waits on it.
        elif again is not None:
            stream.check = self._loop.call_later(
                max(0.0, again - time.monotonic()), self._check, stream)

    def _finish(self, message: Pending, outcome: _publish.Outcome) -> None:
        """Hands `message`'s outcome to its caller, once; frees its
        place."""
        if message.done:
            return
        message.done = True
        handle = self._retrying.pop(message, None)
        if handle is not None:
            handle.cancel()
        self._in_flight -= 1
        self._slots.release()
        if self._in_flight == 0:
            self._idle.set()
        message.settle(outcome)


def _read_outcome(future: "asyncio.Future[Any]") -> None:
    """Marks `future`'s error as read (its caller may have stopped
    waiting: the message goes on)."""
    if not future.cancelled():
        future.exception()


class _Stream:
    """One Subscribe (or SubscribeBatches) call and its outbox.

    grpc.aio's writer task reads `requests()` until the outbox closes.
    """

    def __init__(self, open_request: broker_pb2.SubscribeRequest,
                 endpoint: Endpoint) -> None:
        self._requests: "asyncio.Queue[Optional[Request]]" = asyncio.Queue()
        self.outbox = _protocol.Outbox(self._requests.put_nowait)
        self.outbox.send(open_request)
        self.endpoint = endpoint  # The node it goes to.
        self.call: Any = None  # Set once, right after construction.
        self.accepted = False  # Whether the broker accepted the open.

    async def requests(self) -> AsyncIterator[broker_pb2.SubscribeRequest]:
        while True:
            request = await self._requests.get()
            if request is None:
                return
            yield request


class _Subscription(Generic[T]):
    """A subscribe stream that reconnects, for asyncio: what Subscription
    and BatchSubscription share. `T` is what one step of iteration yields.

    A reader task reads the current stream into a queue and opens the next
    stream after a break, finding a cluster's primary first, as the threaded
    client's reader thread does.
    """

    def __init__(self, client: Client, topic: str, group: str,
                 max_in_flight: int, ack_timeout: Optional[timedelta],
                 reconnect: bool, batches: bool) -> None:
        self._open_request = _protocol.open_request(
            topic, group, max_in_flight, ack_timeout)
        self._name = _protocol.describe(topic, group)
        self._topic = topic
        self._address = client.address
        self._client = client
        self._method_name = _protocol.subscribe_method(batches)
        self._metadata = client._settings.metadata
        self._backoff = client._backoff
        self._reconnect = reconnect
        self._items: "asyncio.Queue[Any]" = asyncio.Queue()
        self._first_answer = asyncio.Event()  # First stream opened/ended.
        self._closing = asyncio.Event()
        self._ended = asyncio.Event()  # Set before the end is queued.
        self._stream: Optional[_Stream] = None
        self._task: Optional["asyncio.Task[None]"] = None
        self._error: Optional[errors.Error] = None
        self._reconnects = 0
        self._waits = self._backoff.waits()
        # When the first stream must have been accepted (set by _open).
        self._open_deadline: Optional[float] = None

    async def _open(self, timeout: Optional[float]) -> None:
        """Opens the first stream and waits until the broker accepts it.

        Raises:
            hourglass.Error: the broker refused it, or DeadlineExceeded.
        """
        self._open_deadline = _cluster.deadline(timeout)
        first = self._start(wait_for_ready=False)
        self._task = asyncio.get_running_loop().create_task(
            self._run(first), name=f"hourglass {self._name}")
        try:
            await asyncio.wait_for(self._first_answer.wait(), timeout)
        except asyncio.TimeoutError:
            await self.close(timeout=0)
            raise errors.DeadlineExceeded(
                f"{self._name}: no answer from {self._address} within "
                f"{timeout} s") from None
        if self._error is not None:
            await self._task
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
        """Acks `deliveries` in one request per stream they came on; as
        ``hourglass.Subscription.ack``. Never waits."""
        return _protocol.ack_all(deliveries)

    async def close(self, timeout: float = DEFAULT_CLOSE_TIMEOUT) -> None:
        """Ends the subscription cleanly; as ``hourglass.Subscription.close``.
        Idempotent."""
        self._closing.set()  # No stream starts after this.
        stream = self._stream
        if stream is not None:
            if stream.accepted:
                stream.outbox.close()
            else:
                # Not open (waiting for the broker to come back): nothing
                # to end cleanly, and nothing to wait for.
                stream.call.cancel()
        if self._task is None:
            return
        done, _ = await asyncio.wait({self._task}, timeout=timeout)
        if not done:
            assert stream is not None
            stream.call.cancel()
            await self._task

    async def __aenter__(self: "_S") -> "_S":
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.close()

    def __aiter__(self: "_S") -> "_S":
        return self

    async def __anext__(self) -> T:
        item = await self._take(None)
        if item is None:
            if self._error is not None:
                raise self._error
            raise StopAsyncIteration
        return item

    async def receive(self, timeout: Optional[float] = None) -> Optional[T]:
        """The next step of iteration, waiting at most `timeout` seconds;
        as ``hourglass.Subscription.receive``."""
        item = await self._take(timeout)
        if item is None and self.closed and self._error is not None:
            raise self._error
        return item

    def _pick(self, deliveries: List[Delivery]) -> T:
        raise NotImplementedError

    async def _take(self, timeout: Optional[float]) -> Optional[T]:
        """What the next response of an open stream holds; None at the end,
        or after `timeout` seconds."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            try:
                item = self._items.get_nowait()
            except asyncio.QueueEmpty:
                if deadline is None:
                    item = await self._items.get()
                else:
                    remaining = deadline - loop.time()
                    if remaining <= 0:
                        return None
                    try:
                        item = await asyncio.wait_for(self._items.get(),
                                                      remaining)
                    except asyncio.TimeoutError:
                        return None
            if item is _END:
                self._items.put_nowait(_END)  # For every later call.
                return None
            outbox, deliveries = item
            if outbox.open:
                return self._pick(deliveries)

    def _start(self, wait_for_ready: bool) -> Optional[_Stream]:
        """Opens a stream to the node calls about the topic go to now and
        makes it the current one; None once closing."""
        if self._closing.is_set():
            return None
        endpoint = self._client._router.route(self._topic)
        stream = _Stream(self._open_request, endpoint)
        method = getattr(endpoint.broker, self._method_name)
        stream.call = method(stream.requests(), metadata=self._metadata,
                             wait_for_ready=wait_for_ready)
        self._stream = stream
        return stream

    async def _serve(self, stream: _Stream) -> Optional[grpc.RpcError]:
        """Reads `stream` into the queue until it ends.

        Returns:
            None if it ended OK (or was cancelled by ``close``), else the
            error it ended with.
        """
        call = stream.call
        try:
            # Sent once the broker accepted the open, marked; a refusal
            # has none, and reading on raises its status.
            if _protocol.accepted(await call.initial_metadata()):
                stream.accepted = True
                self._waits = self._backoff.waits()
                if self._first_answer.is_set():
                    _log.info("%s: subscribed again", self._name)
                self._first_answer.set()
            async for response in call:
                self._items.put_nowait(
                    (stream.outbox,
                     _protocol.deliveries(response, stream.outbox)))
            return None
        except grpc.RpcError as e:
            return e
        except asyncio.CancelledError:
            # grpc.aio raises this for a call cancelled locally, which only
            # close does; a cancellation of this task itself goes on.
            if self._closing.is_set() and call.cancelled():
                return None
            raise
        finally:
            stream.outbox.close()

    async def _run(self, stream: Optional[_Stream]) -> None:
        """The reader task: serves streams until the subscription ends."""
        redirects = 0
        try:
            while stream is not None:
                failure = await self._serve(stream)
                if self._closing.is_set():
                    break
                opened = self._first_answer.is_set()
                again, error = _protocol.after_stream(
                    failure, opened=opened, reconnect=self._reconnect)
                if (not opened and _cluster.unavailable(error)
                        and redirects < _cluster.MAX_REDIRECTS):
                    assert error is not None
                    # Cluster mode: refused by a node that is not the
                    # primary, or its node did not answer: open it where
                    # the primary is.
                    if await self._client._find_primary(
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
                _log.warning(
                    "%s: stream ended (%s); subscribing again in %.3f s",
                    self._name, error, wait)
                try:
                    await asyncio.wait_for(self._closing.wait(), wait)
                    break
                except asyncio.TimeoutError:
                    pass
                if _cluster.unavailable(error):
                    # Cluster mode: its node died or stopped being the
                    # primary.
                    assert error is not None
                    await self._client._find_primary(
                        stream.endpoint, error, None, self._closing.is_set,
                        self._topic)
                stream = self._start(
                    wait_for_ready=self._client._router.wait_for_ready())
                if stream is not None:
                    self._reconnects += 1
        finally:
            self._ended.set()
            self._items.put_nowait(_END)


_S = TypeVar("_S", bound=_Subscription[Any])


class Subscription(_Subscription[Delivery]):
    """The deliveries of a Subscribe stream, one at a time:
    ``async for delivery in subscription``. As ``hourglass.Subscription``.
    Made by ``Client.subscribe``."""

    def __init__(self, client: Client, topic: str, group: str,
                 max_in_flight: int, ack_timeout: Optional[timedelta],
                 reconnect: bool) -> None:
        super().__init__(client, topic, group, max_in_flight, ack_timeout,
                         reconnect, batches=False)

    def _pick(self, deliveries: List[Delivery]) -> Delivery:
        return deliveries[0]


class BatchSubscription(_Subscription[List[Delivery]]):
    """The deliveries of a SubscribeBatches stream, a list at a time. As
    ``hourglass.BatchSubscription``. Made by ``Client.subscribe_batches``."""

    def __init__(self, client: Client, topic: str, group: str,
                 max_in_flight: int, ack_timeout: Optional[timedelta],
                 reconnect: bool) -> None:
        super().__init__(client, topic, group, max_in_flight, ack_timeout,
                         reconnect, batches=True)

    def _pick(self, deliveries: List[Delivery]) -> List[Delivery]:
        return deliveries
