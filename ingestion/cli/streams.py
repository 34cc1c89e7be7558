"""Stream commands: ``watch``, and the ``--stream`` side of ``ingest`` and ``sync``."""

from __future__ import annotations

import argparse

from pyspark.sql import SparkSession

from ingestion.cli import output
from ingestion.cli.arguments import add_stream_arguments
from ingestion.config import settings
from ingestion.dynamodb.tables import TableConfig, get_table
from ingestion.jobs import lease, table_lock
from ingestion.jobs.watch import WatchOptions, watch
from ingestion.spark import spark_config
from ingestion.staging.drift import Drift
from ingestion.staging.streams import ingest_stream
from ingestion.upkeep.adopt import adopt_drift


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "watch",
        help="every --interval seconds: ingest new stream change files and merge (one Spark session)",
    )
    p.add_argument("--table", required=True)
    add_stream_arguments(p, required=True)
    p.add_argument(
        "--interval", type=float, default=60.0, help="seconds between ticks (default 60)"
    )
    p.add_argument(
        "--ticks", type=int, help="stop after this many ticks (default: run until stopped)"
    )
    p.add_argument(
        "--test-every",
        type=int,
        default=10,
        help="run `dbt test` every N ticks that merged something (default 10; 1 = every tick)",
    )
    p.add_argument(
        "--maintain-every",
        type=int,
        default=60,
        help="compact the final table every N ticks (default 60; 0 = never)",
    )
    p.add_argument(
        "--max-failures",
        type=int,
        default=5,
        help="stop after this many failed ticks in a row (default 5)",
    )
    p.add_argument(
        "--if-free",
        action="store_true",
        help="when another watch holds the table, say so and exit 0 (for a schedule that "
        "keeps one watch running: its runs then never fail, nor get retried, for that)",
    )
    p.set_defaults(run=run_watch)


def report_adoption(spark: SparkSession, table: TableConfig, drift: list[Drift]) -> None:
    """Adopt the drift (the table's ``adopt_drift``, default on) or say how to."""
    adopted = adopt_drift(spark, table, drift)
    for line in adopted:
        print(line)
    if not adopted:
        print(
            f"{sum(d.rows for d in drift)} value(s) did not fit their column: the rows are "
            "staged, those columns are null and the values are whole in _image (adopt_drift is "
            f"off for {table.name}). To adopt the new types: ddb-lakehouse rebuild --table "
            f"{table.name}"
        )


def stage_stream(table: TableConfig, args: argparse.Namespace) -> int:
    """Stage the settled change files under ``--stream`` once, and print what was done."""
    spark = spark_config.build_spark(f"ingest {table.name} stream")
    r = ingest_stream(
        spark, table, args.stream, args.settle, args.max_files, max_rejects=args.max_rejects
    )
    newest = r.newest_change.isoformat() if r.newest_change else "-"
    print(
        f"{r.table}: {r.files} change files staged ({r.changes} changes, newest {newest}) from "
        f"{r.location} in {r.seconds:.1f}s; {r.cleaned} files deleted, {r.pending} left"
        + (f"; {r.rejected} damaged lines in staging.{r.table}_rejects" if r.rejected else "")
    )
    for change in r.schema_changes:
        print(f"{r.table}: {change}")
    if r.drift:
        output.print_drift(list(r.drift))
        report_adoption(spark, table, list(r.drift))
    return 0


def run_watch(args: argparse.Namespace) -> int:
    table = get_table(args.table)
    lock = None
    try:
        lock = table_lock.hold(settings.lakehouse_home(), table.name, "watch")  # whole life
        spark = spark_config.build_spark(f"watch {table.name}")
        held = lease.hold(spark, table.name, "watch")  # across machines: one watch per table
    except table_lock.TableBusy as busy:
        if lock is not None:
            lock.close()
        if not args.if_free:
            raise
        print(f"{table.name}: already watched, nothing to do ({busy})")
        return 0
    options = WatchOptions(
        stream=args.stream,
        interval=args.interval,
        ticks=args.ticks,
        settle=args.settle,
        max_files=args.max_files,
        max_rejects=args.max_rejects,
        test_every=args.test_every,
        maintain_every=args.maintain_every,
        max_failures=args.max_failures,
    )
    try:
        watch(spark, table, options, report=lambda line: print(line, flush=True), guard=held.check)
    finally:
        held.release()
        lock.close()
    return 0
