"""What the Python client's tests share: a real hourglassd, a real etcd
(for cluster mode), certificates, times to the millisecond, and waits with
deadlines.

Nothing here sleeps to synchronise: a test waits for a delivery, a log line
or a process exit, each with a deadline, and fails with what it saw when the
deadline passes.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable, Iterable, List, Optional, Sequence, Tuple

import grpc

import hourglass
from hourglass.v1 import admin_pb2, admin_pb2_grpc

#: How long anything that should happen may take; generous, for sanitized
#: builds on loaded machines. Waiting this long means a failure.
WAIT = 30.0
#: How long hourglassd may take to start listening, or to stop.
START_TIMEOUT = 60.0

_LISTENING = re.compile(r"listening on \S+ \(port (\d+)\)")


def now() -> datetime:
    """The wall clock, as the broker reads it (same machine), in UTC."""
    return datetime.now(timezone.utc)


def floor_ms(t: datetime) -> datetime:
    """`t` down to the millisecond: the broker keeps due times in ms."""
    return t.replace(microsecond=t.microsecond - t.microsecond % 1000)


def ms(milliseconds: int) -> timedelta:
    return timedelta(milliseconds=milliseconds)


class Daemon:
    """A real hourglassd child process on a loopback port, with its data in
    a directory of its own. One test drives it from one thread.
    """

    def __init__(self, binary: str, data_dir: Path,
                 flags: Sequence[str] = ()) -> None:
        self.binary = binary
        self.data_dir = data_dir
        self.flags = list(flags)
        self.port = 0
        self.process: Optional[subprocess.Popen[str]] = None
        self._lines: List[str] = []  # Output of every run; under _changed.
        self._changed = threading.Condition()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def output(self) -> str:
        """Everything the daemon logged, over all its runs."""
        with self._changed:
            return "".join(self._lines)

    def start(self) -> None:
        """Starts hourglassd (on its earlier port, after the first run, so
        clients can reconnect) and waits until it listens."""
        argv = [self.binary, f"--listen=127.0.0.1:{self.port}",
                "--metrics_listen=127.0.0.1:0", f"--data_dir={self.data_dir}",
                "--shutdown_grace=500ms", *self.flags]
        with self._changed:
            first_line = len(self._lines)
        process = self.process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True)
        threading.Thread(target=self._read, args=(process,),
                         daemon=True).start()

        def listening() -> Optional[re.Match[str]]:
            for line in self._lines[first_line:]:
                match = _LISTENING.search(line)
                if match:
                    return match
            return None

        with self._changed:
            found = self._changed.wait_for(
                lambda: listening() or process.poll() is not None,
                START_TIMEOUT)
            match = listening()
        if not found or not match:
            self.kill()
            raise AssertionError(
                f"hourglassd did not start listening: {self.output()}")
        self.port = int(match.group(1))

    def await_log(self, pattern: "re.Pattern[str]",
                  timeout: float = START_TIMEOUT) -> "re.Match[str]":
        """The first match of `pattern` in a line the daemon logged, waiting
        up to `timeout` seconds for it; fails with the output without one."""
        def found() -> Optional[re.Match[str]]:
            for line in self._lines:
                match = pattern.search(line)
                if match:
                    return match
            return None

        with self._changed:
            self._changed.wait_for(
                lambda: found() or (self.process is not None and
                                    self.process.poll() is not None),
                timeout)
            match = found()
        if not match:
            raise AssertionError(
                f"hourglassd logged no {pattern.pattern!r}: {self.output()}")
        return match

    def stop(self) -> int:
        """SIGTERM, then its exit code (SIGKILL after START_TIMEOUT)."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(START_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.process.wait()

    def kill(self) -> None:
        """SIGKILL, as a crash; waits for the exit."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def restart(self) -> None:
        """Stops gracefully and starts again on the same port and data."""
        code = self.stop()
        assert code == 0, f"hourglassd exited {code}: {self.output()}"
        self.start()

    def _read(self, process: "subprocess.Popen[str]") -> None:
        assert process.stdout is not None
        with process.stdout:
            for line in process.stdout:
                with self._changed:
                    self._lines.append(line)
                    self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()  # The process ended.


def free_loopback_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listened on when asked (the OS
    chose it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Etcd:
    """A real etcd as a one-member cluster on 127.0.0.1, with client and
    peer ports that were free when it started and its data in a directory
    of its own, started as tests/testing/etcd_server.cc starts it: a 50 ms
    heartbeat and a 500 ms election timeout, so that it starts fast and
    grants leases of 2 s. Its log goes to etcd.log in that directory.
    """

    #: The member's name in its one-member cluster.
    NAME = "hourglass-test"

    def __init__(self, binary: str, directory: Path) -> None:
        self.binary = binary
        self.directory = directory
        self.client_port = 0
        self.peer_port = 0
        self.process: Optional[subprocess.Popen[bytes]] = None

    @property
    def endpoint(self) -> str:
        """host:port of its client URL, for ``hourglassd --etcd``."""
        return f"127.0.0.1:{self.client_port}"

    def start(self) -> None:
        """Starts etcd and waits until it is healthy (it has a leader), at
        most START_TIMEOUT. A port found free may be taken before etcd
        binds it: then etcd exits, and new ports are tried, 3 times."""
        deadline = time.monotonic() + START_TIMEOUT
        for _ in range(3):
            self.client_port = free_loopback_port()
            self.peer_port = free_loopback_port()
            if self.client_port == self.peer_port:
                continue
            self._launch()
            if self._await_healthy(deadline):
                return
            if self.process is not None and self.process.poll() is None:
                break  # Running, but not healthy in time.
        self.kill()
        raise AssertionError(f"etcd did not start: {self.log_tail()}")

    def stop(self) -> None:
        """SIGTERM, then waits for the exit (SIGKILL after START_TIMEOUT).
        Its exit code is not checked: etcd is the test's tool."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(START_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.kill()

    def kill(self) -> None:
        """SIGKILL; waits for the exit."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def log_tail(self, lines: int = 20) -> str:
        """The last lines of its log, for failure messages."""
        try:
            text = (self.directory / "etcd.log").read_text(errors="replace")
        except OSError as e:
            return f"(no log: {e})"
        return "\n".join(text.splitlines()[-lines:])

    def _launch(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        peer = f"http://127.0.0.1:{self.peer_port}"
        client = f"http://127.0.0.1:{self.client_port}"
        argv = [
            self.binary, f"--name={self.NAME}",
            f"--data-dir={self.directory / 'data'}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster={self.NAME}={peer}",
            "--initial-cluster-state=new",
            "--heartbeat-interval=50", "--election-timeout=500",
            "--logger=zap", f"--log-outputs={self.directory / 'etcd.log'}",
        ]
        self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)

    def _await_healthy(self, deadline: float) -> bool:
        """Whether etcd's /health says true before `deadline` (False once
        it exited). Asks every 50 ms, each time for at most 250 ms."""
        assert self.process is not None
        # Loopback, never through a proxy the environment may name.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        url = f"http://{self.endpoint}/health"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            try:
                with opener.open(url, timeout=0.25) as response:
                    if json.load(response).get("health") == "true":
                        return True
            except (OSError, ValueError):
                pass  # Not listening yet, or no leader yet.
            time.sleep(0.05)
        return False


def admin(daemon: Daemon, token: Optional[str] = None
          ) -> Tuple[admin_pb2_grpc.AdminStub, grpc.Channel]:
    """The Admin service's raw stub (what tests inspect the broker with),
    and its channel to close."""
    channel = grpc.insecure_channel(daemon.address)
    stub = admin_pb2_grpc.AdminStub(channel)
    if token:
        metadata = (("authorization", f"Bearer {token}"),)
        with_metadata = _WithMetadata(stub, metadata)
        return with_metadata, channel  # type: ignore[return-value]
    return stub, channel


class _WithMetadata:
    """An Admin stub that sends `metadata` with every call."""

    def __init__(self, stub: admin_pb2_grpc.AdminStub,
                 metadata: Tuple[Tuple[str, str], ...]) -> None:
        self._stub = stub
        self._metadata = metadata

    def __getattr__(self, name: str):
        method = getattr(self._stub, name)
        return lambda request: method(request, metadata=self._metadata,
                                      timeout=WAIT)


def scheduled_ids(daemon: Daemon, topic: str) -> List[str]:
    """Ids of the messages of `topic` that are scheduled, in due order."""
    stub, channel = admin(daemon)
    with channel:
        response = stub.ListMessages(admin_pb2.ListMessagesRequest(
            topic=topic, state=admin_pb2.MESSAGE_STATE_SCHEDULED,
            page_size=1000), timeout=WAIT)
    return [m.id for m in response.messages]


def eventually(condition: Callable[[], bool], what: str,
               timeout: float = WAIT) -> None:
    """Waits until `condition` holds, checking it every few milliseconds,
    and fails naming `what` if it does not within `timeout` seconds. For
    state that nothing announces (what the store holds); deliveries, log
    lines and exits are waited for directly."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.005)


def stored(daemon: Daemon, topic: str, id_: str) -> bool:
    """Whether the broker holds message `id_` of `topic` (Admin
    GetMessage), in any state."""
    stub, channel = admin(daemon)
    with channel:
        try:
            stub.GetMessage(admin_pb2.GetMessageRequest(topic=topic, id=id_),
                            timeout=WAIT)
            return True
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.NOT_FOUND:
                return False
            raise


def check_not_early(deliveries: Iterable[hourglass.Delivery]) -> None:
    """Fails unless each delivery reached the client at or after its due
    time (one machine, one clock)."""
    for d in deliveries:
        assert d.received_at >= d.deliver_at, (
            f"{d.id} attempt {d.attempt} came {d.deliver_at - d.received_at} "
            f"early")


def ids(deliveries: Iterable[hourglass.Delivery]) -> List[str]:
    """"id@attempt" of each delivery, in order."""
    return [f"{d.id}@{d.attempt}" for d in deliveries]


def take(subscription: hourglass.Subscription, count: int = 1,
         timeout: float = WAIT) -> List[hourglass.Delivery]:
    """The next `count` deliveries of `subscription`, checked never early;
    fails if they do not all come within `timeout` seconds."""
    got: List[hourglass.Delivery] = []
    deadline = time.monotonic() + timeout
    while len(got) < count:
        d = subscription.receive(max(0.0, deadline - time.monotonic()))
        assert d is not None, (
            f"{len(got)} of {count} deliveries within {timeout} s: {ids(got)}")
        got.append(d)
    check_not_early(got)
    return got


def take_batches(subscription: hourglass.BatchSubscription, count: int,
                 timeout: float = WAIT) -> List[List[hourglass.Delivery]]:
    """Batches of `subscription` until they hold `count` deliveries, checked
    never early; fails if they do not come within `timeout` seconds."""
    batches: List[List[hourglass.Delivery]] = []
    deadline = time.monotonic() + timeout
    while sum(len(b) for b in batches) < count:
        batch = subscription.receive(max(0.0, deadline - time.monotonic()))
        assert batch is not None, (
            f"{sum(len(b) for b in batches)} of {count} deliveries within "
            f"{timeout} s: {[ids(b) for b in batches]}")
        assert batch, "an empty batch"
        batches.append(batch)
    check_not_early(d for b in batches for d in b)
    return batches


def openssl(binary: str, *args: str) -> None:
    """Runs openssl; fails with its output if it fails."""
    result = subprocess.run([binary, *args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, timeout=WAIT)
    assert result.returncode == 0, result.stdout


class Certificates:
    """A CA and the certificates it signs: the broker's (for localhost and
    127.0.0.1) and a client's; and another CA, which signed nothing here.
    Files in `directory`: NAME.pem, NAME.key.
    """

    def __init__(self, binary: str, directory: Path) -> None:
        self._binary = binary
        self.directory = directory
        self._serial = 1
        self._make_ca("ca", "Hourglass Python test CA")
        self._make_cert("server", "ca", "localhost",
                        "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                        "extendedKeyUsage=serverAuth\n")
        self._make_cert("client", "ca", "python-client",
                        "extendedKeyUsage=clientAuth\n")
        self._make_ca("other-ca", "Another CA")

    def pem(self, name: str) -> Path:
        return self.directory / f"{name}.pem"

    def key(self, name: str) -> Path:
        return self.directory / f"{name}.key"

    def _make_ca(self, name: str, common_name: str) -> None:
        openssl(self._binary, "req", "-x509", "-newkey", "ec", "-pkeyopt",
                "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                str(self.key(name)), "-out", str(self.pem(name)), "-days", "2",
                "-subj", f"/CN={common_name}")

    def _make_cert(self, name: str, ca: str, common_name: str,
                   extensions: str) -> None:
        csr = self.directory / f"{name}.csr"
        ext = self.directory / f"{name}.ext"
        ext.write_text(extensions)
        openssl(self._binary, "req", "-new", "-newkey", "ec", "-pkeyopt",
                "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                str(self.key(name)), "-out", str(csr), "-subj",
                f"/CN={common_name}")
        self._serial += 1
        openssl(self._binary, "x509", "-req", "-in", str(csr), "-CA",
                str(self.pem(ca)), "-CAkey", str(self.key(ca)), "-set_serial",
                str(self._serial), "-days", "2", "-out", str(self.pem(name)),
                "-extfile", str(ext))


def write_private(path: Path, text: str) -> Path:
    """Writes `text` to `path`, readable by its owner only (hourglassd
    refuses a token file others may read)."""
    path.write_text(text)
    os.chmod(path, 0o600)
    return path
