"""Ingest DynamoDB exports into a table's staging change log (the `ingest` command's library),
with the types ``catalog.schema_choice`` chooses and evolves."""

from __future__ import annotations

import logging
import os
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from ingestion.catalog import ledger, schema_choice
from ingestion.dynamodb.tables import TableConfig
from ingestion.schema import detect, types
from ingestion.sources import manifest
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


def table_schema(
    spark: SparkSession, table: TableConfig, export: manifest.Export
) -> tuple[types.Schema, list[str]]:
    """The schema to stage ``export`` with; detected when the table has none yet. Returns it
    and what changed, for the run summary."""
    return schema_choice.schema_for(
        spark,
        table,
        export.export_id,
        lambda: detect.export_images(spark, export),
        export.export_arn,
    )


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
                f"{data_file.item_count} for it: the export is incomplete or altered; nothing "
                f"staged"
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
    batch, added = schema_choice.stage_with_evolution(
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
    detected = schema_choice.types_of_every_item(
        table, lambda: detect.export_images(spark, export), export.export_arn
    )
    return schema_choice.with_keys(table, detected) if table.entities else detected


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
