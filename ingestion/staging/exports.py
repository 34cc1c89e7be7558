"""Ingest DynamoDB exports into a table's staging change log (the `ingest` command's library).

The table's types decide the columns: those kept with its staging table (``table_types``), or
before its first commit a complete schema file; with neither, the types of the first export's
first items, proven on every item by the pass that stages it, or else detected from every item
(``schema_for``; a person's declared entries kept). When a later export holds attributes the
schema does not know, the write stops before its commit; the new attributes are detected from
that export, added to the types, and the export is staged again: they become new columns.
"""

from __future__ import annotations

import logging
import os
import time
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ingestion.catalog import entity_types, ledger, table_types
from ingestion.config import names
from ingestion.dynamodb.tables import TableConfig
from ingestion.schema import detect, schema_file, typed_columns, types
from ingestion.sources import manifest
from ingestion.spark import spark_config
from ingestion.staging import append, chain
from ingestion.staging.drift import Drift

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class IngestResult:
    table: str
    source: str
    rows: int
    expected: int
    skipped: bool
    seconds: float
    drift: tuple[Drift, ...] = ()
    schema_changes: tuple[str, ...] = field(default=())
    chain_note: str | None = None  # an overlap with the full export, a gap left or filled
    unmatched: int = 0  # a single-table design's items of no listed entity value
    batch_id: str = ""  # the batch staged ("" when skipped)


def with_keys(table: TableConfig, current: types.Schema) -> types.Schema:
    """The schema with every key of the table first (a schema file may leave keys out)."""
    declared = schema_file.declared_keys(table)
    keys = [
        current.get(k.name) or types.Attribute(k.name, k.column, declared[k.name], key=True)
        for k in table.keys
    ]
    rest = [a for a in current.attributes if a.name not in declared]
    rule = None if table.staging else table.entities  # an entity's section holds no rule
    return replace(current, attributes=tuple(keys + rest), rule=rule)


def _declared(table: TableConfig) -> dict | None:
    return schema_file.declared_entries(schema_file.table_schema_file(table)) or None


Images = Callable[[], DataFrame]


def table_schema(
    spark: SparkSession, table: TableConfig, export: manifest.Export
) -> tuple[types.Schema, list[str]]:
    """The schema to stage ``export`` with; detected when the table has none yet. Returns it
    and what changed, for the run summary."""
    return schema_for(
        spark,
        table,
        export.export_id,
        lambda: detect.export_images(spark, export),
        export.export_arn,
    )


def schema_for(
    spark: SparkSession, table: TableConfig, label: str, images: Images, source: str
) -> tuple[types.Schema, list[str]]:
    """The table's types (``table_types.current_schema``: kept with its staging table, or a
    complete schema file before the first commit); detected from ``images`` when there are none
    yet, a person's declared entries kept. They are kept with the staging table by the commit
    that stages the batch. Returns the schema and what changed, for the run summary.

    Decision: a first batch's types come from its first items (``detect.first_items_schema``),
    and the pass that stages the batch proves them on every item, failing before its commit on
    any value they would not describe exactly (``stage_with_evolution`` then detects the types
    from every item and stages again). A separate detection pass read the whole source before
    staging read it again: it cost more than the typed read of the export itself
    (docs/performance.md). The types are the same either way; the counts kept with them are
    then those of the first items (``sampled`` in the kept document). Only for a first load: the
    staging table is then created by the commit that proves them (``staging_table``)."""
    current = table_types.current_schema(spark, table)
    if current is not None:
        return with_keys(table, current), []
    if spark.catalog.tableExists(names.staging_table(table.name)):
        # Staged by an earlier version, which kept its types only in a schema file: its
        # columns exist already, so its types come from every item, as they did then.
        return _detected_whole(table, label, images, source)
    sampled: types.Schema | None
    if table.entities is not None:  # each entity's first items, else that entity whole
        split = entity_types.per_entity(table, images, lambda t, lines: detect.first_items_schema(lines(), t, _declared(t), source) or detect.detect_images(lines(), t, _declared(t), source))  # fmt: skip
        if split.sampled is None:
            return with_keys(table, split), [f"schema detected from {label} ({split.items} items)"]  # fmt: skip
        sampled = split
    else:
        sampled = detect.first_items_schema(images(), table, _declared(table), source)
    if sampled is not None:
        changes = [f"schema detected from the first {sampled.items} items of {label}, checked on every item as it was staged"]  # fmt: skip
        return with_keys(table, sampled), changes + [f"conflict: {c}" for c in sampled.conflicts]
    return _detected_whole(table, label, images, source)


def _detected_whole(
    table: TableConfig, label: str, images: Images, source: str
) -> tuple[types.Schema, list[str]]:
    """The types detected from every item of ``images`` (a person's declared entries kept)."""
    detected = _whole(table, images, source)
    changes = [f"schema detected from {label} ({detected.items} items)"]
    changes += [f"conflict: {c}" for c in detected.conflicts]
    return with_keys(table, detected), changes


def _whole(table: TableConfig, images: Images, source: str) -> types.Schema:
    """Every item's types (per entity, for a single-table design)."""
    if table.entities is None:
        return detect.detect_images(images(), table, _declared(table), source)
    whole = lambda t, lines: detect.detect_images(lines(), t, _declared(t), source)  # noqa: E731
    return entity_types.per_entity(table, images, whole)


def add_new_attributes(
    table: TableConfig, label: str, images: Images, source: str, current: types.Schema
) -> tuple[types.Schema, list[str]]:
    """Detect the attributes of ``images`` the schema lacks and add them to it (kept with the
    staging table by the append that stages them)."""
    detected = _whole(table, images, source)
    updated = entity_types.union(current, detected) or current
    added = entity_types.added(current, updated)
    for section in (updated, *updated.entities):
        types.check_columns(section)
    names = ", ".join(f"{a.name!r} ({a.column} {a.type.sql()})" for a in added)
    log.info("%s: new attributes in %s: %s", table.name, label, names)
    conflicts = [c for c in detected.conflicts if any(f"attribute {a.name!r}" in c for a in added)]
    return updated, [f"new columns: {names}"] + [f"conflict: {c}" for c in conflicts]


def stage_with_evolution(
    spark: SparkSession,
    stage: Callable[[types.Schema], append.StagedBatch],
    table: TableConfig,
    label: str,
    images: Images,
    source: str,
    current: types.Schema,
) -> tuple[append.StagedBatch, list[str]]:
    """``stage(current)``; when the batch holds attributes the schema lacks, add them to the
    schema file and stage again (the first attempt committed nothing). Types of the first items
    (``current.sampled``) that some value does not fit: the types detected from every item, and
    the batch staged again with them; the changes then say so after those of ``schema_for``
    (conflicts it reported already left out)."""
    try:
        with spark_config.quiet_task_failures(spark):
            return stage(current), []
    except append.StagingError as exc:
        text = str(exc)
        misfit = typed_columns.SAMPLE_MISFIT in text or typed_columns.NEW_ATTRIBUTES in text
        if current.sampled is not None and misfit:
            detected, changes = _detected_whole(table, label, images, source)
            log.info("%s: the first %d items' types did not hold: %s", table.name, current.sampled, append.spark_reason(exc))  # fmt: skip
            note = f"the first {current.sampled} items' types did not hold for every item of {label}"  # fmt: skip
            told = {f"conflict: {c}" for c in current.conflicts}
            return stage(detected), [note, *(c for c in changes if c not in told)]
        if typed_columns.NEW_ATTRIBUTES not in text:
            raise
    updated, added = add_new_attributes(table, label, images, source, current)
    return stage(updated), added


def check_line_counts(spark: SparkSession, export: manifest.Export) -> None:
    """Every data file holds as many lines as its manifest entry's ``itemCount``, before anything
    is staged. Files on local disk are counted by the driver, a thread per core
    (``manifest.line_count``): the driver has just read each of them for its MD5, and counting
    costs it a third of the Spark pass it replaces (1M items: 0.7 s on one thread against 1.8 s,
    docs/performance.md). Files on S3 are counted by one Spark pass that reads lines without
    parsing them, on the executors: the driver would otherwise inflate a large export alone."""
    if all(isinstance(f.path, Path) for f in export.files):
        counted = _counted_by_driver(export)
    else:
        counted = _counted_by_spark(spark, export)
    for data_file in export.files:
        found = counted.get(data_file.path.name, 0)
        if found != data_file.item_count:
            raise manifest.ExportError(
                f"{data_file.path}: {found} lines, but manifest-files.json lists itemCount "
                f"{data_file.item_count} for it: the export is incomplete or altered; nothing staged"
            )


def _counted_by_driver(export: manifest.Export) -> dict[str, int]:
    def counted(data_file: manifest.DataFile) -> tuple[str, int]:
        path = data_file.path
        assert isinstance(path, Path)
        try:
            return path.name, manifest.line_count(path)
        except (OSError, EOFError, zlib.error) as exc:  # a damaged gzip whose MD5 agrees
            raise manifest.ExportError(
                f"{path}: the data file cannot be read ({exc}); nothing staged"
            ) from exc

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:  # zlib frees the GIL
        return dict(pool.map(counted, export.files))


def _counted_by_spark(spark: SparkSession, export: manifest.Export) -> dict[str, int]:
    lines = spark.read.text([str(f.path) for f in export.files])
    try:
        return {
            str(row["file"]).rsplit("/", 1)[-1]: int(row["count"])
            for row in lines.groupBy(F.input_file_name().alias("file")).count().collect()
        }  # one row per data file
    except Exception as exc:  # an unreadable file (a damaged gzip whose MD5 agrees)
        raise manifest.ExportError(
            f"{export.folder}: a data file cannot be read: {append.spark_reason(exc)}; "
            "nothing staged"
        ) from exc


def ingest_export(
    spark: SparkSession,
    table: TableConfig,
    folder: str,
    allow_gap: bool = False,
    rebaseline: bool = False,
) -> IngestResult:
    """Verify an export against its manifests and the table's chain of exports, then stage it
    in one commit (or skip it when the ledger has it). ``rebaseline``: a full export staged to
    repair the table (``chain.check_rebaseline``), the only way a verify export is staged."""
    started = time.monotonic()
    export = manifest.read_export(folder)
    log.info(
        "%s: export %s (%s, %d items in %d files) verified against its manifest",
        table.name,
        export.export_id,
        export.export_type,
        export.item_count,
        len(export.files),
    )
    chain.check_stageable(table, export, rebaseline)
    applied = ledger.entries(spark, table.name)
    if rebaseline:  # an export already staged is refused, not skipped
        chain_note = chain.check_rebaseline(applied, export, table.name)
    if export.export_arn in {e.source for e in applied}:
        log.info("%s: %s is already in the ledger: nothing to do", table.name, export.export_arn)
        return IngestResult(
            table.name, export.export_arn, 0, export.item_count, True, time.monotonic() - started
        )
    if not rebaseline:
        chain_note = chain.check_chain(applied, export, allow_gap)
    check_line_counts(spark, export)
    current, changes = table_schema(spark, table, export)
    batch, added = stage_with_evolution(
        spark,
        lambda columns: append.stage_export(spark, export, table, columns),
        table,
        export.export_id,
        lambda: detect.export_images(spark, export),
        export.export_arn,
        current,
    )
    changes += added
    result = IngestResult(
        table=table.name,
        source=export.export_arn,
        rows=batch.rows,
        expected=export.item_count,
        skipped=batch.skipped,
        seconds=time.monotonic() - started,
        drift=batch.drift,
        schema_changes=tuple(changes),
        chain_note=chain_note,
        unmatched=batch.unmatched,
        batch_id=batch.batch_id,
    )
    if batch.rows != export.item_count:
        # Reached only if the data files hold other lines than the manifest counts.
        log.error(
            "%s: staged %d rows but the manifest lists %d items (batch %s)",
            table.name,
            batch.rows,
            export.item_count,
            batch.batch_id,
        )
    return result


def detect_table_schema(
    spark: SparkSession, export: manifest.Export, table: TableConfig
) -> types.Schema:
    """A configured table's schema from every item of a full export, keeping what its schema
    file already says (names, types a person chose); per entity for a single-table design."""
    detected = _whole(table, lambda: detect.export_images(spark, export), export.export_arn)
    return with_keys(table, detected) if table.entities else detected


def in_time_order(sources: list[str]) -> list[str]:
    """Export folders in the order of the time their data reaches: the export time (a full
    export) or the window's end (an incremental one), a full export first at equal times. The
    end, not the start: the first window may start just before the full export it follows
    (``staging.chain``). Read from the manifests only (small), before any check of the chain:
    exports given out of order would otherwise be refused as gaps or overlaps, or applied in the
    wrong order."""

    def when(source: str) -> tuple[datetime, int]:
        export = manifest.read_export(source, verify=False)
        moment = export.export_time or export.export_to_time
        assert moment is not None  # read_export refuses an export without either
        return moment, 0 if export.export_type == manifest.FULL else 1

    return sorted(sources, key=when)
