"""One tick of a ``watch``: each table's settled change files staged (one commit each), then one
merge (one dbt run) of every table with something new, each table compacted in its turn. A
table whose step fails is reported on its line and the others go on: one bad table never holds
the others back (``watch`` stops when one fails ``max_failures`` ticks in a row)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from pyspark.sql import SparkSession

from ingestion.dynamodb.entities import final_tables
from ingestion.dynamodb.tables import TableConfig
from ingestion.merge import merge_counts, merge_log, runner
from ingestion.staging import append, streams
from ingestion.staging.streams import StreamResult
from ingestion.upkeep import adopt, maintenance

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Tick:
    number: int
    files: int
    changes: int
    inserted: int
    updated: int
    deleted: int
    lag_seconds: float | None  # now - change time of the newest change merged by this tick
    ingest_seconds: float
    merge_seconds: float
    maintain_seconds: float
    pending: int
    maintain_error: str | None = None
    rejected: int = 0
    table: str = ""  # set when one watch serves several tables
    error: str | None = None  # this table's step failed this tick (retried on the next)
    unmatched: int = 0  # a single-table design's changes of no listed entity value

    @property
    def seconds(self) -> float:
        return self.ingest_seconds + self.merge_seconds + self.maintain_seconds

    def line(self) -> str:
        lag = f"{self.lag_seconds:.1f}s" if self.lag_seconds is not None else "-"
        which = f" {self.table}" if self.table else ""
        if self.error:
            return f"tick {self.number}{which}: FAILED: {self.error}"
        return (
            f"tick {self.number}{which}: {self.files} files, {self.changes} changes, "
            f"+{self.inserted} ~{self.updated} -{self.deleted}, lag {lag}, "
            f"{self.seconds:.1f}s (ingest {self.ingest_seconds:.1f}, merge "
            f"{self.merge_seconds:.1f}, maintain {self.maintain_seconds:.1f})"
            + (f", {self.pending} files left for next tick" if self.pending else "")
            + (f", {self.rejected} damaged lines set aside" if self.rejected else "")
            + (f", {self.unmatched} of no listed entity (to __unmatched)" if self.unmatched else "")
            + (f"; maintenance FAILED: {self.maintain_error}" if self.maintain_error else "")
        )


@dataclass
class WatchOptions:
    stream: str
    interval: float = 60.0
    ticks: int | None = None
    settle: float = streams.DEFAULT_SETTLE_SECONDS
    max_files: int = streams.DEFAULT_MAX_FILES
    max_rejects: int = streams.DEFAULT_MAX_REJECTS
    test_every: int = 10
    maintain_every: int = 60  # compaction and expiry (ingestion.upkeep.maintenance.maintain)
    upkeep_every: timedelta = maintenance.UPKEEP_EVERY  # the rest of maintain, when due
    dbt_artifacts: bool = False  # dbt's target/*.json written every tick (runner.dbt_invoke)
    max_failures: int = 5


@dataclass
class Progress:
    """What a watch carries from tick to tick: how many ticks merged, and per table the
    batches merged since its last data test (the next test looks at the keys they touched)."""

    merged: int = 0
    untested: dict[str, list[str]] = field(default_factory=dict)
    # Per table, the batches this watch staged and saw no drift in, until they are merged: the
    # drift check before the merge leaves them out (ingestion.upkeep.adopt.adopt_before_merge).
    clean: dict[str, set[str]] = field(default_factory=dict)


def tick(
    spark: SparkSession,
    tables: list[TableConfig],
    options: WatchOptions,
    number: int,
    progress: Progress | None = None,
) -> list[Tick]:
    """One tick: each table's settled change files ingested (one staging commit each), then
    one merge (one dbt run) of every table whose ledger holds batches the merge log lacks
    (staged now or earlier) or whose final table is missing; each table maintained every
    ``maintain_every`` ticks. One ``Tick`` per table; a table whose step failed has its error."""
    progress = Progress() if progress is None else progress
    ingested: dict[str, StreamResult] = {}
    failed: dict[str, str] = {}
    for table in tables:
        try:
            ingested[table.name] = staged = _ingest(spark, table, options)
        except Exception as exc:  # reported on its line, retried next tick
            failed[table.name] = append.spark_reason(exc)
            continue
        if staged.batch_id and not staged.drift:
            progress.clean.setdefault(table.name, set()).add(staged.batch_id)
    merging = [t for t in tables if t.name in ingested and _has_news(spark, t, ingested)]
    counts, merge_seconds = _merge_each_apart(spark, merging, options, progress, failed)
    done = []
    for i, table in enumerate(tables):
        named = table.name if len(tables) > 1 else ""
        if table.name in failed:
            done.append(Tick(number, 0, 0, 0, 0, 0, None, 0.0, 0.0, 0.0, 0, None, 0, named, failed[table.name]))  # fmt: skip
            continue
        maintain_seconds, maintain_error = _maintain(spark, table, options, number + i)
        staged, merged = ingested[table.name], counts.get(table.name)
        lag = (
            datetime.now(UTC).timestamp() - staged.newest_change.timestamp()
            if staged.newest_change and merged
            else None
        )
        # fmt: off
        done.append(Tick(
            number, staged.files, staged.changes, merged.inserted if merged else 0,
            merged.updated if merged else 0, merged.deleted if merged else 0, lag,
            staged.seconds, merge_seconds if merged else 0.0, maintain_seconds, staged.pending,
            maintain_error, staged.rejected, named, None, staged.unmatched,
        ))
        # fmt: on
    return done


def _ingest(spark: SparkSession, table: TableConfig, options: WatchOptions) -> StreamResult:
    staged = streams.ingest_stream(
        spark, table, options.stream, options.settle, options.max_files,
        max_rejects=options.max_rejects,
    )  # fmt: skip
    for line in adopt.adopt_drift(spark, table, staged.drift):
        log.info(line)  # the merge rebuilds the final table with the wider types
    return staged


def _has_news(spark: SparkSession, table: TableConfig, ingested: dict[str, StreamResult]) -> bool:
    return bool(ingested[table.name].files) or any(
        merge_counts.current_snapshot(spark, final.name) is None
        or merge_log.new_batches(spark, final.name)
        for final in final_tables(table)
    )


def _merge_each_apart(
    spark: SparkSession,
    tables: list[TableConfig],
    options: WatchOptions,
    progress: Progress,
    failed: dict[str, str],
) -> tuple[dict[str, merge_counts.MergeCounts], float]:
    """One merge of ``tables``; when it fails and there are several, each alone, so that one
    table's failure (a failed data test, drift to fix) holds no other back. A table whose own
    merge failed goes into ``failed``."""
    try:
        return _merge(spark, tables, options, progress)
    except Exception as exc:
        if len(tables) <= 1:
            failed.update({t.name: append.spark_reason(exc) for t in tables})
            return {}, 0.0
    counts: dict[str, merge_counts.MergeCounts] = {}
    seconds = 0.0
    for table in tables:
        try:
            one, took = _merge(spark, [table], options, progress)
        except Exception as exc:
            failed[table.name] = append.spark_reason(exc)
            continue
        counts.update(one)
        seconds += took
    return counts, seconds


def _maintain(
    spark: SparkSession, table: TableConfig, options: WatchOptions, number: int
) -> tuple[float, str | None]:
    """Compaction every ``maintain_every`` ticks (tables of one watch take turns), and the rest
    of ``maintain`` when it is due (``maintenance.UPKEEP_EVERY``). A failed compaction leaves
    the table as it was: reported, and the data keeps flowing."""
    if not options.maintain_every or number % options.maintain_every:
        return 0.0, None
    started, error = time.monotonic(), None
    try:
        report = maintenance.maintain(spark, table, upkeep_every=options.upkeep_every)
        for line in report.lines():
            print(f"maintenance: {line}", flush=True)  # the run summary, not a log
    except Exception as exc:
        error = append.spark_reason(exc)
    return time.monotonic() - started, error


def _merge(
    spark: SparkSession, tables: list[TableConfig], options: WatchOptions, progress: Progress
) -> tuple[dict[str, merge_counts.MergeCounts], float]:
    """A tick's one merge of ``tables``, their drift adopted first. Every ``test_every``-th
    merge runs the data tests, on the keys of every batch merged since the last ones."""
    if not tables:
        return {}, 0.0
    for table in tables:
        clean = progress.clean.get(table.name, set())
        for line in adopt.adopt_before_merge(spark, table, known_clean=clean):
            log.info(line)
    test = options.test_every > 0 and (progress.merged + 1) % options.test_every == 0
    also = {  # keyed by final table: a single-table design's entity tables each
        f.name: list(progress.untested.get(t.name, [])) for t in tables for f in final_tables(t)
    }
    results, merge_seconds = runner.run_merge(
        spark, tables, test=test, also_test=also, artifacts=options.dbt_artifacts
    )
    progress.merged += 1
    results = merge_counts.per_entry(tables, results)
    for table, counts in zip(tables, results, strict=True):
        progress.clean.get(table.name, set()).difference_update(counts.batches)
        untested = progress.untested.setdefault(table.name, [])
        if test:
            untested.clear()
        else:
            untested.extend(counts.batches)
    return {t.name: c for t, c in zip(tables, results, strict=True)}, merge_seconds
