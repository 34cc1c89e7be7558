"""The final tables built from the change logs: ``merge`` (new batches, with their tests) and
``rebuild`` (types detected again from the staged images, then a full refresh)."""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping

from ingestion.catalog import table as catalog_table
from ingestion.catalog import table_metadata
from ingestion.catalog.table import Table
from ingestion.dynamodb.entities import staged_under
from ingestion.dynamodb.tables import TableConfig
from ingestion.jobs.guard import held_table
from ingestion.jobs.reporter import Reporter
from ingestion.maintenance.adopt import adopt_before_merge
from ingestion.maintenance.rebuild import rebuild_staging
from ingestion.merge.dbt_process import dbt_log_file, load_dbt_meanwhile, on_screen
from ingestion.merge.full_refresh import needs_full_refresh
from ingestion.merge.merge_counts import MergeCounts
from ingestion.merge.runner import run_merge
from ingestion.spark import progress, spark_config
from ingestion.staging.staging_table import ENTITIES_MOVED, ENTITY_VALUES, WHOLE_KEY


def merge_tables(
    tables: list[TableConfig],
    reporter: Reporter,
    full_check: bool = False,
    known_clean: Mapping[str, Collection[str]] | None = None,
) -> list[MergeCounts]:
    """``dbt run`` + ``dbt test`` for these tables. A table with nothing staged yet is skipped
    and said so: with no staging table its model cannot compile, and ``merge`` of all tables
    failed on the first run of a deploy that had synced one table. ``known_clean``: per table,
    batches this process staged and saw no drift in (``adopt_before_merge``).

    Each table's handle (``catalog.table``) is loaded once: read from the metadata files while
    no JVM runs (``table_metadata.files``), then through Spark, where only the change log is
    read again (``Table.use``)."""
    handles = catalog_table.load(tables) if table_metadata.files() is not None else None
    if not full_check and handles is not None and nothing_to_merge(handles, reporter):
        return []
    load_dbt_meanwhile()  # while Spark starts
    spark = spark_config.build_spark("merge")
    if handles is None:
        handles = catalog_table.load(tables, spark)
    else:  # the change log read again, through Spark (``Table.use``)
        for handle in handles:
            handle.use(spark)
    staged = [h for h in handles if h.change_log is not None]
    for handle in handles:
        if handle.change_log is None:
            reporter.line(f"{handle.name}: nothing staged yet, skipped")
    if not staged:
        return []
    for handle in staged:
        # The kept types parsed: a changed entity rule stops here, naming the reset
        # (ingestion.catalog.entity_types).
        _ = handle.kept_types
        guard = functools.partial(held_table, handle.name, "adopt")
        clean = (known_clean or {}).get(handle.name, ())
        for line in adopt_before_merge(handle, guard, known_clean=clean):
            reporter.line(line)
    with progress.progress(spark, "merge " + ", ".join(h.name for h in staged)):
        counts, seconds = run_merge(spark, staged, whole_tables=full_check)
    reporter.merged(counts, seconds)
    if not on_screen():
        reporter.line(f"dbt's log: {dbt_log_file()}")
    return counts


def nothing_to_merge(handles: list[Table], reporter: Reporter) -> bool:
    """True (and said) when no table has anything to merge, from the handles' reads without a
    JVM: every final table a staged change log feeds (a single-table design's: each entity's)
    exists, holds every batch, and has its staged column types (no drift adopted since its last
    build: ``full_refresh.needs_full_refresh``); a single-table design's change log is also
    staged under its configured rule, with no row waiting to move entity
    (``maintenance.entity_moves``). False when any of that does not hold: the merge then starts
    Spark."""
    lines = []
    for handle in handles:
        if handle.change_log is None:
            lines.append(f"{handle.name}: nothing staged yet, skipped")
            continue
        rule, properties = handle.config.entities, handle.change_log.properties
        if rule is not None and (
            not staged_under(rule, properties)
            or properties.get(ENTITIES_MOVED) == "true"
            or (rule.by == "key" and properties.get(ENTITY_VALUES) != WHOLE_KEY)
        ):
            return False
        for final in handle.finals:
            if final.final is None or final.new_batches or needs_full_refresh(final):
                return False
        lines.append(f"{handle.name}: nothing new to merge (the merge log holds every batch)")
    for line in lines:
        reporter.line(line)
    return True


def rebuild_table(table: TableConfig, reporter: Reporter) -> list[MergeCounts]:
    """Staging rebuilt from its items with types detected again, then the final table rebuilt
    from it (a full refresh), the table held by this process throughout (``guard``: the lock
    and the lease, the full refresh included, so that no ``watch`` starts between the two)."""
    with held_table(table.name, "rebuild") as (spark, _lease):
        rebuilt = rebuild_staging(spark, table)
        assert rebuilt is not None  # only_if_changed not asked
        reporter.line(f"staging.{table.name} rebuilt from its items: {rebuilt.rows} rows")
        for batch in rebuilt.restaged:
            reporter.line(
                f"  batch {batch} was committed by another process meanwhile: staged again"
            )
        for change in rebuilt.changed or ["(no column type changed)"]:
            reporter.line(f"  {change}")
        counts, seconds = run_merge(spark, [table], full_refresh=True)
    reporter.merged(counts, seconds)
    return counts
