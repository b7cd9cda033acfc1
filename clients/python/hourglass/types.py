"""The plain values of the Hourglass client, for hourglass and hourglass.aio.

Field meanings and limits are those of api/hourglass/v1/broker.proto; the
broker checks them and answers INVALID_ARGUMENT naming a bad field, so this
module checks only what protobuf itself cannot carry (types, timezones, a
message with two due times).

Times are aware ``datetime`` objects in UTC, delays ``timedelta`` objects:
explicit units, where a bare number could be seconds or milliseconds.
"""

from __future__ import annotations

import dataclasses
import os
import random
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Dict, Iterator, Mapping, Optional, Union

if TYPE_CHECKING:
    from hourglass._protocol import Outbox

#: A payload: bytes as they are, or a str sent as its UTF-8 encoding.
Payload = Union[bytes, bytearray, memoryview, str]

#: PEM data as bytes, or the path of a PEM file.
Pem = Union[bytes, str, "os.PathLike[str]"]


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
    """

    topic: str
    payload: Payload = b""
    delay: Optional[timedelta] = None
    deliver_at: Optional[datetime] = None
    id: Optional[str] = None
    headers: Optional[Mapping[str, str]] = None


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
