"""``ddb-lakehouse watch``: keep final tables fresh from their stream change files.

One process, one SparkSession for its whole life, for one table or several (each held by its
own lock and lease): every tick ingests each table's settled change files (one staging commit
each, then their cleanup), runs one dbt merge of every table that has something new in this
same process and session (dbt's programmatic runner: no JVM start per tick), and prints one
line per table (``ticks``). ``dbt test`` runs every ``test_every`` ticks that merged something,
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
from typing import Any

from pyspark.sql import SparkSession

from ingestion.config import clock
from ingestion.config.errors import LakehouseError
from ingestion.dynamodb import decode
from ingestion.dynamodb.tables import TableConfig
from ingestion.jobs import table_lock
from ingestion.jobs.guard import held_table
from ingestion.jobs.ticks import Progress, Tick, WatchOptions, tick
from ingestion.merge import runner
from ingestion.staging import append, exports, table_types

log = logging.getLogger(__name__)
__all__ = ["Tick", "WatchError", "WatchOptions", "watch", "watch_tables"]


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
