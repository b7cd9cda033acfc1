"""The Admin calls of hourglass.Client and hourglass.aio.Client against a real
hourglassd, each with its exact result: stats, topics, groups (list, create,
delete), list_messages (pages, ranges, groups), get_message, the schedule
histogram, redrive, purge and create_snapshot; and the broker's refusals
with their exact codes and messages.

Counts the broker keeps as deliveries move (ready, in flight, dead) are
waited for with ``eventually``; rates and lateness, which depend on timing,
are left out of the comparisons.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, List

import grpc
import pytest

import hourglass
import hourglass.aio
from hourglass import (Group, GroupState, GroupStats, Message, MessageInfo,
                       MessageState, Percentiles, Schedule, ScheduleBucket,
                       Topic, TopicStats)
from helpers import Daemon, eventually, floor_ms, ms, now, take

HOUR = timedelta(hours=1)
ZERO = timedelta(0)
NO_LATENESS = Percentiles(ZERO, ZERO, ZERO, ZERO)


def without_rates(stats: TopicStats) -> TopicStats:
    """`stats` with its rates and lateness zeroed: they depend on timing."""
    return dataclasses.replace(
        stats, publish_rate=0.0, delivery_rate=0.0, lateness=NO_LATENESS,
        groups=[dataclasses.replace(g, ack_rate=0.0) for g in stats.groups])


def next_hour() -> datetime:
    """The start of the UTC hour after the next one: in the future for at
    least an hour."""
    t = now().replace(minute=0, second=0, microsecond=0)
    return t + 2 * HOUR


def test_stats_topics_and_groups_count_exactly(
        client: hourglass.Client) -> None:
    before = now()
    audit = client.create_group("orders", "audit")
    after = now()
    assert audit == Group("orders", "audit", audit.created_at, 0, 0, 0)
    assert floor_ms(before) <= audit.created_at <= after

    client.publish_many([Message("orders", b"later", delay=HOUR + ms(k),
                                 id=f"later-{k}") for k in range(3)])
    with client.subscribe("orders", "billing", max_in_flight=1) as sub:
        client.publish_many([Message("orders", b"now", id=f"now-{k}")
                             for k in range(2)])
        # billing holds one in flight and has one ready; audit has both
        # ready.
        [held] = take(sub)
        expected = TopicStats(
            topic="orders", scheduled=3, ready=3, in_flight=1,
            dead_lettered=0, publish_rate=0.0, delivery_rate=0.0,
            lateness=NO_LATENESS, groups=[
                GroupStats("audit", ready=2, in_flight=0, consumers=0,
                           ack_rate=0.0),
                GroupStats("billing", ready=1, in_flight=1, consumers=1,
                           ack_rate=0.0)])
        eventually(lambda: [without_rates(t) for t in client.stats().topics]
                   == [expected], "the counts settle")

        stats = client.stats()
        assert re.fullmatch(r"\d+\.\d+\.\d+.*", stats.version), stats.version
        assert (stats.serving, stats.not_serving_reason) == (True, "")
        assert re.fullmatch(r"[0-9a-f]{32}", stats.store_id), stats.store_id
        assert stats.format_version >= 1
        assert stats.started_at <= now()
        assert stats.started_at.utcoffset() == ZERO
        assert stats.topics[0].publish_rate > 0
        only = client.stats("orders")
        assert [without_rates(t) for t in only.topics] == [expected]

        assert client.topics() == [Topic("orders", scheduled=3, groups=2,
                                         ready=3, in_flight=1,
                                         dead_lettered=0)]
        groups = client.groups("orders")
        assert [dataclasses.replace(g, created_at=audit.created_at)
                for g in groups] == [
            Group("orders", "audit", audit.created_at, 2, 0, 0),
            Group("orders", "billing", audit.created_at, 1, 1, 1)]
        assert groups[0] == dataclasses.replace(audit, ready=2)
        assert groups[1].created_at >= audit.created_at
        assert held.ack() is True

    with pytest.raises(hourglass.NotFound) as e:
        client.stats("nope")
    assert e.value.message == (
        'no topic "nope" (no pending messages and no groups)')
    with pytest.raises(hourglass.NotFound) as e:
        client.groups("nope")
    assert e.value.message == (
        'no topic "nope" (no pending messages and no groups)')


def test_create_and_delete_group(client: hourglass.Client) -> None:
    created = client.create_group("orders", "audit")
    assert (created.topic, created.name, created.ready, created.in_flight,
            created.consumers) == ("orders", "audit", 0, 0, 0)
    with pytest.raises(hourglass.AlreadyExists) as e:
        client.create_group("orders", "audit")
    assert e.value.code == grpc.StatusCode.ALREADY_EXISTS
    assert e.value.message == 'group "audit" of topic "orders" already exists'

    # Registered before any consumer: it gets what comes due from now on.
    client.publish_many([Message("orders", b"x", id=f"m-{k}")
                         for k in range(2)])
    eventually(lambda: client.groups("orders")[0].ready == 2,
               "both ready in audit")
    assert client.delete_group("orders", "audit") == 2
    with pytest.raises(hourglass.NotFound) as e:
        client.delete_group("orders", "audit")
    assert e.value.message == 'no group "audit" in topic "orders"'
    with pytest.raises(hourglass.InvalidArgument) as e:
        client.create_group("orders", "bad group")
    assert e.value.message == 'group "bad group" has a space'


def test_list_messages_pages_ranges_and_groups_and_get_message(
        client: hourglass.Client) -> None:
    base = next_hour()
    before = now()
    receipts = client.publish_many([
        Message("orders", f"body {k}".encode(), deliver_at=base + k * HOUR,
                id=f"m-{k}", headers={"k": str(k)}) for k in range(5)])
    after = now()

    # Pages of 2, in due order; the last has no token.
    pages = []
    token = None
    while True:
        page = client.list_messages("orders", MessageState.SCHEDULED,
                                    page_size=2, page_token=token)
        pages.append([m.id for m in page.messages])
        token = page.next_page_token
        if token is None:
            break
    assert pages == [["m-0", "m-1"], ["m-2", "m-3"], ["m-4"]]

    # A due-time range [from, to).
    page = client.list_messages("orders", MessageState.SCHEDULED,
                                due_from=base + HOUR, due_to=base + 3 * HOUR)
    assert ([m.id for m in page.messages], page.next_page_token) == (
        ["m-1", "m-2"], None)
    listed = page.messages[0]
    assert floor_ms(before) <= listed.published_at <= after
    assert listed == MessageInfo(
        id="m-1", topic="orders", state=MessageState.SCHEDULED,
        deliver_at=base + HOUR, published_at=listed.published_at,
        payload_size=6, headers={"k": "1"}, payload_preview=b"", groups=[],
        attempt=0)

    # One message, with a preview of its payload.
    info = client.get_message("orders", "m-3", preview_bytes=4)
    assert info == MessageInfo(
        id="m-3", topic="orders", state=MessageState.SCHEDULED,
        deliver_at=receipts[3].deliver_at, published_at=info.published_at,
        payload_size=6, headers={"k": "3"}, payload_preview=b"body",
        groups=[], attempt=0)
    assert client.get_message("orders", "m-3").payload_preview == b"body 3"

    # Due messages: in flight in one group, ready in another.
    client.create_group("jobs", "audit")
    with client.subscribe("jobs", "workers",
                          ack_timeout=timedelta(seconds=30)) as sub:
        handed = now()
        client.publish("jobs", b"work", id="job-1")
        [d] = take(sub)
        taken = now()
        eventually(lambda: client.get_message("jobs", "job-1").state
                   is MessageState.READY, "job-1 ready in audit")
        info = client.get_message("jobs", "job-1")
        assert (info.state, info.attempt) == (MessageState.READY, 1)
        audit, workers = info.groups
        assert audit == GroupState("audit", MessageState.READY, 0, None)
        assert (workers.group, workers.state, workers.attempt) == (
            "workers", MessageState.IN_FLIGHT, 1)
        assert workers.redeliver_at is not None
        assert (floor_ms(handed) + timedelta(seconds=30)
                <= workers.redeliver_at <= taken + timedelta(seconds=30))

        in_flight = client.list_messages("jobs", MessageState.IN_FLIGHT,
                                         group="workers")
        assert [(m.id, m.groups) for m in in_flight.messages] == [
            ("job-1", [workers])]
        ready = client.list_messages("jobs", MessageState.READY,
                                     group="workers")
        assert ready.messages == []
        ready = client.list_messages("jobs", MessageState.READY)
        assert [m.id for m in ready.messages] == ["job-1"]
        assert d.ack() is True

    with pytest.raises(hourglass.InvalidArgument) as e:
        client.list_messages("orders", MessageState.SCHEDULED, group="g")
    assert e.value.message == "group narrows READY and IN_FLIGHT listings only"
    with pytest.raises(hourglass.InvalidArgument) as e:
        client.list_messages("orders", MessageState.SCHEDULED,
                             page_token="xx")
    assert e.value.message == "page_token is not a token this broker made"
    with pytest.raises(hourglass.InvalidArgument) as e:
        client.list_messages("orders", MessageState.READY, page_size=1001)
    assert e.value.message == "page_size 1001 is over the limit of 1000"
    with pytest.raises(TypeError, match="state is a hourglass.MessageState"):
        client.list_messages("orders", "scheduled")  # type: ignore[arg-type]
    with pytest.raises(hourglass.NotFound) as e:
        client.get_message("orders", "nope")
    assert e.value.message == 'no message with id "nope" in topic "orders"'


def test_the_schedule_histogram_counts_per_aligned_bucket(
        client: hourglass.Client) -> None:
    h = next_hour()
    minute = timedelta(minutes=1)
    client.publish_many([
        Message("reminders", deliver_at=h + 5 * minute, id="a"),
        Message("reminders", deliver_at=h + 10 * minute, id="b"),
        Message("reminders", deliver_at=h + 70 * minute, id="c"),
        Message("reminders", deliver_at=h + 181 * minute, id="d"),
    ])
    hourly = client.schedule_histogram("reminders", h, h + 4 * HOUR, HOUR)
    assert hourly == Schedule(buckets=[
        ScheduleBucket(h, 2), ScheduleBucket(h + HOUR, 1),
        ScheduleBucket(h + 2 * HOUR, 0), ScheduleBucket(h + 3 * HOUR, 1)],
        total=4)
    # Buckets are aligned: a range starting inside one counts all of it.
    assert client.schedule_histogram(
        "reminders", h + 15 * minute, h + HOUR, HOUR) == Schedule(
            [ScheduleBucket(h, 2)], 2)
    assert client.schedule_histogram(
        "reminders", h + 30 * minute, h + 90 * minute,
        30 * minute) == Schedule([ScheduleBucket(h + 30 * minute, 0),
                                  ScheduleBucket(h + 60 * minute, 1)], 1)
    # A reschedule moves a message between buckets; a cancel takes it out.
    client.reschedule("reminders", "a", deliver_at=h + 2 * HOUR)
    client.cancel("reminders", "d")
    assert [b.count for b in client.schedule_histogram(
        "reminders", h, h + 4 * HOUR, HOUR).buckets] == [1, 1, 1, 0]
    # A topic without scheduled messages gets zeros.
    assert client.schedule_histogram("nothing", h, h + 2 * HOUR,
                                     HOUR) == Schedule(
        [ScheduleBucket(h, 0), ScheduleBucket(h + HOUR, 0)], 0)

    with pytest.raises(hourglass.InvalidArgument) as e:
        client.schedule_histogram("reminders", h, h + HOUR,
                                  timedelta(seconds=90))
    assert e.value.message == (
        "bucket 1m30s is not a positive whole number of minutes")
    with pytest.raises(ValueError, match="has no timezone"):
        client.schedule_histogram("reminders", datetime(2030, 1, 1),
                                  datetime(2030, 1, 2), HOUR)


def test_dead_letters_are_listed_and_redriven(make_daemon) -> None:
    daemon = make_daemon(["--max_attempts=1"])
    with hourglass.Client(daemon.address) as client:
        with client.subscribe("jobs", "workers") as sub:
            receipts = client.publish_many([
                Message("jobs", b"j1", id="j1"),
                Message("jobs", b"j2", id="j2")])
            for d in take(sub, 2):
                assert d.nack() is True  # Its last attempt: dead.
            eventually(lambda: len(client.list_messages(
                "jobs", MessageState.DEAD).messages) == 2, "two dead")
            dead = client.list_messages("jobs", MessageState.DEAD).messages
            assert [(m.id, m.topic, m.state, m.attempt, m.groups)
                    for m in dead] == [
                ("j1", "jobs.dlq", MessageState.DEAD, 1, []),
                ("j2", "jobs.dlq", MessageState.DEAD, 1, [])]
            assert dead[0].deliver_at >= receipts[0].deliver_at
            assert client.stats("jobs").topics[0].dead_lettered == 2
            assert [t.name for t in client.topics()] == ["jobs", "jobs.dlq"]

            with pytest.raises(hourglass.NotFound) as e:
                client.redrive("jobs", ["j1", "nope"])
            assert e.value.message == (
                'no dead letter with id "nope" of topic "jobs" '
                '(in "jobs.dlq")')
            assert client.redrive("jobs", ["j1"]) == 1
            [again] = take(sub)
            assert (again.id, again.payload, again.attempt) == (
                "j1", b"j1", 1)
            assert again.ack() is True
            assert client.redrive("jobs") == 1
            [again] = take(sub)
            assert (again.id, again.attempt) == ("j2", 1)
            assert again.ack() is True
            assert client.redrive("jobs") == 0
            assert client.list_messages("jobs",
                                        MessageState.DEAD).messages == []
        with pytest.raises(TypeError, match="ids is a list of ids"):
            client.redrive("jobs", "j1")


def test_purge_deletes_scheduled_and_ready_messages(
        client: hourglass.Client) -> None:
    client.publish_many([Message("old", b"x", delay=HOUR, id=f"s-{k}")
                         for k in range(3)])
    client.publish("old", b"due", id="due")  # Ready for a first group.
    eventually(lambda: client.topics()[0].ready == 1, "due is ready")
    assert client.topics() == [Topic("old", 3, 0, 1, 0, 0)]
    assert client.purge("old", ready=True) == 1
    assert client.topics() == [Topic("old", 3, 0, 0, 0, 0)]
    assert client.purge("old", scheduled=True, ready=True) == 3
    assert client.topics() == []
    with pytest.raises(hourglass.InvalidArgument) as e:
        client.purge("old")
    assert e.value.message == "nothing to purge: set scheduled, ready, or both"


def test_create_snapshot_writes_the_store_into_the_snapshot_dir(
        daemon: Daemon, client: hourglass.Client) -> None:
    client.publish("orders", b"x", delay=HOUR, id="kept")
    stats = client.stats()
    before = now()
    snapshot = client.create_snapshot("snap-1")
    after = now()
    directory = daemon.data_dir / "snapshots"
    assert snapshot == dataclasses.replace(
        snapshot, dir=str(directory / "snap-1"),
        format_version=stats.format_version, store_id=stats.store_id,
        shards=0)
    assert snapshot.files > 0 and snapshot.bytes > 0
    assert before <= snapshot.started_at <= after
    assert ZERO <= snapshot.took <= after - before
    assert Path(snapshot.dir).is_dir()

    with pytest.raises(hourglass.AlreadyExists) as e:
        client.create_snapshot("snap-1")
    assert e.value.message == (
        f"snapshot dir {directory / 'snap-1'} already exists")
    with pytest.raises(hourglass.InvalidArgument) as e:
        client.create_snapshot("a/b")
    assert e.value.message == (
        'dir "a/b" is not a plain name: name the new snapshot with up to 200 '
        "letters, digits, '.', '_' and '-' (not . or ..); it is written into "
        f"the broker's --snapshot_dir, {directory}")


def test_asyncio_admin_calls_answer_as_the_threaded_ones(
        make_daemon) -> None:
    daemon = make_daemon(["--max_attempts=1"])
    h = next_hour()
    with hourglass.Client(daemon.address) as client:
        client.publish_many([
            Message("orders", b"one", deliver_at=h + HOUR * k, id=f"m-{k}")
            for k in range(3)])
        client.create_group("orders", "audit")
        threaded = [
            client.topics(),
            client.groups("orders"),
            [without_rates(t) for t in client.stats().topics],
            client.list_messages("orders", MessageState.SCHEDULED,
                                 page_size=2),
            client.get_message("orders", "m-1", preview_bytes=2),
            client.schedule_histogram("orders", h, h + 3 * HOUR, HOUR),
            client.redrive("orders"),
        ]

    async def main() -> List[Any]:
        async with hourglass.aio.Client(daemon.address) as aio:
            results: List[Any] = [
                await aio.topics(),
                await aio.groups("orders"),
                [without_rates(t) for t in (await aio.stats()).topics],
                await aio.list_messages("orders", MessageState.SCHEDULED,
                                        page_size=2),
                await aio.get_message("orders", "m-1", preview_bytes=2),
                await aio.schedule_histogram("orders", h, h + 3 * HOUR,
                                             HOUR),
                await aio.redrive("orders"),
            ]
            created = await aio.create_group("orders", "extra")
            assert (created.topic, created.name) == ("orders", "extra")
            assert await aio.delete_group("orders", "extra") == 0
            with pytest.raises(hourglass.NotFound) as e:
                await aio.delete_group("orders", "extra")
            assert e.value.message == 'no group "extra" in topic "orders"'
            snapshot = await aio.create_snapshot("from-aio")
            assert snapshot.dir == str(daemon.data_dir / "snapshots" /
                                       "from-aio")
            assert await aio.purge("orders", scheduled=True) == 3
            assert await aio.topics() == [Topic("orders", 0, 1, 0, 0, 0)]
            return results

    assert asyncio.run(main()) == threaded
    topics, groups, stats, page, info, schedule, redriven = threaded
    assert topics == [Topic("orders", 3, 1, 0, 0, 0)]
    assert [(g.name, g.ready) for g in groups] == [("audit", 0)]
    assert [(t.topic, t.scheduled, t.groups) for t in stats] == [
        ("orders", 3, [GroupStats("audit", 0, 0, 0, 0.0)])]
    assert [m.id for m in page.messages] == ["m-0", "m-1"]
    assert page.next_page_token is not None
    assert (info.id, info.payload_preview) == ("m-1", b"on")
    assert schedule == Schedule([ScheduleBucket(h, 1),
                                 ScheduleBucket(h + HOUR, 1),
                                 ScheduleBucket(h + 2 * HOUR, 1)], 3)
    assert redriven == 0
