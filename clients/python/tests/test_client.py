"""hourglass.Client against a real hourglassd: publish, subscribe, ack,
nack, cancel, reschedule, duplicates, batches, closing and reconnecting.

Every delivery is checked never early (``take``); due times are checked
against the clock read around the call, to the millisecond the broker keeps.
"""

from __future__ import annotations

import re
import time
from datetime import timedelta

import grpc
import pytest

import hourglass
from hourglass import Message
from hourglass.v1 import admin_pb2
from helpers import (WAIT, admin, eventually, floor_ms, ids, ms, now,
                     scheduled_ids, stored, take, take_batches)


def test_a_message_comes_at_its_time_with_its_fields_and_an_ack_ends_it(
        client: hourglass.Client) -> None:
    with client.subscribe("orders", "billing",
                          ack_timeout=timedelta(seconds=1)) as sub:
        before = now()
        receipt = client.publish("orders", b'{"order": 1}', delay=ms(300),
                                 id="order-1", headers={"user": "7"})
        after = now()
        assert receipt.id == "order-1"
        assert receipt.duplicate is False
        assert (floor_ms(before) + ms(300) <= receipt.deliver_at
                <= after + ms(300))
        assert receipt.deliver_at.utcoffset() == timedelta(0)
        assert receipt.deliver_at.microsecond % 1000 == 0

        [d] = take(sub)
        assert (d.id, d.topic, d.payload, d.headers, d.attempt) == (
            "order-1", "orders", b'{"order": 1}', {"user": "7"}, 1)
        assert d.deliver_at == receipt.deliver_at
        assert floor_ms(before) <= d.published_at <= after
        assert d.ack() is True

        # Due after the acked delivery's ack timeout would have sent it
        # again: it comes next, so the ack took.
        client.publish("orders", b"next", delay=ms(1500), id="order-2")
        assert ids(take(sub)) == ["order-2@1"]


def test_no_due_time_or_a_past_one_means_now_and_the_broker_assigns_ids(
        client: hourglass.Client) -> None:
    before = now()
    plain = client.publish("now", "text is UTF-8: é")
    past = client.publish("now", b"late",
                          deliver_at=before - timedelta(hours=1))
    after = now()
    for receipt in (plain, past):
        assert re.fullmatch(r"hg-[0-9a-f]{16}", receipt.id), receipt.id
        assert floor_ms(before) <= receipt.deliver_at <= after
    assert plain.id != past.id

    at = floor_ms(now()) + ms(200)
    timed = client.publish("now", b"timed", deliver_at=at)
    assert timed.deliver_at == at
    with client.subscribe("now", "g") as sub:
        got = take(sub, 3)
        assert [(d.id, d.payload) for d in got] == [
            (plain.id, "text is UTF-8: é".encode()), (past.id, b"late"),
            (timed.id, b"timed")]
        assert got[2].deliver_at == at
        assert sub.ack(got) == 3


def test_a_nack_brings_the_delivery_back_after_its_delay(
        client: hourglass.Client) -> None:
    with client.subscribe("jobs", "workers") as sub:
        client.publish("jobs", b"x", id="job-1")
        [first] = take(sub)
        assert (first.id, first.attempt) == ("job-1", 1)
        nacked = now()
        assert first.nack(delay=ms(500)) is True
        [again] = take(sub)
        assert (again.id, again.attempt, again.payload) == ("job-1", 2, b"x")
        assert again.received_at - nacked >= ms(500)
        assert again.ack() is True


def test_a_cancelled_message_never_comes_and_cannot_be_cancelled_twice(
        daemon, client: hourglass.Client) -> None:
    client.publish_many([
        Message("orders", b"a", delay=ms(1000), id="order-a"),
        Message("orders", b"b", delay=ms(1200), id="order-b"),
    ])
    client.cancel("orders", "order-a")
    assert scheduled_ids(daemon, "orders") == ["order-b"]
    with client.subscribe("orders", "g") as sub:
        # order-a was due first: had it been delivered it would come first.
        assert ids(take(sub)) == ["order-b@1"]
    with pytest.raises(hourglass.NotFound) as e:
        client.cancel("orders", "order-a")
    assert e.value.code == grpc.StatusCode.NOT_FOUND
    assert e.value.message == (
        'no scheduled message with id "order-a" in topic "orders" '
        '(unknown, already due, or cancelled)')


def test_reschedule_moves_a_message_by_delay_or_to_a_time(
        client: hourglass.Client) -> None:
    client.publish("reminders", b"r1", delay=timedelta(hours=1), id="r-1")
    before = now()
    moved = client.reschedule("reminders", "r-1", delay=ms(200))
    after = now()
    assert (moved.id, moved.duplicate) == ("r-1", False)
    assert floor_ms(before) + ms(200) <= moved.deliver_at <= after + ms(200)

    client.publish("reminders", b"r2", delay=ms(1000), id="r-2")
    at = floor_ms(now()) + ms(1500)
    later = client.reschedule("reminders", "r-2", deliver_at=at)
    assert later.deliver_at == at
    client.publish("reminders", b"marker", delay=ms(1200), id="marker")

    with client.subscribe("reminders", "g") as sub:
        got = take(sub, 3)
        # r-2 was due before the marker and now comes after it.
        assert ids(got) == ["r-1@1", "marker@1", "r-2@1"]
        assert got[0].deliver_at == moved.deliver_at
        assert got[2].deliver_at == at

    with pytest.raises(hourglass.NotFound) as e:
        client.reschedule("reminders", "r-1", delay=ms(100))
    assert e.value.message == (
        'no scheduled message with id "r-1" in topic "reminders" '
        '(unknown, already due, or cancelled)')


def test_a_pending_id_returns_the_first_receipt_and_stores_nothing(
        daemon, client: hourglass.Client) -> None:
    first = client.publish("orders", b"first", delay=ms(300), id="order-7")
    second = client.publish("orders", b"second", delay=timedelta(hours=1),
                            id="order-7")
    assert second == hourglass.Receipt("order-7", first.deliver_at, True)
    [batch_receipt] = client.publish_many([Message("orders", b"third",
                                                   id="order-7")])
    assert batch_receipt == second

    with client.subscribe("orders", "g") as sub:
        [d] = take(sub)
        assert (d.id, d.payload, d.deliver_at) == (
            "order-7", b"first", first.deliver_at)
        assert d.ack() is True
        # Acked by every group, the message is deleted and its id is free
        # again: a new message.
        eventually(lambda: not stored(daemon, "orders", "order-7"),
                   "order-7 deleted after its ack")
        again = client.publish("orders", b"fourth", id="order-7")
        assert again.duplicate is False
        [d] = take(sub)
        assert (d.id, d.payload, d.attempt) == ("order-7", b"fourth", 1)


def test_publish_many_stores_all_or_nothing(
        daemon, client: hourglass.Client) -> None:
    hour = timedelta(hours=1)
    with pytest.raises(hourglass.InvalidArgument) as e:
        client.publish_many([
            Message("orders", b"1", delay=hour, id="m-1"),
            Message("orders", b"2", delay=hour, id="m-2",
                    headers={"bad key": "x"}),
            Message("orders", b"3", delay=hour, id="m-3"),
        ])
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.message == 'message 1: header "bad key" has a space'
    assert scheduled_ids(daemon, "orders") == []
    for id_ in ("m-1", "m-3"):
        with pytest.raises(hourglass.NotFound):
            client.cancel("orders", id_)

    receipts = client.publish_many([
        Message("orders", b"1", delay=hour, id="m-1"),
        Message("orders", b"2", delay=hour + ms(1), id="m-2"),
        Message("orders", b"3", delay=hour + ms(2), id="m-3"),
    ])
    assert [(r.id, r.duplicate) for r in receipts] == [
        ("m-1", False), ("m-2", False), ("m-3", False)]
    assert scheduled_ids(daemon, "orders") == ["m-1", "m-2", "m-3"]

    with pytest.raises(hourglass.InvalidArgument) as e:
        client.publish_many([])
    assert e.value.message == "the request has no messages"


def test_batches_carry_what_came_due_and_one_ack_answers_them(
        client: hourglass.Client) -> None:
    with client.subscribe_batches("burst", "g", max_in_flight=100,
                                  ack_timeout=timedelta(seconds=1)) as sub:
        at = floor_ms(now()) + ms(300)
        client.publish_many([Message("burst", str(i), id=f"b-{i:02}",
                                     deliver_at=at) for i in range(20)])
        batches = take_batches(sub, 20)
        got = [d for batch in batches for d in batch]
        # One due time: publish order.
        assert ids(got) == [f"b-{i:02}@1" for i in range(20)]
        assert all(d.deliver_at == at for d in got)
        assert sub.ack(got) == 20
        # Due after the ack timeout would have sent them again.
        client.publish("burst", b"after", delay=ms(1500), id="after")
        assert [ids(b) for b in take_batches(sub, 1)] == [["after@1"]]


def test_close_hands_unacked_deliveries_back_at_once(
        client: hourglass.Client) -> None:
    first = client.subscribe("handback", "g", max_in_flight=2)
    client.publish_many([Message("handback", b"a", id="a"),
                         Message("handback", b"b", id="b")])
    held = take(first, 2)
    assert ids(held) == ["a@1", "b@1"]
    with client.subscribe("handback", "g") as second:
        closed_at = time.monotonic()
        first.close()
        assert first.closed and first.error is None
        assert list(first) == []
        assert held[0].ack() is False  # Its stream is gone.
        back = take(second, 2)
        # At once: long before the default ack timeout of 30 s.
        assert time.monotonic() - closed_at < 10
        assert ids(back) == ["a@2", "b@2"]
        assert second.ack(back) == 2


def test_a_subscription_subscribes_again_after_the_broker_restarts(
        daemon, client: hourglass.Client) -> None:
    with client.subscribe("restart", "g") as sub:
        client.publish("restart", b"before", id="m-1")
        [held] = take(sub)
        assert ids([held]) == ["m-1@1"]
        # SIGTERM ends the stream with UNAVAILABLE; the same port and data
        # come back.
        daemon.restart()
        with hourglass.Client(daemon.address) as other:
            other.publish("restart", b"after", id="m-2")
        got = take(sub, 2)
        # m-1 was in flight when the broker stopped: it comes again.
        assert sorted(ids(got)) == ["m-1@2", "m-2@1"]
        assert sub.reconnects >= 1
        assert held.ack() is False
        assert sub.ack(got) == 2


def test_without_reconnect_a_broken_stream_ends_the_subscription(
        daemon, client: hourglass.Client) -> None:
    sub = client.subscribe("once", "g", reconnect=False)
    daemon.stop()
    with pytest.raises(hourglass.Unavailable) as e:
        sub.receive(WAIT)
    assert e.value.message == "hourglassd is shutting down; reconnect later"
    assert sub.closed and sub.error is e.value
    with pytest.raises(hourglass.Unavailable):
        next(sub)


def test_a_deleted_group_ends_its_subscriptions_with_not_found(
        daemon, client: hourglass.Client) -> None:
    sub = client.subscribe("orders", "doomed")
    stub, channel = admin(daemon)
    with channel:
        removed = stub.DeleteGroup(admin_pb2.DeleteGroupRequest(
            topic="orders", group="doomed"), timeout=WAIT)
    assert removed.removed == 0
    with pytest.raises(hourglass.NotFound) as e:
        sub.receive(WAIT)
    assert e.value.message == 'group "doomed" was deleted'
    assert sub.reconnects == 0


def test_a_negative_nack_delay_ends_the_subscription_with_invalid_argument(
        client: hourglass.Client) -> None:
    sub = client.subscribe("jobs", "g")
    client.publish("jobs", b"x", id="job-1")
    [d] = take(sub)
    assert d.nack(delay=timedelta(seconds=-1)) is True
    with pytest.raises(hourglass.InvalidArgument) as e:
        sub.receive(WAIT)
    assert e.value.message == "nack.delay -1s is negative"


def test_closing_while_the_broker_is_away_does_not_wait_for_it(
        daemon, client: hourglass.Client) -> None:
    sub = client.subscribe("away", "g")
    daemon.stop()
    # The stream broke; the next one waits for the broker to come back.
    eventually(lambda: sub.reconnects >= 1, "a new stream started")
    started = time.monotonic()
    sub.close(timeout=WAIT)
    assert time.monotonic() - started < WAIT / 3
    assert sub.closed and sub.error is None
    assert sub.receive(0) is None
