"""Trigger DynamoDB exports with boto3 and wait for them (the `export` command's library).

The next incremental window comes from the ledger: it starts where the last applied export ended. A
backlog is split into windows of at most 24 hours (DynamoDB's limit), and a window shorter than 15
minutes (DynamoDB's minimum) is left for a later run. "Now" is rounded down to its 15-minute slot,
and each request carries a ``ClientToken`` derived from the table, the export type and the window: a
retry in the same slot (after a crash or a timeout) is the same request, and DynamoDB returns the
same export instead of starting another one (tokens are honoured for 8 hours). A run refuses to
start while an export of the table is still in progress, naming it.

``verify --from-dynamodb`` takes its full export under a prefix of its own
(``<export_to>/dynamodb-lakehouse-verify``). The two kinds never wait for each other: a sync
export is refused only while another sync export runs, a verify export only while another verify
export runs (DynamoDB runs several exports of a table at once), and ``sync``/``ingest`` never stage
a folder under the verify prefix (``is_verify_folder``). Which kind a running export is comes from
its ``S3Prefix`` (``DescribeExport``: ``ListExports`` does not say).

Before an incremental export, ``recovery.chain_break`` asks whether the chain can continue at all.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ingestion.config import polling
from ingestion.sources.aws_errors import aws_errors
from ingestion.sources.manifest import FULL, INCREMENTAL, ExportError, Window
from ingestion.sources.recovery import PITR_RETENTION, beyond_retention
from ingestion.sources.s3_uri import parse_s3_uri

log = logging.getLogger(__name__)

MAX_WINDOW = timedelta(hours=24)
MIN_WINDOW = timedelta(minutes=15)
SLOT = timedelta(minutes=15)  # "now" rounded down to it: a retry in the slot, the same request


def slot_start(moment: datetime) -> datetime:
    """``moment`` rounded down to its 15-minute slot."""
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    return epoch + ((moment - epoch) // SLOT) * SLOT


class ExportInProgress(ExportError):
    """An export of the table is already running."""


VERIFY_PREFIX = "dynamodb-lakehouse-verify"  # verify's own exports, under the export prefix


def verify_destination(destination: str) -> str:
    """Where ``verify --from-dynamodb`` exports to: its own prefix under ``destination``."""
    return f"{destination.rstrip('/')}/{VERIFY_PREFIX}"


def is_verify_prefix(prefix: str) -> bool:
    return prefix.rstrip("/").rsplit("/", 1)[-1] == VERIFY_PREFIX


def is_verify_folder(folder: str) -> bool:
    """A folder ``.../dynamodb-lakehouse-verify/AWSDynamoDB/<ExportId>``: a verify export."""
    return f"/{VERIFY_PREFIX}/AWSDynamoDB/" in str(folder).replace("\\", "/")


@dataclass(frozen=True)
class Request:
    table_arn: str
    bucket: str
    prefix: str
    export_type: str  # FULL_EXPORT | INCREMENTAL_EXPORT
    window: Window | None  # incremental only
    export_time: datetime | None = None  # full only (None: now)

    @property
    def client_token(self) -> str:
        """Same table, type and window -> same token (DynamoDB then returns the same export)."""
        moment = self.export_time.isoformat() if self.export_time else ""
        window = (
            f"{self.window.start.isoformat()}/{self.window.end.isoformat()}" if self.window else ""
        )
        seed = f"{self.table_arn}|{self.export_type}|{moment}|{window}|{self.bucket}/{self.prefix}"
        return hashlib.sha256(seed.encode()).hexdigest()[:32]

    def parameters(self) -> dict[str, Any]:
        params: dict[str, Any] = {
            "TableArn": self.table_arn,
            "S3Bucket": self.bucket,
            "S3Prefix": self.prefix,
            "ExportFormat": "DYNAMODB_JSON",
            "ExportType": self.export_type,
            "ClientToken": self.client_token,
        }
        if self.export_type == FULL and self.export_time is not None:
            params["ExportTime"] = self.export_time
        if self.window is not None:
            params["IncrementalExportSpecification"] = {
                "ExportFromTime": self.window.start,
                "ExportToTime": self.window.end,
                "ExportViewType": "NEW_AND_OLD_IMAGES",
            }
        return params


def incremental_windows(last_end: datetime, now: datetime) -> list[Window]:
    """Windows from ``last_end`` rounded down to its whole minute up to ``now`` rounded down to its
    15-minute slot: each at most 24 hours; a remainder shorter than 15 minutes is left for the next
    run. Rounding the start down makes the first window after a full export (whose time has
    milliseconds) overlap it by under a minute instead of leaving a gap: the overlap changes nothing
    (``staging.chain``), and windows on whole minutes are what AWS's own windows look like."""
    windows = []
    start = last_end.replace(second=0, microsecond=0)
    until = slot_start(now)
    while until - start >= MIN_WINDOW:
        end = min(start + MAX_WINDOW, until)
        windows.append(Window(start, end))
        start = end
    return windows


def exports_in_progress(client: Any, table_arn: str, verify: bool | None = None) -> list[str]:
    """The table's exports in progress; with ``verify`` True or False, only verify's (or only
    the others), told apart by each one's ``S3Prefix``."""
    running = _in_progress(client, table_arn)

    def prefix(arn: str) -> str:
        return str(client.describe_export(ExportArn=arn)["ExportDescription"].get("S3Prefix") or "")

    return (
        running if verify is None else [a for a in running if is_verify_prefix(prefix(a)) == verify]
    )


def _in_progress(client: Any, table_arn: str) -> list[str]:
    arns: list[str] = []
    extra: dict[str, str] = {}
    while True:  # ListExports has no boto3 paginator
        page = client.list_exports(TableArn=table_arn, **extra)
        arns += [
            str(summary["ExportArn"])
            for summary in page.get("ExportSummaries", [])
            if summary.get("ExportStatus") == "IN_PROGRESS"
        ]
        if not page.get("NextToken"):
            return arns
        extra = {"NextToken": page["NextToken"]}


def start(client: Any, request: Request) -> str:
    """Start the export (or get the one this request already started); refuse when another
    export of the table of the same kind (verify's, or sync's) is in progress."""
    verify = is_verify_prefix(request.prefix)
    with aws_errors(f"{request.table_arn}: ListExports"):
        running = exports_in_progress(client, request.table_arn, verify)
    if running:
        then = "before verifying again" if verify else "(and ingest it) before starting another"
        raise ExportInProgress(
            f"{request.table_arn}: export {running[0]} is still in progress; wait for it to "
            f"complete {then}"
        )
    with aws_errors(f"{request.table_arn}: ExportTableToPointInTime"):
        answer = client.export_table_to_point_in_time(**request.parameters())
    return str(answer["ExportDescription"]["ExportArn"])


def wait(
    client: Any,
    export_arn: str,
    poll_seconds: float = 30.0,
    timeout_seconds: float = 6 * 3600,
    report: Callable[[str], Any] = print,
) -> dict[str, Any]:
    """Poll ``DescribeExport`` until COMPLETED (returned) or FAILED (raised), with a progress
    line."""

    def check() -> tuple[str, dict[str, Any]]:
        with aws_errors(f"{export_arn}: DescribeExport"):
            description = client.describe_export(ExportArn=export_arn)["ExportDescription"]
        return str(description.get("ExportStatus")), dict(description)

    try:
        status, description, elapsed = polling.poll_until(
            check, ("COMPLETED", "FAILED"), export_arn, poll_seconds, report, timeout_seconds
        )
    except polling.StillRunning as running:
        raise ExportError(
            f"{export_arn}: {running}; run the same command again later (the same request "
            "returns this export)"
        ) from None
    if status == "FAILED":
        raise ExportError(
            f"{export_arn}: export FAILED ({description.get('FailureCode')}): "
            f"{description.get('FailureMessage')}; nothing was ingested"
        )
    report(
        f"{export_arn}: COMPLETED after {elapsed:.0f}s ({description.get('ItemCount', '?')} items)"
    )
    return description


def export_folder(bucket: str, description: dict[str, Any]) -> str:
    """``s3://bucket/<prefix>/AWSDynamoDB/<ExportId>`` from a completed export's manifest key."""
    manifest = description.get("ExportManifest")
    if not manifest or "/AWSDynamoDB/" not in f"/{manifest}":
        raise ExportError(
            f"{description.get('ExportArn')}: completed without an ExportManifest; cannot find "
            "its files"
        )
    return f"s3://{bucket}/{manifest.rsplit('/', 1)[0]}"


def plan(
    table_arn: str,
    bucket: str,
    prefix: str,
    kind: str,
    last_end: datetime | None,
    now: datetime | None = None,
) -> list[Request]:
    """The requests to make: one full export, or the incremental windows since ``last_end``."""
    now = now or datetime.now(UTC)
    if kind == FULL:
        return [Request(table_arn, bucket, prefix, FULL, None, slot_start(now))]
    if last_end is None:
        raise ExportError(
            f"{table_arn}: no export in the ledger yet; start with a full export (--full)"
        )
    if now - last_end > PITR_RETENTION:
        raise ExportError(
            f"{table_arn}: {beyond_retention(last_end)}: start again with a full export (--full)"
        )
    return [
        Request(table_arn, bucket, prefix, INCREMENTAL, window)
        for window in incremental_windows(last_end, now)
    ]


def run_exports(
    client: Any,
    table_arn: str,
    destination: str,
    kind: str,
    last_end: datetime | None,
    poll_seconds: float,
    report: Callable[[str], None],
) -> list[str]:
    """Start the exports ``plan`` calls for, one after the other, and wait for each; return
    their folders (``s3://.../AWSDynamoDB/<ExportId>``), in order; none when the last export
    ended less than 15 minutes ago."""
    bucket, prefix = parse_s3_uri(destination)
    requests = plan(table_arn, bucket, prefix, kind, last_end)
    folders = []
    for number, request in enumerate(requests, 1):
        window = (
            f" {request.window.start.isoformat()} -> {request.window.end.isoformat()}"
            if request.window
            else ""
        )
        report(f"[{number}/{len(requests)}] {request.export_type}{window}")
        description = wait(client, start(client, request), poll_seconds, report=report)
        folders.append(export_folder(bucket, description))
    return folders
