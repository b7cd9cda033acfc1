"""Bearer tokens and TLS: hourglass.Client against an hourglassd with
--auth_tokens, and with --tls_cert/--tls_key (and --tls_client_ca).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import grpc
import pytest

import hourglass
from helpers import Certificates, Daemon, ms, take, write_private

PRODUCER = "producer-0123456789abcdef"
CONSUMER = "consumer-0123456789abcdef"
ADMIN = "admin-0123456789abcdef012"

TOKENS = f"""# The tokens of the Python client's tests.
{PRODUCER}   produce
{CONSUMER}   consume
{ADMIN}      admin,produce,consume
"""


@pytest.fixture
def secured(make_daemon, tmp_path: Path) -> Daemon:
    tokens = write_private(tmp_path / "tokens.txt", TOKENS)
    return make_daemon([f"--auth_tokens={tokens}"])


def test_tokens_grant_roles_and_missing_or_unknown_ones_are_refused(
        secured: Daemon) -> None:
    with hourglass.Client(secured.address, token=ADMIN) as operator, \
            hourglass.Client(secured.address, token=PRODUCER) as producer, \
            hourglass.Client(secured.address, token=CONSUMER) as consumer:
        # Only an admin creates a group; then a consumer may join it.
        operator.subscribe("orders", "billing").close()
        with consumer.subscribe("orders", "billing") as sub:
            receipt = producer.publish("orders", b"x", delay=ms(100),
                                       id="order-1")
            [d] = take(sub)
            assert (d.id, d.deliver_at) == ("order-1", receipt.deliver_at)
            assert d.ack() is True

        with pytest.raises(hourglass.PermissionDenied) as e:
            consumer.publish("orders", b"x")
        assert e.value.code == grpc.StatusCode.PERMISSION_DENIED
        assert e.value.message == (
            'message 0: token lacks role produce for topic "orders"')
        with pytest.raises(hourglass.NotFound) as e:
            consumer.subscribe("orders", "new-group")
        assert e.value.message.startswith(
            'group "new-group" of topic "orders" does not exist')

        producer.publish("orders", b"x", delay=timedelta(hours=1), id="o-2")
        with pytest.raises(hourglass.PermissionDenied) as e:
            producer.reschedule("orders", "o-2", delay=ms(1))
        assert e.value.message == 'token lacks role admin for topic "orders"'
        moved = operator.reschedule("orders", "o-2",
                                    delay=timedelta(hours=2))
        assert moved.id == "o-2"
        producer.cancel("orders", "o-2")

    missing = 'missing "authorization: Bearer <token>" metadata'
    with hourglass.Client(secured.address) as anonymous:
        with pytest.raises(hourglass.Unauthenticated) as e:
            anonymous.publish("orders", b"x")
        assert e.value.code == grpc.StatusCode.UNAUTHENTICATED
        assert e.value.message == missing
        with pytest.raises(hourglass.Unauthenticated) as e:
            anonymous.subscribe("orders", "billing")
        assert e.value.message == missing
    with hourglass.Client(secured.address,
                          token="unknown-0123456789abcdef") as stranger:
        with pytest.raises(hourglass.Unauthenticated) as e:
            stranger.cancel("orders", "x")
        assert e.value.message == "unknown token"


@pytest.fixture
def tls_daemon(make_daemon, certs: Certificates) -> Daemon:
    return make_daemon([f"--tls_cert={certs.pem('server')}",
                        f"--tls_key={certs.key('server')}"])


def test_tls_with_the_brokers_ca_by_path_bytes_or_settings(
        tls_daemon: Daemon, certs: Certificates) -> None:
    ca = certs.pem("ca")
    variants = [
        str(ca),  # A path (its certificate names 127.0.0.1).
        ca,  # A pathlib.Path.
        ca.read_bytes(),  # PEM bytes.
        hourglass.Tls(root_certs=ca.read_text(), server_name="localhost"),
    ]
    for i, tls in enumerate(variants):
        with hourglass.Client(tls_daemon.address, tls=tls) as client:
            with client.subscribe("tls", "g") as sub:
                receipt = client.publish("tls", b"over tls", id=f"m-{i}")
                [d] = take(sub)
                assert (d.id, d.payload, d.deliver_at) == (
                    f"m-{i}", b"over tls", receipt.deliver_at)
                assert d.ack() is True


def test_tls_refuses_clients_that_do_not_trust_or_do_not_speak_it(
        tls_daemon: Daemon, certs: Certificates) -> None:
    refused = [
        None,  # Plaintext.
        True,  # The system's CAs, which never signed the test CA.
        certs.pem("other-ca"),
        hourglass.Tls(root_certs=certs.pem("ca"), server_name="other.test"),
    ]
    for tls in refused:
        with hourglass.Client(tls_daemon.address, tls=tls) as client:
            with pytest.raises(hourglass.Unavailable) as e:
                client.publish("tls", b"x")
            assert e.value.code == grpc.StatusCode.UNAVAILABLE, tls


def test_mutual_tls_needs_a_client_certificate(
        make_daemon, certs: Certificates) -> None:
    daemon = make_daemon([f"--tls_cert={certs.pem('server')}",
                          f"--tls_key={certs.key('server')}",
                          f"--tls_client_ca={certs.pem('ca')}"])
    mine = hourglass.Tls(root_certs=certs.pem("ca"),
                         cert_chain=certs.pem("client"),
                         private_key=certs.key("client"))
    with hourglass.Client(daemon.address, tls=mine) as client:
        receipt = client.publish("mtls", b"x", delay=timedelta(hours=1),
                                 id="m-1")
        assert receipt.id == "m-1"
    with hourglass.Client(daemon.address, tls=certs.pem("ca")) as client:
        with pytest.raises(hourglass.Unavailable):
            client.publish("mtls", b"x")
