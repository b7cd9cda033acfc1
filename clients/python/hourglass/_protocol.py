"""What hourglass.client (threads) and hourglass.aio (asyncio) share.

The two clients differ only in how they wait. Everything they decide is here,
once: the channel's credentials, options and call metadata; requests built
from Python values; answers turned into Python values; gRPC errors turned
into ``hourglass.errors``; the outbox of a subscribe stream; and which
stream ends a subscription reconnects after. Which node of a cluster calls
go to is decided in ``hourglass._cluster``.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from datetime import datetime, timedelta, timezone
from typing import (Any, Callable, Iterable, List, Optional, Sequence, Tuple,
                    Union)

import grpc
from google.protobuf import duration_pb2, timestamp_pb2

from hourglass import errors
from hourglass.types import (Backoff, Delivery, Group, GroupState,
                             GroupStats, Message, MessageInfo, MessagePage,
                             MessageState, Payload, Pem, Percentiles, Receipt,
                             Schedule, ScheduleBucket, Snapshot, Stats, Tls,
                             Topic, TopicStats)

from hourglass.v1 import admin_pb2, broker_pb2, recurrences_pb2
from hourglass.v1 import cluster_pb2  # noqa: F401  (for _cluster)

#: Default deadline of unary calls, and of opening a subscription, in seconds.
DEFAULT_TIMEOUT = 10.0
#: Default time ``close`` gives the broker to end a stream cleanly, in seconds.
DEFAULT_CLOSE_TIMEOUT = 5.0

#: The initial-metadata entry with which the broker says a subscribe
#: stream's open was accepted (broker.proto, Subscribe). A refused open ends
#: with a status alone, which gRPC Python reports as empty initial metadata
#: followed by the status: only the entry tells the two apart.
SUBSCRIBED_METADATA = "hourglass-subscribed"


def accepted(initial_metadata: Any) -> bool:
    """Whether a subscribe stream's initial metadata says it was accepted."""
    return any(key == SUBSCRIBED_METADATA for key, _ in
               (initial_metadata or ()))


#: What ``Client(tls=...)`` takes: off (None, False), the system's roots
#: (True), root CAs as PEM bytes or a path (str or os.PathLike; a str holding
#: PEM text is taken as the PEM itself), or full settings.
TlsArg = Union[None, bool, bytes, str, "os.PathLike[str]", Tls]

# Ends of a subscribe stream after which a subscription opens a new one:
# the broker restarted or went away (UNAVAILABLE), ended a stream it could
# not write to, or the connection broke (CANCELLED; only when the client did
# not cancel it itself), or it had too many streams open (RESOURCE_EXHAUSTED).
# Other codes are answers about this subscription (NOT_FOUND: the group was
# deleted; PERMISSION_DENIED, UNAUTHENTICATED: the token changed;
# INVALID_ARGUMENT) that a new stream would get again.
_RECONNECT_CODES = frozenset({
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
})


def after_stream(failure: Optional[grpc.RpcError], *, opened: bool,
                 reconnect: bool) -> Tuple[bool, Optional[errors.Error]]:
    """What a subscription does after one of its streams ended.

    Args:
        failure: The error the stream ended with; None if it ended OK.
        opened: Whether a stream of the subscription was ever accepted (the
            first subscription is not retried: its caller gets the error).
        reconnect: The subscription's option.

    Returns:
        (True, the error) to subscribe again after a backoff; else (False,
        the error the subscription ends with, None for a clean end).

    REQUIRES: the client did not end or cancel the stream itself.
    """
    if failure is None:
        return False, None
    code = failure.code()  # type: ignore[attr-defined]
    again = opened and reconnect and code in _RECONNECT_CODES
    return again, error(failure)


# --- The channel -------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ChannelSettings:
    """How to build the gRPC channel of a client, sync or asyncio.

    Attributes:
        target: The broker's address as given: host:port, or several
            separated by commas (nodes of a cluster).
        addresses: The addresses of `target`, in order; at least one.
        credentials: TLS credentials; None for plaintext.
        options: gRPC channel arguments.
        metadata: Sent with every call (the bearer token).
    """

    target: str
    addresses: Tuple[str, ...]
    credentials: Optional[grpc.ChannelCredentials]
    options: Tuple[Tuple[str, Union[str, int]], ...]
    metadata: Tuple[Tuple[str, str], ...]


def channel_settings(addr: str, token: Optional[str], tls: TlsArg,
                     backoff: Backoff) -> ChannelSettings:
    """The channel settings of ``Client(addr, token, tls, backoff=...)``.

    gRPC reconnects a broken channel by itself, with a backoff of its own;
    it gets the bounds of `backoff`, so that a subscription waiting for the
    broker to come back waits no longer than the subscription's own backoff
    says.

    Raises:
        ValueError: `addr` is empty or names no address, `token` is empty
            or holds characters other than printable ASCII, or `tls` is a
            bad value.
        TypeError: `tls` is of no type it takes.
        OSError: a PEM file of `tls` cannot be read.
    """
    addresses = addresses_of(addr)
    metadata: Tuple[Tuple[str, str], ...] = ()
    if token is not None:
        if not token or not all(" " < c <= "~" for c in token):
            raise ValueError(
                "Client: a token is printable ASCII without spaces, and "
                "not empty")
        metadata = (("authorization", f"Bearer {token}"),)
    options: List[Tuple[str, Union[str, int]]] = [
        # The broker bounds what it sends (--max_payload_bytes, batches of
        # about 1 MiB, but a larger delivery travels alone); gRPC's default
        # limit of 4 MiB would refuse a large payload the broker accepted.
        ("grpc.max_receive_message_length", -1),
        ("grpc.initial_reconnect_backoff_ms",
         max(1, int(backoff.initial.total_seconds() * 1000))),
        ("grpc.max_reconnect_backoff_ms",
         max(1, int(backoff.maximum.total_seconds() * 1000))),
        # Connections of this client's own. gRPC otherwise shares them
        # among every channel of the process with the same target and
        # options: a new client would inherit another's backoff after a
        # refused connection (the broker restarting) and fail its first
        # call at once with that old error, as the C++ client's own_connection.
        ("grpc.use_local_subchannel_pool", 1),
    ]
    settings = tls_settings(tls)
    credentials = None
    if settings is not None:
        credentials = grpc.ssl_channel_credentials(
            root_certificates=_pem(settings.root_certs),
            private_key=_pem(settings.private_key),
            certificate_chain=_pem(settings.cert_chain))
        if settings.server_name:
            options.append(("grpc.ssl_target_name_override",
                            settings.server_name))
    return ChannelSettings(addr, addresses, credentials, tuple(options),
                           metadata)


def addresses_of(addr: str) -> Tuple[str, ...]:
    """The addresses of ``Client(addr)``: one, or several separated by
    commas (the nodes of a cluster), spaces around each ignored.

    Raises:
        ValueError: `addr` is empty, or names no address (only commas).
    """
    if not addr:
        raise ValueError("Client: addr is empty")
    addresses = tuple(a.strip() for a in addr.split(",") if a.strip())
    if not addresses:
        raise ValueError(f"Client: addr {addr!r} names no address")
    return addresses


def tls_settings(tls: TlsArg) -> Optional[Tls]:
    """The Tls settings `tls` stands for; None for plaintext.

    Raises:
        TypeError: `tls` is of no type ``Client`` takes.
    """
    if tls is None or tls is False:
        return None
    if tls is True:
        return Tls()
    if isinstance(tls, Tls):
        return tls
    if isinstance(tls, (bytes, str, os.PathLike)):
        return Tls(root_certs=tls)
    raise TypeError(
        f"Client: tls is None, a bool, PEM bytes, a path or a hourglass.Tls, "
        f"not {type(tls).__name__}")


def _pem(value: Optional[Pem]) -> Optional[bytes]:
    """PEM bytes from bytes, PEM text, or a path; None stays None."""
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str) and value.lstrip().startswith("-----BEGIN"):
        return value.encode("ascii")
    with open(value, "rb") as f:
        return f.read()


# --- Values ------------------------------------------------------------------


def duration(value: timedelta, what: str) -> duration_pb2.Duration:
    """`value` as a protobuf Duration; `what` names it in errors.

    Raises:
        TypeError: `value` is not a timedelta.
    """
    if not isinstance(value, timedelta):
        raise TypeError(
            f"{what} is a datetime.timedelta, not {type(value).__name__}")
    result = duration_pb2.Duration()
    result.FromTimedelta(value)
    return result


def timestamp(value: datetime, what: str) -> timestamp_pb2.Timestamp:
    """`value` as a protobuf Timestamp; `what` names it in errors.

    Raises:
        TypeError: `value` is not a datetime.
        ValueError: `value` is naive: it could be any timezone's.
    """
    if not isinstance(value, datetime):
        raise TypeError(
            f"{what} is a datetime.datetime, not {type(value).__name__}")
    if value.utcoffset() is None:
        raise ValueError(
            f"{what} {value.isoformat()} has no timezone; give it one, "
            f"e.g. datetime.now(timezone.utc) + timedelta(minutes=30)")
    result = timestamp_pb2.Timestamp()
    result.FromDatetime(value)
    return result


def from_timestamp(value: timestamp_pb2.Timestamp) -> datetime:
    """`value` as an aware datetime in UTC."""
    return value.ToDatetime(tzinfo=timezone.utc)


def _payload(value: Payload) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"payload is bytes or str, not {type(value).__name__}")


def _when(target: Union[broker_pb2.Message, admin_pb2.RescheduleRequest],
          delay: Optional[timedelta], deliver_at: Optional[datetime],
          what: str) -> None:
    if delay is not None and deliver_at is not None:
        raise ValueError(f"{what}: give delay or deliver_at, not both")
    if delay is not None:
        target.delay.CopyFrom(duration(delay, f"{what}: delay"))
    elif deliver_at is not None:
        target.deliver_at.CopyFrom(
            timestamp(deliver_at, f"{what}: deliver_at"))


#: ``Message.on_expire`` as broker.proto's OnExpire.
_ON_EXPIRE = {
    "drop": broker_pb2.ON_EXPIRE_DROP,
    "dead_letter": broker_pb2.ON_EXPIRE_DEAD_LETTER,
}


def _deadline(target: broker_pb2.Message, ttl: Optional[timedelta],
              expire_at: Optional[datetime], on_expire: str,
              what: str) -> None:
    """Sets the deadline fields of `target`. Whether the deadline comes
    after the due time, and its limit, are the broker's to check (on its
    clock, with its ``--max_delay``)."""
    if ttl is not None and expire_at is not None:
        raise ValueError(f"{what}: give ttl or expire_at, not both")
    if ttl is not None:
        target.ttl.CopyFrom(duration(ttl, f"{what}: ttl"))
    elif expire_at is not None:
        target.expire_at.CopyFrom(timestamp(expire_at, f"{what}: expire_at"))
    if not isinstance(on_expire, str):
        raise TypeError(f"{what}: on_expire is 'drop' or 'dead_letter', "
                        f"not {type(on_expire).__name__}")
    if on_expire not in _ON_EXPIRE:
        raise ValueError(f"{what}: on_expire {on_expire!r} is neither "
                         f"'drop' nor 'dead_letter'")
    target.on_expire = _ON_EXPIRE[on_expire]


# --- Requests ----------------------------------------------------------------


def message(value: Message, what: str = "message") -> broker_pb2.Message:
    """`value` as the protobuf Message of a PublishRequest.

    Raises:
        ValueError, TypeError: as ``Client.publish`` says.
    """
    if not isinstance(value, Message):
        raise TypeError(
            f"{what} is a hourglass.Message, not {type(value).__name__}")
    result = broker_pb2.Message(topic=value.topic,
                                payload=_payload(value.payload),
                                id=value.id or "")
    if value.headers:
        result.headers.update(value.headers)
    _when(result, value.delay, value.deliver_at, what)
    _deadline(result, value.ttl, value.expire_at, value.on_expire, what)
    return result


def publish_request(messages: Iterable[Message]) -> broker_pb2.PublishRequest:
    """A PublishRequest of `messages`, in order.

    Raises:
        ValueError, TypeError: a message is bad as ``Client.publish`` says;
            the error names its index.
    """
    return broker_pb2.PublishRequest(messages=[
        message(m, f"message {i}") for i, m in enumerate(messages)
    ])


def repeatable(request: broker_pb2.PublishRequest) -> bool:
    """Whether a Publish may be sent again after an unknown outcome (an
    UNAVAILABLE from a node that died with it): when every message has an
    id, the broker stores none of them twice (a pending id is answered with
    its first receipt, ``duplicate`` set)."""
    return all(m.id for m in request.messages)


def cancel_request(topic: str, id: str) -> broker_pb2.CancelRequest:
    """A CancelRequest (Broker.Cancel)."""
    return broker_pb2.CancelRequest(topic=topic, id=id)


def reschedule_request(topic: str, id: str, delay: Optional[timedelta],
                       deliver_at: Optional[datetime]
                       ) -> admin_pb2.RescheduleRequest:
    """A RescheduleRequest (Admin.Reschedule).

    Raises:
        ValueError: neither or both of `delay` and `deliver_at`, or a naive
            `deliver_at`.
        TypeError: `delay` or `deliver_at` is of the wrong type.
    """
    if delay is None and deliver_at is None:
        raise ValueError("reschedule: give delay or deliver_at")
    request = admin_pb2.RescheduleRequest(topic=topic, id=id)
    _when(request, delay, deliver_at, "reschedule")
    return request


def open_request(topic: str, group: str, max_in_flight: int,
                 ack_timeout: Optional[timedelta]
                 ) -> broker_pb2.SubscribeRequest:
    """The first request of a Subscribe or SubscribeBatches stream.

    Raises:
        ValueError: `max_in_flight` is negative or over 2**32 - 1.
        TypeError: `ack_timeout` is not a timedelta.
    """
    if not 0 <= max_in_flight < 2**32:
        raise ValueError(
            f"subscribe: max_in_flight {max_in_flight} is not in 0..2**32-1")
    open_ = broker_pb2.Open(topic=topic, group=group,
                            max_in_flight=max_in_flight)
    if ack_timeout is not None:
        open_.ack_timeout.CopyFrom(
            duration(ack_timeout, "subscribe: ack_timeout"))
    return broker_pb2.SubscribeRequest(open=open_)


#: MessageState as admin.proto numbers it.
_STATE_TO_PROTO = {
    MessageState.SCHEDULED: admin_pb2.MESSAGE_STATE_SCHEDULED,
    MessageState.READY: admin_pb2.MESSAGE_STATE_READY,
    MessageState.IN_FLIGHT: admin_pb2.MESSAGE_STATE_IN_FLIGHT,
    MessageState.DEAD: admin_pb2.MESSAGE_STATE_DEAD,
}
_STATE_FROM_PROTO = {v: k for k, v in _STATE_TO_PROTO.items()}


def list_messages_request(topic: str, state: MessageState,
                          group: Optional[str],
                          due_from: Optional[datetime],
                          due_to: Optional[datetime], page_size: int,
                          page_token: Optional[str]
                          ) -> admin_pb2.ListMessagesRequest:
    """A ListMessagesRequest (Admin.ListMessages).

    Raises:
        TypeError: `state` is not a MessageState, or a time is not a
            datetime.
        ValueError: a naive time, or `page_size` not in 0..2**32-1.
    """
    if not isinstance(state, MessageState):
        raise TypeError(f"list_messages: state is a hourglass.MessageState, "
                        f"not {type(state).__name__}")
    if not 0 <= page_size < 2**32:
        raise ValueError(
            f"list_messages: page_size {page_size} is not in 0..2**32-1")
    request = admin_pb2.ListMessagesRequest(
        topic=topic, state=_STATE_TO_PROTO[state], group=group or "",
        page_size=page_size, page_token=page_token or "")
    if due_from is not None:
        request.due_from.CopyFrom(
            timestamp(due_from, "list_messages: due_from"))
    if due_to is not None:
        request.due_to.CopyFrom(timestamp(due_to, "list_messages: due_to"))
    return request


def schedule_request(topic: str, start: datetime, end: datetime,
                     bucket: timedelta) -> admin_pb2.GetScheduleRequest:
    """A GetScheduleRequest (Admin.GetSchedule) of [start, end).

    Raises:
        TypeError, ValueError: as ``timestamp`` and ``duration`` say.
    """
    request = admin_pb2.GetScheduleRequest(topic=topic)
    # "from" is a Python keyword: set through getattr.
    getattr(request, "from").CopyFrom(
        timestamp(start, "schedule_histogram: start"))
    request.to.CopyFrom(timestamp(end, "schedule_histogram: end"))
    request.bucket.CopyFrom(duration(bucket, "schedule_histogram: bucket"))
    return request


def preview_request(cron: Optional[str], every: Optional[timedelta],
                    time_zone: str, on_gap: str, on_overlap: str,
                    start_at: Optional[datetime], end_at: Optional[datetime],
                    after: Optional[datetime], count: int
                    ) -> recurrences_pb2.PreviewRecurrenceRequest:
    """A PreviewRecurrenceRequest (Recurrences.PreviewRecurrence) of the
    rule given by the arguments of ``Client.next_fire_times``. What the
    rule's strings mean, and their limits, are the broker's to check.

    Raises:
        ValueError: neither or both of `cron` and `every`, a naive time,
            or `count` not in 1..2**32-1 (0 would mean the broker's
            default).
        TypeError: an argument of the wrong type.
    """
    what = "next_fire_times"
    if cron is not None and every is not None:
        raise ValueError(f"{what}: give cron or every, not both")
    if cron is None and every is None:
        raise ValueError(f"{what}: give cron or every")
    if not 1 <= count < 2**32:
        raise ValueError(f"{what}: count {count} is not in 1..2**32-1")
    rule = recurrences_pb2.RecurrenceRule(time_zone=time_zone, on_gap=on_gap,
                                          on_overlap=on_overlap)
    if cron is not None:
        rule.cron = cron
    if every is not None:
        rule.every.CopyFrom(duration(every, f"{what}: every"))
    if start_at is not None:
        rule.start_at.CopyFrom(timestamp(start_at, f"{what}: start_at"))
    if end_at is not None:
        rule.end_at.CopyFrom(timestamp(end_at, f"{what}: end_at"))
    request = recurrences_pb2.PreviewRecurrenceRequest(rule=rule,
                                                       count=count)
    if after is not None:
        # "from" is a Python keyword: set through getattr.
        getattr(request, "from").CopyFrom(timestamp(after, f"{what}: after"))
    return request


def redrive_request(topic: str, ids: Optional[Iterable[str]]
                    ) -> admin_pb2.RedriveDeadLettersRequest:
    """A RedriveDeadLettersRequest; no ids means every dead letter.

    Raises:
        TypeError: `ids` is a str (one id goes in a list).
    """
    if isinstance(ids, str):
        raise TypeError("redrive: ids is a list of ids, not a str")
    return admin_pb2.RedriveDeadLettersRequest(topic=topic,
                                               ids=list(ids or ()))


# --- Answers -----------------------------------------------------------------


def receipt(value: broker_pb2.Receipt) -> Receipt:
    """`value` as a Receipt."""
    return Receipt(id=value.id, deliver_at=from_timestamp(value.deliver_at),
                   duplicate=value.duplicate)


def _optional_time(message: Any, field: str) -> Optional[datetime]:
    """`message.field` (a Timestamp) as a datetime; None when unset."""
    if not message.HasField(field):
        return None
    return from_timestamp(getattr(message, field))


def _state(value: int) -> Optional[MessageState]:
    return _STATE_FROM_PROTO.get(value)


def _percentiles(value: admin_pb2.Percentiles) -> Percentiles:
    return Percentiles(p50=value.p50.ToTimedelta(),
                       p90=value.p90.ToTimedelta(),
                       p99=value.p99.ToTimedelta(),
                       max=value.max.ToTimedelta())


def stats(value: admin_pb2.GetStatsResponse) -> Stats:
    """`value` (Admin.GetStats) as Stats."""
    return Stats(
        topics=[TopicStats(
            topic=t.topic, scheduled=t.scheduled, ready=t.ready,
            in_flight=t.in_flight, dead_lettered=t.dead_lettered,
            publish_rate=t.publish_rate, delivery_rate=t.delivery_rate,
            lateness=_percentiles(t.lateness),
            groups=[GroupStats(group=g.group, ready=g.ready,
                               in_flight=g.in_flight, consumers=g.consumers,
                               ack_rate=g.ack_rate) for g in t.groups])
            for t in value.topics],
        started_at=from_timestamp(value.started_at), version=value.version,
        format_version=value.format_version, store_id=value.store_id,
        serving=value.serving, not_serving_reason=value.not_serving_reason)


def topics(value: admin_pb2.ListTopicsResponse) -> List[Topic]:
    """The topics of `value` (Admin.ListTopics), in its order."""
    return [Topic(name=t.name, scheduled=t.scheduled, groups=t.groups,
                  ready=t.ready, in_flight=t.in_flight,
                  dead_lettered=t.dead_lettered) for t in value.topics]


def group(value: admin_pb2.Group) -> Group:
    """`value` (Admin.ListGroups, CreateGroup) as a Group."""
    return Group(topic=value.topic, name=value.name,
                 created_at=from_timestamp(value.created_at),
                 ready=value.ready, in_flight=value.in_flight,
                 consumers=value.consumers)


def message_info(value: admin_pb2.MessageInfo) -> MessageInfo:
    """`value` (Admin.GetMessage, ListMessages) as a MessageInfo."""
    return MessageInfo(
        id=value.id, topic=value.topic, state=_state(value.state),
        deliver_at=from_timestamp(value.deliver_at),
        published_at=from_timestamp(value.published_at),
        payload_size=value.payload_size, headers=dict(value.headers),
        payload_preview=value.payload_preview,
        groups=[GroupState(group=g.group, state=_state(g.state),
                           attempt=g.attempt,
                           redeliver_at=_optional_time(g, "redeliver_at"))
                for g in value.groups],
        attempt=value.attempt)


def message_page(value: admin_pb2.ListMessagesResponse) -> MessagePage:
    """`value` (Admin.ListMessages) as a MessagePage."""
    return MessagePage(messages=[message_info(m) for m in value.messages],
                       next_page_token=value.next_page_token or None)


def schedule(value: admin_pb2.GetScheduleResponse) -> Schedule:
    """`value` (Admin.GetSchedule) as a Schedule."""
    return Schedule(buckets=[ScheduleBucket(start=from_timestamp(b.start),
                                            count=b.count)
                             for b in value.buckets],
                    total=value.total)


def fire_times(value: recurrences_pb2.PreviewRecurrenceResponse
               ) -> List[datetime]:
    """The fire times of `value` (Recurrences.PreviewRecurrence), in
    order, as aware datetimes in UTC."""
    return [from_timestamp(t) for t in value.fire_times]


def snapshot(value: admin_pb2.Snapshot) -> Snapshot:
    """`value` (Admin.CreateSnapshot) as a Snapshot."""
    return Snapshot(dir=value.dir, files=value.files, bytes=value.bytes,
                    format_version=value.format_version,
                    store_id=value.store_id,
                    started_at=from_timestamp(value.started_at),
                    took=value.took.ToTimedelta(), shards=value.shards)


def deliveries(response: Union[broker_pb2.Delivery, broker_pb2.DeliveryBatch],
               outbox: "Outbox") -> List[Delivery]:
    """The deliveries of one response of a subscribe stream, acked through
    `outbox`, with ``received_at`` now."""
    received_at = datetime.now(timezone.utc)
    protos: Sequence[broker_pb2.Delivery] = (
        response.deliveries if isinstance(response, broker_pb2.DeliveryBatch)
        else (response,))
    return [
        Delivery(id=d.id, topic=d.topic, payload=d.payload,
                 headers=dict(d.headers),
                 deliver_at=from_timestamp(d.deliver_at),
                 published_at=from_timestamp(d.published_at),
                 attempt=d.attempt, received_at=received_at, _outbox=outbox)
        for d in protos
    ]


def error(rpc_error: grpc.RpcError) -> errors.Error:
    """The hourglass error of a failed gRPC call (sync or asyncio), with
    `rpc_error` as its ``__cause__`` (gRPC's debug details)."""
    code = rpc_error.code() if hasattr(rpc_error, "code") else None
    if not isinstance(code, grpc.StatusCode):
        code = grpc.StatusCode.UNKNOWN
    message = (rpc_error.details() if hasattr(rpc_error, "details") else None)
    metadata = (rpc_error.trailing_metadata()
                if hasattr(rpc_error, "trailing_metadata") else None)
    result = errors.BY_CODE.get(code, errors.Error)(
        message or "", code=code,
        trailing_metadata=tuple((k, v) for k, v in (metadata or ())))
    result.__cause__ = rpc_error
    return result


# --- Subscribe streams -------------------------------------------------------


class Outbox:
    """The requests waiting to be written to one subscribe stream.

    ``Delivery.ack`` and ``nack`` put requests here and the stream's writer
    (gRPC, reading the requests through `put`'s queue) sends them in order.
    Once closed it takes nothing more: the client ended its side of the
    stream, or the stream ended. Deliveries of a closed outbox are stale (the
    broker hands them back to the group), so subscriptions drop those not
    yet taken.

    Thread-safe. `put` is called under the outbox's lock, never concurrently.
    """

    def __init__(self, put: Callable[[Optional[broker_pb2.SubscribeRequest]],
                                     None]) -> None:
        """`put` queues a request for the writer; None ends the requests."""
        self._lock = threading.Lock()
        self._put = put
        self._open = True  # Protected by _lock.

    @property
    def open(self) -> bool:
        """Whether the outbox still takes requests."""
        with self._lock:
            return self._open

    def send(self, request: broker_pb2.SubscribeRequest) -> bool:
        """Queues `request`; False (and nothing queued) once closed."""
        with self._lock:
            if self._open:
                self._put(request)
            return self._open

    def ack(self, ids: Sequence[str]) -> bool:
        """Queues an Ack of `ids`; False once closed."""
        return self.send(broker_pb2.SubscribeRequest(
            ack=broker_pb2.Ack(ids=ids)))

    def nack(self, id: str, delay: timedelta) -> bool:
        """Queues a Nack of `id` after `delay`; False once closed.

        Raises:
            TypeError: `delay` is not a timedelta.
        """
        request = broker_pb2.SubscribeRequest(nack=broker_pb2.Nack(
            id=id, delay=duration(delay, "nack: delay")))
        return self.send(request)

    def close(self) -> None:
        """Ends the requests (the client's side of the stream); idempotent."""
        with self._lock:
            if self._open:
                self._open = False
                self._put(None)


def ack_all(deliveries_: Iterable[Delivery]) -> int:
    """Acks `deliveries_` with one Ack per stream they came on.

    Returns:
        How many acks were queued: those of deliveries whose stream is open.
    """
    by_outbox: "dict[int, Tuple[Outbox, List[str]]]" = {}
    for d in deliveries_:
        by_outbox.setdefault(id(d._outbox), (d._outbox, []))[1].append(d.id)
    return sum(len(ids) for outbox, ids in by_outbox.values()
               if outbox.ack(ids))


def subscribe_method(batches: bool) -> str:
    """The Broker stub's method of a subscription."""
    return "SubscribeBatches" if batches else "Subscribe"


def describe(topic: str, group: str) -> str:
    """How logs and errors name a subscription."""
    return f"subscription {topic!r}/{group!r}"
