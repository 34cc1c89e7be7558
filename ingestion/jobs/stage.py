"""Staging as a command runs it: export folders in time order, or a stream's settled change
files, each staged in one commit with its ledger entry; drift adopted (or how to, said); the
schema of a full export detected on its own (``detect-schema``)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession

from ingestion.catalog import entity_types, ledger, table_metadata
from ingestion.config import names
from ingestion.dynamodb.tables import TableConfig
from ingestion.jobs.guard import held_table
from ingestion.jobs.reporter import Reporter
from ingestion.maintenance.adopt import adopt_drift
from ingestion.schema import detect, schema_file, types
from ingestion.sources import manifest
from ingestion.sources.stream_files import store_for
from ingestion.spark import progress, spark_config
from ingestion.staging.chain import check_stageable
from ingestion.staging.drift import Drift
from ingestion.staging.exports import (
    IngestResult,
    detect_table_schema,
    in_time_order,
    ingest_export,
)
from ingestion.staging.streams import ingest_stream


@dataclass(frozen=True)
class StreamSource:
    """Where a table's stream change files are, and how many of them one commit takes."""

    location: str
    settle: float
    max_files: int
    max_rejects: int


@dataclass(frozen=True)
class StagedExports:
    """What ``stage_exports`` staged: ``complete`` is False when a staged count differs from its
    manifest's (nothing may be merged then); ``clean``: the batches staged with no drift, which
    the merge that follows in the same process need not read again for it (``merge_tables``)."""

    complete: bool
    clean: frozenset[str] = frozenset()


def short_source(source: str) -> str:
    """The last part of a source's location: an export id, a stream batch."""
    return source.rsplit("/", 1)[-1]


def adopt_or_explain(
    spark: SparkSession, table: TableConfig, drift: Sequence[Drift], reporter: Reporter
) -> None:
    """Report the drift, then adopt it (the table's ``adopt_drift``, default on) or say how to."""
    if not drift:
        return
    reporter.drift(drift)
    adopted = adopt_drift(spark, table, list(drift), guard=lambda: held_table(table.name, "adopt"))
    for line in adopted:
        reporter.line(line)
    if not adopted:
        reporter.line(
            f"{sum(d.rows for d in drift)} value(s) did not fit their column: the rows are "
            "staged, those columns are null and the values are whole in _rest (adopt_drift is "
            f"off for {table.name}). To adopt the new types: ddb-lakehouse rebuild --table "
            f"{table.name}"
        )


def stage_exports(
    table: TableConfig,
    sources: list[str],
    reporter: Reporter,
    allow_gap: bool = False,
    rebaseline: bool = False,
) -> StagedExports:
    """Stage export folders in time order (whatever order they were given in). ``rebaseline``: one
    full export staged to repair the table (``staging.chain.check_rebaseline``)."""
    ordered = in_time_order(sources)
    if ordered != sources:
        shown = ", ".join(short_source(s) for s in ordered)
        reporter.line(f"exports given out of order: staged in time order: {shown}")
    for folder in ordered:  # every export is the table's own, before any is staged
        check_stageable(table, manifest.read_export(folder, verify=False), rebaseline)
    applied = None if rebaseline else already_applied(table, ordered)
    if applied is not None:
        reporter.ingested(applied)
        return StagedExports(complete=True)
    spark = spark_config.build_spark(f"ingest {table.name}")
    results = []
    for number, source in enumerate(ordered, 1):
        if len(ordered) > 1:
            reporter.line(f"[{number}/{len(ordered)}] {source}")
        with progress.progress(spark, f"ingest {table.name} {short_source(source)}"):
            results.append(ingest_export(spark, table, source, allow_gap, rebaseline))
    reporter.ingested(results)
    for r in results:
        if r.chain_note:
            reporter.line(r.chain_note)
        for change in r.schema_changes:
            reporter.line(f"{r.table}: {change}")
        report_unmatched(reporter, table, r.unmatched)
    adopt_or_explain(spark, table, [d for r in results for d in r.drift], reporter)
    return StagedExports(
        complete=all(r.skipped or r.rows == r.expected for r in results),
        clean=frozenset(r.batch_id for r in results if r.batch_id and not r.drift),
    )


def already_applied(table: TableConfig, folders: list[str]) -> list[IngestResult] | None:
    """When the ledger holds every export given, their (skipped) results, found without a JVM
    (``catalog.table_metadata.files``: manifests and the staging table's metadata); else None
    (staging starts Spark)."""
    files = table_metadata.files()
    if files is None:
        return None
    exports = [manifest.read_export(f, verify=False) for f in folders]
    applied = {e.source for e in ledger.entries(files, table.name)}
    if not all(e.export_arn in applied for e in exports):
        return None
    return [IngestResult(table.name, e.export_arn, 0, e.item_count, True, 0.0) for e in exports]


def nothing_to_stage(table: TableConfig, stream: StreamSource) -> int | None:
    """When the stream folder holds no settled change file the ledger lacks, and none the
    ledger holds (a cleanup left after a crash), how many files wait to settle, found without a
    JVM (``catalog.table_metadata.files``); else None (staging starts Spark)."""
    if table_metadata.files() is None:
        return None
    store = store_for(stream.location, table.dynamodb_name)
    listed = store.listing()
    cutoff = time.time() - stream.settle
    if any(f.modified <= cutoff for f in listed):
        return None  # settled files: new, or left by a crash after their commit
    return len(listed)


def stage_stream(table: TableConfig, stream: StreamSource, reporter: Reporter) -> None:
    """Stage the settled change files under ``stream.location`` once."""
    waiting = nothing_to_stage(table, stream)
    if waiting is not None:
        reporter.line(
            f"{table.name}: 0 change files staged from {stream.location}: nothing settled; "
            f"{waiting} left"
        )
        return
    spark = spark_config.build_spark(f"ingest {table.name} stream")
    r = ingest_stream(
        spark,
        table,
        stream.location,
        stream.settle,
        stream.max_files,
        max_rejects=stream.max_rejects,
    )
    newest = r.newest_change.isoformat() if r.newest_change else "-"
    reporter.line(
        f"{r.table}: {r.files} change files staged ({r.changes} changes, newest {newest}) from "
        f"{r.location} in {r.seconds:.1f}s; {r.cleaned} files deleted, {r.pending} left"
        + (f"; {r.rejected} damaged lines in staging.{r.table}_rejects" if r.rejected else "")
    )
    for change in r.schema_changes:
        reporter.line(f"{r.table}: {change}")
    report_unmatched(reporter, table, r.unmatched)
    adopt_or_explain(spark, table, r.drift, reporter)


def report_unmatched(reporter: Reporter, table: TableConfig, unmatched: int) -> None:
    """A single-table design's changes of no listed entity value, and where they went."""
    if unmatched and table.entities is not None:
        reporter.line(
            f"{table.name}: {unmatched} change(s) of no listed entity value (entities: values) "
            f"went to {names.FINAL}.{table.entities.unmatched}"
        )


@dataclass(frozen=True)
class Detected:
    schema: types.Schema
    seconds: float
    written: Path | None  # the schema file written, or None (the caller shows the schema)
    # A single-table design's entity values found (None: no value), with their item counts.
    values: dict[str | None, int] | None = None


def detect_schema(
    folder: str,
    table: TableConfig | None,
    output: Path | None = None,
    entity: tuple[str, str] | None = None,
) -> Detected:
    """Every item of a full export scanned once: the schema (of ``table``, with its keys and
    declared entries, or of an unconfigured table) and how long it took. Written to ``output``,
    or to the table's schema file when a table is given and no ``output``. ``entity``: (``key``
    or ``attribute``, its name) to count the entity values found (default: the table's rule)."""
    export = manifest.read_export(folder)
    started = time.monotonic()
    spark = spark_config.build_spark("detect-schema")
    with progress.progress(spark, f"detect-schema {short_source(folder)}"):
        if table is None:
            detected = detect.detect_unconfigured(spark, export)
        else:
            detected = detect_table_schema(spark, export, table)
        rule = table.entities if table is not None else None
        entity = entity or ((rule.by, rule.attribute) if rule else None)
        values = (
            entity_types.value_counts(detect.export_images(spark, export), *entity)
            if entity
            else None
        )
    seconds = time.monotonic() - started
    written = schema_file.write_schema(detected, output) if output or table else None
    return Detected(detected, seconds, written, values)
