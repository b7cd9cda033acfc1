"""Errors: the broker's refusals as hourglass exceptions with their exact code
and message; an unreachable or silent broker; and the mistakes the client
refuses before sending anything.
"""

from __future__ import annotations

import socket
from datetime import datetime, timedelta
from typing import Callable, Iterator, Type

import grpc
import pytest

import hourglass
from hourglass import Message
from helpers import ms

MiB = 1024 * 1024

# (call, exception, its code, the broker's exact message)
BROKER_REFUSALS = [
    (lambda c: c.publish("orders", b"x", delay=timedelta(seconds=-1)),
     hourglass.InvalidArgument, "message 0: delay -1s is negative"),
    (lambda c: c.publish("a b", b"x"),
     hourglass.InvalidArgument, 'message 0: topic "a b" has a space'),
    (lambda c: c.publish("orders", b"x", id="hg-0123456789abcdef"),
     hourglass.InvalidArgument,
     'message 0: id "hg-0123456789abcdef" has the form of the ids the broker '
     'assigns (hg- and 16 hex digits)'),
    (lambda c: c.publish("orders", b"x" * (MiB + 1)),
     hourglass.InvalidArgument,
     "message 0: payload is 1048577 bytes; the limit is 1048576 "
     "(--max_payload_bytes)"),
    (lambda c: c.publish("orders", b"x", delay=timedelta(days=3651)),
     hourglass.InvalidArgument,
     "message 0: delay 87624h is over the limit of 87600h (--max_delay)"),
    (lambda c: c.publish("orders", b"x", delay=timedelta(seconds=2),
                         ttl=timedelta(seconds=1)),
     hourglass.InvalidArgument,
     "message 0: ttl 1s is not longer than the message's delay 2s: it would "
     "expire before it comes due"),
    (lambda c: c.publish("orders", b"x", ttl=timedelta(days=3651)),
     hourglass.InvalidArgument,
     "message 0: ttl 87624h is over the limit of 87600h (--max_delay)"),
    (lambda c: c.publish_many([Message("orders"), Message("a b")]),
     hourglass.InvalidArgument, 'message 1: topic "a b" has a space'),
    (lambda c: c.cancel("orders", ""),
     hourglass.InvalidArgument, "id is empty"),
    (lambda c: c.cancel("orders", "nope"),
     hourglass.NotFound,
     'no scheduled message with id "nope" in topic "orders" '
     '(unknown, already due, or cancelled)'),
    (lambda c: c.reschedule("orders", "nope", delay=timedelta(seconds=-1)),
     hourglass.InvalidArgument, "delay -1s is negative"),
    (lambda c: c.subscribe("orders", "bad group"),
     hourglass.InvalidArgument, 'open.group "bad group" has a space'),
    (lambda c: c.subscribe("orders", "g", max_in_flight=10001),
     hourglass.InvalidArgument,
     "open.max_in_flight 10001 is over the limit of 10000 (--max_credit)"),
    (lambda c: c.subscribe_batches("orders", "g",
                                   ack_timeout=timedelta(seconds=-1)),
     hourglass.InvalidArgument, "open.ack_timeout -1s is negative"),
    (lambda c: c.subscribe("orders", "g", ack_timeout=timedelta(hours=25)),
     hourglass.InvalidArgument,
     "open.ack_timeout 25h is over the limit of 24h (--max_ack_timeout)"),
]


@pytest.mark.parametrize("call,error,message", BROKER_REFUSALS,
                         ids=[message for _, _, message in BROKER_REFUSALS])
def test_a_refusal_raises_its_exception_with_code_and_message(
        client: hourglass.Client, call: Callable[[hourglass.Client], object],
        error: Type[hourglass.Error], message: str) -> None:
    with pytest.raises(error) as e:
        call(client)
    assert type(e.value) is error
    assert e.value.code == error.default_code
    assert e.value.message == message
    assert str(e.value) == f"{error.default_code.name}: {message}"
    assert isinstance(e.value.__cause__, grpc.RpcError)


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


def test_an_unreachable_broker_raises_unavailable(free_port: int) -> None:
    with hourglass.Client(f"127.0.0.1:{free_port}") as client:
        with pytest.raises(hourglass.Unavailable) as e:
            client.publish("orders", b"x")
        assert e.value.code == grpc.StatusCode.UNAVAILABLE
        assert "failed to connect" in e.value.message
        with pytest.raises(hourglass.Unavailable):
            client.subscribe("orders", "g")


def test_a_silent_broker_raises_deadline_exceeded(silent_port: int) -> None:
    address = f"127.0.0.1:{silent_port}"
    with hourglass.Client(address, timeout=0.5) as client:
        with pytest.raises(hourglass.DeadlineExceeded) as e:
            client.cancel("orders", "x")
        assert e.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
        with pytest.raises(hourglass.DeadlineExceeded) as e:
            client.subscribe("orders", "g")
        assert e.value.message == (
            f"subscription 'orders'/'g': no answer from {address} "
            f"within 0.5 s")


def test_mistakes_the_client_sees_raise_before_sending(free_port: int) -> None:
    # Nothing listens: a call that reached gRPC would raise Unavailable.
    with hourglass.Client(f"127.0.0.1:{free_port}") as client:
        naive = datetime(2030, 1, 1, 12, 0)
        cases = [
            (lambda: client.publish("t", b"x", delay=ms(1),
                                    deliver_at=naive),
             ValueError, "publish: give delay or deliver_at, not both"),
            (lambda: client.publish("t", b"x", deliver_at=naive), ValueError,
             "publish: deliver_at 2030-01-01T12:00:00 has no timezone"),
            (lambda: client.publish("t", b"x",
                                    delay=5),  # type: ignore[arg-type]
             TypeError,
             "publish: delay is a datetime.timedelta, not int"),
            (lambda: client.publish("t",
                                    {"a": 1}),  # type: ignore[arg-type]
             TypeError,
             "payload is bytes or str, not dict"),
            (lambda: client.publish_many(
                [Message("t"), "x"]),  # type: ignore[list-item]
             TypeError,
             "message 1 is a hourglass.Message, not str"),
            (lambda: client.publish("t", b"x", ttl=ms(1),
                                    expire_at=naive),
             ValueError, "publish: give ttl or expire_at, not both"),
            (lambda: client.publish_many([Message("t"), Message(
                "t", ttl=ms(1), expire_at=naive)]),
             ValueError, "message 1: give ttl or expire_at, not both"),
            (lambda: client.publish_async("t", b"x", expire_at=naive),
             ValueError,
             "publish_async: expire_at 2030-01-01T12:00:00 has no timezone"),
            (lambda: client.publish("t", b"x",
                                    ttl=30),  # type: ignore[arg-type]
             TypeError, "publish: ttl is a datetime.timedelta, not int"),
            (lambda: client.publish(
                "t", b"x", ttl=ms(1),
                on_expire="keep"),  # type: ignore[arg-type]
             ValueError,
             "publish: on_expire 'keep' is neither 'drop' nor 'dead_letter'"),
            (lambda: client.publish(
                "t", b"x", ttl=ms(1),
                on_expire=1),  # type: ignore[arg-type]
             TypeError,
             "publish: on_expire is 'drop' or 'dead_letter', not int"),
            (lambda: client.reschedule("t", "x"), ValueError,
             "reschedule: give delay or deliver_at"),
            (lambda: client.subscribe("t", "g", max_in_flight=-1), ValueError,
             "subscribe: max_in_flight -1 is not in 0..2**32-1"),
            (lambda: client.next_fire_times(cron="* * * * *",
                                            every=ms(60000)),
             ValueError, "next_fire_times: give cron or every, not both"),
            (lambda: client.next_fire_times(), ValueError,
             "next_fire_times: give cron or every"),
            (lambda: client.next_fire_times(cron="* * * * *", after=naive),
             ValueError,
             "next_fire_times: after 2030-01-01T12:00:00 has no timezone"),
            (lambda: client.next_fire_times(cron="* * * * *", count=0),
             ValueError, "next_fire_times: count 0 is not in 1..2**32-1"),
            (lambda: client.next_fire_times(
                every=60),  # type: ignore[arg-type]
             TypeError,
             "next_fire_times: every is a datetime.timedelta, not int"),
        ]
        for call, error, message in cases:
            with pytest.raises(error) as e:
                call()
            assert str(e.value).startswith(message)


def test_bad_client_options_raise_at_once() -> None:
    with pytest.raises(ValueError, match="a token is printable ASCII"):
        hourglass.Client("127.0.0.1:1", token="has space")
    with pytest.raises(ValueError, match="addr is empty"):
        hourglass.Client("")
    with pytest.raises(TypeError, match="not int"):
        hourglass.Client("127.0.0.1:1", tls=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cert_chain and private_key go"):
        hourglass.Tls(cert_chain=b"x")
