"""The exceptions of the Hourglass client.

Every failed call raises an ``Error`` carrying the gRPC status code and the
broker's message, as the broker said it (``message 1: topic "a b" has a
space``). The subclasses name the codes the broker answers with, as
api/hourglass/v1/*.proto lists them; ``except hourglass.NotFound`` reads
better than comparing codes. A code without a subclass raises ``Error``
itself. Mistakes the client can see without asking the broker (a naive
datetime, two due times for one message, a payload that is not bytes) raise
``ValueError`` or ``TypeError`` instead.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple, Type

import grpc

#: Trailing metadata of a failed call, as (key, value) pairs.
Metadata = Sequence[Tuple[str, str]]


class Error(Exception):
    """A call the broker (or gRPC on its way there) refused or failed.

    Attributes:
        code: The gRPC status code.
        message: The broker's message (gRPC's status details).
        trailing_metadata: The call's trailing metadata, as (key, value)
            pairs; empty unless the broker sent some.
    """

    #: The code of the subclass; Error itself carries any code.
    default_code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(self, message: str, *, code: Optional[grpc.StatusCode] = None,
                 trailing_metadata: Metadata = ()) -> None:
        super().__init__(message)
        self.code: grpc.StatusCode = code or self.default_code
        self.message: str = message
        self.trailing_metadata: Tuple[Tuple[str, str], ...] = tuple(
            trailing_metadata)

    def __str__(self) -> str:
        return f"{self.code.name}: {self.message}"

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.message!r}, "
                f"code={self.code.name})")


class Cancelled(Error):
    """CANCELLED: the call was cancelled, e.g. a stream the broker ended
    because its client read nothing for ``--stream_stall_timeout``."""

    default_code = grpc.StatusCode.CANCELLED


class InvalidArgument(Error):
    """INVALID_ARGUMENT: a bad request; the message names the field and the
    value. Nothing changed."""

    default_code = grpc.StatusCode.INVALID_ARGUMENT


class DeadlineExceeded(Error):
    """DEADLINE_EXCEEDED: no answer within the client's timeout. The outcome
    of a publish is unknown: retry it with ids set."""

    default_code = grpc.StatusCode.DEADLINE_EXCEEDED


class NotFound(Error):
    """NOT_FOUND: no such message (cancel, reschedule: not scheduled, or
    already due), or no such group (deleted; or a consume-only token may not
    create it)."""

    default_code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(Error):
    """ALREADY_EXISTS: the thing to create exists (a consumer group)."""

    default_code = grpc.StatusCode.ALREADY_EXISTS


class PermissionDenied(Error):
    """PERMISSION_DENIED: the token (or client certificate) lacks the role
    for the topic."""

    default_code = grpc.StatusCode.PERMISSION_DENIED


class ResourceExhausted(Error):
    """RESOURCE_EXHAUSTED: a limit of the broker (streams, groups per
    topic, request or publish-queue bytes, a full disk). Nothing was
    stored; retry later."""

    default_code = grpc.StatusCode.RESOURCE_EXHAUSTED


class FailedPrecondition(Error):
    """FAILED_PRECONDITION: the broker is not in a state to do it."""

    default_code = grpc.StatusCode.FAILED_PRECONDITION


class Aborted(Error):
    """ABORTED: the call lost a race and changed nothing; retry."""

    default_code = grpc.StatusCode.ABORTED


class Internal(Error):
    """INTERNAL: a bug, in the broker or in gRPC."""

    default_code = grpc.StatusCode.INTERNAL


class Unavailable(Error):
    """UNAVAILABLE: the broker cannot be reached, is shutting down, or its
    disk failed. A publish's outcome is then unknown: retry with ids set."""

    default_code = grpc.StatusCode.UNAVAILABLE


class Unauthenticated(Error):
    """UNAUTHENTICATED: no token, an unknown token, or no client certificate
    that a ``cert`` line names."""

    default_code = grpc.StatusCode.UNAUTHENTICATED


#: The subclass raised for each code; other codes raise Error.
BY_CODE: Dict[grpc.StatusCode, Type[Error]] = {
    cls.default_code: cls
    for cls in (Cancelled, InvalidArgument, DeadlineExceeded, NotFound,
                AlreadyExists, PermissionDenied, ResourceExhausted,
                FailedPrecondition, Aborted, Internal, Unavailable,
                Unauthenticated)
}
