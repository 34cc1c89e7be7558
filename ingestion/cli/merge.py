"""Commands that build the final tables: ``merge``, ``rebuild`` and ``drift``."""

from __future__ import annotations

import argparse

from ingestion.cli import output
from ingestion.cli.arguments import add_table_selection, selected_tables
from ingestion.config import names, settings
from ingestion.dynamodb.tables import TableConfig, get_table
from ingestion.jobs import lease, table_lock
from ingestion.merge.merge_counts import MergeCounts
from ingestion.merge.runner import run_merge
from ingestion.spark import progress, spark_config
from ingestion.staging import drift
from ingestion.upkeep.rebuild import rebuild_staging


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("merge", help="dbt run + dbt test, with a report of the changes")
    add_table_selection(p)
    p.add_argument(
        "--full-check",
        action="store_true",
        help="test whole final tables against their change logs (default: the keys the merged "
        "batches touched)",
    )
    p.set_defaults(run=run_merge_command)

    p = sub.add_parser(
        "rebuild", help="re-detect types from the staged images, rebuild staging and final table"
    )
    p.add_argument("--table", required=True)
    p.set_defaults(run=run_rebuild)

    p = sub.add_parser("drift", help="values staged that did not fit their column, per attribute")
    p.add_argument("--table", required=True)
    p.set_defaults(run=run_drift)


def merge_tables(tables: list[TableConfig], full_check: bool = False) -> list[MergeCounts]:
    """``dbt run`` + ``dbt test`` for these tables, and the summary table. A table with nothing
    staged yet is skipped and said so: with no staging table its model cannot compile, and
    ``merge`` of all tables failed on the first run of a deploy that had synced one table."""
    spark = spark_config.build_spark("merge")
    staged = [t for t in tables if spark.catalog.tableExists(names.staging_table(t.name))]
    for table in tables:
        if table not in staged:
            print(f"{table.name}: nothing staged yet, skipped")
    if not staged:
        return []
    with progress.progress(spark, "merge " + ", ".join(t.name for t in staged)):
        counts, seconds = run_merge(spark, staged, full_check=full_check)
    output.print_merge(counts, seconds)
    return counts


def run_merge_command(args: argparse.Namespace) -> int:
    merge_tables(selected_tables(args), full_check=args.full_check)
    return 0


def run_rebuild(args: argparse.Namespace) -> int:
    table = get_table(args.table)
    lock = table_lock.hold(settings.lakehouse_home(), table.name, "rebuild")
    spark = spark_config.build_spark(f"rebuild {table.name}")
    held = lease.hold(spark, table.name, "rebuild")
    try:
        rebuilt = rebuild_staging(spark, table)
    finally:
        held.release()
    print(f"staging.{table.name} rebuilt from _image: {rebuilt.rows} rows")
    for batch in rebuilt.restaged:
        print(f"  batch {batch} was committed by another process meanwhile: staged again")
    for change in rebuilt.changed or ["(no column type changed)"]:
        print(f"  {change}")
    counts, seconds = run_merge(spark, [table], full_refresh=True)
    output.print_merge(counts, seconds)
    lock.close()
    return 0


def run_drift(args: argparse.Namespace) -> int:
    table = get_table(args.table)
    found = drift.drift_report(spark_config.build_spark("drift"), table.name)
    if not found:
        print(f"{table.name}: no schema drift: every staged value fits its column")
        return 0
    output.print_drift(found)
    print(f"to adopt the new types: ddb-lakehouse rebuild --table {table.name}")
    return 0
