"""Time, explicitly in UTC. Every time the project compares is an aware UTC ``datetime``.

Two sources give naive times: PySpark turns a Spark timestamp (an instant: Iceberg's
``committed_at``) into a naive datetime in the *process's local time zone*, and a caller may pass a
naive time meaning UTC. Each is converted where it enters (``from_spark``, ``utc``); Spark SQL
reads literals in the session time zone, which every profile sets to UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def utc_now() -> datetime:
    return datetime.now(UTC)


def utc(moment: datetime) -> datetime:
    """An aware time in UTC; a naive one is taken as UTC."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def from_spark(moment: datetime) -> datetime:
    """A timestamp collected from Spark (naive, in the process's local time) in UTC."""
    return moment.astimezone(UTC)  # a naive datetime's astimezone assumes local time


def epoch_micros(moment: datetime) -> int:
    """Microseconds since the Unix epoch, exact (integer arithmetic); a naive time is UTC."""
    return (utc(moment) - EPOCH) // timedelta(microseconds=1)


def sql_timestamp(moment: datetime) -> str:
    """A Spark SQL timestamp literal of ``moment`` (the session time zone is UTC)."""
    return f"timestamp '{utc(moment):%Y-%m-%d %H:%M:%S.%f}'"
