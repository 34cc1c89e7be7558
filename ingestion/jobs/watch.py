"""``ddb-lakehouse watch``: keep a final table fresh from its stream change files.

One process, one SparkSession for its whole life: every tick ingests the settled change files
(one staging commit, then their cleanup), runs the dbt merge in this same process and session
(dbt's programmatic runner: no JVM start per tick), and prints one line. ``dbt test`` runs every
``test_every`` ticks that merged something, compaction every ``maintain_every`` ticks.
SIGINT / SIGTERM stop it between ticks (a tick under way finishes first).
"""

from __future__ import annotations

import json
import logging
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import SparkSession

from ingestion.config import clock
from ingestion.config.errors import LakehouseError
from ingestion.dynamodb import decode
from ingestion.dynamodb.tables import TableConfig
from ingestion.jobs import table_lock
from ingestion.jobs.guard import held_table
from ingestion.merge import merge_counts, merge_log, runner
from ingestion.staging import append, exports, streams, table_types
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

    @property
    def seconds(self) -> float:
        return self.ingest_seconds + self.merge_seconds + self.maintain_seconds

    def line(self) -> str:
        lag = f"{self.lag_seconds:.1f}s" if self.lag_seconds is not None else "-"
        return (
            f"tick {self.number}: {self.files} files, {self.changes} changes, "
            f"+{self.inserted} ~{self.updated} -{self.deleted}, lag {lag}, "
            f"{self.seconds:.1f}s (ingest {self.ingest_seconds:.1f}, merge "
            f"{self.merge_seconds:.1f}, maintain {self.maintain_seconds:.1f})"
            + (f", {self.pending} files left for next tick" if self.pending else "")
            + (f", {self.rejected} damaged lines set aside" if self.rejected else "")
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
    max_failures: int = 5


class WatchError(LakehouseError):
    """Too many ticks in a row failed."""


def tick(
    spark: SparkSession,
    table: TableConfig,
    options: WatchOptions,
    number: int,
    merged: int,
    untested: list[str] | None = None,
) -> Tick:
    """One tick: ingest, merge when the ledger holds batches the merge log lacks (staged now or
    earlier) or the final table is missing, maintain every ``maintain_every`` ticks. ``merged``
    counts earlier ticks that merged; ``untested`` holds the batches merged since the last data
    test (the next test looks at the keys they touched too) and is kept up to date here."""
    untested = [] if untested is None else untested
    ingested = streams.ingest_stream(
        spark,
        table,
        options.stream,
        options.settle,
        options.max_files,
        max_rejects=options.max_rejects,
    )
    for line in adopt.adopt_drift(spark, table, ingested.drift):
        log.info(line)  # the merge below rebuilds the final table with the wider types
    counts, merge_seconds = _merge(spark, table, options, ingested.files, merged, untested)
    maintain_seconds, maintain_error = 0.0, None
    if options.maintain_every and number % options.maintain_every == 0:
        # A failed compaction leaves the table as it was: report it, keep the data flowing.
        started = time.monotonic()
        try:
            for line in maintenance.maintain(spark, table).lines():
                print(f"maintenance: {line}", flush=True)  # the run summary, not a log
        except Exception as exc:
            maintain_error = append.spark_reason(exc)
        maintain_seconds = time.monotonic() - started
    lag = (
        datetime.now(UTC).timestamp() - ingested.newest_change.timestamp()
        if ingested.newest_change and counts
        else None
    )
    return Tick(
        number,
        ingested.files,
        ingested.changes,
        counts.inserted if counts else 0,
        counts.updated if counts else 0,
        counts.deleted if counts else 0,
        lag,
        ingested.seconds,
        merge_seconds,
        maintain_seconds,
        ingested.pending,
        maintain_error,
        ingested.rejected,
    )


def _merge(
    spark: SparkSession,
    table: TableConfig,
    options: WatchOptions,
    staged_files: int,
    merged: int,
    untested: list[str],
) -> tuple[merge_counts.MergeCounts | None, float]:
    """A tick's merge, when this tick staged files or batches wait (a kill after the staging
    commit, a tick whose merge failed: the ledger holds them, the merge log does not); its
    drift adopted first. Every ``test_every``-th merge runs the data tests."""
    if not (
        staged_files
        or merge_counts.current_snapshot(spark, table.name) is None
        or merge_log.new_batches(spark, table.name)
    ):
        return None, 0.0
    for line in adopt.adopt_before_merge(spark, table):
        log.info(line)
    test = options.test_every > 0 and (merged + 1) % options.test_every == 0
    also = {table.name: list(untested)}
    results, merge_seconds = runner.run_merge(spark, [table], test=test, also_test=also)
    counts = results[0]
    if test:
        untested.clear()
    else:
        untested.extend(counts.batches)
    return counts, merge_seconds


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
            exports.with_keys(table, current),
            "warm-up",
            "warm-up",
            clock.utc_now(),
        )
        rows.write.format("noop").mode("overwrite").save()
    runner.dbt_invoke(["parse"])
    return time.monotonic() - started


def watch(
    spark: SparkSession,
    table: TableConfig,
    options: WatchOptions,
    report: Callable[[str], Any] = print,
    guard: Callable[[], None] = lambda: None,
) -> list[Tick]:
    """Tick until stopped (a signal, or ``options.ticks``); returns the ticks. ``guard()`` runs
    before every tick and stops the loop by raising (the table's lease was lost)."""
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        report(f"{signal.Signals(signum).name}: stopping after this tick")
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    ticks: list[Tick] = []
    untested: list[str] = []  # batches merged since the last data test
    failures = 0
    number = 0
    report(f"warmed up in {warm_up(spark, table):.1f}s")
    report(
        f"watching {options.stream} for {table.name}: a tick every {options.interval:g}s "
        "(Ctrl-C stops between ticks)"
    )
    try:
        while not stop.is_set() and (options.ticks is None or number < options.ticks):
            guard()
            number += 1
            started = time.monotonic()
            try:
                merged = sum(1 for t in ticks if t.files)
                done = tick(spark, table, options, number, merged, untested)
            except Exception as exc:  # a tick that fails is retried on the next one
                failures += 1
                report(f"tick {number}: FAILED ({failures} in a row): {exc}")
                if failures >= options.max_failures:
                    raise WatchError(
                        f"{failures} ticks in a row failed; last error: {exc}"
                    ) from exc
            else:
                failures = 0
                ticks.append(done)
                report(done.line())
            stop.wait(max(0.0, options.interval - (time.monotonic() - started)))
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    total = sum(t.changes for t in ticks)
    report(f"stopped after {number} ticks: {total} changes merged")
    return ticks


def watch_table(
    table: TableConfig, options: WatchOptions, report: Callable[[str], Any], if_free: bool = False
) -> list[Tick]:
    """``watch`` with the table held by this process (``guard``) for its whole life. With
    ``if_free``, a table another watch holds is said and left (no ticks), not an error: a schedule
    that keeps one watch running then never fails, nor gets retried, for that."""
    try:
        with held_table(table.name, "watch") as (spark, held):
            return watch(spark, table, options, report=report, guard=held.check)
    except table_lock.TableBusy as busy:
        if not if_free:
            raise
        report(f"{table.name}: already watched, nothing to do ({busy})")
        return []
