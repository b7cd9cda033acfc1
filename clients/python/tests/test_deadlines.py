"""Message deadlines (``ttl``, ``expire_at``, ``on_expire``) against a real
hourglassd, from both clients: a message whose deadline passes while its
group has no credit is never delivered there (dropped, or dead-lettered to
``<topic>.dlq``), and a deadline not after the due time is the broker's
INVALID_ARGUMENT.

Nothing sleeps: to know the broker's clock passed a deadline, a test
publishes a marker due just after it on a topic of its own and waits for
the marker's delivery (deliveries are never early).
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

import grpc
import pytest

import hourglass
import hourglass.aio
from hourglass import Message, MessageState
from helpers import Daemon, floor_ms, ids, ms, now, take
from test_aio import take as take_async


def rfc3339(t: datetime) -> str:
    """`t` (whole milliseconds, UTC) as the broker writes times in its
    errors (absl's RFC3339_full: no trailing zeros of the fraction)."""
    text = t.strftime("%Y-%m-%dT%H:%M:%S")
    if t.microsecond:
        text += f".{t.microsecond // 1000:03d}".rstrip("0")
    return text + "+00:00"


def test_a_message_past_its_deadline_is_dropped_or_dead_lettered(
        client: hourglass.Client) -> None:
    with client.subscribe("offers", "g", max_in_flight=1) as sub, \
            client.subscribe("offers.dlq", "g") as dlq, \
            client.subscribe("clock", "g") as clock:
        client.publish("offers", b"held", id="held")
        [held] = take(sub)  # The group's only credit, until it is acked.

        dropped = client.publish("offers", b"late", id="dropped",
                                 ttl=ms(300))
        # Ahead enough that the batch cannot arrive after it on a loaded
        # machine (a deadline not after the due time is refused).
        expire_at = floor_ms(now()) + ms(1000)
        client.publish_many([
            Message("offers", b"late too", id="lettered",
                    expire_at=expire_at, on_expire="dead_letter"),
            Message("offers", b"next", id="next", ttl=timedelta(hours=1),
                    on_expire="dead_letter"),
        ])
        # A ttl counts from the broker's acceptance: for a message due now,
        # its due time (both in whole milliseconds).
        deadline = max(dropped.deliver_at + ms(300), expire_at)
        tick = client.publish("clock", b"tick", deliver_at=deadline + ms(1))
        assert ids(take(clock)) == [f"{tick.id}@1"]
        assert held.ack() is True

        # Both were due before "next": delivered, they would come first.
        [next_] = take(sub)
        assert (next_.id, next_.payload, next_.attempt) == (
            "next", b"next", 1)
        [letter] = take(dlq)
        assert (letter.id, letter.topic, letter.payload) == (
            "lettered", "offers.dlq", b"late too")
        # "dropped" left its group without a letter.
        assert [m.id for m in client.list_messages(
            "offers", MessageState.DEAD).messages] == ["lettered"]
        assert next_.ack() and letter.ack()


def test_asyncio_a_message_past_its_deadline_goes_to_the_dead_letters(
        daemon: Daemon) -> None:
    async def main() -> None:
        async with hourglass.aio.Client(daemon.address) as client:
            sub = await client.subscribe("offers", "g", max_in_flight=1)
            dlq = await client.subscribe("offers.dlq", "g")
            clock = await client.subscribe("clock", "g")
            async with sub, dlq, clock:
                await client.publish("offers", b"held", id="held")
                [held] = await take_async(sub)

                late = await client.publish_async(
                    "offers", b"late", id="late", ttl=ms(300),
                    on_expire="dead_letter")
                await client.publish("offers", b"next", id="next")
                tick = await client.publish(
                    "clock", b"tick",
                    deliver_at=late.deliver_at + ms(301))
                assert ids(await take_async(clock)) == [f"{tick.id}@1"]
                assert held.ack() is True

                assert ids(await take_async(sub)) == ["next@1"]
                [letter] = await take_async(dlq)
                assert (letter.id, letter.payload) == ("late", b"late")

            with pytest.raises(hourglass.InvalidArgument) as e:
                await client.publish_many([Message(
                    "offers", b"x", delay=timedelta(seconds=5),
                    ttl=timedelta(seconds=5))])
            assert e.value.message == (
                "message 0: ttl 5s is not longer than the message's delay "
                "5s: it would expire before it comes due")

    asyncio.run(main())


def test_a_deadline_not_after_the_due_time_is_invalid_argument(
        client: hourglass.Client) -> None:
    with pytest.raises(hourglass.InvalidArgument) as e:
        client.publish("offers", b"x", delay=timedelta(seconds=2),
                       ttl=timedelta(seconds=1))
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.message == (
        "message 0: ttl 1s is not longer than the message's delay 2s: it "
        "would expire before it comes due")

    at = floor_ms(now()) + timedelta(hours=1, milliseconds=250)
    with pytest.raises(hourglass.InvalidArgument) as e:
        client.publish_many([
            Message("offers", b"ok", deliver_at=at,
                    expire_at=at + ms(1)),
            Message("offers", b"x", deliver_at=at, expire_at=at,
                    on_expire="dead_letter"),
        ])
    assert e.value.message == (
        f"message 1: expire_at {rfc3339(at)} is not after the message's due "
        f"time {rfc3339(at)}: it would expire before it comes due")

    with pytest.raises(hourglass.InvalidArgument) as e:
        client.publish_async("offers", b"x", delay=timedelta(seconds=1),
                             ttl=timedelta(seconds=1)).result()
    assert e.value.message == (
        "message 0: ttl 1s is not longer than the message's delay 1s: it "
        "would expire before it comes due")
    assert client.list_messages("offers", MessageState.SCHEDULED
                                ).messages == []
