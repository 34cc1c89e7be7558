"""``ddb-lakehouse watch``: keep final tables fresh from their stream change files.

One process, one SparkSession for its whole life, for one table or several (each held by its
own lock and lease): every tick ingests each table's settled change files (one staging commit
each, then their cleanup), runs one dbt merge of every table that has something new in this
same process and session (dbt's programmatic runner: no JVM start per tick), and prints one
line per table. ``dbt test`` runs every ``test_every`` ticks that merged something,
compaction every ``maintain_every`` ticks. A table whose step fails is retried on the next tick
while the others go on; ``max_failures`` failures of one table in a row stop the watch.
SIGINT / SIGTERM stop it between ticks (a tick under way finishes first).
"""

from __future__ import annotations

import json
import logging
import signal
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pyspark.sql import SparkSession

from ingestion.catalog import merge_log, schema_choice, table_types
from ingestion.catalog import table as catalog_table
from ingestion.config import clock
from ingestion.config.errors import LakehouseError
from ingestion.dynamodb import decode
from ingestion.dynamodb.entities import final_tables
from ingestion.dynamodb.tables import TableConfig
from ingestion.jobs import table_lock
from ingestion.jobs.guard import held_table
from ingestion.maintenance import adopt, compaction
from ingestion.merge import dbt_process, merge_counts, runner
from ingestion.spark import threads
from ingestion.staging import append, streams
from ingestion.staging.streams import StreamResult

log = logging.getLogger(__name__)
__all__ = ["Tick", "WatchError", "WatchOptions", "watch", "watch_tables"]


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
    maintain_every: int = 60  # compaction and expiry (ingestion.maintenance.compaction.maintain)
    expiry_every: timedelta = compaction.EXPIRY_EVERY  # the rest of maintain, when due
    dbt_artifacts: bool = False  # dbt's target/*.json written every tick (dbt_process.dbt_invoke)
    max_failures: int = 5
    # The whole-table data tests of each table (runner.full_check, as `maintain` ends): a tick's
    # tests look only at the rows its merges wrote (docs/exports-and-the-ledger.md, "Each
    # guarantee, and where it runs"), and the rendered deployment runs no `maintain` for a
    # stream table. The first that long after the watch started (not at its start: a restart
    # would delay its first tick by a whole-table scan), then as often. None: never.
    check_every: timedelta | None = timedelta(days=1)


@dataclass
class Progress:
    """What a watch carries from tick to tick: how many ticks merged, and per table the
    batches merged since its last data test (the next test looks at the keys they touched)."""

    merged: int = 0
    untested: dict[str, list[str]] = field(default_factory=dict)
    # Per table, the batches this watch staged and saw no drift in, until they are merged: the
    # drift check before the merge leaves them out (ingestion.maintenance.adopt.adopt_before_merge).
    clean: dict[str, set[str]] = field(default_factory=dict)
    # Per table, when its whole-table check is next due (time.monotonic()): ``_check``.
    check_due: dict[str, float] = field(default_factory=dict)


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

    def ingest(table: TableConfig) -> StreamResult | str:
        try:
            return _ingest(spark, table, options)
        except Exception as exc:  # reported on its line, retried next tick
            return append.spark_reason(exc)

    # The tables' ingests run at once (each stages its own table, with its own ledger in its
    # commits): a small batch's time is mostly file listing, planning and a commit, which
    # overlap another table's (bench/tick_profile.py, 10 tables).
    outcomes = threads.each(spark, ingest, tables)
    for table, outcome in zip(tables, outcomes, strict=True):
        if isinstance(outcome, str):
            failed[table.name] = outcome
            continue
        ingested[table.name] = staged = outcome
        if staged.batch_id and not staged.drift:
            progress.clean.setdefault(table.name, set()).add(staged.batch_id)
    merging = [t for t in tables if t.name in ingested and _has_news(spark, t, ingested)]
    counts, merge_seconds = _merge_each_apart(spark, merging, options, progress, failed)
    done = []
    for i, table in enumerate(tables):
        named = table.name if len(tables) > 1 else ""
        if table.name in failed:
            done.append(
                Tick(
                    number,
                    0,
                    0,
                    0,
                    0,
                    0,
                    None,
                    0.0,
                    0.0,
                    0.0,
                    0,
                    None,
                    0,
                    named,
                    failed[table.name],
                )
            )
            continue
        maintain_seconds, maintain_error = _maintain(spark, table, options, number + i)
        check_seconds, check_error = _check(spark, table, options, progress)
        maintain_seconds += check_seconds
        maintain_error = "; ".join(e for e in (maintain_error, check_error) if e) or None
        staged, merged = ingested[table.name], counts.get(table.name)
        lag = (
            datetime.now(UTC).timestamp() - staged.newest_change.timestamp()
            if staged.newest_change and merged
            else None
        )
        done.append(
            Tick(
                number,
                staged.files,
                staged.changes,
                merged.inserted if merged else 0,
                merged.updated if merged else 0,
                merged.deleted if merged else 0,
                lag,
                staged.seconds,
                merge_seconds if merged else 0.0,
                maintain_seconds,
                staged.pending,
                maintain_error,
                staged.rejected,
                named,
                None,
                staged.unmatched,
            )
        )
    return done


def _ingest(spark: SparkSession, table: TableConfig, options: WatchOptions) -> StreamResult:
    staged = streams.ingest_stream(
        spark,
        table,
        options.stream,
        options.settle,
        options.max_files,
        max_rejects=options.max_rejects,
    )
    for line in adopt.adopt_drift(spark, table, staged.drift):
        log.info(line)  # the merge rebuilds the final table with the wider types
    return staged


def _has_news(spark: SparkSession, table: TableConfig, ingested: dict[str, StreamResult]) -> bool:
    return bool(ingested[table.name].files) or any(
        merge_counts.current_snapshot(spark, final.name) is None
        or merge_log.new_batches(spark, final.name, final.history)
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
    of ``maintain`` when it is due (``compaction.EXPIRY_EVERY``). A failed compaction leaves
    the table as it was: reported, and the data keeps flowing."""
    if not options.maintain_every or number % options.maintain_every:
        return 0.0, None
    started, error = time.monotonic(), None
    try:
        report = compaction.maintain(spark, table, expiry_every=options.expiry_every)
        for line in report.lines():
            print(f"maintenance: {line}", flush=True)  # the run summary, not a log
    except Exception as exc:
        error = append.spark_reason(exc)
    return time.monotonic() - started, error


def _check(
    spark: SparkSession, table: TableConfig, options: WatchOptions, progress: Progress
) -> tuple[float, str | None]:
    """The whole-table data tests of ``table`` when due (``WatchOptions.check_every``): its
    seconds, and what failed (reported on the tick's line, as a failed compaction is: the data
    keeps flowing). A failed check runs again an hour later (or after ``check_every``, if
    shorter), not on every tick: each is a scan of both tables. A table with batches staged and
    not merged yet is left for a later tick."""
    if options.check_every is None:
        return 0.0, None
    period = options.check_every.total_seconds()
    started = time.monotonic()
    due = progress.check_due.setdefault(table.name, started + period)
    if started < due:
        return 0.0, None
    try:
        checked, _ = runner.full_check(spark, [table], artifacts=options.dbt_artifacts)
    except Exception as exc:
        progress.check_due[table.name] = time.monotonic() + min(period, CHECK_AGAIN_AFTER_FAILURE)
        return time.monotonic() - started, f"whole-table check: {append.spark_reason(exc)}"
    if checked:
        progress.check_due[table.name] = time.monotonic() + period
        log.info("whole-table check of %s passed", table.name)
    return time.monotonic() - started, None


CHECK_AGAIN_AFTER_FAILURE = 3600.0  # seconds: ``_check``


def _merge(
    spark: SparkSession, tables: list[TableConfig], options: WatchOptions, progress: Progress
) -> tuple[dict[str, merge_counts.MergeCounts], float]:
    """A tick's one merge of ``tables``, their drift adopted first. Every ``test_every``-th
    merge runs the data tests, on the keys of every batch merged since the last ones."""
    if not tables:
        return {}, 0.0
    entries = catalog_table.load(tables, spark)
    for entry in entries:
        clean = progress.clean.get(entry.name, set())
        for line in adopt.adopt_before_merge(entry, known_clean=clean):
            log.info(line)
    test = options.test_every > 0 and (progress.merged + 1) % options.test_every == 0
    also = {  # keyed by final table: a single-table design's entity tables each
        f.name: list(progress.untested.get(t.name, [])) for t in tables for f in final_tables(t)
    }
    results, merge_seconds = runner.run_merge(
        spark, entries, test=test, also_test=also, artifacts=options.dbt_artifacts
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


class WatchError(LakehouseError):
    """Too many ticks in a row failed."""


def warm_up(spark: SparkSession, table: TableConfig) -> float:
    """Compile what every tick runs before the first one: the decoding of one synthetic change
    (Spark's code generation for the table's columns, written nowhere) and dbt's project parse.
    Without it the first tick that has data takes several times a warm one."""
    started = time.monotonic()
    current = table_types.current_schema(spark, table)
    if current is not None:
        sample_values = {"S": {"S": "warm-up"}, "N": {"N": "0"}, "B": {"B": ""}}
        keys = {k.name: sample_values[k.descriptor] for k in table.keys}
        line = {
            "Keys": keys,
            "NewImage": keys,
            "SequenceNumber": "1",
            "ApproximateCreationDateTime": 0,
            "eventName": "INSERT",
        }
        rows = append.staging_rows(
            spark.createDataFrame([(json.dumps(line),)], "value string"),
            decode.stream_change_columns(),
            schema_choice.with_keys(table, current),
            "warm-up",
            "warm-up",
            clock.utc_now(),
        )
        rows.write.format("noop").mode("overwrite").save()
    dbt_process.dbt_invoke(["parse"])
    return time.monotonic() - started


def watch(
    spark: SparkSession,
    tables: list[TableConfig],
    options: WatchOptions,
    report: Callable[[str], Any] = print,
    guard: Callable[[], None] = lambda: None,
) -> list[Tick]:
    """Tick until stopped (a signal, or ``options.ticks``); returns the ticks (one per table a
    tick). ``guard()`` runs before every tick and stops the loop by raising (a lease was lost)."""
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        report(f"{signal.Signals(signum).name}: stopping after this tick")
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    ticks: list[Tick] = []
    progress = Progress()
    failures: dict[str, int] = {}  # a table's failed ticks in a row
    number = 0
    report(f"warmed up in {sum(warm_up(spark, t) for t in tables):.1f}s")
    report(
        f"watching {options.stream} for {', '.join(t.name for t in tables)}: a tick every "
        f"{options.interval:g}s (Ctrl-C stops between ticks)"
    )
    try:
        while not stop.is_set() and (options.ticks is None or number < options.ticks):
            guard()
            number += 1
            started = time.monotonic()
            done = tick(spark, tables, options, number, progress)
            for table, one in zip(tables, done, strict=True):
                report(one.line())
                failures[table.name] = failures.get(table.name, 0) + 1 if one.error else 0
                if failures[table.name] >= options.max_failures:
                    raise WatchError(
                        f"table {table.name}: {failures[table.name]} ticks in a row failed; "
                        f"last error: {one.error}"
                    )
            ticks += [t for t in done if not t.error]
            stop.wait(max(0.0, options.interval - (time.monotonic() - started)))
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    total = sum(t.changes for t in ticks)
    report(f"stopped after {number} ticks: {total} changes merged")
    return ticks


def watch_tables(
    tables: list[TableConfig],
    options: WatchOptions,
    report: Callable[[str], Any],
    if_free: bool = False,
) -> list[Tick]:
    """``watch`` of ``tables`` in one process and one Spark session, each table held (its lock
    and its lease) for the watch's whole life. With ``if_free``, a table another watch holds is
    said and left, not an error, and the others are watched: a schedule that keeps one watch
    running then never fails, nor gets retried, for that."""
    with ExitStack() as stack:
        held, free = [], []
        for table in tables:
            try:
                spark, lease = stack.enter_context(held_table(table.name, "watch"))
            except table_lock.TableBusy as busy:
                if not if_free:
                    raise
                report(f"{table.name}: already watched, nothing to do ({busy})")
                continue
            held.append(lease)
            free.append(table)
        if not free:
            return []

        def guard() -> None:
            for lease in held:
                lease.check()

        return watch(spark, free, options, report=report, guard=guard)
