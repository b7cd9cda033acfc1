"""publish_async over PublishStream, and publishes retried: first what the
client decides (``hourglass._publish``, no broker); then against a real
hourglassd: many messages in flight with exact receipts, duplicates, refused
messages, the bound on messages in flight, a broker that restarts in the
middle of a stream (each message with an id stored once), messages without
ids never sent twice, close; for the threaded client and asyncio.

Nothing sleeps to synchronise: each test waits for futures, callbacks, log
records or the broker's state, each with a deadline.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import random
import socket
import threading
import time
from datetime import timedelta
from typing import Any, Callable, Iterator, List, Sequence, Set

import grpc
import pytest

import hourglass
import hourglass.aio
from hourglass import (Message, MessageState, Receipt, _cluster, _protocol,
                       _publish)
from hourglass.v1 import broker_pb2
from helpers import WAIT, Daemon, eventually, floor_ms, ms, now

HOUR = timedelta(hours=1)
MiB = 1024 * 1024


def results(futures: Sequence["concurrent.futures.Future[Receipt]"]
            ) -> List[Receipt]:
    """The receipts of `futures`, in their order, once every one is done;
    fails if one is not within WAIT or failed."""
    done, not_done = concurrent.futures.wait(futures, timeout=WAIT)
    assert not not_done, f"{len(not_done)} of {len(futures)} not done"
    return [f.result(0) for f in futures]


def listed(client: hourglass.Client, topic: str,
           state: MessageState = MessageState.SCHEDULED
           ) -> List[hourglass.MessageInfo]:
    """Every message of `topic` in `state`, page by page (Admin
    ListMessages through the client)."""
    messages: List[hourglass.MessageInfo] = []
    token = None
    while True:
        page = client.list_messages(topic, state, page_size=1000,
                                    page_token=token)
        messages.extend(page.messages)
        token = page.next_page_token
        if token is None:
            return messages


class Counter:
    """Counts futures as they complete (a done callback), and sets an event
    once `target` have since it was armed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0
        self._target = 0
        self.reached = threading.Event()

    def arm(self, more: int) -> None:
        """`reached` once `more` futures complete from now on."""
        with self._lock:
            self.reached.clear()
            self._target = self.count + more

    def done(self, _future: Any) -> None:
        with self._lock:
            self.count += 1
            if self.count >= self._target:
                self.reached.set()


class Records(logging.Handler):
    """The hourglass logger's records, with an event per new one that
    matches."""

    def __init__(self, text: str) -> None:
        super().__init__(logging.DEBUG)
        self._text = text
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self._text in record.getMessage():
            self.seen.set()


@pytest.fixture
def hourglass_log() -> Iterator[Callable[[str], Records]]:
    """Installs handlers on the "hourglass" logger (see Records)."""
    logger = logging.getLogger("hourglass")
    handlers: List[Records] = []
    level = logger.level
    logger.setLevel(logging.DEBUG)

    def watch(text: str) -> Records:
        handler = Records(text)
        handlers.append(handler)
        logger.addHandler(handler)
        return handler

    yield watch
    for handler in handlers:
        logger.removeHandler(handler)
    logger.setLevel(level)


@pytest.fixture
def free_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback port that accepts connections and never answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield s.getsockname()[1]


# --- How the client decides (no broker) -------------------------------------


def answer(code: int = 0, message: str = "", primary: str = "",
           shard_count: int = 0, receipts: int = 1
           ) -> broker_pb2.PublishAnswer:
    return broker_pb2.PublishAnswer(
        code=code, message=message, primary=primary, epoch=2 if primary else 0,
        shard_count=shard_count,
        receipts=[broker_pb2.Receipt(id=f"r-{k}") for k in range(receipts)
                  ] if code == 0 else [])


def test_answers_become_receipts_or_errors_with_a_calls_trailers() -> None:
    receipt = _publish.outcome(answer())
    assert isinstance(receipt, Receipt) and receipt.id == "r-0"
    refused = _publish.outcome(answer(3, 'message 0: topic "a b" has a space'))
    assert isinstance(refused, hourglass.InvalidArgument)
    assert (refused.code, refused.message, refused.trailing_metadata) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        'message 0: topic "a b" has a space', ())
    moved = _publish.outcome(answer(14, "not the primary", "b:2", 4))
    assert isinstance(moved, hourglass.Unavailable)
    assert moved.trailing_metadata == (
        ("hourglass-primary", "b:2"), ("hourglass-epoch", "2"),
        ("hourglass-shards", "4"))
    assert _cluster.redirect_address(moved) == "b:2"
    assert _cluster.shard_count_of(moved) == 4
    two = _publish.outcome(answer(receipts=2))
    assert isinstance(two, hourglass.Internal)
    assert two.message == (
        "the broker answered 2 receipts to a publish of 1 messages")


def test_which_failed_messages_go_again_and_after_what_wait() -> None:
    router = _cluster.Router(_protocol.channel_settings(
        "a:1", None, None, hourglass.Backoff()), grpc)
    a = router.current()

    def message(id_: str = "") -> _publish.Pending:
        return _publish.pending(_protocol.publish_request(
            [Message("t", id=id_ or None)]), 10.0, lambda _: None)

    unavailable = hourglass.Unavailable("socket closed")
    assert _publish.next_step(message("m"), unavailable, router, a,
                              False) is _publish.Step.RETRY
    assert _publish.next_step(message(), unavailable, router, a,
                              False) is _publish.Step.FAIL
    assert _publish.next_step(message("m"), hourglass.Cancelled("x"),
                              router, a, False) is _publish.Step.RETRY
    assert _publish.next_step(message("m"), hourglass.InvalidArgument("x"),
                              router, a, False) is _publish.Step.FAIL
    assert _publish.next_step(message("m"), unavailable, router, a,
                              True) is _publish.Step.FAIL
    # A redirect goes again at once, with or without an id, at most 3
    # times; later messages of the shard go there.
    redirected = message()
    moved = _publish.outcome(answer(14, "not the primary", "b:2"))
    assert isinstance(moved, hourglass.Error)
    for _ in range(3):
        assert _publish.next_step(redirected, moved, router, a,
                                  False) is _publish.Step.RESEND
    assert _publish.next_step(redirected, moved, router, a,
                              False) is _publish.Step.FAIL
    assert router.route("t").address == "b:2"
    for channel in router.channels():
        channel.close()

    # Waits as Backoff says: 50 ms doubling to 5 s, each 50-100 %.
    backoff = hourglass.Backoff()
    rng = random.Random(7)
    for failures, nominal in [(1, 0.05), (2, 0.1), (3, 0.2), (8, 5.0),
                              (50, 5.0)]:
        wait = _publish.retry_wait(backoff, failures, rng)
        assert nominal / 2 <= wait <= nominal


def test_a_stream_matches_answers_to_its_requests_in_order() -> None:
    written: List[Any] = []
    state = _publish.StreamState(written.append, "a:1", 0.5)
    settled: List[Any] = []
    messages = [_publish.pending(_protocol.publish_request(
        [Message("t", id=f"m-{k}")]), 0.5, settled.append) for k in range(3)]
    assert all(state.send(m) for m in messages)
    assert [w.messages[0].id for w in written] == ["m-0", "m-1", "m-2"]
    assert state.watch() == messages[0].deadline
    assert state.watch() is None  # Set already.

    answered = state.answered(broker_pb2.PublishStreamResponse(
        answers=[answer(), answer(3, "bad")]))
    assert [m for m, _ in answered] == messages[:2]
    assert not state.too_many
    answered = state.answered(broker_pb2.PublishStreamResponse(
        answers=[answer(), answer()]))
    assert [m for m, _ in answered] == messages[2:]
    assert state.too_many  # An answer to no request: a broker's bug.

    state.close_writes()
    assert written[-1] is None and not state.send(messages[0])
    unanswered, error = state.ended(None)
    assert unanswered == []
    assert isinstance(error, hourglass.Internal)
    assert written.count(None) == 1

    # A deadline that passed cancels the stream: what waits fails with
    # DEADLINE_EXCEEDED.
    late = _publish.StreamState(written.append, "a:1", 0.5)
    old = _publish.pending(_protocol.publish_request([Message("t")]), 0.5,
                           settled.append)
    old.deadline = time.monotonic() - 1
    assert late.send(old)
    assert late.watch() == old.deadline
    assert late.check() == (True, None)
    assert not late.usable
    unanswered, error = late.ended(None)
    assert unanswered == [old]
    assert isinstance(error, hourglass.DeadlineExceeded)
    assert error.message == "no answer from a:1 within 0.5 s"
    assert settled == []  # The clients settle; the state only decides.


# --- The threaded client -----------------------------------------------------


def test_many_publishes_in_flight_each_get_their_exact_receipt(
        client: hourglass.Client) -> None:
    count, threads = 2000, 4
    futures: List[List["concurrent.futures.Future[Receipt]"]] = [
        [] for _ in range(threads)]

    def produce(t: int) -> None:
        for i in range(t, count, threads):
            futures[t].append(client.publish_async(
                "orders", f"body {i}", delay=HOUR + ms(i), id=f"m-{i:04}",
                headers={"n": str(i)}))

    before = now()
    producers = [threading.Thread(target=produce, args=(t,))
                 for t in range(threads)]
    for p in producers:
        p.start()
    for p in producers:
        p.join(WAIT)
        assert not p.is_alive()
    by_id = {r.id: r for r in results([f for fs in futures for f in fs])}
    after = now()

    assert sorted(by_id) == [f"m-{i:04}" for i in range(count)]
    for i in range(count):
        receipt = by_id[f"m-{i:04}"]
        assert receipt.duplicate is False
        assert (floor_ms(before) + HOUR + ms(i) <= receipt.deliver_at
                <= after + HOUR + ms(i))
    # One stream carried them all, and nothing was sent twice.
    assert len(client._publisher._streams) == 1
    assert client._publisher.retries == 0

    # The broker holds each once, due when its receipt says (in due
    # order, which the threads' interleaving decided).
    stored_messages = listed(client, "orders")
    assert sorted(m.id for m in stored_messages) == [
        f"m-{i:04}" for i in range(count)]
    assert all(m.deliver_at == by_id[m.id].deliver_at
               for m in stored_messages)
    info = client.get_message("orders", "m-0007")
    assert (info.payload_preview, info.headers) == (b"body 7", {"n": "7"})

    # Pending ids again, without waiting for each: the first receipts,
    # duplicate set, and nothing new stored.
    again = results([client.publish_async("orders", b"other", id=f"m-{i:04}")
                     for i in range(0, count, 10)])
    assert again == [Receipt(f"m-{i:04}", by_id[f"m-{i:04}"].deliver_at, True)
                     for i in range(0, count, 10)]
    assert client.stats("orders").topics[0].scheduled == count


def test_a_refused_message_fails_alone_and_the_stream_goes_on(
        daemon: Daemon, client: hourglass.Client) -> None:
    futures = [
        client.publish_async("orders", b"1", delay=HOUR, id="ok-1"),
        client.publish_async("a b", b"x", id="bad-topic"),
        client.publish_async("orders", b"x" * (MiB + 1), id="too-big"),
        client.publish_async("orders", b"x", id="hg-0123456789abcdef"),
        client.publish_async("orders", b"2", delay=HOUR, id="ok-2"),
    ]
    done, not_done = concurrent.futures.wait(futures, timeout=WAIT)
    assert not not_done
    assert [f.result(0).id for f in (futures[0], futures[4])] == [
        "ok-1", "ok-2"]
    failures = [f.exception(0) for f in futures[1:4]]
    assert [(type(e), e.code if e else None, e.message if e else None)
            for e in failures] == [
        (hourglass.InvalidArgument, grpc.StatusCode.INVALID_ARGUMENT,
         'message 0: topic "a b" has a space'),
        (hourglass.InvalidArgument, grpc.StatusCode.INVALID_ARGUMENT,
         "message 0: payload is 1048577 bytes; the limit is 1048576 "
         "(--max_payload_bytes)"),
        (hourglass.InvalidArgument, grpc.StatusCode.INVALID_ARGUMENT,
         'message 0: id "hg-0123456789abcdef" has the form of the ids the '
         'broker assigns (hg- and 16 hex digits)'),
    ]
    assert [m.id for m in listed(client, "orders")] == ["ok-1", "ok-2"]
    assert len(client._publisher._streams) == 1
    assert client._publisher.retries == 0

    # A mistake the client sees raises at once, and sends nothing.
    with pytest.raises(ValueError) as e:
        client.publish_async("orders", b"x", delay=ms(1),
                             deliver_at=now())
    assert str(e.value) == "publish_async: give delay or deliver_at, not both"


def test_publish_async_waits_while_its_bound_of_messages_is_in_flight(
        silent_port: int) -> None:
    address = f"127.0.0.1:{silent_port}"
    with hourglass.Client(address, timeout=0.5,
                          max_publishes_in_flight=2) as client:
        sent_at = time.monotonic()
        first = [client.publish_async("t", b"x", id=f"m-{i}")
                 for i in range(2)]
        # The broker answers nothing: the third waits until the first two
        # fail at their deadline, 0.5 s after they were sent.
        third = client.publish_async("t", b"x", id="m-2")
        assert time.monotonic() - sent_at >= 0.5
        for f in first:
            error = f.exception(WAIT)
            assert isinstance(error, hourglass.DeadlineExceeded)
            assert error.message == f"no answer from {address} within 0.5 s"
        error = third.exception(WAIT)
        assert isinstance(error, hourglass.DeadlineExceeded)
    with pytest.raises(ValueError, match="max_publishes_in_flight 0 is not"):
        hourglass.Client(address, max_publishes_in_flight=0)


def test_messages_with_ids_survive_a_broker_restart_mid_stream(
        daemon: Daemon, client: hourglass.Client) -> None:
    counter = Counter()
    futures: List["concurrent.futures.Future[Receipt]"] = []
    stop = threading.Event()

    def produce() -> None:
        i = 0
        while not stop.is_set():
            future = client.publish_async("orders", f"{i}", delay=HOUR,
                                          id=f"m-{i:06}")
            future.add_done_callback(counter.done)
            futures.append(future)
            i += 1

    producer = threading.Thread(target=produce)
    counter.arm(500)
    producer.start()
    try:
        assert counter.reached.wait(WAIT), "500 receipts before the restart"
        # SIGTERM with messages in flight on the stream: it ends with
        # UNAVAILABLE, and what it did not answer goes again on a new one,
        # which waits for the broker to come back on the same port.
        daemon.restart()
        counter.arm(500)
        assert counter.reached.wait(WAIT), "500 receipts after the restart"
    finally:
        stop.set()
        producer.join(WAIT)
    receipts = results(futures)

    published = [f"m-{i:06}" for i in range(len(futures))]
    assert [r.id for r in receipts] == published
    assert client._publisher.retries > 0, "nothing was in flight"
    # Each stored exactly once (the retries went after later messages),
    # due when its receipt (the first one, for a retry of a message the
    # broker had stored) says.
    stored_messages = listed(client, "orders")
    assert sorted(m.id for m in stored_messages) == published
    due = {r.id: r.deliver_at for r in receipts}
    assert all(m.deliver_at == due[m.id] for m in stored_messages)


def test_a_publish_with_ids_waits_out_a_stopped_broker_one_without_fails(
        daemon: Daemon, hourglass_log: Callable[[str], Records]) -> None:
    daemon.stop()
    with hourglass.Client(daemon.address) as client:
        # Without an id: no retry, on the stream or in a call.
        stream_error = client.publish_async("orders", b"x").exception(WAIT)
        assert isinstance(stream_error, hourglass.Unavailable)
        with pytest.raises(hourglass.Unavailable):
            client.publish("orders", b"x")
        with pytest.raises(hourglass.Unavailable):
            client.publish_many([Message("orders", b"x", id="m-0"),
                                 Message("orders", b"x")])
        assert client._publisher.retries == 0

    with hourglass.Client(daemon.address, timeout=WAIT) as client:
        # With an id: sent again after a backoff; the stream that replaces
        # the first waits for the broker.
        streamed = client.publish_async("orders", b"s", delay=HOUR,
                                        id="streamed")
        eventually(lambda: client._publisher.retries >= 1,
                   "publish_async tried again")
        assert not streamed.done()

        retrying = hourglass_log("a publish with ids to")
        pool = concurrent.futures.ThreadPoolExecutor(2)
        unary = pool.submit(client.publish, "orders", b"u", delay=HOUR,
                            id="unary")
        many = pool.submit(client.publish_many, [
            Message("orders", b"b0", delay=HOUR, id="batch-0"),
            Message("orders", b"b1", delay=HOUR, id="batch-1")])
        assert retrying.seen.wait(WAIT), "publish tried again"
        daemon.start()
        receipts = [streamed.result(WAIT), unary.result(WAIT),
                    *many.result(WAIT)]
        pool.shutdown()
        assert [(r.id, r.duplicate) for r in receipts] == [
            ("streamed", False), ("unary", False), ("batch-0", False),
            ("batch-1", False)]
        assert sorted(m.id for m in listed(client, "orders")) == [
            "batch-0", "batch-1", "streamed", "unary"]


def test_an_unreachable_broker_fails_messages_with_and_without_ids(
        free_port: int) -> None:
    address = f"127.0.0.1:{free_port}"
    with hourglass.Client(address) as client:
        error = client.publish_async("t", b"x").exception(WAIT)
        assert isinstance(error, hourglass.Unavailable)
        assert "failed to connect" in error.message
        assert client._publisher.retries == 0
    with hourglass.Client(address, timeout=1.0) as client:
        # Tried again until the deadline, waiting for the broker.
        error = client.publish_async("t", b"x", id="m-1").exception(WAIT)
        assert isinstance(error, hourglass.DeadlineExceeded)
        assert error.message == f"no answer from {address} within 1.0 s"
        assert client._publisher.retries >= 1


def test_close_waits_for_messages_in_flight_then_cancels_the_rest(
        daemon: Daemon, silent_port: int) -> None:
    client = hourglass.Client(daemon.address)
    futures = [client.publish_async("orders", b"x", delay=HOUR, id=f"m-{i}")
               for i in range(300)]
    client.close()
    assert all(f.done() for f in futures)
    assert [f.result(0).id for f in futures] == [f"m-{i}" for i in range(300)]
    late = client.publish_async("orders", b"x", id="late")
    error = late.exception(0)
    assert isinstance(error, hourglass.Cancelled)
    assert error.message == "publish_async: the client is closed"

    silent = hourglass.Client(f"127.0.0.1:{silent_port}", timeout=WAIT)
    waiting = [silent.publish_async("t", b"x", id=f"m-{i}") for i in range(3)]
    started = time.monotonic()
    silent.close(timeout=0.2)
    assert time.monotonic() - started < WAIT / 3
    for f in waiting:
        error = f.exception(0)
        assert isinstance(error, hourglass.Cancelled)
        assert error.message == "the client was closed"


# --- asyncio -----------------------------------------------------------------


def test_asyncio_many_in_flight_duplicates_and_a_refusal(
        daemon: Daemon) -> None:
    async def main() -> None:
        async with hourglass.aio.Client(daemon.address) as client:
            count = 1500
            before = now()
            receipts = await asyncio.wait_for(asyncio.gather(*(
                client.publish_async("orders", f"{i}", delay=HOUR + ms(i),
                                     id=f"m-{i:04}")
                for i in range(count))), WAIT)
            after = now()
            assert [(r.id, r.duplicate) for r in receipts] == [
                (f"m-{i:04}", False) for i in range(count)]
            assert all(floor_ms(before) + HOUR + ms(i) <= r.deliver_at
                       <= after + HOUR + ms(i)
                       for i, r in enumerate(receipts))
            assert len(client._publisher._streams) == 1
            assert client._publisher.retries == 0

            again = await asyncio.wait_for(asyncio.gather(
                client.publish_async("orders", b"x", id="m-0003"),
                client.publish_async("a b", b"x", id="bad"),
                return_exceptions=True), WAIT)
            assert again[0] == Receipt("m-0003", receipts[3].deliver_at, True)
            assert isinstance(again[1], hourglass.InvalidArgument)
            assert again[1].message == 'message 0: topic "a b" has a space'
            stats = await client.stats("orders")
            assert stats.topics[0].scheduled == count

    asyncio.run(main())


def test_asyncio_messages_with_ids_survive_a_broker_restart_mid_stream(
        daemon: Daemon) -> None:
    async def main() -> None:
        async with hourglass.aio.Client(daemon.address) as client:
            tasks: List["asyncio.Task[Receipt]"] = []
            done = 0
            reached = asyncio.Event()
            target = 500

            def counted(_task: Any) -> None:
                nonlocal done
                done += 1
                if done >= target:
                    reached.set()

            stopping = asyncio.Event()

            async def produce() -> None:
                i = 0
                outstanding: Set["asyncio.Task[Receipt]"] = set()
                while not stopping.is_set():
                    if len(outstanding) >= 1000:
                        # Let them be sent and answered.
                        _, outstanding = await asyncio.wait(
                            outstanding, return_when=asyncio.FIRST_COMPLETED)
                        continue
                    task = asyncio.ensure_future(client.publish_async(
                        "orders", f"{i}", delay=HOUR, id=f"m-{i:06}"))
                    task.add_done_callback(counted)
                    tasks.append(task)
                    outstanding.add(task)
                    i += 1

            producer = asyncio.ensure_future(produce())
            await asyncio.wait_for(reached.wait(), WAIT)
            # The restart blocks a thread, not the loop: the producer goes
            # on while the broker stops.
            await asyncio.get_running_loop().run_in_executor(
                None, daemon.restart)
            reached.clear()
            target = done + 500
            await asyncio.wait_for(reached.wait(), WAIT)
            stopping.set()
            await asyncio.wait_for(producer, WAIT)
            receipts = await asyncio.wait_for(asyncio.gather(*tasks), WAIT)

            published = [f"m-{i:06}" for i in range(len(tasks))]
            assert [r.id for r in receipts] == published
            assert client._publisher.retries > 0, "nothing was in flight"
            page = await client.list_messages(
                "orders", MessageState.SCHEDULED, page_size=1000)
            ids = [m.id for m in page.messages]
            while page.next_page_token is not None:
                page = await client.list_messages(
                    "orders", MessageState.SCHEDULED, page_size=1000,
                    page_token=page.next_page_token)
                ids += [m.id for m in page.messages]
            assert sorted(ids) == published

    asyncio.run(main())


def test_asyncio_without_an_id_nothing_is_retried_and_close_cancels(
        free_port: int, silent_port: int) -> None:
    async def main() -> None:
        async with hourglass.aio.Client(f"127.0.0.1:{free_port}") as client:
            with pytest.raises(hourglass.Unavailable) as e:
                await client.publish_async("t", b"x")
            assert "failed to connect" in e.value.message
            assert client._publisher.retries == 0
        quiet = f"127.0.0.1:{silent_port}"
        async with hourglass.aio.Client(quiet, timeout=0.5) as client:
            with pytest.raises(hourglass.DeadlineExceeded) as e:
                await client.publish_async("t", b"x", id="m-1")
            assert e.value.message == f"no answer from {quiet} within 0.5 s"
        client = hourglass.aio.Client(quiet, timeout=WAIT)
        waiting = [asyncio.ensure_future(client.publish_async("t", id=f"{i}"))
                   for i in range(3)]
        await asyncio.sleep(0)  # One turn of the loop: each is sent.
        assert client._publisher._in_flight == 3
        await client.close(timeout=0.2)
        for outcome in await asyncio.gather(*waiting, return_exceptions=True):
            assert isinstance(outcome, hourglass.Cancelled)
            assert outcome.message == "the client was closed"
        with pytest.raises(hourglass.Cancelled):
            await client.publish_async("t", b"x")

    asyncio.run(main())
