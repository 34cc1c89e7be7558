"""The final tables built from the change logs: ``merge`` (new batches, with their tests) and
``rebuild`` (types detected again from the staged images, then a full refresh)."""

from __future__ import annotations

import functools

from ingestion.config import names
from ingestion.dynamodb.tables import TableConfig
from ingestion.jobs.guard import held_table
from ingestion.jobs.reporter import Reporter
from ingestion.light import catalog as light_catalog
from ingestion.merge import merge_log
from ingestion.merge.merge_counts import MergeCounts
from ingestion.merge.runner import dbt_log_file, on_screen, run_merge
from ingestion.spark import progress, spark_config
from ingestion.staging import table_types
from ingestion.upkeep.adopt import adopt_before_merge
from ingestion.upkeep.rebuild import rebuild_staging


def merge_tables(
    tables: list[TableConfig], reporter: Reporter, full_check: bool = False
) -> list[MergeCounts]:
    """``dbt run`` + ``dbt test`` for these tables. A table with nothing staged yet is skipped
    and said so: with no staging table its model cannot compile, and ``merge`` of all tables
    failed on the first run of a deploy that had synced one table."""
    if not full_check and nothing_to_merge(tables, reporter):
        return []
    spark = spark_config.build_spark("merge")
    staged = [t for t in tables if spark.catalog.tableExists(names.staging_table(t.name))]
    for table in tables:
        if table not in staged:
            reporter.line(f"{table.name}: nothing staged yet, skipped")
    if not staged:
        return []
    for table in staged:
        # A changed entity rule stops here, naming the reset (ingestion.staging.entity_types).
        table_types.stored_schema(spark, table)
        guard = functools.partial(held_table, table.name, "adopt")
        for line in adopt_before_merge(spark, table, guard):
            reporter.line(line)
    with progress.progress(spark, "merge " + ", ".join(t.name for t in staged)):
        counts, seconds = run_merge(spark, staged, full_check=full_check)
    reporter.merged(counts, seconds)
    if not on_screen():
        reporter.line(f"dbt's log: {dbt_log_file()}")
    return counts


def nothing_to_merge(tables: list[TableConfig], reporter: Reporter) -> bool:
    """True (and said) when no table has anything to merge, found without a JVM (``light``):
    every staged table has its final table, no batch the merge log lacks, and the same column
    types as its staging table (no drift adopted since its last build). False when any of that
    does not hold, or the light path does not serve this target: the merge then starts Spark."""
    if not light_catalog.available():
        return False
    lines = []
    for table in tables:
        staging = light_catalog.read_metadata(names.STAGING, table.name)
        if staging is None:
            lines.append(f"{table.name}: nothing staged yet, skipped")
            continue
        if table.entities is not None:
            return False  # a single-table design: its entity tables' types are its structs'
        final = light_catalog.read_metadata(names.FINAL, table.name)
        if final is None or merge_log.light_new_batches(table.name):
            return False
        staged = staging.columns
        if any(staged.get(c, kind) != kind for c, kind in final.columns.items()):
            return False
        lines.append(f"{table.name}: nothing new to merge (the merge log holds every batch)")
    for line in lines:
        reporter.line(line)
    return True


def rebuild_table(table: TableConfig, reporter: Reporter) -> list[MergeCounts]:
    """Staging rebuilt from ``_image`` with types detected again, then the final table rebuilt
    from it (a full refresh), the table held by this process throughout (``guard``: the lock
    and the lease, the full refresh included, so that no ``watch`` starts between the two)."""
    with held_table(table.name, "rebuild") as (spark, _lease):
        rebuilt = rebuild_staging(spark, table)
        assert rebuilt is not None  # only_if_changed not asked
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
