"""The Python client of Hourglass, a persistent delayed-message broker.

    import hourglass
    from datetime import timedelta

    with hourglass.Client("127.0.0.1:7070") as client:
        client.publish("orders", b'{"order": 42}', delay=timedelta(minutes=30),
                       id="order-42")
        # Many in flight at once, on a PublishStream:
        futures = [client.publish_async("orders", b"...", id=f"order-{i}")
                   for i in range(1000)]
        receipts = [f.result() for f in futures]

``hourglass.Client`` is for threaded code, ``hourglass.aio.Client`` for
asyncio; both take the same arguments and return the same values
(``hourglass.types``) and raise the same errors (``hourglass.errors``).
clients/python/README.md has examples.

The gRPC stubs (``hourglass.v1``) are generated from api/hourglass/v1 by
protoc and kept in this package; clients/python/check_stubs.py checks that
they match the protos.
"""

from hourglass.client import BatchSubscription, Client, Subscription
from hourglass.errors import (Aborted, AlreadyExists, Cancelled,
                              DeadlineExceeded, Error, FailedPrecondition,
                              Internal, InvalidArgument, NotFound,
                              PermissionDenied, ResourceExhausted,
                              Unauthenticated, Unavailable)
from hourglass.types import (Backoff, Delivery, Group, GroupState,
                             GroupStats, Message, MessageInfo, MessagePage,
                             MessageState, Percentiles, Receipt, Schedule,
                             ScheduleBucket, Snapshot, Stats, Tls, Topic,
                             TopicStats)

__version__ = "0.1.0"

__all__ = [
    "Aborted", "AlreadyExists", "Backoff", "BatchSubscription", "Cancelled",
    "Client", "DeadlineExceeded", "Delivery", "Error", "FailedPrecondition",
    "Group", "GroupState", "GroupStats", "Internal", "InvalidArgument",
    "Message", "MessageInfo", "MessagePage", "MessageState", "NotFound",
    "Percentiles", "PermissionDenied", "Receipt", "ResourceExhausted",
    "Schedule", "ScheduleBucket", "Snapshot", "Stats", "Subscription", "Tls",
    "Topic", "TopicStats", "Unauthenticated", "Unavailable",
]
