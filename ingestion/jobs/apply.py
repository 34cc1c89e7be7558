"""The final tables built from the change logs: ``merge`` (new batches, with their tests) and
``rebuild`` (types detected again from the staged images, then a full refresh)."""

from __future__ import annotations

import functools

from ingestion.config import names
from ingestion.dynamodb.tables import TableConfig
from ingestion.jobs.guard import held_table
from ingestion.jobs.reporter import Reporter
from ingestion.merge.merge_counts import MergeCounts
from ingestion.merge.runner import run_merge
from ingestion.spark import progress, spark_config
from ingestion.upkeep.adopt import adopt_before_merge
from ingestion.upkeep.rebuild import rebuild_staging


def merge_tables(
    tables: list[TableConfig], reporter: Reporter, full_check: bool = False
) -> list[MergeCounts]:
    """``dbt run`` + ``dbt test`` for these tables. A table with nothing staged yet is skipped
    and said so: with no staging table its model cannot compile, and ``merge`` of all tables
    failed on the first run of a deploy that had synced one table."""
    spark = spark_config.build_spark("merge")
    staged = [t for t in tables if spark.catalog.tableExists(names.staging_table(t.name))]
    for table in tables:
        if table not in staged:
            reporter.line(f"{table.name}: nothing staged yet, skipped")
    if not staged:
        return []
    for table in staged:
        guard = functools.partial(held_table, table.name, "adopt")
        for line in adopt_before_merge(spark, table, guard):
            reporter.line(line)
    with progress.progress(spark, "merge " + ", ".join(t.name for t in staged)):
        counts, seconds = run_merge(spark, staged, full_check=full_check)
    reporter.merged(counts, seconds)
    return counts


def rebuild_table(table: TableConfig, reporter: Reporter) -> list[MergeCounts]:
    """Staging rebuilt from ``_image`` with types detected again, then the final table rebuilt
    from it (a full refresh), the table held by this process throughout (``guard``: the lock
    and the lease, the full refresh included, so that no ``watch`` starts between the two)."""
    with held_table(table.name, "rebuild") as (spark, _lease):
        rebuilt = rebuild_staging(spark, table)
        reporter.line(f"staging.{table.name} rebuilt from _image: {rebuilt.rows} rows")
        for batch in rebuilt.restaged:
            reporter.line(
                f"  batch {batch} was committed by another process meanwhile: staged again"
            )
        for change in rebuilt.changed or ["(no column type changed)"]:
            reporter.line(f"  {change}")
        counts, seconds = run_merge(spark, [table], full_refresh=True)
    reporter.merged(counts, seconds)
    return counts
