"""Fixtures of the Python client's tests.

HOURGLASSD names the hourglassd to test against (ctest sets it to this
tree's); HOURGLASS_OPENSSL the openssl command (default: openssl on PATH).
Each test that asks for a daemon gets its own, on a free loopback port, with
its data in the test's temporary directory, stopped (and checked to exit 0)
after the test.
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path
from typing import Callable, Iterator, List, Sequence

import pytest

import hourglass
from helpers import Certificates, Daemon

DaemonFactory = Callable[..., Daemon]


@pytest.fixture(autouse=True)
def no_subscription_outlives_its_test() -> Iterator[None]:
    """Fails a test that leaves a subscription's reader thread running:
    closing a subscription, or its client, ends the thread before it
    returns."""
    yield
    running = [t.name for t in threading.enumerate()
               if t.name.startswith("hourglass ")]
    assert running == []


@pytest.fixture(scope="session")
def hourglassd() -> str:
    """Path of the hourglassd under test."""
    path = os.environ.get("HOURGLASSD")
    if not path:
        pytest.fail("HOURGLASSD is not set: point it at a built hourglassd "
                    "(e.g. build/dev/cmd/hourglassd/hourglassd)")
    if not os.access(path, os.X_OK):
        pytest.fail(f"HOURGLASSD={path} is not an executable")
    return path


@pytest.fixture
def make_daemon(hourglassd: str, tmp_path: Path) -> Iterator[DaemonFactory]:
    """Starts hourglassds with extra flags; stops them after the test and
    fails it unless each exits 0 (a sanitizer's report exits non-zero)."""
    daemons: List[Daemon] = []

    def make(flags: Sequence[str] = ()) -> Daemon:
        daemon = Daemon(hourglassd, tmp_path / f"data-{len(daemons)}", flags)
        daemons.append(daemon)
        daemon.start()
        return daemon

    yield make
    for daemon in daemons:
        code = daemon.stop()
        assert code == 0, f"hourglassd exited {code}:\n{daemon.output()}"


@pytest.fixture
def daemon(make_daemon: DaemonFactory) -> Daemon:
    """A plaintext hourglassd without tokens."""
    return make_daemon()


@pytest.fixture
def client(daemon: Daemon) -> Iterator[hourglass.Client]:
    """A client of `daemon`, closed after the test."""
    with hourglass.Client(daemon.address) as c:
        yield c


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    """Certificates made once for the whole run by the openssl command."""
    binary = os.environ.get("HOURGLASS_OPENSSL") or shutil.which("openssl")
    if not binary:
        pytest.fail("no openssl: set HOURGLASS_OPENSSL or put it on PATH")
    return Certificates(binary, tmp_path_factory.mktemp("certs"))
