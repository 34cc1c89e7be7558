"""Ingest stream change files (written by ingestion.stream_writer) into a table's staging change log.

One run: list the table's change files, keep those older than a settle time, delete the ones the
ledger already holds (a previous run committed them and stopped before its cleanup), stage the
others in ONE Iceberg commit whose snapshot summary lists their names, and only then delete them.
A crash at any point is safe: before the commit nothing is staged and the files are still there;
after it, the ledger names the files and the next run deletes them without staging them again.

A damaged line (not JSON, no ``Keys``, a key attribute missing or of the wrong type, an unknown
``eventName``, no ``NewImage`` for an insert or update, no valid time or sequence number) is
rejected: counted, and with ``max_rejects`` (default 0) exceeded the run fails before any commit,
naming the first one (file, line, reason), and the files stay. Within the limit the rejected lines
go to ``staging.<table>_rejects`` (file, line number, reason, raw text, batch) before the good
ones are staged; recording them is idempotent (keyed by file and line), so a run repeated after a
crash never records a line twice.

Duplicates (Lambda delivers at least once, and a retried batch may be split differently) collapse:
within a batch by key, version and sequence number; across batches in the merge, where the latest
change per key wins and an identical change changes nothing.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from ingestion import decode, detect, faults, ingest, ledger, staging
from ingestion.locations import S3Path, s3_client
from ingestion.naming import quote_table
from ingestion.stream_writer import SUFFIX, split_uri
from ingestion.tables import TableConfig
from ingestion.values import sql_string

log = logging.getLogger(__name__)

DEFAULT_SETTLE_SECONDS = 5.0
DEFAULT_MAX_FILES = 1000
DEFAULT_MAX_REJECTS = 0


class StreamError(RuntimeError):
    """Stream change files could not be listed, read or removed."""


@dataclass(frozen=True)
class ChangeFile:
    name: str  # relative to the table's stream folder
    uri: str  # what Spark reads
    size: int
    modified: float  # epoch seconds


class LocalFolder:
    """Change files in a local folder: ``<root>/<table>/*.json.gz``."""

    def __init__(self, root: str, table: str) -> None:
        self.folder = Path(root) / table
        self.location = str(Path(root).resolve() / table)

    def listing(self) -> list[ChangeFile]:
        if not self.folder.is_dir():
            return []
        found = []
        for entry in os.scandir(self.folder):
            if entry.is_file() and entry.name.endswith(SUFFIX):
                stat = entry.stat()
                found.append(
                    ChangeFile(entry.name, os.path.abspath(entry.path), stat.st_size, stat.st_mtime)
                )
        return found

    def delete(self, names: list[str]) -> None:
        for name in names:
            (self.folder / name).unlink(missing_ok=True)


class S3Prefix:
    """Change files under ``s3://bucket/prefix/<table>/`` (listed and deleted with boto3)."""

    def __init__(self, uri: str, table: str, client: Any = None) -> None:
        S3Path.parse(uri)  # a valid bucket name and no `..`, before anything is called
        bucket, prefix = split_uri(uri)
        self.bucket = bucket
        self.prefix = "/".join(p for p in (prefix, table) if p) + "/"
        self.location = f"s3://{bucket}/{self.prefix.rstrip('/')}"
        self.client = client or s3_client()

    def listing(self) -> list[ChangeFile]:
        found = []
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=self.prefix
        )
        for page in pages:
            for item in page.get("Contents", []):
                name = item["Key"][len(self.prefix) :]
                if name.endswith(SUFFIX) and "/" not in name:
                    found.append(
                        ChangeFile(
                            name,
                            f"s3://{self.bucket}/{item['Key']}",
                            int(item["Size"]),
                            item["LastModified"].timestamp(),
                        )
                    )
        return found

    def delete(self, names: list[str]) -> None:
        for start in range(0, len(names), 1000):
            chunk = names[start : start + 1000]
            answer = self.client.delete_objects(
                Bucket=self.bucket,
                Delete={"Objects": [{"Key": self.prefix + n} for n in chunk], "Quiet": True},
            )
            if answer.get("Errors"):
                first = answer["Errors"][0]
                raise StreamError(
                    f"could not delete {len(answer['Errors'])} staged change file(s) under "
                    f"{self.location}, e.g. {first.get('Key')}: {first.get('Message')} "
                    "(they are in the ledger: the next run deletes them without staging them)"
                )


def store_for(uri: str, table: str) -> LocalFolder | S3Prefix:
    if uri.startswith("s3://"):
        return S3Prefix(uri, table)
    if "://" in uri:
        raise StreamError(f"{uri!r}: a stream location is a local folder or s3://BUCKET/PREFIX")
    return LocalFolder(uri, table)


@dataclass(frozen=True)
class StreamResult:
    table: str
    location: str
    files: int  # staged by this run
    changes: int  # rows staged
    cleaned: int  # files deleted (staged by this run, or by an earlier one that stopped)
    pending: int  # files left for the next run (too young, or over --max-files)
    batch_id: str
    newest_change: datetime | None  # change time of the newest staged change
    seconds: float
    drift: tuple[staging.Drift, ...] = ()
    schema_changes: tuple[str, ...] = field(default=())
    rejected: int = 0  # damaged lines set aside in staging.<table>_rejects


def rejects_table(table: str) -> str:
    return quote_table("lake", "staging", f"{table}_rejects")


def reject_reason(table: TableConfig) -> F.Column:
    """Why a change-file line (``value``) cannot be staged, or null when it can."""
    line = (
        "from_json(value, 'eventName string, Keys string, NewImage string, "
        "ApproximateCreationDateTime string, SequenceNumber string')"
    )
    keys = f"from_json({line}.Keys, 'map<string, map<string, string>>')"
    checks = [
        (
            "get_json_object(value, '$') is null or ltrim(value) not like '{%'",
            "not a JSON object",
        ),
        (f"{line}.Keys is null or {keys} is null", "no Keys"),
        *[
            (
                f"element_at(element_at({keys}, {sql_string(k.name)}), '{k.descriptor}') is null",
                f"Keys lacks {k.name!r} of type {k.descriptor}",
            )
            for k in table.keys
        ],
        (
            f"coalesce({line}.eventName, '') not in ('INSERT', 'MODIFY', 'REMOVE')",
            "eventName is not INSERT, MODIFY or REMOVE",
        ),
        (
            f"{line}.eventName in ('INSERT', 'MODIFY') and {line}.NewImage is null",
            "no NewImage (the stream's view type must be NEW_IMAGE or NEW_AND_OLD_IMAGES)",
        ),
        (
            f"coalesce({line}.ApproximateCreationDateTime, '') "
            "not rlike '^[0-9]{1,11}([.][0-9]+)?$'",
            "no valid ApproximateCreationDateTime",
        ),
        (
            f"coalesce({line}.SequenceNumber, '') not rlike '^[0-9]{{1,40}}$'",
            "no valid SequenceNumber",
        ),
    ]
    cases = " ".join(f"when {test} then {sql_string(reason)}" for test, reason in checks)
    return F.expr(f"case {cases} end")


def rejected_lines(classified: DataFrame) -> DataFrame:
    """The rejected lines of ``classified`` (``value``, ``_reject``, ``_file``, ``_id``) with
    their 1-based line number in their file. A change file is gzip'd, so Spark reads it whole in
    one partition, in order: a line's number is its id minus its file's first id, plus one."""
    first = F.min("_id").over(Window.partitionBy("_file"))
    return (
        classified.withColumn("line", F.col("_id") - first + 1)
        .where(F.col("_reject").isNotNull())
        .select(
            F.col("_file").alias("file"),
            "line",
            F.col("_reject").alias("reason"),
            F.col("value").alias("raw"),
        )
    )


def record_rejects(spark: SparkSession, table: str, rejects: DataFrame, batch_id: str) -> None:
    """Add the rejected lines to ``staging.<table>_rejects``, once per file and line."""
    name = rejects_table(table)
    spark.sql(
        f"create table if not exists {name} (file string, line bigint, reason string, "
        "raw string, batch_id string, rejected_at timestamp) using iceberg "
        "tblproperties ('format-version'='2')"
    )
    rejects.withColumn("batch_id", F.lit(batch_id)).withColumn(
        "rejected_at", F.current_timestamp()
    ).createOrReplaceTempView("lakehouse_new_rejects")
    spark.sql(
        f"merge into {name} as t using lakehouse_new_rejects as s "
        "on t.file = s.file and t.line = s.line when not matched then insert *"
    )


def ingest_stream(
    spark: SparkSession,
    table: TableConfig,
    uri: str,
    settle_seconds: float = DEFAULT_SETTLE_SECONDS,
    max_files: int = DEFAULT_MAX_FILES,
    now: float | None = None,
    max_rejects: int = DEFAULT_MAX_REJECTS,
) -> StreamResult:
    """Stage the table's settled change files in one commit, then delete them."""
    started = time.monotonic()
    store = store_for(uri, table.name)
    cutoff = (time.time() if now is None else now) - settle_seconds
    listed = sorted(store.listing(), key=lambda f: f.name)
    settled = [f for f in listed if f.modified <= cutoff]
    applied = ledger.entries(spark, table.name)
    done = ledger.staged_files(applied, store.location)
    leftover = [f.name for f in settled if f.name in done]
    if leftover:
        log.info(
            "%s: %d change file(s) already staged by an earlier run: deleting them",
            table.name,
            len(leftover),
        )
        store.delete(leftover)
    todo = [f for f in settled if f.name not in done][:max_files]
    pending = len(listed) - len(leftover) - len(todo)
    if not todo:
        return StreamResult(
            table.name, store.location, 0, 0, len(leftover), pending, "", None, _since(started)
        )
    paths = [f.uri for f in todo]
    label = f"{len(todo)} change file(s) in {store.location}"
    classified = (
        spark.read.text(paths)
        .withColumn("_reject", reject_reason(table))
        .withColumn("_file", F.input_file_name())
        .withColumn("_id", F.monotonically_increasing_id())
    )
    # A plain count first (no shuffle); line numbers (a window per file) only when lines failed.
    rejected = classified.where(F.col("_reject").isNotNull()).count()
    rejects = rejected_lines(classified).localCheckpoint() if rejected else None
    if rejects is not None and rejected > max_rejects:
        first = rejects.orderBy("file", "line").first()
        assert first is not None
        raise StreamError(
            f"{label}: {rejected} damaged line(s), more than --max-rejects {max_rejects}; the "
            f"first: {first['file']} line {first['line']}: {first['reason']}. Nothing was "
            "staged and the files stay; fix or remove them, or raise --max-rejects to set "
            f"such lines aside in staging.{table.name}_rejects"
        )
    good = classified.where(F.col("_reject").isNull()).select("value")
    current, changes = ingest.schema_for(
        table, label, lambda: detect.stream_images(good), store.location
    )
    ingested_at = datetime.now(UTC).replace(tzinfo=None)
    batch_id = staging.new_batch_id(ingested_at)
    if rejects is not None:
        record_rejects(spark, table.name, rejects, batch_id)
        log.warning(
            "%s: %d damaged line(s) set aside in staging.%s_rejects",
            table.name,
            rejected,
            table.name,
        )
    entry = ledger.Entry(
        source=ledger.stream_source(store.location, batch_id),
        batch_id=batch_id,
        kind=ledger.STREAM,
        table_arn=None,
        start=_file_time(todo[0].name),
        end=_file_time(todo[-1].name),
        files="\n".join(f.name for f in todo),
    )
    keys = [k.column for k in table.keys]

    def stage(columns_schema: Any) -> staging.StagedBatch:
        rows = staging.staging_rows(
            good,
            decode.stream_change_columns(),
            columns_schema,
            entry.source,
            batch_id,
            ingested_at,
        ).dropDuplicates([*keys, "_version", "_sequence", "_operation"])
        return staging.append_batch(spark, table, rows, entry, label, ingested_at)

    batch, added = ingest.stage_with_evolution(
        stage, table, label, lambda: detect.stream_images(good), store.location, current
    )
    faults.point("after-stream-commit")
    names = [f.name for f in todo]
    store.delete(names[:1])
    faults.point("during-stream-cleanup")
    store.delete(names[1:])
    newest = (
        datetime.fromtimestamp(batch.newest_version // 1_000_000, UTC)
        if batch.newest_version is not None
        else None
    )
    return StreamResult(
        table=table.name,
        location=store.location,
        files=len(todo),
        changes=batch.rows,
        cleaned=len(leftover) + len(todo),
        pending=pending,
        batch_id=batch_id,
        newest_change=newest,
        seconds=_since(started),
        drift=batch.drift,
        schema_changes=tuple(changes + added),
        rejected=rejected,
    )


def _file_time(name: str) -> str | None:
    """The earliest change time a change file's name starts with, as ISO 8601 (as the ledger's
    export times are)."""
    try:
        return datetime.strptime(name[:16], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC).isoformat()
    except ValueError:
        return None


def _since(started: float) -> float:
    return time.monotonic() - started
