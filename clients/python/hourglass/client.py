"""The Hourglass client for threaded code: ``hourglass.Client``.

``hourglass.aio`` has the same client for asyncio. Both build their requests,
read their answers and map their errors through ``hourglass._protocol``; this
module only adds how a thread waits.
"""

from __future__ import annotations

import concurrent.futures
import heapq
import itertools
import logging
import queue
import threading
import time
import weakref
from datetime import datetime, timedelta
from typing import (Any, Callable, Dict, Generic, Iterable, Iterator, List,
                    Mapping, Optional, Set, Tuple, TypeVar)

import grpc

from hourglass import _cluster, _protocol, _publish, _split, errors
from hourglass._cluster import Endpoint
from hourglass._protocol import (DEFAULT_CLOSE_TIMEOUT, DEFAULT_TIMEOUT,
                                 TlsArg)
from hourglass._publish import DEFAULT_MAX_IN_FLIGHT, Pending, Step
from hourglass.types import (Backoff, Delivery, Group, Message, MessageInfo,
                             MessagePage, MessageState, OnExpire, Payload,
                             Receipt, Schedule, Snapshot, Stats, Topic)
from hourglass.v1 import admin_pb2, broker_pb2

_log = logging.getLogger("hourglass")

T = TypeVar("T")
Request = broker_pb2.SubscribeRequest
PublishRequest = broker_pb2.PublishRequest

# Queued after a subscription's last deliveries.
_END = object()


class Client:
    """A connection to one hourglassd, or to a cluster of them: publish,
    cancel, reschedule, consume, and the Admin calls.

    One gRPC channel carries every call and stream of the client to a
    broker; gRPC connects it on first use and reconnects it after it breaks.
    Unary calls (``publish``, ``publish_many``, ``cancel``, the Admin calls,
    ``next_fire_times``) each have a deadline of ``timeout``.
    ``publish_async`` sends each message as a request on a PublishStream the
    client keeps open, many in flight at once, each with the same deadline.

    Retries: a publish whose messages all have ids (``publish``,
    ``publish_many``, ``publish_async``) is sent again after UNAVAILABLE
    (the broker restarting or shutting down, a cluster failing over), after
    a jittered backoff (``backoff``), until it is answered or its deadline
    passes: the broker answers an id still pending with its first receipt
    (``duplicate`` set) and stores nothing, so a retry cannot store a
    message twice. A publish with a message without an id is never sent
    again: after ``Unavailable`` or ``DeadlineExceeded`` its outcome is
    unknown (it may have been stored), and the broker could not tell a
    second attempt from a new message. No other call is retried.
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
    ``publish_async`` keeps one PublishStream per node it publishes to: a
    message goes on the stream of its topic's shard's primary.

    Thread-safe. ``close`` (or leaving a ``with`` block) ends the
    PublishStreams, closes the subscriptions and the channels; nothing may
    be called afterwards.

    Every call here is made through ``_unary``, a subscription's stream
    (``_Subscription._start``) or a PublishStream (``_Publisher._send``):
    the places that choose the node.
    """

    def __init__(self, addr: str, token: Optional[str] = None,
                 tls: TlsArg = None, *,
                 timeout: Optional[float] = DEFAULT_TIMEOUT,
                 backoff: Backoff = Backoff(),
                 max_publishes_in_flight: int = DEFAULT_MAX_IN_FLIGHT
                 ) -> None:
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
            timeout: Deadline of each unary call, of each message of
                ``publish_async``, and of opening a subscription, in seconds
                (as gRPC and the standard library count timeouts), retries
                included; None waits without end. Default: 10.
            backoff: How subscriptions wait between attempts to subscribe
                again, and publishes with ids between attempts; the bounds
                of gRPC's own waits between attempts to reconnect the
                channel. Default: ``Backoff()``, 50 ms doubling up to 5 s,
                with jitter.
            max_publishes_in_flight: The most messages of ``publish_async``
                in flight at once (sent, or waiting to be sent again, and
                not yet answered); ``publish_async`` waits while there are
                this many. Default: 1000, within the 1024 requests a broker
                reads ahead on a stream.

        Raises:
            ValueError, TypeError: a bad argument: `addr` empty or only
                commas, a bad token, a bad `tls` (see ``Tls``),
                `max_publishes_in_flight` below 1.
            OSError: a PEM file of `tls` cannot be read.
        """
        _publish.check_max_in_flight(max_publishes_in_flight)
        self._settings = _protocol.channel_settings(addr, token, tls, backoff)
        self._timeout = timeout
        self._backoff = backoff
        self._router = _cluster.Router(self._settings, grpc)
        self._lock = threading.Lock()
        # Protected by _lock.
        self._subscriptions: "weakref.WeakSet[_Subscription[Any]]" = (
            weakref.WeakSet())
        self._publisher = _Publisher(self, max_publishes_in_flight)

    @property
    def address(self) -> str:
        """The broker's address, as given (all of them, in cluster mode)."""
        return self._settings.target

    def publish(self, topic: str, payload: Payload = b"", *,
                delay: Optional[timedelta] = None,
                deliver_at: Optional[datetime] = None,
                id: Optional[str] = None,
                headers: Optional[Mapping[str, str]] = None,
                ttl: Optional[timedelta] = None,
                expire_at: Optional[datetime] = None,
                on_expire: OnExpire = "drop") -> Receipt:
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
                value), or a deadline (`ttl`, `expire_at`) at or before
                the due time; nothing is stored.
            ResourceExhausted: the disk is full or the broker's publish
                queue is at its limit; nothing is stored.
            Unavailable, DeadlineExceeded: the outcome is unknown. With an
                `id`, UNAVAILABLE was retried (see the class comment) until
                the deadline, at the primary the other nodes name in a
                cluster: a receipt after retries says ``duplicate`` if an
                earlier attempt was stored. Without an `id` nothing is
                retried: the message may have been stored.
            Unauthenticated, PermissionDenied: see the token file.
            ValueError: both `delay` and `deliver_at`, both `ttl` and
                `expire_at`, a naive `deliver_at` or `expire_at`, or an
                `on_expire` other than "drop" and "dead_letter".
            TypeError: `delay`, `deliver_at`, `ttl`, `expire_at`,
                `on_expire` or `payload` of the wrong type.
        """
        request = broker_pb2.PublishRequest(messages=[_protocol.message(
            Message(topic, payload, delay, deliver_at, id, headers, ttl,
                    expire_at, on_expire),
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
                ids on every message, UNAVAILABLE was retried until the
                deadline, and publishing the batch again is safe; with a
                message without an id, nothing is retried.
        """
        return _split.publish(_protocol.publish_request(messages),
                              self._router.shard_count(), self._publish)

    def publish_async(self, topic: str, payload: Payload = b"", *,
                      delay: Optional[timedelta] = None,
                      deliver_at: Optional[datetime] = None,
                      id: Optional[str] = None,
                      headers: Optional[Mapping[str, str]] = None,
                      ttl: Optional[timedelta] = None,
                      expire_at: Optional[datetime] = None,
                      on_expire: OnExpire = "drop"
                      ) -> "concurrent.futures.Future[Receipt]":
        """Publishes one message as a request on a PublishStream, without
        waiting for its answer: the way to keep many publishes in flight.

        The fields, the durability and the errors are those of ``publish``.
        The client keeps one PublishStream to each node it publishes to
        (the broker, or in a cluster each shard's primary: a message goes
        on the stream of its topic's shard), opened on first use and again
        after it broke; messages from every thread share it, and the broker
        stores those in flight together with shared log writes and fsyncs.
        Their futures complete in any order.

        Each message has the client's ``timeout`` as deadline, retries
        included. A message with an `id` is sent again, on a new stream,
        after UNAVAILABLE or a stream that broke (the broker restarted or
        went away, a failover), after a backoff, until its deadline: its
        receipt then says ``duplicate`` if an earlier attempt was stored. A
        message without an id is never sent again: if its stream breaks
        before its answer, its future fails with the stream's error
        (``Unavailable``) and the message may or may not be stored. Answers
        come in order, so a request whose deadline passes cancels its
        stream: every message waiting on it fails with
        ``DeadlineExceeded``.

        Blocks only while ``max_publishes_in_flight`` messages of the
        client are in flight (each is done by its deadline), so do not
        call it from a future's callback. Callbacks added to the future
        run on a thread of the client's and must not block.

        Returns:
            A ``concurrent.futures.Future`` that completes with the
            message's ``Receipt``, or with the ``hourglass.Error`` it
            failed with (``future.result()`` raises it): as ``publish``'s,
            and ``Cancelled`` for a message still in flight when ``close``
            gave up waiting for it. It cannot be cancelled.

        Raises:
            ValueError, TypeError: a bad field, as ``publish``; nothing is
                sent.
        """
        request = broker_pb2.PublishRequest(messages=[_protocol.message(
            Message(topic, payload, delay, deliver_at, id, headers, ttl,
                    expire_at, on_expire),
            "publish_async")])
        return self._publisher.publish(request)

    def cancel(self, topic: str, id: str) -> None:
        """Cancels a message that is scheduled and not yet due (Broker
        Cancel, for a token with role ``produce``; the Admin service's
        CancelMessage does the same for role ``admin``).

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

    # --- The Admin service ---------------------------------------------------
    #
    # Each needs the token's ``admin`` role for the topic (for every topic:
    # stats of all topics, topics, create_snapshot) with --auth_tokens.
    # Calls about a topic go to its shard's primary in a cluster; the
    # others to the node calls go to, which answers for the whole cluster.
    # None is retried (see the class comment).

    def stats(self, topic: Optional[str] = None) -> Stats:
        """Counts (exact), rates and lateness of every topic, or of one, and
        the broker's version and health (Admin GetStats).

        Raises:
            NotFound: `topic` has no messages and no groups.
            InvalidArgument: a malformed topic.
        """
        response = self._unary(lambda e: e.admin.GetStats,
                               admin_pb2.GetStatsRequest(topic=topic or ""))
        return _protocol.stats(response)

    def topics(self) -> List[Topic]:
        """Every topic that has messages or groups, in name order, with its
        counts (Admin ListTopics)."""
        response = self._unary(lambda e: e.admin.ListTopics,
                               admin_pb2.ListTopicsRequest())
        return _protocol.topics(response)

    def groups(self, topic: str) -> List[Group]:
        """The consumer groups of `topic`, in name order (Admin
        ListGroups).

        Raises:
            NotFound: no such topic.
        """
        response = self._unary(lambda e: e.admin.ListGroups,
                               admin_pb2.ListGroupsRequest(topic=topic))
        return [_protocol.group(g) for g in response.groups]

    def create_group(self, topic: str, group: str) -> Group:
        """Registers `group` before any consumer subscribes, so that it gets
        every message of `topic` that comes due from now on (Admin
        CreateGroup).

        Raises:
            AlreadyExists: the group exists.
            ResourceExhausted: the topic has the broker's
                ``--max_groups_per_topic`` (64) groups.
        """
        response = self._unary(lambda e: e.admin.CreateGroup,
                               admin_pb2.CreateGroupRequest(topic=topic,
                                                            group=group))
        return _protocol.group(response)

    def delete_group(self, topic: str, group: str) -> int:
        """Deletes `group` with its ready and in-flight state; its
        subscriptions end with ``NotFound`` (Admin DeleteGroup).

        Returns:
            How many ready and in-flight entries went with it.

        Raises:
            NotFound: no such group.
        """
        response = self._unary(lambda e: e.admin.DeleteGroup,
                               admin_pb2.DeleteGroupRequest(topic=topic,
                                                            group=group))
        return response.removed

    def list_messages(self, topic: str, state: MessageState, *,
                      group: Optional[str] = None,
                      due_from: Optional[datetime] = None,
                      due_to: Optional[datetime] = None,
                      page_size: int = 0,
                      page_token: Optional[str] = None) -> MessagePage:
        """One page of the messages of `topic` in `state`, in due-time
        order (ties: publish order) (Admin ListMessages).

        ``MessageState.DEAD`` lists the dead letters of `topic` (the
        messages of ``<topic>.dlq``). For the next page, call again with
        the same arguments and ``page_token=page.next_page_token``, until
        it is None::

            token = None
            while True:
                page = client.list_messages("orders", MessageState.SCHEDULED,
                                            page_token=token)
                ...
                token = page.next_page_token
                if token is None:
                    break

        Args:
            group: For ``READY`` and ``IN_FLIGHT``: only this group's.
            due_from, due_to: Only messages due in [due_from, due_to)
                (timezone-aware); None leaves that end open.
            page_size: 1 to 1000; 0 for the broker's default, 100.
            page_token: The previous page's ``next_page_token``.

        Raises:
            InvalidArgument: a bad argument (a group with another state,
                a page token of another listing).
            TypeError, ValueError: `state` is not a MessageState, a naive
                or non-datetime time, a negative `page_size`.
        """
        response = self._unary(
            lambda e: e.admin.ListMessages,
            _protocol.list_messages_request(topic, state, group, due_from,
                                            due_to, page_size, page_token))
        return _protocol.message_page(response)

    def get_message(self, topic: str, id: str, *,
                    preview_bytes: int = 0) -> MessageInfo:
        """One message of `topic`, with its state in every group (Admin
        GetMessage).

        Args:
            preview_bytes: How much of the payload to return: 0 for 256
                bytes, at most 1 MiB.

        Raises:
            NotFound: no such message (never published, or acked by every
                group, or cancelled).
        """
        response = self._unary(
            lambda e: e.admin.GetMessage,
            admin_pb2.GetMessageRequest(topic=topic, id=id,
                                        preview_bytes=preview_bytes))
        return _protocol.message_info(response)

    def schedule_histogram(self, topic: str, start: datetime, end: datetime,
                           bucket: timedelta) -> Schedule:
        """How many scheduled messages of `topic` come due in each `bucket`
        of [start, end) (Admin GetSchedule).

        Buckets are aligned to whole multiples of `bucket` since the Unix
        epoch, in UTC (1 h buckets start on the hour, 1 day buckets at
        midnight UTC): the first holds `start`, the last the instant before
        `end`, and each count covers its whole bucket. The counts are
        exact; a topic without scheduled messages gets zeros.

        Args:
            start, end: The range (timezone-aware); `end` after `start`.
            bucket: A positive whole number of minutes.

        Raises:
            InvalidArgument: `bucket` not whole minutes, more than 10,000
                buckets, `end` not after `start`.
        """
        response = self._unary(
            lambda e: e.admin.GetSchedule,
            _protocol.schedule_request(topic, start, end, bucket))
        return _protocol.schedule(response)

    def redrive(self, topic: str, ids: Optional[Iterable[str]] = None
                ) -> int:
        """Publishes dead letters of `topic` (messages of ``<topic>.dlq``)
        back to `topic`, due now, and removes them from the dead-letter
        topic (Admin RedriveDeadLetters).

        Args:
            ids: The dead letters to move, at most ``--max_batch`` (10000);
                None moves all of them.

        Returns:
            How many moved.

        Raises:
            NotFound: an id of `ids` is not a dead letter of the topic;
                then nothing moved.
            Unavailable: letters stayed busy too long; the others moved;
                call again.
        """
        response = self._unary(lambda e: e.admin.RedriveDeadLetters,
                               _protocol.redrive_request(topic, ids))
        return response.redriven

    def purge(self, topic: str, *, scheduled: bool = False,
              ready: bool = False) -> int:
        """Deletes the scheduled and/or ready messages of `topic` (Admin
        PurgeTopic). A message in flight in one group and ready in another
        stays for the group that holds it; dead letters stay.

        Returns:
            How many were deleted.

        Raises:
            InvalidArgument: neither `scheduled` nor `ready`.
        """
        response = self._unary(
            lambda e: e.admin.PurgeTopic,
            admin_pb2.PurgeTopicRequest(topic=topic, scheduled=scheduled,
                                        ready=ready))
        return response.purged

    def create_snapshot(self, name: str) -> Snapshot:
        """Writes a consistent snapshot of the broker's store into a new
        directory `name` of its ``--snapshot_dir`` (by default
        ``snapshots`` under its data directory), on the broker's machine
        (Admin CreateSnapshot). Publishes and deliveries go on meanwhile.

        Raises:
            InvalidArgument: `name` is empty or not a plain name (up to 200
                of letters, digits, ``.``, ``_``, ``-``).
            AlreadyExists: the snapshot exists.
            FailedPrecondition: the broker takes no snapshots.
        """
        response = self._unary(lambda e: e.admin.CreateSnapshot,
                               admin_pb2.CreateSnapshotRequest(dir=name))
        return _protocol.snapshot(response)

    # --- The Recurrences service ---------------------------------------------

    def next_fire_times(self, *, cron: Optional[str] = None,
                        every: Optional[timedelta] = None,
                        time_zone: str = "", on_gap: str = "",
                        on_overlap: str = "",
                        start_at: Optional[datetime] = None,
                        end_at: Optional[datetime] = None,
                        after: Optional[datetime] = None,
                        count: int = 10) -> List[datetime]:
        """The next fire times of a recurring rule given here, computed by
        the broker without storing anything (Recurrences
        PreviewRecurrence). Needs no role: with ``--auth_tokens``, any
        valid token. Goes to the node calls about no topic go to.

        Fire times are whole seconds. A cron rule is read in `time_zone`:
        a local time that falls in a DST gap fires as the gap ends (or not
        at all, ``on_gap="skip"``); one that occurs twice fires as
        `on_overlap` says.

        Args:
            cron: A cron expression: 5 fields (minute hour day-of-month
                month day-of-week), or 6 with seconds first, or
                ``@daily`` and the like; or
            every: a fixed period of whole seconds, at least 1 s, anchored
                at `start_at` (else the Unix epoch), blind to time zones.
                Exactly one of the two.
            time_zone: An IANA name (``"Europe/Paris"``), from the
                broker's tzdata; "" for UTC.
            on_gap: ``"fire"`` (the default, "") or ``"skip"``.
            on_overlap: ``"auto"`` (the default, ""): once for fixed hours,
                twice for ``*`` or steps; or ``"both"``.
            start_at, end_at: Only fire times f with start_at <= f <
                end_at (timezone-aware); None leaves that end open.
            after: The first fire time is strictly after this
                (timezone-aware); None: the broker's now.
            count: How many, 1 to 1000; fewer come back when the rule
                ends first.

        Returns:
            The fire times in order, as timezone-aware datetimes in UTC.

        Raises:
            InvalidArgument: a bad rule, the message saying what is bad
                and its value (``rule: unknown time zone
                "Mars/Olympus"``), or `count` above 1000.
            ValueError: neither or both of `cron` and `every`, a naive
                `start_at`, `end_at` or `after`, or `count` below 1;
                nothing is sent.
            TypeError: an argument of the wrong type; nothing is sent.
        """
        response = self._unary(
            lambda e: e.recurrences.PreviewRecurrence,
            _protocol.preview_request(cron, every, time_zone, on_gap,
                                      on_overlap, start_at, end_at, after,
                                      count))
        return _protocol.fire_times(response)

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
        """Closes the client. Idempotent.

        Waits up to `timeout` seconds for the messages of ``publish_async``
        in flight to be answered (those still in flight then fail with
        ``Cancelled``, their outcome unknown) and ends the PublishStreams;
        closes every subscription (see ``Subscription.close``); then the
        channels.
        """
        self._publisher.close(timeout)
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
                unknown outcome (``_protocol.repeatable``): then an
                UNAVAILABLE is retried after a backoff (the client's
                `backoff`) until the deadline. A node's redirect needs no
                such care: it did nothing.

        Raises:
            hourglass.Error: the call (its last attempt) failed; its code
                and message.
        """
        topic = _cluster.topic_of(request)
        deadline = _cluster.deadline(self._timeout)
        endpoint = self._router.route(topic)
        redirects = 0
        failures = 0
        # The first attempt fails fast if its node cannot be reached; a
        # retry of a single broker waits for it (within the deadline).
        wait_for_ready = False
        while True:
            try:
                return method(endpoint)(
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
                    found = self._rediscover(endpoint, deadline, topic=topic)
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
            time.sleep(wait)
            endpoint = self._router.route(topic)
            wait_for_ready = self._router.wait_for_ready()

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


class _Timers:
    """Calls functions at given times (time.monotonic()), one at a time, on
    a thread of its own started on first use: the deadline checks and the
    retries of ``publish_async``. A function must not block. Thread-safe.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._changed = threading.Condition()
        # Protected by _changed.
        self._heap: List[Tuple[float, int, Callable[[], None]]] = []
        self._order = itertools.count()
        self._closed = False
        self._thread: Optional[threading.Thread] = None

    def at(self, when: float, function: Callable[[], None]) -> bool:
        """Calls `function` at `when`; False (and never) once closed."""
        with self._changed:
            if self._closed:
                return False
            heapq.heappush(self._heap, (when, next(self._order), function))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run,
                                                name=self._name, daemon=True)
                self._thread.start()
            self._changed.notify()
            return True

    def close(self) -> None:
        """Drops what is not due and ends the thread; idempotent."""
        with self._changed:
            self._closed = True
            self._heap.clear()
            self._changed.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        while True:
            with self._changed:
                while True:
                    if self._closed:
                        return
                    wait = None
                    if self._heap:
                        wait = self._heap[0][0] - time.monotonic()
                        if wait <= 0:
                            break
                    self._changed.wait(wait)
                _, _, function = heapq.heappop(self._heap)
            try:
                function()
            except Exception:  # A bug: log it, keep the others going.
                _log.exception("a timer of the publisher failed")


class _PublishStream:
    """One PublishStream call to one node: its requests, written by gRPC's
    writer thread from a queue, and a reader thread of its own matching
    the answers to them (``_Publisher._read``)."""

    def __init__(self, publisher: "_Publisher", endpoint: Endpoint,
                 wait_for_ready: bool, first: Pending) -> None:
        """Starts the call with `first` as its first request: the message
        a stream is opened for rides it, even if it fails at once."""
        self.endpoint = endpoint
        self._requests: "queue.SimpleQueue[Optional[PublishRequest]]" = (
            queue.SimpleQueue())
        self.state = _publish.StreamState(self._requests.put,
                                          endpoint.address,
                                          publisher.timeout)
        sent = self.state.send(first)
        assert sent
        self.call: Any = endpoint.broker.PublishStream(
            self._requests_iter(), metadata=publisher.metadata,
            wait_for_ready=wait_for_ready)
        self.thread = threading.Thread(
            target=publisher._read, args=(self,),
            name=f"hourglass publish stream to {endpoint.address}",
            daemon=True)
        self.thread.start()

    def _requests_iter(self) -> Iterator[PublishRequest]:
        while True:
            request = self._requests.get()
            if request is None:
                return
            yield request


class _Publisher:
    """The PublishStreams of a client and the messages of ``publish_async``
    on them; ``hourglass._publish`` decides what happens to each.

    Threads: each stream's reader thread reads its answers, settles its
    messages, and after the stream ended sends on or retries those it did
    not answer (after looking for the primary, in a cluster); a timer
    thread (``_Timers``) checks the streams' deadlines and sends messages
    again after their backoff. Thread-safe.
    """

    def __init__(self, client: Client, max_in_flight: int) -> None:
        self._client = client
        self._router = client._router
        self._backoff = client._backoff
        self._max_in_flight = max_in_flight
        self.metadata = client._settings.metadata
        self.timeout = client._timeout
        self._timers = _Timers("hourglass publish timers")
        self._changed = threading.Condition()
        # Protected by _changed.
        # The stream messages to each node (by address) go on now.
        self._streams: Dict[str, _PublishStream] = {}
        # Every stream whose reader thread may still run.
        self._all: List[_PublishStream] = []
        # The nodes a stream was opened to: a new one waits for its node.
        self._opened: Set[str] = set()
        self._in_flight = 0
        self._retrying: Set[Pending] = set()  # Waiting for their backoff.
        self._closed = False  # Takes no new messages.
        self._stopping = False  # Sends nothing more.
        #: Messages sent again after a failure, for tests.
        self.retries = 0

    def publish(self, request: broker_pb2.PublishRequest
                ) -> "concurrent.futures.Future[Receipt]":
        """Sends `request` (of one message) on its stream; its future."""
        future: "concurrent.futures.Future[Receipt]" = (
            concurrent.futures.Future())
        future.set_running_or_notify_cancel()  # It cannot be cancelled.
        with self._changed:
            self._changed.wait_for(
                lambda: self._closed or self._in_flight < self._max_in_flight)
            if self._closed:
                future.set_exception(errors.Cancelled(
                    "publish_async: the client is closed"))
                return future
            self._in_flight += 1
        self._send(_publish.pending(
            request, self.timeout,
            lambda outcome: _publish.complete(future, outcome)))
        return future

    def close(self, timeout: float) -> None:
        """Waits up to `timeout` for the messages in flight, fails the rest
        with Cancelled, ends the streams (cleanly if nothing is left), and
        the timers."""
        deadline = time.monotonic() + timeout
        with self._changed:
            self._closed = True
            self._changed.notify_all()
            idle = self._changed.wait_for(lambda: self._in_flight == 0,
                                          timeout)
            self._stopping = True
            retrying = list(self._retrying)
            self._retrying.clear()
            streams = list(self._all)
        for message in retrying:
            self._finish(message, errors.Cancelled("the client was closed"))
        for stream in streams:
            if idle:
                stream.state.close_writes()
            else:
                stream.state.cancelling()
                stream.call.cancel()
        for stream in streams:
            if stream.thread is threading.current_thread():
                continue  # Closed from a future's callback: it ends next.
            stream.thread.join(max(0.0, deadline - time.monotonic()))
            if stream.thread.is_alive():
                stream.state.cancelling()
                stream.call.cancel()
                stream.thread.join()
        self._timers.close()

    def _send(self, message: Pending) -> None:
        """Sends `message` on the stream to the node its topic goes to now,
        opening one if there is none, or if it ended. The first stream to a
        node fails fast if the node cannot be reached; a later one waits
        for it (a single broker's), as the messages' deadlines allow."""
        while True:
            with self._changed:
                if message.done:
                    return
                stopping = self._stopping
                if not stopping:
                    endpoint = self._router.route(message.topic)
                    stream = self._streams.get(endpoint.address)
                    if stream is None or not stream.state.usable:
                        wait = (endpoint.address in self._opened
                                and self._router.wait_for_ready())
                        self._opened.add(endpoint.address)
                        stream = _PublishStream(self, endpoint, wait, message)
                        self._streams[endpoint.address] = stream
                        self._all = [s for s in self._all
                                     if s.thread.is_alive()]
                        self._all.append(stream)
                        sent = True
                    else:
                        sent = False
            if stopping:
                self._finish(message,
                             errors.Cancelled("the client was closed"))
                return
            if sent or stream.state.send(message):
                self._watch(stream)
                return

    def _read(self, stream: _PublishStream) -> None:
        """A stream's reader thread: settles each message answered, then
        the rest once the stream ended."""
        rpc_error: Optional[grpc.RpcError] = None
        try:
            for response in stream.call:
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
        unanswered, error = stream.state.ended(rpc_error)
        retry = self._steps(stream.endpoint, unanswered, error)
        if retry:
            _log.warning("the PublishStream to %s ended (%s); %d messages "
                         "with ids are sent again", stream.endpoint.address,
                         error, len(retry))
            if _cluster.unavailable(error):
                # Cluster mode: its node may have died; the messages go
                # where the maps say the primaries are now.
                self._client._rediscover(stream.endpoint,
                                         _publish.latest_deadline(retry),
                                         lambda: self._stopping,
                                         retry[0].topic)
        self._schedule(retry, error)

    def _steps(self, endpoint: Endpoint, messages: List[Pending],
               error: errors.Error) -> List[Pending]:
        """`messages` failed on `endpoint` with `error`: each is sent on,
        or failed, or returned to be retried (``_publish.next_step``)."""
        with self._changed:
            stopping = self._stopping
        retry = []
        for message in messages:
            step = _publish.next_step(message, error, self._router, endpoint,
                                      stopping)
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
            wait = _publish.retry_wait(self._backoff, message.failures)
            at = _publish.retry_at(message, wait)
            if at is None:  # No time left for another attempt.
                self._finish(message, error)
                continue
            with self._changed:
                if message.done:
                    continue
                stopping = self._stopping
                if not stopping:
                    self._retrying.add(message)
                    self.retries += 1
            if stopping or not self._timers.at(
                    at, lambda m=message: self._retry(m)):
                self._finish(message,
                             errors.Cancelled("the client was closed"))

    def _retry(self, message: Pending) -> None:
        """A timer: `message`'s backoff has passed."""
        with self._changed:
            self._retrying.discard(message)
        self._send(message)

    def _watch(self, stream: _PublishStream) -> None:
        """Sets the deadline check of `stream`'s oldest message, if due."""
        at = stream.state.watch()
        if at is not None:
            self._timers.at(at, lambda: self._check(stream))

    def _check(self, stream: _PublishStream) -> None:
        """A timer: a deadline of `stream` may have passed."""
        cancel, again = stream.state.check()
        if cancel:
            stream.call.cancel()  # Its reader fails what waits on it.
        elif again is not None:
            self._timers.at(again, lambda: self._check(stream))

    def _finish(self, message: Pending,
                outcome: _publish.Outcome) -> None:
        """Hands `message`'s outcome to its caller, once; frees its
        place."""
        with self._changed:
            if message.done:
                return
            message.done = True
            self._retrying.discard(message)
            self._in_flight -= 1
            self._changed.notify_all()
        message.settle(outcome)


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
