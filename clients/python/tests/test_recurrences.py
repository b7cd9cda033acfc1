"""next_fire_times of hourglass.Client and hourglass.aio.Client against a real
hourglassd (the Recurrences service's PreviewRecurrence): the exact fire
times of a cron rule across a DST gap and of a bounded period, the broker's
refusal of a bad rule with its code and message. test_errors.py has the
mistakes the client refuses before sending.

Every instant here is fixed (``after`` is given), so the answers do not
depend on the clock.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from typing import List

import pytest

import hourglass
import hourglass.aio
from helpers import Daemon


def utc(text: str) -> datetime:
    """An aware UTC datetime from ISO 8601 text ending in Z."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def check_utc(times: List[datetime]) -> None:
    """Fire times come back aware, in UTC."""
    assert all(t.utcoffset() == timedelta(0) for t in times), times


def test_a_cron_rule_fires_in_its_time_zone_across_the_dst_gap(
        client: hourglass.Client) -> None:
    # 2027-03-14 02:30 does not exist in New York (clocks jump 02:00 ->
    # 03:00 EST -> EDT): the rule fires as the gap ends, 03:00 EDT.
    times = client.next_fire_times(cron="30 2 * * *",
                                   time_zone="America/New_York",
                                   after=utc("2027-03-13T00:00:00Z"),
                                   count=3)
    assert times == [utc("2027-03-13T07:30:00Z"),
                     utc("2027-03-14T07:00:00Z"),
                     utc("2027-03-15T06:30:00Z")]
    check_utc(times)
    # The same rule given "skip" fires nothing in the gap.
    assert client.next_fire_times(cron="30 2 * * *",
                                  time_zone="America/New_York",
                                  on_gap="skip",
                                  after=utc("2027-03-13T00:00:00Z"),
                                  count=2) == [utc("2027-03-13T07:30:00Z"),
                                               utc("2027-03-15T06:30:00Z")]
    # `after` in another offset is the same instant.
    eastern = timezone(timedelta(hours=-5))
    assert client.next_fire_times(
        cron="30 2 * * *", time_zone="America/New_York",
        after=datetime(2027, 3, 12, 19, 0, tzinfo=eastern),
        count=1) == [utc("2027-03-13T07:30:00Z")]


def test_a_period_fires_from_start_at_until_end_at(
        client: hourglass.Client) -> None:
    times = client.next_fire_times(every=timedelta(minutes=15),
                                   start_at=utc("2027-01-01T00:05:00Z"),
                                   end_at=utc("2027-01-01T00:50:00Z"),
                                   after=utc("2027-01-01T00:00:00Z"),
                                   count=5)
    # Fewer than count: the rule ends at end_at.
    assert times == [utc("2027-01-01T00:05:00Z"),
                     utc("2027-01-01T00:20:00Z"),
                     utc("2027-01-01T00:35:00Z")]
    check_utc(times)


def test_a_bad_rule_is_the_brokers_invalid_argument(
        client: hourglass.Client) -> None:
    with pytest.raises(hourglass.InvalidArgument) as e:
        client.next_fire_times(cron="0 0 * * *", time_zone="Mars/Olympus",
                               after=utc("2027-01-01T00:00:00Z"))
    assert type(e.value) is hourglass.InvalidArgument
    assert e.value.message == 'rule: unknown time zone "Mars/Olympus"'
    with pytest.raises(hourglass.InvalidArgument) as e:
        client.next_fire_times(cron="0 0 * * *", count=1001)
    assert e.value.message == "count 1001 is above the limit of 1000"
    # Mistakes the client sees itself (test_errors.py has the rest).
    with pytest.raises(ValueError, match="give cron or every, not both"):
        client.next_fire_times(cron="0 0 * * *", every=timedelta(days=1))


def test_asyncio_next_fire_times_answers_as_the_threaded_one(
        daemon: Daemon) -> None:
    async def main() -> None:
        async with hourglass.aio.Client(daemon.address) as client:
            times = await client.next_fire_times(
                cron="30 2 * * *", time_zone="America/New_York",
                after=utc("2027-03-13T00:00:00Z"), count=3)
            assert times == [utc("2027-03-13T07:30:00Z"),
                             utc("2027-03-14T07:00:00Z"),
                             utc("2027-03-15T06:30:00Z")]
            check_utc(times)
            assert await client.next_fire_times(
                every=timedelta(minutes=15),
                start_at=utc("2027-01-01T00:05:00Z"),
                end_at=utc("2027-01-01T00:50:00Z"),
                after=utc("2027-01-01T00:00:00Z"), count=5) == [
                    utc("2027-01-01T00:05:00Z"),
                    utc("2027-01-01T00:20:00Z"),
                    utc("2027-01-01T00:35:00Z")]
            with pytest.raises(hourglass.InvalidArgument) as e:
                await client.next_fire_times(cron="0 0 * * *",
                                             time_zone="Mars/Olympus")
            assert e.value.message == (
                'rule: unknown time zone "Mars/Olympus"')
            with pytest.raises(ValueError, match="not both"):
                await client.next_fire_times(cron="0 0 * * *",
                                             every=timedelta(hours=1))

    asyncio.run(main())
