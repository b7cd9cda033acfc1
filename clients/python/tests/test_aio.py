"""hourglass.aio.Client against a real hourglassd: the asyncio API, on the
scenarios of test_client.py that exercise its own code (the requests,
answers and errors it shares with the threaded client are tested there).

Each test runs one coroutine with asyncio.run: Debian 12 packages no
pytest-asyncio, and a loop per test keeps them apart anyway.
"""

from __future__ import annotations

import asyncio
import socket
import time
from datetime import timedelta
from pathlib import Path
from typing import Any, Coroutine, List, Union

import grpc
import pytest

import hourglass
import hourglass.aio
from hourglass import Message
from helpers import (WAIT, Daemon, check_not_early, eventually, floor_ms, ids,
                     ms, now, scheduled_ids, stored, write_private)

Subscription = Union[hourglass.aio.Subscription,
                     hourglass.aio.BatchSubscription]


def run(coroutine: Coroutine[Any, Any, None]) -> None:
    asyncio.run(coroutine)


async def take(subscription: Subscription, count: int = 1,
               timeout: float = WAIT) -> List[hourglass.Delivery]:
    """The next `count` deliveries (flattened from batches), checked never
    early; fails if they do not all come within `timeout` seconds."""
    got: List[hourglass.Delivery] = []
    deadline = time.monotonic() + timeout
    while len(got) < count:
        remaining = max(0.0, deadline - time.monotonic())
        item = await subscription.receive(remaining)
        assert item is not None, (
            f"{len(got)} of {count} deliveries within {timeout} s: {ids(got)}")
        got.extend(item if isinstance(item, list) else [item])
    check_not_early(got)
    return got


def test_publish_subscribe_ack_and_nack(daemon: Daemon) -> None:
    async def main() -> None:
        async with hourglass.aio.Client(daemon.address) as client:
            async with await client.subscribe(
                    "orders", "billing",
                    ack_timeout=timedelta(seconds=1)) as sub:
                before = now()
                receipt = await client.publish(
                    "orders", b"one", delay=ms(300), id="order-1",
                    headers={"user": "7"})
                after = now()
                assert (receipt.id, receipt.duplicate) == ("order-1", False)
                assert (floor_ms(before) + ms(300) <= receipt.deliver_at
                        <= after + ms(300))

                [d] = await take(sub)
                assert (d.id, d.payload, d.headers, d.attempt) == (
                    "order-1", b"one", {"user": "7"}, 1)
                assert d.deliver_at == receipt.deliver_at
                nacked = now()
                assert d.nack(delay=ms(400)) is True
                [again] = await take(sub)
                assert (again.id, again.attempt) == ("order-1", 2)
                assert again.received_at - nacked >= ms(400)
                assert again.ack() is True

                # Due after the ack timeout would have sent order-1 again.
                await client.publish("orders", b"next", delay=ms(1500),
                                     id="order-2")
                assert ids(await take(sub)) == ["order-2@1"]
            assert sub.closed and sub.error is None

    run(main())


def test_cancel_reschedule_and_duplicates(daemon: Daemon) -> None:
    async def main() -> None:
        async with hourglass.aio.Client(daemon.address) as client:
            await client.publish_many([
                Message("orders", b"a", delay=ms(1000), id="a"),
                Message("orders", b"b", delay=timedelta(hours=1), id="b"),
            ])
            await client.cancel("orders", "a")
            with pytest.raises(hourglass.NotFound) as e:
                await client.cancel("orders", "a")
            assert e.value.message == (
                'no scheduled message with id "a" in topic "orders" '
                '(unknown, already due, or cancelled)')

            duplicate = await client.publish("orders", b"again", id="b")
            assert duplicate.duplicate is True
            at = floor_ms(now()) + ms(1200)
            moved = await client.reschedule("orders", "b", deliver_at=at)
            assert (moved.id, moved.deliver_at, moved.duplicate) == (
                "b", at, False)
            async with await client.subscribe("orders", "g") as sub:
                # a was due first: had it been delivered, it would come first.
                [d] = await take(sub)
                assert (d.id, d.payload, d.deliver_at) == ("b", b"b", at)
                assert d.ack() is True

    run(main())


def test_publish_many_stores_all_or_nothing(daemon: Daemon) -> None:
    async def main() -> None:
        async with hourglass.aio.Client(daemon.address) as client:
            with pytest.raises(hourglass.InvalidArgument) as e:
                await client.publish_many([
                    Message("orders", b"1", delay=timedelta(hours=1),
                            id="m-1"),
                    Message("orders", b"2", delay=timedelta(seconds=-1),
                            id="m-2"),
                ])
            assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
            assert e.value.message == "message 1: delay -1s is negative"
        assert scheduled_ids(daemon, "orders") == []

    run(main())


def test_batches_and_close_hands_deliveries_back(daemon: Daemon) -> None:
    async def main() -> None:
        async with hourglass.aio.Client(daemon.address) as client:
            first = await client.subscribe_batches("burst", "g",
                                                   max_in_flight=10)
            at = floor_ms(now()) + ms(200)
            await client.publish_many([
                Message("burst", str(i), id=f"b-{i}", deliver_at=at)
                for i in range(10)])
            held = await take(first, 10)
            assert ids(held) == [f"b-{i}@1" for i in range(10)]
            assert all(d.deliver_at == at for d in held)

            second = await client.subscribe_batches("burst", "g")
            closed_at = time.monotonic()
            await first.close()
            assert first.closed and first.error is None
            assert [batch async for batch in first] == []
            assert first.ack(held) == 0  # Its stream is gone.
            back = await take(second, 10)
            # At once: long before the default ack timeout of 30 s.
            assert time.monotonic() - closed_at < 10
            assert sorted(ids(back)) == sorted(f"b-{i}@2" for i in range(10))
            assert second.ack(back) == 10
            # The acks reach the broker: the messages go.
            for i in (0, 9):
                await asyncio.get_running_loop().run_in_executor(
                    None, eventually,
                    lambda i=i: not stored(daemon, "burst", f"b-{i}"),
                    f"b-{i} deleted after its ack")

    run(main())


def test_a_subscription_subscribes_again_after_the_broker_restarts(
        daemon: Daemon) -> None:
    async def main() -> None:
        async with hourglass.aio.Client(daemon.address) as client:
            sub = await client.subscribe("restart", "g")
            await client.publish("restart", b"before", id="m-1")
            [held] = await take(sub)
            # Restarting blocks this thread, not the loop's streams.
            await asyncio.get_running_loop().run_in_executor(
                None, daemon.restart)
            async with hourglass.aio.Client(daemon.address) as other:
                await other.publish("restart", b"after", id="m-2")
            got = await take(sub, 2)
            assert sorted(ids(got)) == ["m-1@2", "m-2@1"]
            assert sub.reconnects >= 1
            assert held.ack() is False
            assert sub.ack(got) == 2
        assert sub.closed and sub.error is None

    run(main())


def test_errors_and_token_auth(make_daemon, tmp_path: Path) -> None:
    token = "all-roles-0123456789abcde"
    tokens = write_private(tmp_path / "tokens.txt",
                           f"{token} produce,consume,admin\n")
    secured = make_daemon([f"--auth_tokens={tokens}"])

    async def main() -> None:
        async with hourglass.aio.Client(secured.address) as anonymous:
            with pytest.raises(hourglass.Unauthenticated) as e:
                await anonymous.publish("orders", b"x")
            assert e.value.message == (
                'missing "authorization: Bearer <token>" metadata')
            with pytest.raises(hourglass.Unauthenticated):
                await anonymous.subscribe("orders", "g")
        async with hourglass.aio.Client(secured.address,
                                        token=token) as client:
            with pytest.raises(hourglass.InvalidArgument) as e:
                await client.subscribe("orders", "bad group")
            assert e.value.message == 'open.group "bad group" has a space'
            sub = await client.subscribe("jobs", "g")
            await client.publish("jobs", b"x", id="job-1")
            [d] = await take(sub)
            assert d.nack(delay=timedelta(seconds=-1)) is True
            with pytest.raises(hourglass.InvalidArgument) as e:
                await sub.receive(WAIT)
            assert e.value.message == "nack.delay -1s is negative"
            assert sub.closed and sub.error is e.value
            with pytest.raises(hourglass.InvalidArgument):
                await sub.__anext__()

    run(main())


def test_the_client_needs_a_running_loop() -> None:
    with pytest.raises(RuntimeError):
        hourglass.aio.Client("127.0.0.1:1")


def test_an_unreachable_or_silent_broker() -> None:
    with socket.socket() as silent, socket.socket() as closed:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)  # Accepts connections, never answers.
        closed.bind(("127.0.0.1", 0))  # Nothing listens.
        quiet = "127.0.0.1:%d" % silent.getsockname()[1]
        gone = "127.0.0.1:%d" % closed.getsockname()[1]

        async def main() -> None:
            async with hourglass.aio.Client(quiet, timeout=0.5) as client:
                with pytest.raises(hourglass.DeadlineExceeded):
                    await client.publish("orders", b"x")
                with pytest.raises(hourglass.DeadlineExceeded) as e:
                    await client.subscribe_batches("orders", "g")
                assert e.value.message == (
                    f"subscription 'orders'/'g': no answer from {quiet} "
                    f"within 0.5 s")
            async with hourglass.aio.Client(gone) as client:
                with pytest.raises(hourglass.Unavailable) as e:
                    await client.subscribe("orders", "g")
                assert "failed to connect" in e.value.message

        run(main())


def test_closing_while_the_broker_is_away_does_not_wait_for_it(
        daemon: Daemon) -> None:
    async def main() -> None:
        async with hourglass.aio.Client(daemon.address) as client:
            sub = await client.subscribe("away", "g")
            await asyncio.get_running_loop().run_in_executor(
                None, daemon.stop)
            # The stream broke; the next one waits for the broker.
            deadline = time.monotonic() + WAIT
            while sub.reconnects < 1:
                assert time.monotonic() < deadline, "no new stream started"
                await asyncio.sleep(0.005)
            started = time.monotonic()
            await sub.close(timeout=WAIT)
            assert time.monotonic() - started < WAIT / 3
            assert sub.closed and sub.error is None
            assert await sub.receive(0) is None

    run(main())
