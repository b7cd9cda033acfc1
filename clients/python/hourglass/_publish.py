"""Publishing over Broker.PublishStream, and retrying publishes, for both
clients: what ``publish_async`` decides, once.

``publish_async`` sends each message as one request on a PublishStream the
client keeps open to the node its topic goes to (``Router.route``: in a
cluster, its shard's primary), so that many are in flight together without
a call each. The broker answers the requests of a stream in the order they
came (broker.proto, PublishStream), one or more answers to a response, and
the stream carries no sequence number: a stream keeps its requests in the
order it wrote them (``StreamState``), and each answer goes to the oldest
one still waiting. A request the broker refused gets its error in its answer
and the stream goes on; a stream that ends fails every request still waiting
with the stream's end.

What happens to a message whose attempt failed (``next_step``):

- Refused by a node that is not its shard's primary (UNAVAILABLE naming the
  primary in the answer): sent again at once on the primary's stream,
  which later messages of that shard take too; at most
  ``_cluster.MAX_REDIRECTS`` times.
- Failed with UNAVAILABLE (the node is shutting down, or the stream broke:
  the broker restarted, the node died) or, for a stream the broker ended,
  CANCELLED: the outcome is unknown. A message with an id is sent again
  after a jittered backoff (``retry_wait``), on a new stream, as long as
  its deadline allows: the broker answers an id still pending with its
  first receipt (``duplicate`` set) and stores nothing, so a retry cannot
  store it twice. A message without an id fails with the error.
- Anything else fails with its error.

Each message has one deadline (the client's ``timeout``) for all its
attempts. Answers come in order, so a request whose deadline passes holds
back every later one: the stream is cancelled and each request waiting on
it fails with DEADLINE_EXCEEDED, as the C++ client does
(client/internal/publish_stream.h); the next message opens a new stream.

The clients (``hourglass.client``, ``hourglass.aio``) make the calls, the
timers and the threads or tasks, each in its own way of waiting.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import random
import threading
import time
from typing import Any, Callable, Deque, List, Optional, Tuple, Union

import grpc

from hourglass import _cluster, _protocol, errors
from hourglass._cluster import Endpoint
from hourglass.types import Backoff, Receipt
from hourglass.v1 import broker_pb2

#: Default bound on the messages of ``publish_async`` in flight at once in
#: one client: below the 1024 requests a broker reads ahead on a stream.
DEFAULT_MAX_IN_FLIGHT = 1000


def check_max_in_flight(value: int) -> None:
    """Checks ``Client(max_publishes_in_flight=...)``.

    Raises:
        ValueError: not a whole number of 1 or more.
    """
    if not isinstance(value, int) or value < 1:
        raise ValueError(
            f"Client: max_publishes_in_flight {value!r} is not a whole "
            f"number of 1 or more")


#: gRPC status codes by their number, as a PublishAnswer carries them.
_CODES = {code.value[0]: code for code in grpc.StatusCode}

#: What a message ended with: its receipt, or its error.
Outcome = Union[Receipt, errors.Error]


class Step(enum.Enum):
    """What to do with a message after a failed attempt."""

    #: Send it again at once: a node named its shard's primary.
    RESEND = 1
    #: Send it again after a backoff: its outcome is unknown, and its id
    #: makes a retry safe.
    RETRY = 2
    #: Report the error.
    FAIL = 3


@dataclasses.dataclass(eq=False)
class Pending:
    """One message of ``publish_async`` until it has its outcome.

    Attributes:
        request: A PublishRequest of the one message.
        topic: Its topic: where it goes (``Router.route``).
        deadline: When its attempts must have ended, in time.monotonic();
            None for none.
        repeatable: Whether it has an id (``_protocol.repeatable``).
        settle: Hands the outcome to the caller (sets the future); called
            once, by ``Publisher``-side code that checks ``done``.
        failures: Attempts that failed and were retried, for the backoff.
        redirects: Times a node sent it to another.
        done: Whether it has its outcome (guarded by its client's lock).
    """

    request: broker_pb2.PublishRequest
    topic: str
    deadline: Optional[float]
    repeatable: bool
    settle: Callable[[Outcome], None]
    failures: int = 0
    redirects: int = 0
    done: bool = False


def pending(request: broker_pb2.PublishRequest, timeout: Optional[float],
            settle: Callable[[Outcome], None]) -> Pending:
    """The Pending of a request of one message, its deadline `timeout`
    seconds from now."""
    return Pending(request=request, topic=request.messages[0].topic,
                   deadline=_cluster.deadline(timeout),
                   repeatable=_protocol.repeatable(request), settle=settle)


def complete(future: Any, outcome: Outcome) -> None:
    """Completes `future` (a ``concurrent.futures.Future`` or an
    ``asyncio.Future``) with `outcome`: its receipt, or its error."""
    if isinstance(outcome, errors.Error):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


def latest_deadline(messages: List[Pending]) -> Optional[float]:
    """The latest deadline of `messages`; None if one has none."""
    deadlines = [m.deadline for m in messages]
    if any(d is None for d in deadlines):
        return None
    return max(d for d in deadlines if d is not None)


def answer_error(answer: broker_pb2.PublishAnswer) -> Optional[errors.Error]:
    """The error of a refused request's answer; None for a receipt. The
    primary and shard count an answer names become the trailers a Publish
    call would have had, for ``Router.follow``."""
    if answer.code == 0:
        return None
    code = _CODES.get(answer.code, grpc.StatusCode.UNKNOWN)
    trailers: List[Tuple[str, str]] = []
    if answer.primary:
        trailers += [(_cluster.PRIMARY_TRAILER, answer.primary),
                     ("hourglass-epoch", str(answer.epoch))]
    if answer.shard_count:
        trailers.append((_cluster.SHARDS_TRAILER, str(answer.shard_count)))
    return errors.BY_CODE.get(code, errors.Error)(
        answer.message, code=code, trailing_metadata=trailers)


def outcome(answer: broker_pb2.PublishAnswer) -> Outcome:
    """The outcome of an answer to a request of one message: its receipt,
    or its error."""
    error = answer_error(answer)
    if error is not None:
        return error
    if len(answer.receipts) != 1:
        return errors.Internal(
            f"the broker answered {len(answer.receipts)} receipts to a "
            f"publish of 1 messages")
    return _protocol.receipt(answer.receipts[0])


def retryable(error: errors.Error) -> bool:
    """Whether a message with an id is sent again after `error`: its
    outcome is unknown (UNAVAILABLE; CANCELLED, from a stream the broker or
    the connection ended)."""
    return error.code in (grpc.StatusCode.UNAVAILABLE,
                          grpc.StatusCode.CANCELLED)


def next_step(message: Pending, error: errors.Error, router: _cluster.Router,
              endpoint: Endpoint, stopping: bool) -> Step:
    """What to do with `message` after its attempt on `endpoint` failed
    with `error` (see the module comment). Takes what `error` says of the
    cluster (``Router.follow``), and counts the redirect or failure.

    Args:
        stopping: The client is closing and sends nothing more.
    """
    primary = router.follow(endpoint, error, message.topic)
    if stopping:
        return Step.FAIL
    if (primary is not None and error.code == grpc.StatusCode.UNAVAILABLE
            and message.redirects < _cluster.MAX_REDIRECTS
            and _cluster.remaining(message.deadline) != 0):
        message.redirects += 1
        return Step.RESEND
    if message.repeatable and retryable(error):
        message.failures += 1
        return Step.RETRY
    return Step.FAIL


def retry_wait(backoff: Backoff, failures: int,
               rng: Optional[random.Random] = None) -> float:
    """The wait, in seconds, before the attempt after `failures` (1 or
    more) failed ones: as ``Backoff.waits`` would yield it."""
    nominal = backoff.initial.total_seconds()
    maximum = backoff.maximum.total_seconds()
    for _ in range(failures - 1):
        nominal = min(nominal * backoff.multiplier, maximum)
        if nominal >= maximum:
            break
    return nominal * (rng or random).uniform(0.5, 1.0)


def retry_at(message: Pending, wait: float) -> Optional[float]:
    """When (time.monotonic()) to send `message` again after `wait`
    seconds; None if its deadline comes first (it fails then)."""
    at = time.monotonic() + wait
    if message.deadline is not None and at >= message.deadline:
        return None
    return at


class StreamState:
    """The requests of one PublishStream call, in the order written, and
    which of them each answer answers. No I/O: the client writes what
    `put` is given to the call, reads its responses into ``answered``, and
    calls ``ended`` once the call has ended.

    Thread-safe; in asyncio used from the loop's thread only.
    """

    def __init__(self, put: Callable[[Optional[broker_pb2.PublishRequest]],
                                     None],
                 address: str, timeout: Optional[float]) -> None:
        """
        Args:
            put: Queues a request for the call's writer; None ends the
                client's side. Called under the state's lock, in order.
            address: The node's, for errors.
            timeout: The client's, for errors.
        """
        self._lock = threading.Lock()
        self._put = put
        self._address = address
        self._timeout = timeout
        # Protected by _lock.
        self._waiting: Deque[Pending] = collections.deque()
        self._open = True  # Takes requests: not ended, nor ending.
        self._writes_ended = False  # None was put.
        self._watched = False  # A deadline check is set.
        self._expired = False  # A deadline passed: the call is cancelled.
        self._too_many = False  # More answers than requests came.
        self._cancelled = False  # The client cancelled it (closing).

    @property
    def usable(self) -> bool:
        """Whether ``send`` still takes requests."""
        with self._lock:
            return self._open

    def send(self, message: Pending) -> bool:
        """Queues `message`'s request after those sent before; False (and
        nothing queued) once the stream ended or is ending."""
        with self._lock:
            if not self._open:
                return False
            self._waiting.append(message)
            self._put(message.request)
            return True

    def answered(self, response: broker_pb2.PublishStreamResponse
                 ) -> List[Tuple[Pending, broker_pb2.PublishAnswer]]:
        """The requests `response` answers, each with its answer, in order.
        An answer beyond the requests waiting is a broker's bug: then
        ``too_many`` holds, and the client cancels the call."""
        result = []
        with self._lock:
            for answer in response.answers:
                if not self._waiting:
                    self._too_many = True
                    break
                result.append((self._waiting.popleft(), answer))
        return result

    @property
    def too_many(self) -> bool:
        with self._lock:
            return self._too_many

    def close_writes(self) -> None:
        """Ends the client's side: the broker ends the stream once it has
        answered every request. Takes no more requests; idempotent."""
        with self._lock:
            self._open = False
            self._end_writes_locked()

    def cancelling(self) -> None:
        """The client is about to cancel the call (closing)."""
        with self._lock:
            self._cancelled = True

    def ended(self, rpc_error: Optional[grpc.RpcError]
              ) -> Tuple[List[Pending], errors.Error]:
        """The call ended (with `rpc_error`, or OK if None): takes no more
        requests. Returns the requests it did not answer, and what they
        fail with: DEADLINE_EXCEEDED if a deadline cancelled it, INTERNAL
        after too many answers, CANCELLED if the client cancelled it,
        UNAVAILABLE for an OK end before the last answer, else the end."""
        with self._lock:
            self._open = False
            self._end_writes_locked()  # Ends the writer's iteration.
            unanswered = list(self._waiting)
            self._waiting.clear()
            if self._expired:
                error: errors.Error = errors.DeadlineExceeded(
                    f"no answer from {self._address} within "
                    f"{self._timeout} s")
            elif self._too_many:
                error = errors.Internal(
                    f"{self._address} sent more answers on the "
                    f"PublishStream than it was sent requests")
            elif self._cancelled:
                error = errors.Cancelled("the client was closed")
            elif rpc_error is None:
                error = errors.Unavailable(
                    f"the PublishStream to {self._address} ended before "
                    f"answering")
            else:
                error = _protocol.error(rpc_error)
        if error.__cause__ is None and rpc_error is not None:
            error.__cause__ = rpc_error
        return unanswered, error

    def watch(self) -> Optional[float]:
        """When (time.monotonic()) to check the deadline of the oldest
        request waiting, if no check is set and it has one; the client sets
        a timer that calls ``check`` then. None: no timer to set."""
        with self._lock:
            return self._watch_locked()

    def check(self) -> Tuple[bool, Optional[float]]:
        """The deadline check set by ``watch`` is due. Returns whether to
        cancel the call now (the oldest request's deadline passed: every
        request waiting fails with DEADLINE_EXCEEDED), and when to check
        again (as ``watch``)."""
        with self._lock:
            self._watched = False
            if (self._waiting and self._waiting[0].deadline is not None
                    and self._waiting[0].deadline <= time.monotonic()):
                self._expired = True
                self._open = False
                return True, None
            return False, self._watch_locked()

    def _end_writes_locked(self) -> None:
        if not self._writes_ended:
            self._writes_ended = True
            self._put(None)

    def _watch_locked(self) -> Optional[float]:
        if (self._watched or not self._waiting
                or self._waiting[0].deadline is None or self._expired):
            return None
        self._watched = True
        return self._waiting[0].deadline
