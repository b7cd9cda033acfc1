"""What the sync and asyncio clients share (hourglass._protocol and the
types), without a broker: time conversions, requests, error mapping, TLS
settings, the outbox and the backoff.
"""

from __future__ import annotations

import os
import random
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import List, Optional

import grpc
import pytest

import hourglass
from hourglass import _protocol, errors
from hourglass.v1 import broker_pb2


def test_delays_convert_exactly_with_one_sign() -> None:
    cases = [
        (timedelta(0), 0, 0),
        (timedelta(milliseconds=1500), 1, 500_000_000),
        (timedelta(days=2, microseconds=7), 172800, 7000),
        (timedelta(milliseconds=-1500), -1, -500_000_000),
    ]
    for value, seconds, nanos in cases:
        d = _protocol.duration(value, "delay")
        assert (d.seconds, d.nanos) == (seconds, nanos), value


def test_times_convert_to_utc_and_back() -> None:
    eastern = timezone(timedelta(hours=-5))
    t = datetime(2026, 11, 26, 7, 30, 0, 123000, tzinfo=eastern)
    ts = _protocol.timestamp(t, "deliver_at")
    assert (ts.seconds, ts.nanos) == (
        int(datetime(2026, 11, 26, 12, 30, tzinfo=timezone.utc).timestamp()),
        123_000_000)
    back = _protocol.from_timestamp(ts)
    assert back == t
    assert back.tzinfo == timezone.utc
    with pytest.raises(ValueError, match="has no timezone"):
        _protocol.timestamp(datetime(2026, 1, 1), "deliver_at")


def test_messages_become_requests() -> None:
    at = datetime(2030, 1, 1, tzinfo=timezone.utc)
    request = _protocol.publish_request([
        hourglass.Message("a", "é", id="x", headers={"k": "v"}),
        hourglass.Message("b", bytearray(b"\x00\x01"),
                          delay=timedelta(seconds=3)),
        hourglass.Message("c", memoryview(b"m"), deliver_at=at),
    ])
    a, b, c = request.messages
    assert (a.topic, a.payload, a.id, dict(a.headers),
            a.WhichOneof("when")) == ("a", "é".encode(), "x", {"k": "v"}, None)
    assert (b.payload, b.delay.seconds, b.WhichOneof("when")) == (
        b"\x00\x01", 3, "delay")
    assert (c.payload, c.deliver_at.seconds, c.WhichOneof("when")) == (
        b"m", int(at.timestamp()), "deliver_at")
    assert (a.HasField("ttl"), a.HasField("expire_at"), a.on_expire) == (
        False, False, broker_pb2.ON_EXPIRE_DROP)

    d, e = _protocol.publish_request([
        hourglass.Message("d", ttl=timedelta(milliseconds=1500)),
        hourglass.Message("e", expire_at=at, on_expire="dead_letter"),
    ]).messages
    assert (d.ttl.seconds, d.ttl.nanos, d.HasField("expire_at"),
            d.on_expire) == (1, 500_000_000, False, broker_pb2.ON_EXPIRE_DROP)
    assert (e.expire_at.seconds, e.HasField("ttl"), e.on_expire) == (
        int(at.timestamp()), False, broker_pb2.ON_EXPIRE_DEAD_LETTER)
    with pytest.raises(ValueError, match="^message 1: give delay or"):
        _protocol.publish_request([
            hourglass.Message("a"),
            hourglass.Message("b", delay=timedelta(1), deliver_at=at)])

    open_ = _protocol.open_request("t", "g", 7, timedelta(seconds=2)).open
    assert (open_.topic, open_.group, open_.max_in_flight,
            open_.ack_timeout.seconds) == ("t", "g", 7, 2)
    assert not _protocol.open_request("t", "g", 0, None).open.HasField(
        "ack_timeout")


class FakeRpcError(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: Optional[str],
                 metadata: tuple = ()) -> None:
        self._code, self._details, self._metadata = code, details, metadata

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> Optional[str]:
        return self._details

    def trailing_metadata(self) -> tuple:
        return self._metadata


def test_every_code_maps_to_its_exception() -> None:
    for code in grpc.StatusCode:
        if code == grpc.StatusCode.OK:
            continue
        cause = FakeRpcError(code, "why", (("hourglass-primary", "h:1"),))
        e = _protocol.error(cause)
        assert isinstance(e, hourglass.Error)
        assert type(e) is errors.BY_CODE.get(code, hourglass.Error)
        assert (e.code, e.message, e.trailing_metadata, e.__cause__) == (
            code, "why", (("hourglass-primary", "h:1"),), cause)
        assert str(e) == f"{code.name}: why"
    assert type(_protocol.error(FakeRpcError(
        grpc.StatusCode.DATA_LOSS, None))) is hourglass.Error
    assert errors.BY_CODE[grpc.StatusCode.NOT_FOUND] is hourglass.NotFound


def test_tls_arguments(tmp_path: Path) -> None:
    assert _protocol.tls_settings(None) is None
    assert _protocol.tls_settings(False) is None
    assert _protocol.tls_settings(True) == hourglass.Tls()
    assert _protocol.tls_settings(b"pem") == hourglass.Tls(root_certs=b"pem")
    assert _protocol.tls_settings("ca.pem") == hourglass.Tls(
        root_certs="ca.pem")
    with pytest.raises(TypeError):
        _protocol.tls_settings(3.0)  # type: ignore[arg-type]

    pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    path = tmp_path / "ca.pem"
    path.write_text(pem)
    assert _protocol._pem(pem) == pem.encode()
    assert _protocol._pem(str(path)) == pem.encode()
    assert _protocol._pem(path) == pem.encode()

    settings = _protocol.channel_settings(
        "h:1", "t0k3n", hourglass.Tls(root_certs=path, server_name="broker"),
        hourglass.Backoff())
    assert settings.metadata == (("authorization", "Bearer t0k3n"),)
    assert ("grpc.ssl_target_name_override", "broker") in settings.options
    assert ("grpc.max_reconnect_backoff_ms", 5000) in settings.options
    assert settings.credentials is not None
    plain = _protocol.channel_settings("h:1", None, None, hourglass.Backoff())
    assert (plain.credentials, plain.metadata) == (None, ())


def test_an_outbox_takes_requests_until_it_closes() -> None:
    queued: List[Optional[broker_pb2.SubscribeRequest]] = []
    outbox = _protocol.Outbox(queued.append)
    assert outbox.open and outbox.ack(["a", "b"])
    assert outbox.nack("c", timedelta(seconds=1))
    with pytest.raises(TypeError):
        outbox.nack("c", 1)  # type: ignore[arg-type]
    outbox.close()
    outbox.close()
    assert not outbox.open and not outbox.ack(["d"])
    assert [r.WhichOneof("kind") if r else None for r in queued] == [
        "ack", "nack", None]
    assert list(queued[0].ack.ids) == ["a", "b"]
    assert (queued[1].nack.id, queued[1].nack.delay.seconds) == ("c", 1)


def test_ack_all_sends_one_ack_per_open_stream() -> None:
    streams: List[List[Optional[broker_pb2.SubscribeRequest]]] = [[], []]
    first, second = (_protocol.Outbox(s.append) for s in streams)
    response = broker_pb2.DeliveryBatch(deliveries=[
        broker_pb2.Delivery(id=i, attempt=1) for i in ("a", "b")])
    deliveries = (_protocol.deliveries(response, first)
                  + _protocol.deliveries(broker_pb2.Delivery(id="c"), second))
    assert [d.id for d in deliveries] == ["a", "b", "c"]
    second.close()
    assert _protocol.ack_all(deliveries) == 2
    assert [list(r.ack.ids) for r in streams[0]] == [["a", "b"]]
    assert streams[1] == [None]


def test_backoff_grows_to_its_maximum_with_jitter() -> None:
    seed = int(os.environ.get("HOURGLASS_SEED", time.time_ns()))
    print(f"HOURGLASS_SEED={seed}")  # pytest shows it when the test fails.
    backoff = hourglass.Backoff(initial=timedelta(milliseconds=100),
                                maximum=timedelta(seconds=1), multiplier=3)
    waits = backoff.waits(random.Random(seed))
    nominal = [0.1, 0.3, 0.9, 1.0, 1.0, 1.0]
    for expected in nominal:
        wait = next(waits)
        # Within [50 %, 100 %] of the nominal wait, but for float rounding.
        assert expected * 0.5 - 1e-9 <= wait <= expected + 1e-9, (
            expected, wait)
    for bad in (dict(initial=timedelta(0)),
                dict(maximum=timedelta(milliseconds=1)),
                dict(multiplier=0.5)):
        with pytest.raises(ValueError):
            hourglass.Backoff(**bad)
