"""The plain values of the Hourglass client, for hourglass and hourglass.aio.

Field meanings and limits are those of api/hourglass/v1/broker.proto (and,
for what the Admin calls answer, admin.proto); the
broker checks them and answers INVALID_ARGUMENT naming a bad field, so this
module checks only what protobuf itself cannot carry (types, timezones, a
message with two due times or two deadlines, an ``on_expire`` it has no
value for).

Times are aware ``datetime`` objects in UTC, delays ``timedelta`` objects:
explicit units, where a bare number could be seconds or milliseconds.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import random
from datetime import datetime, timedelta
from typing import (TYPE_CHECKING, Dict, Iterator, List, Literal, Mapping,
                    Optional, Union)

if TYPE_CHECKING:
    from hourglass._protocol import Outbox

#: A payload: bytes as they are, or a str sent as its UTF-8 encoding.
Payload = Union[bytes, bytearray, memoryview, str]

#: PEM data as bytes, or the path of a PEM file.
Pem = Union[bytes, str, "os.PathLike[str]"]

#: What a group does with a message it has not received by its deadline
#: (broker.proto's OnExpire): drop it, as an ack would end it there, or move
#: it to the dead-letter topic ``<topic>.dlq``.
OnExpire = Literal["drop", "dead_letter"]


@dataclasses.dataclass(frozen=True)
class Message:
    """One message for ``Client.publish_many``: the arguments of ``publish``.

    Attributes:
        topic: Where to publish; ``[A-Za-z0-9._-]{1,200}``.
        payload: Delivered unchanged; at most the broker's
            ``--max_payload_bytes`` (1 MiB). A str is sent as UTF-8.
        delay: Due this long after the broker accepts the message, on the
            broker's clock. At most one of ``delay`` and ``deliver_at``;
            neither means due now.
        deliver_at: Due at this time (timezone-aware; a past time means
            now).
        id: Idempotency key, unique within the topic, at most 128 bytes.
            Publishing an id that is still pending stores nothing and returns
            the first receipt with ``duplicate`` set. None lets the broker
            assign one (``hg-`` and 16 hex digits; ids of that form are
            refused from producers).
        headers: Delivered unchanged; keys ``[A-Za-z0-9._-]{1,200}``.
        ttl: The message's deadline, this long after the broker accepts it
            (not after its due time): a consumer group that has not received
            it by then never does (nor gets it again after a nack or an ack
            timeout). At most one of ``ttl`` and ``expire_at``; neither
            means no deadline. A deadline at or before the due time is
            INVALID_ARGUMENT (so is one more than ``--max_delay`` ahead).
        expire_at: The deadline itself (timezone-aware).
        on_expire: What a group does with the message once its deadline
            passed: ``"drop"`` it (the default), or ``"dead_letter"`` it to
            ``<topic>.dlq`` (one letter however many groups it expires in
            at once). Ignored without a deadline.
    """

    topic: str
    payload: Payload = b""
    delay: Optional[timedelta] = None
    deliver_at: Optional[datetime] = None
    id: Optional[str] = None
    headers: Optional[Mapping[str, str]] = None
    ttl: Optional[timedelta] = None
    expire_at: Optional[datetime] = None
    on_expire: OnExpire = "drop"


@dataclasses.dataclass(frozen=True)
class Receipt:
    """What the broker answered for one stored (or rescheduled) message.

    Attributes:
        id: The message's id: the producer's, or the one the broker assigned.
        deliver_at: When it comes due, on the broker's clock, to the
            millisecond (UTC, timezone-aware).
        duplicate: The id was pending already: nothing new was stored, and
            this receipt describes the first message.
    """

    id: str
    deliver_at: datetime
    duplicate: bool


@dataclasses.dataclass(frozen=True, eq=False)
class Delivery:
    """One delivery of a message to a consumer, from a subscription.

    Acknowledge it with ``ack()`` once it is handled, or ask for it again
    later with ``nack(delay)``. Either only queues a request for the stream
    the delivery came on and never blocks; in asyncio code call them from the
    event loop's thread. A delivery not acknowledged within the
    subscription's ack timeout comes again (``attempt`` + 1); so does one
    whose stream ended first (the broker hands it back to the group at once),
    which is why ``ack`` answers False then: at-least-once delivery.

    Attributes:
        id: The message's id, as in its receipt.
        topic: Where it was published.
        payload: As published.
        headers: As published.
        deliver_at: When it came due, on the broker's clock (UTC).
        published_at: When the broker accepted it (UTC).
        attempt: 1 for the first delivery to the group, then one more for
            each redelivery (ack timeout, nack, disconnect).
        received_at: When this client read it from its stream, on this
            machine's clock (UTC), before it waited in the subscription.
    """

    id: str
    topic: str
    payload: bytes
    headers: Dict[str, str]
    deliver_at: datetime
    published_at: datetime
    attempt: int
    received_at: datetime
    _outbox: "Outbox" = dataclasses.field(repr=False)

    def ack(self) -> bool:
        """Acknowledges the delivery: the group is done with the message.

        Returns:
            True if the ack was queued on the stream the delivery came on;
            False if that stream has ended or is closing (the message comes
            again, to this group).
        """
        return self._outbox.ack([self.id])

    def nack(self, delay: timedelta = timedelta(0)) -> bool:
        """Rejects the delivery: the broker delivers it again after ``delay``.

        Args:
            delay: How long the message waits before its next delivery (to
                any consumer of the group); at most the broker's
                ``--max_delay``. A negative delay ends the stream with
                INVALID_ARGUMENT.

        Returns:
            As ``ack``.
        """
        return self._outbox.nack(self.id, delay)


@dataclasses.dataclass(frozen=True)
class Tls:
    """How to speak TLS to the broker.

    Attributes:
        root_certs: The CAs to trust: PEM bytes, or the path of a PEM file.
            None trusts gRPC's default roots (the system's).
        cert_chain: The client's certificate chain, for mutual TLS (the
            broker's ``--tls_client_ca``): PEM bytes or a path. Needs
            ``private_key``.
        private_key: The key of ``cert_chain``: PEM bytes or a path.
        server_name: The name expected in the broker's certificate when it
            is not the host of the address (an IP address, a tunnel).
            None checks the address's host.
    """

    root_certs: Optional[Pem] = None
    cert_chain: Optional[Pem] = None
    private_key: Optional[Pem] = None
    server_name: Optional[str] = None

    def __post_init__(self) -> None:
        if (self.cert_chain is None) != (self.private_key is None):
            raise ValueError("Tls: cert_chain and private_key go together")


@dataclasses.dataclass(frozen=True)
class Backoff:
    """Bounded exponential backoff with jitter, for reconnecting.

    The nominal wait starts at ``initial`` and is multiplied by
    ``multiplier`` after each failed attempt, up to ``maximum``; each actual
    wait is drawn uniformly from [50 %, 100 %] of the nominal one, so that
    consumers that lost the broker together do not all come back at the same
    instant. A stream that opens again starts over at ``initial``.

    Attributes:
        initial: First nominal wait. Default: 50 ms.
        maximum: Longest nominal wait. Default: 5 s.
        multiplier: Growth per attempt; at least 1. Default: 2.
    """

    initial: timedelta = timedelta(milliseconds=50)
    maximum: timedelta = timedelta(seconds=5)
    multiplier: float = 2.0

    def __post_init__(self) -> None:
        if self.initial <= timedelta(0):
            raise ValueError(
                f"Backoff: initial {self.initial} is not positive")
        if self.maximum < self.initial:
            raise ValueError(
                f"Backoff: maximum {self.maximum} is below initial "
                f"{self.initial}")
        if self.multiplier < 1:
            raise ValueError(
                f"Backoff: multiplier {self.multiplier} is below 1")

    def waits(self, rng: Optional[random.Random] = None) -> Iterator[float]:
        """Yields the waits, in seconds, one per failed attempt; endless.

        Args:
            rng: Source of the jitter. Default: a fresh ``random.Random``.
        """
        rng = rng or random.Random()
        nominal = self.initial.total_seconds()
        maximum = self.maximum.total_seconds()
        while True:
            yield nominal * rng.uniform(0.5, 1.0)
            nominal = min(nominal * self.multiplier, maximum)


# --- What the Admin calls answer ---------------------------------------------


class MessageState(enum.Enum):
    """Where a message is in its life (admin.proto's MessageState)."""

    #: Published and not yet due.
    SCHEDULED = "scheduled"
    #: Due, and waiting in a group for a consumer with credit.
    READY = "ready"
    #: Delivered to a consumer of a group and not yet acknowledged.
    IN_FLIGHT = "in_flight"
    #: Moved to the dead-letter topic ``<topic>.dlq`` after the broker's
    #: ``--max_attempts`` deliveries, or at its deadline (``on_expire``
    #: ``"dead_letter"``).
    DEAD = "dead"


@dataclasses.dataclass(frozen=True)
class Percentiles:
    """Latency percentiles over the broker's last minute; all zero when
    nothing was measured."""

    p50: timedelta
    p90: timedelta
    p99: timedelta
    max: timedelta


@dataclasses.dataclass(frozen=True)
class GroupStats:
    """One consumer group of a topic, in ``TopicStats.groups``.

    Attributes:
        group: The group's name.
        ready: Due messages waiting in the group for a consumer.
        in_flight: Delivered to its consumers and not yet acknowledged.
        consumers: Subscribe streams of the group connected now.
        ack_rate: Acknowledgements per second over the last minute.
    """

    group: str
    ready: int
    in_flight: int
    consumers: int
    ack_rate: float


@dataclasses.dataclass(frozen=True)
class TopicStats:
    """Counts (exact), rates and lateness of one topic, in ``Stats.topics``.

    Attributes:
        topic: The topic's name.
        scheduled: Published and not yet due.
        ready: The groups' ready messages, plus due messages waiting for
            the topic's first group.
        in_flight: The groups' in-flight deliveries.
        dead_lettered: Messages of the topic now in ``<topic>.dlq``.
        publish_rate, delivery_rate: Per second, over the last minute.
        lateness: Delivery time minus due time, over the last minute.
        groups: Its groups, in name order.
    """

    topic: str
    scheduled: int
    ready: int
    in_flight: int
    dead_lettered: int
    publish_rate: float
    delivery_rate: float
    lateness: Percentiles
    groups: List[GroupStats]


@dataclasses.dataclass(frozen=True)
class Stats:
    """What ``Client.stats`` answers: the topics and the broker.

    Attributes:
        topics: Each topic with messages or groups (or the one asked
            for), in name order.
        started_at: When the broker started (UTC).
        version: The broker's version (``hourglassd --version``).
        format_version, store_id: Its store's format version and identity.
        serving: Whether the store takes writes.
        not_serving_reason: Why not, when it does not; "" when it does.
    """

    topics: List[TopicStats]
    started_at: datetime
    version: str
    format_version: int
    store_id: str
    serving: bool
    not_serving_reason: str


@dataclasses.dataclass(frozen=True)
class Topic:
    """One topic in ``Client.topics``.

    Attributes:
        name: The topic's name.
        scheduled, ready, in_flight, dead_lettered: As in ``TopicStats``.
        groups: How many groups it has.
    """

    name: str
    scheduled: int
    groups: int
    ready: int
    in_flight: int
    dead_lettered: int


@dataclasses.dataclass(frozen=True)
class Group:
    """One consumer group of a topic (``Client.groups``,
    ``Client.create_group``).

    Attributes:
        topic: Its topic.
        name: The group's name.
        created_at: When it was registered (UTC).
        ready, in_flight, consumers: As in ``GroupStats``.
    """

    topic: str
    name: str
    created_at: datetime
    ready: int
    in_flight: int
    consumers: int


@dataclasses.dataclass(frozen=True)
class GroupState:
    """Where a due message stands in one group, in ``MessageInfo.groups``.

    Attributes:
        group: The group's name.
        state: ``READY`` or ``IN_FLIGHT``.
        attempt: Deliveries to the group so far.
        redeliver_at: For ``IN_FLIGHT``: when the ack timeout delivers it
            again (UTC); None otherwise.
    """

    group: str
    state: Optional[MessageState]
    attempt: int
    redeliver_at: Optional[datetime]


@dataclasses.dataclass(frozen=True)
class MessageInfo:
    """A stored message as the Admin calls show it (``Client.get_message``,
    ``Client.list_messages``).

    Attributes:
        id: Its id.
        topic: Its topic (``<topic>.dlq`` for a dead letter).
        state: ``SCHEDULED``; ``DEAD`` for a dead letter; otherwise the
            least advanced state over its groups (``READY`` before
            ``IN_FLIGHT``); None for a state this client does not know.
        deliver_at: When it comes (or came) due (UTC).
        published_at: When the broker accepted it (UTC).
        payload_size: The payload's length in bytes.
        headers: As published.
        payload_preview: The first bytes of the payload (``preview_bytes``
            of ``get_message``; 256 by default).
        groups: Its state in each group, once it is due.
        attempt: The highest attempt over its groups; 0 while scheduled.
    """

    id: str
    topic: str
    state: Optional[MessageState]
    deliver_at: datetime
    published_at: datetime
    payload_size: int
    headers: Dict[str, str]
    payload_preview: bytes
    groups: List[GroupState]
    attempt: int


@dataclasses.dataclass(frozen=True)
class MessagePage:
    """One page of ``Client.list_messages``.

    Attributes:
        messages: In due-time order (ties: publish order).
        next_page_token: Pass it as ``page_token`` (with the same other
            arguments) for the next page; None on the last page.
    """

    messages: List[MessageInfo]
    next_page_token: Optional[str]


@dataclasses.dataclass(frozen=True)
class ScheduleBucket:
    """One bucket of ``Schedule``: the scheduled messages due in
    [start, start + bucket)."""

    start: datetime
    count: int


@dataclasses.dataclass(frozen=True)
class Schedule:
    """The schedule histogram of a topic (``Client.schedule_histogram``).

    Attributes:
        buckets: Every bucket of the range in time order, empty ones
            included.
        total: The counts summed.
    """

    buckets: List[ScheduleBucket]
    total: int


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """A snapshot the broker wrote (``Client.create_snapshot``).

    Attributes:
        dir: Where, on the broker's machine: its ``--snapshot_dir`` and
            the name asked for.
        files, bytes: What it holds.
        format_version, store_id: The store's format version and identity
            (store_id is "" for a cluster's snapshot of several shards).
        started_at: Every write completed before this time is in it (UTC).
        took: How long writing it took.
        shards: 0 for a snapshot of one store; for a cluster of several
            shards, how many (``dir`` holds ``shards/<n>`` for each).
    """

    dir: str
    files: int
    bytes: int
    format_version: int
    store_id: str
    started_at: datetime
    took: timedelta
    shards: int
