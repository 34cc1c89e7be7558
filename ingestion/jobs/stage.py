"""Staging as a command runs it: export folders in time order, or a stream's settled change
files, each staged in one commit with its ledger entry; drift adopted (or how to, said); the
schema of a full export detected on its own (``detect-schema``)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession

from ingestion.dynamodb.tables import TableConfig
from ingestion.jobs.guard import held_table
from ingestion.jobs.reporter import Reporter
from ingestion.schema import detect, schema_file, types
from ingestion.sources import manifest
from ingestion.spark import progress, spark_config
from ingestion.staging.drift import Drift
from ingestion.staging.exports import detect_table_schema, in_time_order, ingest_export
from ingestion.staging.streams import ingest_stream
from ingestion.upkeep.adopt import adopt_drift


@dataclass(frozen=True)
class StreamSource:
    """Where a table's stream change files are, and how many of them one commit takes."""

    location: str
    settle: float
    max_files: int
    max_rejects: int


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
            "staged, those columns are null and the values are whole in _image (adopt_drift is "
            f"off for {table.name}). To adopt the new types: ddb-lakehouse rebuild --table "
            f"{table.name}"
        )


def stage_exports(
    table: TableConfig, sources: list[str], reporter: Reporter, allow_gap: bool = False
) -> bool:
    """Stage export folders in time order (whatever order they were given in); False when a
    staged count differs from its manifest's."""
    ordered = in_time_order(sources)
    if ordered != sources:
        shown = ", ".join(short_source(s) for s in ordered)
        reporter.line(f"exports given out of order: staged in time order: {shown}")
    spark = spark_config.build_spark(f"ingest {table.name}")
    results = []
    for number, source in enumerate(ordered, 1):
        if len(ordered) > 1:
            reporter.line(f"[{number}/{len(ordered)}] {source}")
        with progress.progress(spark, f"ingest {table.name} {short_source(source)}"):
            results.append(ingest_export(spark, table, source, allow_gap))
    reporter.ingested(results)
    for r in results:
        if r.chain_note:
            reporter.line(r.chain_note)
        for change in r.schema_changes:
            reporter.line(f"{r.table}: {change}")
    adopt_or_explain(spark, table, [d for r in results for d in r.drift], reporter)
    return all(r.skipped or r.rows == r.expected for r in results)


def stage_stream(table: TableConfig, stream: StreamSource, reporter: Reporter) -> None:
    """Stage the settled change files under ``stream.location`` once."""
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
    adopt_or_explain(spark, table, r.drift, reporter)


@dataclass(frozen=True)
class Detected:
    schema: types.Schema
    seconds: float
    written: Path | None  # the schema file written, or None (the caller shows the schema)


def detect_schema(folder: str, table: TableConfig | None, output: Path | None = None) -> Detected:
    """Every item of a full export scanned once: the schema (of ``table``, with its keys and
    declared entries, or of an unconfigured table) and how long it took. Written to ``output``,
    or to the table's schema file when a table is given and no ``output``."""
    export = manifest.read_export(folder)
    started = time.monotonic()
    spark = spark_config.build_spark("detect-schema")
    with progress.progress(spark, f"detect-schema {short_source(folder)}"):
        if table is None:
            detected = detect.detect_unconfigured(spark, export)
        else:
            detected = detect_table_schema(spark, export, table)
    seconds = time.monotonic() - started
    written = schema_file.write_schema(detected, output) if output or table else None
    return Detected(detected, seconds, written)
