"""The final tables built from the change logs: ``merge`` (new batches, with their tests) and
``rebuild`` (types detected again from the staged images, then a full refresh)."""

from __future__ import annotations

import functools
import json
from collections.abc import Collection, Mapping
from typing import Any

from ingestion.config import names
from ingestion.dynamodb.entities import final_tables, staged_under
from ingestion.dynamodb.tables import TableConfig
from ingestion.jobs.guard import held_table
from ingestion.jobs.reporter import Reporter
from ingestion.maintenance.adopt import adopt_before_merge
from ingestion.maintenance.rebuild import rebuild_staging
from ingestion.merge import merge_log
from ingestion.merge.merge_counts import MergeCounts
from ingestion.merge.runner import dbt_log_file, load_dbt_meanwhile, on_screen, run_merge
from ingestion.spark import progress, spark_config
from ingestion.spark.table_metadata import Metadata
from ingestion.staging import table_types
from ingestion.staging.staging_table import ENTITIES_MOVED, ENTITY_VALUES, WHOLE_KEY
from ingestion.without_spark import iceberg_metadata


def merge_tables(
    tables: list[TableConfig],
    reporter: Reporter,
    full_check: bool = False,
    known_clean: Mapping[str, Collection[str]] | None = None,
) -> list[MergeCounts]:
    """``dbt run`` + ``dbt test`` for these tables. A table with nothing staged yet is skipped
    and said so: with no staging table its model cannot compile, and ``merge`` of all tables
    failed on the first run of a deploy that had synced one table. ``known_clean``: per table,
    batches this process staged and saw no drift in (``adopt_before_merge``)."""
    if not full_check and nothing_to_merge(tables, reporter):
        return []
    load_dbt_meanwhile()  # while Spark starts
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
        clean = (known_clean or {}).get(table.name, ())
        for line in adopt_before_merge(spark, table, guard, known_clean=clean):
            reporter.line(line)
    with progress.progress(spark, "merge " + ", ".join(t.name for t in staged)):
        counts, seconds = run_merge(spark, staged, full_check=full_check)
    reporter.merged(counts, seconds)
    if not on_screen():
        reporter.line(f"dbt's log: {dbt_log_file()}")
    return counts


def nothing_to_merge(tables: list[TableConfig], reporter: Reporter) -> bool:
    """True (and said) when no table has anything to merge, found without a JVM (``without_spark``):
    every staged table has its final table, no batch the merge log lacks, and the same column
    types as its staging table (no drift adopted since its last build). False when any of that
    does not hold, or the path without Spark does not serve this target: the merge then starts Spark."""
    if not iceberg_metadata.available():
        return False
    lines = []
    for table in tables:
        staging = iceberg_metadata.read_metadata(names.STAGING, table.name)
        if staging is None:
            lines.append(f"{table.name}: nothing staged yet, skipped")
            continue
        if not _merged_whole(table, staging):
            return False
        lines.append(f"{table.name}: nothing new to merge (the merge log holds every batch)")
    for line in lines:
        reporter.line(line)
    return True


def _merged_whole(table: TableConfig, staging: Metadata) -> bool:
    """Every final table the change log feeds (a single-table design's: each entity's) exists,
    holds every batch, and has its staged column types (an entity's: its struct's fields); for
    a single-table design also: staged under its configured rule, with no row waiting to move
    entity (``maintenance.entity_moves``)."""
    if table.entities is not None:
        properties = staging.properties
        rule_kept = staged_under(table.entities, properties)
        if not rule_kept or properties.get(ENTITIES_MOVED) == "true":
            return False
        if table.entities.by == "key" and properties.get(ENTITY_VALUES) != WHOLE_KEY:
            return False
    for final_table in final_tables(table):
        final = iceberg_metadata.read_metadata(names.FINAL, final_table.name)
        if final is None or merge_log.new_batches_without_spark(
            final_table.name, final_table.history
        ):
            return False
        staged = {c: _plain(kind) for c, kind in staging.columns.items()}
        entity = staging.columns.get(final_table.name) if final_table.staging else None
        for field in json.loads(entity).get("fields", []) if entity else []:
            staged[field["name"]] = _plain(field["type"])
        if any(staged.get(c, _plain(kind)) != _plain(kind) for c, kind in final.columns.items()):
            return False
    return True


def _plain(kind: Any) -> str:
    """An Iceberg type without its field ids (which differ from table to table), as text."""
    if isinstance(kind, str) and kind.startswith("{"):
        kind = json.loads(kind)
    if isinstance(kind, dict):
        ids = ("id", "element-id", "key-id", "value-id", "doc")
        return json.dumps({k: _plain(v) for k, v in sorted(kind.items()) if k not in ids})
    if isinstance(kind, list):
        return json.dumps([_plain(v) for v in kind])
    return str(kind)


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
