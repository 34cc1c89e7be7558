"""Ingest stream change files (written by ingestion.sources.change_file_writer) into a table's
staging change log.

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
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ingestion import fault_points
from ingestion.catalog import ledger, schema_choice, table_types
from ingestion.config import clock
from ingestion.dynamodb import decode
from ingestion.dynamodb.tables import TableConfig
from ingestion.schema import detect, types
from ingestion.sources.stream_files import (
    ChangeFile,
    ChangeFiles,
    StreamError,
    file_end_time,
    file_time,
    store_for,
)
from ingestion.spark import java_errors, spark_config
from ingestion.staging import append
from ingestion.staging.drift import Drift
from ingestion.staging.stream_rejects import record_rejects, rejected_lines, with_reject_reason

log = logging.getLogger(__name__)

DEFAULT_SETTLE_SECONDS = 5.0
DEFAULT_MAX_FILES = 1000
DEFAULT_MAX_REJECTS = 0
# Change files of at most this many bytes in all (gzip) are staged by one task: the batch's
# dedupe then runs in that task, where a shuffle (two stages) cost about 0.2 s of every `watch`
# tick (50 changes, bench/tick_profile.py). A larger backlog keeps every core decoding.
ONE_TASK_BYTES = 4 * 1024 * 1024


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
    drift: tuple[Drift, ...] = ()
    schema_changes: tuple[str, ...] = field(default=())
    rejected: int = 0  # damaged lines set aside in staging.<table>_rejects
    unmatched: int = 0  # a single-table design's changes of no listed entity value


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
    store = store_for(uri, table.dynamodb_name)
    cutoff = (time.time() if now is None else now) - settle_seconds
    todo, leftover, pending = _files_to_stage(spark, table.name, store, cutoff, max_files)
    if not todo:
        return StreamResult(
            table.name, store.location, 0, 0, len(leftover), pending, "", None, _since(started)
        )
    label = f"{len(todo)} change file(s) in {store.location}"
    paths = [f.uri for f in todo]
    rejected = 0
    if max_rejects == 0:
        # The default: no damaged line may pass, so the staging job itself checks every line
        # (one pass over the files, not a count first); when one fails it, the lines are
        # classified to name the first. Nothing was committed either way.
        try:
            with spark_config.quiet_task_failures(spark):
                staged = _staged(spark, table, store, todo, _checked(spark, table, paths), label)
        except Exception as exc:
            if java_errors.raised(exc) != DAMAGED:
                raise
            _classified(spark, table, paths, label, max_rejects)  # raises, naming the first
            raise  # not reached: the classification found the damaged line the job failed on
    else:
        good, rejects, rejected = _classified(spark, table, paths, label, max_rejects)
        staged = _staged(spark, table, store, todo, good, label, rejects, rejected)
    batch, schema_changes, batch_id = staged
    _clean_up(store, [f.name for f in todo])
    return StreamResult(
        table=table.name,
        location=store.location,
        files=len(todo),
        changes=batch.rows,
        cleaned=len(leftover) + len(todo),
        pending=pending,
        batch_id=batch_id,
        newest_change=_as_time(batch.newest_version),
        seconds=_since(started),
        drift=batch.drift,
        schema_changes=tuple(schema_changes),
        rejected=rejected,
        unmatched=batch.unmatched,
    )


def _staged(
    spark: SparkSession,
    table: TableConfig,
    store: ChangeFiles,
    todo: list[ChangeFile],
    good: DataFrame,
    label: str,
    rejects: DataFrame | None = None,
    rejected: int = 0,
) -> tuple[append.StagedBatch, list[str], str]:
    """``good`` (the lines to stage) staged in one commit, ``rejects`` set aside before it: the
    batch, what changed in the table's types, and the batch id."""
    current, changes = schema_choice.schema_for(
        spark, table, label, lambda: detect.stream_images(good), store.location
    )
    ingested_at = clock.utc_now()
    batch_id = append.new_batch_id(ingested_at)
    if rejects is not None:
        record_rejects(spark, table.name, rejects, batch_id)
        log.warning(
            "%s: %d damaged line(s) set aside in staging.%s_rejects",
            table.name,
            rejected,
            table.name,
        )
    entry = _ledger_entry(store.location, todo, batch_id)
    keys = [k.column for k in table.keys]

    one_task = sum(f.size for f in todo) <= ONE_TASK_BYTES

    def stage(columns_schema: types.Schema) -> append.StagedBatch:
        rows = append.staging_rows(
            good,
            decode.stream_change_columns(),
            columns_schema,
            entry.source,
            batch_id,
            ingested_at,
        )
        rows = rows.coalesce(1) if one_task else rows  # the dedupe then needs no shuffle
        rows = rows.dropDuplicates([*keys, "_version", "_sequence", "_operation"])
        return append.append_batch(spark, table, rows, entry, label, ingested_at, columns_schema)

    batch, added = schema_choice.stage_with_evolution(
        spark, stage, table, label, lambda: detect.stream_images(good), store.location, current
    )
    return batch, changes + added, batch_id


def _ledger_entry(location: str, todo: list[ChangeFile], batch_id: str) -> ledger.Entry:
    """The batch's ledger entry: its files by name, its time span from their names (the
    earliest change of the first file to the latest change of any)."""
    return ledger.Entry(
        source=ledger.stream_source(location, batch_id),
        batch_id=batch_id,
        kind=ledger.STREAM,
        table_arn=None,
        start=file_time(todo[0].name),
        end=max((t for f in todo if (t := file_end_time(f.name))), default=None),
        files="\n".join(f.name for f in todo),
    )


def _as_time(version: int | None) -> datetime | None:
    """A ``_version`` (epoch microseconds) as a UTC time, to the second."""
    return None if version is None else datetime.fromtimestamp(version // 1_000_000, UTC)


def _files_to_stage(
    spark: SparkSession, table: str, store: ChangeFiles, cutoff: float, max_files: int
) -> tuple[list[ChangeFile], list[str], int]:
    """The settled files to stage now (at most ``max_files``), the leftover names an earlier run
    staged (deleted here, not staged again), and how many files wait for a later run."""
    listed = sorted(store.listing(), key=lambda f: f.name)
    settled = [f for f in listed if f.modified <= cutoff]
    done = ledger.staged_files(ledger.entries(spark, table), store.location)
    leftover = [f.name for f in settled if f.name in done]
    if leftover:
        log.info(
            "%s: %d change file(s) already staged by an earlier run: deleting them",
            table,
            len(leftover),
        )
        store.delete(leftover)
    todo = [f for f in settled if f.name not in done][:max_files]
    return todo, leftover, len(listed) - len(leftover) - len(todo)


# The message a damaged line fails the staging job with (``_checked``).
DAMAGED = "dynamodb-lakehouse: a damaged change-file line"


def _checked(spark: SparkSession, table: TableConfig, paths: list[str]) -> DataFrame:
    """The lines (``value``), each checked where it is read: a damaged one fails the job that
    reads it with ``DAMAGED`` (the reasons of ``_classified``, evaluated before any decode)."""
    current = table_types.current_schema(spark, table)
    lines = with_reject_reason(spark.read.text(paths), table, current)
    # The check in the line's own column, not a filter: Spark pushes a filter down into the scan
    # with the parsed columns written out again in each reason (``with_reject_reason``). So it
    # runs where `value` is read: staging reads every line's `value` (a query of this frame
    # that reads no column, a bare count, would not check).
    checked = F.when(F.col("_reject").isNull(), F.col("value"))
    return lines.select(checked.otherwise(F.raise_error(F.lit(DAMAGED))).alias("value"))


def _classified(
    spark: SparkSession, table: TableConfig, paths: list[str], label: str, max_rejects: int
) -> tuple[DataFrame, DataFrame | None, int]:
    """The good lines, the rejected ones with their line numbers (None when none), and how many
    were rejected; more than ``max_rejects`` fails the run before anything is staged."""
    current = table_types.current_schema(spark, table)
    classified = (
        with_reject_reason(spark.read.text(paths), table, current)
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
    return classified.where(F.col("_reject").isNull()).select("value"), rejects, rejected


def _clean_up(store: ChangeFiles, names: list[str]) -> None:
    """Delete the staged files (the ledger names them: a crash here loses nothing)."""
    fault_points.point("after-stream-commit")
    store.delete(names[:1])
    fault_points.point("during-stream-cleanup")
    store.delete(names[1:])


def _since(started: float) -> float:
    return time.monotonic() - started
