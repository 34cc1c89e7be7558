"""The Lambda function on a table's DynamoDB stream: one gzip'd JSON-lines change file per batch.

Plain Python and boto3 (no Spark): the function's code is this module with the two it imports
(``sources.s3_uri`` and ``config.errors``), handler ``ingestion.stream_writer.handler``
(``aws.packaging.LAMBDA_FILES``). Each invocation writes ONE object,

    <prefix>/<table>/<YYYYMMDDTHHMMSSZ>-<YYYYMMDDTHHMMSSZ>-<digest>.json.gz

where the times are the batch's earliest ``ApproximateCreationDateTime`` (so names sort by time) and
its latest (the range ``status`` shows), and the digest is a hash of the batch's event ids (so a
retried invocation of the same batch overwrites its object instead of writing a duplicate). Each
line has the shape of an incremental export line (``Keys``, ``NewImage``, ``OldImage``) plus the
stream's own fields (``SequenceNumber``, ``ApproximateCreationDateTime``, ``eventName``,
``eventID``, and ``userIdentity`` for TTL deletions), which the ingest uses to order changes and to
tell TTL expiries apart.

Failures are reported the way Lambda's ``ReportBatchItemFailures`` expects: a record that is not a
DynamoDB stream record stops the batch there (the records before it are written, Lambda retries
from it); a failed write reports the batch's first record (Lambda retries the whole batch).

Configuration (environment): ``LAKEHOUSE_STREAM_URI`` = ``s3://bucket/prefix`` or a local folder;
``LAKEHOUSE_TABLE`` overrides the table name taken from the stream ARN.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import os
import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from ingestion.config.errors import LakehouseError
from ingestion.sources.s3_uri import parse_s3_uri

log = logging.getLogger(__name__)

SUFFIX = ".json.gz"
_TABLE_IN_ARN = re.compile(r":table/([^/]+)/stream/")
_EVENTS = ("INSERT", "MODIFY", "REMOVE")
_UNITS = {"SECOND": 0, "MILLISECOND": 3, "MICROSECOND": 6}  # digits below the second


class WriterNotConfigured(LakehouseError):
    """The function's environment lacks where to write."""


class StreamRecordError(LakehouseError):
    """A record is not a DynamoDB stream record this function can write."""


@dataclass(frozen=True)
class WrittenFile:
    uri: str
    records: int


def table_of(record: dict[str, Any]) -> str:
    """The table name in the record's ``eventSourceARN`` (or ``LAKEHOUSE_TABLE``)."""
    configured = os.environ.get("LAKEHOUSE_TABLE")
    if configured:
        return configured
    found = _TABLE_IN_ARN.search(str(record.get("eventSourceARN", "")))
    if not found:
        raise StreamRecordError(
            f"record {record.get('eventID')!r}: no table in eventSourceARN "
            f"{record.get('eventSourceARN')!r} (set LAKEHOUSE_TABLE)"
        )
    return found.group(1)


def creation_time(change: dict[str, Any], event_id: str) -> int | str:
    """``ApproximateCreationDateTime`` as exact epoch seconds: an integer when whole, else the
    exact decimal text (a float such as ``1767225600.0`` becomes ``1767225600``; Spark would
    read a JSON float as ``1.7672256E9``). With ``ApproximateCreationDateTimePrecision``
    (``MILLISECOND`` / ``MICROSECOND``: the value counts those units) it is scaled to seconds."""
    created = change.get("ApproximateCreationDateTime")
    if isinstance(created, bool) or not isinstance(created, int | float):
        raise StreamRecordError(
            f"record {event_id!r}: dynamodb.ApproximateCreationDateTime must be epoch seconds, "
            f"got {created!r}"
        )
    value = Decimal(repr(created)) if isinstance(created, float) else Decimal(created)
    precision = change.get("ApproximateCreationDateTimePrecision")
    if precision is not None:
        if precision not in _UNITS:
            raise StreamRecordError(
                f"record {event_id!r}: unknown ApproximateCreationDateTimePrecision {precision!r}"
            )
        value = value.scaleb(-_UNITS[precision])
    if not value.is_finite() or value < 0 or value >= 10**11:
        raise StreamRecordError(
            f"record {event_id!r}: dynamodb.ApproximateCreationDateTime {created!r} is not a "
            "time in epoch seconds"
        )
    if value == value.to_integral_value():
        return int(value)
    return format(value.normalize(), "f")


def change_line(record: dict[str, Any]) -> dict[str, Any]:
    """One stream record -> one change-file line (export-shaped, plus the stream's fields)."""
    change = record.get("dynamodb")
    name = record.get("eventName")
    if not isinstance(change, dict) or name not in _EVENTS:
        raise StreamRecordError(
            f"record {record.get('eventID')!r}: not a DynamoDB stream record "
            f"(eventName {name!r}, dynamodb {'present' if change else 'missing'})"
        )
    sequence = str(change.get("SequenceNumber", ""))
    if not sequence.isdigit() or not isinstance(change.get("Keys"), dict):
        raise StreamRecordError(
            f"record {record.get('eventID')!r}: needs dynamodb.Keys and a numeric "
            f"dynamodb.SequenceNumber (got {sequence!r})"
        )
    created = creation_time(change, str(record.get("eventID")))
    line: dict[str, Any] = {"Keys": change["Keys"]}
    for image in ("NewImage", "OldImage"):
        if image in change:
            line[image] = change[image]
    line.update(
        {
            "SequenceNumber": sequence,
            "ApproximateCreationDateTime": created,
            "eventName": name,
            "eventID": record.get("eventID"),
        }
    )
    if "ApproximateCreationDateTimePrecision" in change:
        line["ApproximateCreationDateTimePrecision"] = change[
            "ApproximateCreationDateTimePrecision"
        ]
    if "userIdentity" in record:
        line["userIdentity"] = record["userIdentity"]
    return line


def object_name(lines: list[dict[str, Any]]) -> str:
    """``<earliest change time>-<latest change time>-<digest of the event ids>.json.gz``: sorts
    by time, says the time range its changes span (``status`` shows it), and the same batch
    always gets the same name. (A name with one time is read as the earliest time only.)"""
    times = [float(line["ApproximateCreationDateTime"]) for line in lines]
    earliest, latest = (datetime.fromtimestamp(t, UTC) for t in (min(times), max(times)))
    digest = hashlib.sha256()
    for line in lines:
        digest.update(f"{line.get('eventID')}|{line['SequenceNumber']}\n".encode())
    return f"{earliest:%Y%m%dT%H%M%S}Z-{latest:%Y%m%dT%H%M%S}Z-{digest.hexdigest()[:20]}{SUFFIX}"


def encode(lines: Iterable[dict[str, Any]]) -> bytes:
    text = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)
    return gzip.compress(text.encode("utf-8"), mtime=0)


def put(destination: str, table: str, name: str, body: bytes, s3: Any = None) -> str:
    """Write one change file atomically: an S3 PUT, or a local temporary file renamed into place."""
    if "://" in destination:
        bucket, prefix = parse_s3_uri(destination)
        key = "/".join(p for p in (prefix, table, name) if p)
        client = s3 or _s3_client()
        client.put_object(Bucket=bucket, Key=key, Body=body, ContentEncoding="gzip")
        return f"s3://{bucket}/{key}"
    folder = Path(destination) / table
    folder.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".writing-", suffix=".tmp")
    with os.fdopen(handle, "wb") as out:
        out.write(body)
    os.chmod(temporary, 0o644)  # mkstemp's 0600 would hide the file from other readers
    os.replace(temporary, folder / name)
    return str(folder / name)


def _s3_client() -> Any:
    import boto3

    return boto3.client("s3", endpoint_url=os.environ.get("AWS_ENDPOINT_URL_S3") or None)


def write_batch(
    records: list[dict[str, Any]], destination: str, s3: Any = None
) -> tuple[list[WrittenFile], str | None]:
    """Write the records (one file per table in the batch; a stream has one table).

    Returns the files written and the SequenceNumber Lambda must retry from (None when all is
    written)."""
    lines: list[dict[str, Any]] = []
    tables: list[str] = []
    failed_at: str | None = None
    for record in records:
        try:
            lines.append(change_line(record))
            tables.append(table_of(record))
        except StreamRecordError as exc:
            log.error("%s; the batch stops here and Lambda retries from this record", exc)
            # No sequence number to point at: "" makes Lambda retry the whole batch (the
            # records before this one are rewritten under the same name, never duplicated).
            failed_at = str((record.get("dynamodb") or {}).get("SequenceNumber", ""))
            break
    by_table: dict[str, list[dict[str, Any]]] = {}
    for table, line in zip(tables, lines, strict=True):
        by_table.setdefault(table, []).append(line)
    written: list[WrittenFile] = []
    for table, table_lines in by_table.items():
        try:
            uri = put(destination, table, object_name(table_lines), encode(table_lines), s3)
        except Exception:
            log.exception("writing %d records of %s failed", len(table_lines), table)
            return written, lines[0]["SequenceNumber"]
        written.append(WrittenFile(uri, len(table_lines)))
    return written, failed_at


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    """Lambda entry point (with ``FunctionResponseTypes: [ReportBatchItemFailures]``)."""
    destination = os.environ.get("LAKEHOUSE_STREAM_URI")
    if not destination:
        raise WriterNotConfigured("LAKEHOUSE_STREAM_URI is not set (s3://BUCKET/PREFIX)")
    if "://" in destination:
        parse_s3_uri(destination)  # a malformed location fails the invocation, naming it
    records = event.get("Records") or []
    written, failed_at = write_batch(records, destination)
    for item in written:
        log.info("wrote %d changes to %s", item.records, item.uri)
    failures = [] if failed_at is None else [{"itemIdentifier": failed_at}]
    return {"batchItemFailures": failures}


def main(argv: list[str] | None = None) -> int:
    """Run the writer on this machine on a saved Lambda event: ``python -m
    ingestion.sources.change_file_writer EVENT.json DESTINATION`` (a folder or s3://BUCKET/PREFIX),
    e.g. to see what a batch of your stream becomes before deploying."""
    import argparse
    import json

    parser = argparse.ArgumentParser(
        prog="python -m ingestion.sources.change_file_writer",
        description="write the change files of a saved DynamoDB Streams Lambda event",
    )
    parser.add_argument("event", help='a JSON file holding the event ({"Records": [...]})')
    parser.add_argument("destination", help="a local folder or s3://BUCKET/PREFIX")
    args = parser.parse_args(argv)
    with open(args.event, encoding="utf-8") as handle:
        event = json.load(handle)
    written, failed_at = write_batch(event.get("Records") or [], args.destination)
    for item in written:
        print(f"wrote {item.records} change(s) to {item.uri}")
    if failed_at is not None:
        print(f"failed at record {failed_at}: the records from it on were not written")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
