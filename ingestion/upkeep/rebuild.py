"""Adopt new types: re-detect a table's schema from its staging change log and rebuild its columns.

The staging table keeps every item's DynamoDB JSON (``_image``), so its typed columns can always be
derived again: ``rebuild`` detects the schema from every staged image (column names chosen in the
schema file are kept, types are detected anew), rewrites the staging table from ``_image`` in one
commit (Iceberg keeps the previous version; the ledger of applied sources is carried in the new
commit), then the dbt model is fully refreshed.

A replace commits over whatever another process appended meanwhile (a stream ingest on another
machine: ``rebuild`` holds the table's lock on this one, ``jobs.table_lock``). So ``rebuild``
reads one pinned snapshot and, after its commit, looks for staging commits made after that
snapshot: their rows are missing from the rebuilt table, and their change files may already be
deleted. Each is staged again from its own snapshot (still in the table's history) with its own
ledger entry, and the run says so; if that fails, it fails loudly naming the snapshots to recover.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from ingestion.config import clock, names
from ingestion.dynamodb import decode
from ingestion.dynamodb.tables import TableConfig
from ingestion.schema import detect, schema_file, type_rules, typed_columns, types
from ingestion.staging import append, exports, ledger

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Rebuilt:
    schema: types.Schema
    rows: int
    changed: tuple[str, ...]  # "attribute: old type -> new type"
    restaged: tuple[str, ...] = ()  # batches committed by others while it ran, staged again


def _current_snapshot(spark: SparkSession, name: str) -> tuple[int, object]:
    spark.sql(f"refresh table {name}")
    row = (
        spark.table(f"{name}.snapshots")
        .orderBy(F.col("committed_at").desc(), F.col("snapshot_id").desc())
        .select("snapshot_id", "committed_at")
        .first()
    )
    assert row is not None  # a staging table exists only with its first commit
    return int(row["snapshot_id"]), clock.from_spark(row["committed_at"])


def rebuild_staging(
    spark: SparkSession, table: TableConfig, before_commit: Callable[[], None] | None = None
) -> Rebuilt:
    """Rebuild ``staging.<table>`` from ``_image`` with freshly detected types.
    ``before_commit`` runs between the read and the commit (the race test's other writer)."""
    name = names.staging_table(table.name)
    if not spark.catalog.tableExists(names.staging_table(table.name)):
        raise append.StagingError(f"{table.name}: nothing staged yet, nothing to rebuild")
    read_id, read_at = _current_snapshot(spark, name)
    carried = ledger.carried(spark, table.name)
    existing = schema_file.table_schema_file(table)
    columns_only = {
        n: {"column": e["column"]}
        for n, e in (existing.overrides if existing else {}).items()
        if "column" in e
    }
    staged = spark.read.option("snapshot-id", read_id).table(name)
    stats = detect.statistics(staged.select("_image"))
    detected = exports.with_keys(
        table,
        type_rules.resolve(
            table.name, stats, table.key_descriptors, columns_only, source="staging"
        ),
    )
    before = {
        a.name: a.type.sql()
        for a in (schema_file.from_file(existing).attributes if existing else ())
    }
    changed = tuple(
        f"{a.name}: {before[a.name]} -> {a.type.sql()}"
        for a in detected.attributes
        if a.name in before and before[a.name] != a.type.sql()
    )
    metadata = [c for c in types.METADATA_COLUMNS if c != "_drift"]
    rows = (
        staged.select(*metadata)
        .withColumn("_attrs", F.expr(decode.parse_item("`_image`")))
        .transform(typed_columns.with_typed_columns(detected, table.name))
        .select(*[a.column for a in detected.attributes], *types.METADATA_COLUMNS)
    )
    writer = rows.writeTo(name)
    for key, value in append.TABLE_PROPERTIES.items():
        writer = writer.tableProperty(key, value)
    if before_commit is not None:
        before_commit()
    try:
        (
            writer.partitionedBy(F.days("_ingested_at"))
            .option(f"snapshot-property.{ledger.LEDGER}", carried)
            .createOrReplace()
        )
    except Exception as exc:
        raise append.StagingError(
            f"{table.name}: staging not rebuilt (unchanged): {append.spark_reason(exc)}"
        ) from exc
    schema_file.write_schema(detected)
    restaged = restage_lost_commits(spark, table, detected, read_at)
    count = spark.table(name).count()
    log.info(
        "%s: staging rebuilt with %d rows; %d column types changed", table.name, count, len(changed)
    )
    return Rebuilt(detected, count, changed, restaged)


def restage_lost_commits(
    spark: SparkSession, table: TableConfig, schema: types.Schema, read_at: object
) -> tuple[str, ...]:
    """Stage again, each from its own snapshot, the staging commits made after ``read_at``
    (by another process while the rebuild ran): the replace committed over them."""
    name = names.staging_table(table.name)
    lost = (
        spark.table(f"{name}.snapshots")
        .where(
            (F.col("committed_at") > F.lit(read_at)) & F.col("summary")[ledger.SOURCE].isNotNull()
        )
        .orderBy("committed_at", "snapshot_id")
        .select("snapshot_id", "summary")
        .collect()  # one row per commit made during the rebuild: few
    )
    restaged = []
    for commit in lost:
        batch = commit["summary"][ledger.BATCH]
        properties = {
            k: v for k, v in commit["summary"].items() if k.startswith(names.SUMMARY_PREFIX)
        }
        try:
            rows = (
                spark.read.option("snapshot-id", commit["snapshot_id"])
                .table(name)
                .where(F.col("_batch_id") == batch)
                .select(*[c for c in types.METADATA_COLUMNS if c != "_drift"])
                .withColumn("_attrs", F.expr(decode.parse_item("`_image`")))
                .transform(typed_columns.with_typed_columns(schema, table.name))
                .select(*[a.column for a in schema.attributes], *types.METADATA_COLUMNS)
            )
            (
                rows.writeTo(name)
                .option("merge-schema", "true")
                .options(**{f"snapshot-property.{k}": v for k, v in properties.items()})
                .append()
            )
        except Exception as exc:
            raise append.StagingError(
                f"{table.name}: batch {batch} was committed while rebuild ran (snapshot "
                f"{commit['snapshot_id']}) and could not be staged again: "
                f"{append.spark_reason(exc)}. Its rows are in that snapshot: do not expire "
                "snapshots (maintain) before it is restored"
            ) from exc
        log.warning("%s: batch %s was committed while rebuild ran: staged again", table.name, batch)
        restaged.append(batch)
    return tuple(restaged)
