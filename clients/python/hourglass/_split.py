"""Cluster mode, for both clients: a publish of messages in several shards.

A node refuses a Publish whose messages fall in different shards
(FAILED_PRECONDITION, with the ``hourglass-shards`` trailer, nothing
stored): all-or-nothing holds within a shard only. So ``publish_many``, once
the client knows the cluster's shard count, sends one request per shard,
each to its shard's primary and all at once, and answers the receipts in the
batch's order. Before it knows the count it sends the batch whole; refused
for spanning shards, it splits it by the count the refusal gave and sends
the parts (once: a part is never split again).

Each part is all-or-nothing; the batch is not. If parts fail, the error has
the class and code of the first failed part (by shard) and says what was
stored, numbered as in the batch, in the words of the C++ client
(client/publisher.cc, PublishSplit)::

    shard 1 (message 1) failed: message 1: payload is 1048577 bytes; the
    limit is 1048576 (--max_payload_bytes); the batch spans shards 0, 1, 2
    and is all-or-nothing within each shard only: messages 0, 2 were stored

This module decides and words; ``publish`` and ``publish_async`` wait, each
in its client's way (threads, or the event loop).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import re
from typing import (Awaitable, Callable, Dict, List, Mapping, Optional,
                    Sequence, Union)

import grpc

from hourglass import _cluster, errors, shards
from hourglass.types import Receipt
from hourglass.v1 import broker_pb2

#: How many parts of one batch the threaded client sends at once.
MAX_PARALLEL_PARTS = 16
#: More indices than this are shown as the first ones and a count.
_SHOWN = 8
#: A broker's message about one message of a request: "message K: ...".
_ABOUT_MESSAGE = re.compile(r"message (\d+): ")

#: Sends one request and answers its receipts, in order (a client's publish
#: call, following the primary); raises ``hourglass.Error``.
Send = Callable[[broker_pb2.PublishRequest], List[Receipt]]
SendAsync = Callable[[broker_pb2.PublishRequest], Awaitable[List[Receipt]]]
#: What a part ended with: its receipts, or its error.
Outcome = Union[List[Receipt], errors.Error]


def parts(request: broker_pb2.PublishRequest, shard_count: int
          ) -> Dict[int, List[int]]:
    """The indices of `request`'s messages by shard, shards in increasing
    order; empty when the request goes whole (a shard count of 0 or 1, or
    every message in one shard)."""
    if shard_count <= 1:
        return {}
    by_shard: Dict[int, List[int]] = {}
    for i, m in enumerate(request.messages):
        by_shard.setdefault(shards.shard_of(m.topic, shard_count),
                            []).append(i)
    return dict(sorted(by_shard.items())) if len(by_shard) > 1 else {}


def spanned(error: errors.Error) -> int:
    """The shard count of a refusal of a Publish that spans shards
    (FAILED_PRECONDITION with an ``hourglass-shards`` above 1); 0 for any
    other error."""
    if error.code != grpc.StatusCode.FAILED_PRECONDITION:
        return 0
    count = _cluster.shard_count_of(error)
    return count if count > 1 else 0


def part_request(request: broker_pb2.PublishRequest, indices: Sequence[int]
                 ) -> broker_pb2.PublishRequest:
    """The request of the messages of `request` at `indices`, in order."""
    return broker_pb2.PublishRequest(
        messages=[request.messages[i] for i in indices])


def gather(size: int, by_shard: Mapping[int, Sequence[int]],
           outcomes: Mapping[int, Outcome]) -> List[Receipt]:
    """The receipts of a batch of `size` messages sent as the parts
    `by_shard` (indices by shard), in the batch's order.

    Raises:
        hourglass.Error: a part failed, or answered a receipt count other
            than its message count (INTERNAL): see ``failure``.
    """
    receipts: List[Optional[Receipt]] = [None] * size
    failed: Dict[int, errors.Error] = {}
    for shard, indices in by_shard.items():
        outcome = outcomes[shard]
        if not isinstance(outcome, errors.Error) and len(outcome) != len(
                indices):
            outcome = errors.Internal(
                f"the broker answered {len(outcome)} receipts to a publish "
                f"of {len(indices)} messages")
        if isinstance(outcome, errors.Error):
            failed[shard] = outcome
            continue
        for i, receipt in zip(indices, outcome):
            receipts[i] = receipt
    if failed:
        raise failure(by_shard, failed)
    return [r for r in receipts if r is not None]


def failure(by_shard: Mapping[int, Sequence[int]],
            failed: Mapping[int, errors.Error]) -> errors.Error:
    """The error of a batch whose parts `failed` (by shard) failed: the
    class, code and trailing metadata of the first failed part, its
    ``__cause__`` that part's error, and a message naming each failed part
    and the messages stored."""
    texts = []
    stored: List[int] = []
    for shard, indices in sorted(by_shard.items()):
        error = failed.get(shard)
        if error is None:
            stored.extend(indices)
            continue
        texts.append(f"shard {shard} ({_messages(indices)}) failed: "
                     f"{numbered_in_batch(error.message, indices)}")
    stored.sort()
    if not stored:
        what = "none of its messages were stored"
    else:
        what = (f"{_messages(stored)} "
                f"{'was' if len(stored) == 1 else 'were'} stored")
    first = failed[min(failed)]
    result = errors.BY_CODE.get(first.code, errors.Error)(
        f"{'; '.join(texts)}; the batch spans shards "
        f"{', '.join(str(s) for s in sorted(by_shard))} and is "
        f"all-or-nothing within each shard only: {what}",
        code=first.code, trailing_metadata=first.trailing_metadata)
    result.__cause__ = first
    return result


def describe_indices(indices: Sequence[int]) -> str:
    """"0, 4, 5"; more than 8 as "0, 1, ..., 7, ... (12 in all)"."""
    text = ", ".join(str(i) for i in indices[:_SHOWN])
    if len(indices) > _SHOWN:
        text += f", ... ({len(indices)} in all)"
    return text


def numbered_in_batch(message: str, indices: Sequence[int]) -> str:
    """A part's error `message` with its leading "message K: " (the part's
    K-th message) numbered as in the batch, whose `indices` the part
    holds; other messages unchanged."""
    match = _ABOUT_MESSAGE.match(message)
    if match is None or int(match.group(1)) >= len(indices):
        return message
    return (f"message {indices[int(match.group(1))]}: "
            f"{message[match.end():]}")


def _messages(indices: Sequence[int]) -> str:
    """"message 3" or "messages 0, 4, 5"."""
    return (f"{'message' if len(indices) == 1 else 'messages'} "
            f"{describe_indices(indices)}")


# --- How each client waits ---------------------------------------------------


def publish(request: broker_pb2.PublishRequest, shard_count: int,
            send: Send) -> List[Receipt]:
    """Publishes `request` for the threaded client: whole, or split by
    shard (see the module comment), its parts sent concurrently from
    threads of this call's own (at most ``MAX_PARALLEL_PARTS`` at once),
    all ended before it returns. Blocks.

    Args:
        shard_count: The cluster's shard count as the client knows it; 0
            if it does not.
        send: Sends one request (whole, or a part).

    Raises:
        hourglass.Error: the whole request failed, or parts did
            (``failure``).
    """
    by_shard = parts(request, shard_count)
    if not by_shard:
        try:
            return send(request)
        except errors.Error as e:
            by_shard = parts(request, spanned(e))
            if not by_shard:
                raise
    outcomes: Dict[int, "concurrent.futures.Future[List[Receipt]]"] = {}
    with concurrent.futures.ThreadPoolExecutor(
            min(len(by_shard), MAX_PARALLEL_PARTS),
            thread_name_prefix="hourglass-publish") as pool:
        for shard, indices in by_shard.items():
            outcomes[shard] = pool.submit(send, part_request(request, indices))
    return gather(len(request.messages), by_shard,
                  {shard: _outcome(f) for shard, f in outcomes.items()})


async def publish_async(request: broker_pb2.PublishRequest, shard_count: int,
                        send: SendAsync) -> List[Receipt]:
    """Publishes `request` for the asyncio client: as ``publish``, the
    parts sent concurrently on the event loop."""
    by_shard = parts(request, shard_count)
    if not by_shard:
        try:
            return await send(request)
        except errors.Error as e:
            by_shard = parts(request, spanned(e))
            if not by_shard:
                raise
    results = await asyncio.gather(
        *(send(part_request(request, indices))
          for indices in by_shard.values()),
        return_exceptions=True)
    outcomes: Dict[int, Outcome] = {}
    for shard, result in zip(by_shard, results):
        if isinstance(result, BaseException) and not isinstance(
                result, errors.Error):
            raise result
        outcomes[shard] = result
    return gather(len(request.messages), by_shard, outcomes)


def _outcome(future: "concurrent.futures.Future[List[Receipt]]") -> Outcome:
    """What a part's future ended with; raises what is not an
    ``hourglass.Error``."""
    try:
        return future.result()
    except errors.Error as e:
        return e
