"""Whether a table's chain of exports can continue: an incremental export starts where the last
applied one ended, and only within point-in-time recovery's window (``DescribeContinuousBackups``:
recovery on, its earliest restorable time not after that end, never more than 35 days back).
When it cannot, only a full export restarts the chain (``sync --from-dynamodb --heal``); with
recovery off not even that, and the error says how to turn it on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from ingestion.sources.aws_errors import aws_errors
from ingestion.sources.manifest import ExportError

PITR_RETENTION = timedelta(days=35)  # the longest point-in-time recovery period


def beyond_retention(last_end: datetime) -> str:
    return (
        f"the last applied export ended {last_end.isoformat()}, more than 35 days ago, beyond "
        "point-in-time recovery"
    )


def chain_break(
    client: Any, table_arn: str, last_end: datetime, now: datetime | None = None
) -> str | None:
    """Why no incremental export can continue the chain from ``last_end`` (None when one can):
    beyond the longest recovery period, point-in-time recovery off, or its earliest restorable
    time after ``last_end`` (recovery switched off and on again since)."""
    now = now or datetime.now(UTC)
    if now - last_end > PITR_RETENTION:
        return beyond_retention(last_end)
    name = table_arn.rsplit("/", 1)[-1]
    with aws_errors(f"{table_arn}: DescribeContinuousBackups"):
        backups = client.describe_continuous_backups(TableName=table_arn)
    recovery = backups["ContinuousBackupsDescription"].get("PointInTimeRecoveryDescription", {})
    if recovery.get("PointInTimeRecoveryStatus") != "ENABLED":  # no export at all, not even a heal
        raise ExportError(
            f"point-in-time recovery of {name} is "
            f"{recovery.get('PointInTimeRecoveryStatus', 'off')}: "
            f"exports need it. Turn it on (aws dynamodb update-continuous-backups --table-name "
            f"{name} "
            "--point-in-time-recovery-specification PointInTimeRecoveryEnabled=true), then heal "
            "the "
            "chain with a full export (sync --from-dynamodb --heal)"
        )
    earliest = recovery.get("EarliestRestorableDateTime")
    if earliest is not None and earliest > last_end:
        return (
            f"the last applied export ended {last_end.isoformat()}, before the earliest "
            f"restorable time of {name}, {earliest.isoformat()} (point-in-time recovery was off "
            "in between): "
            "the changes in between cannot be exported"
        )
    return None
