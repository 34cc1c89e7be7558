"""Adopt new types: re-detect a table's schema from its staging change log and rebuild its columns.

The staging table keeps every item's DynamoDB JSON (``_image``), so its typed columns can always be
derived again: ``rebuild`` detects the schema from every staged image (column names chosen in the
schema file are kept, types are detected anew), rewrites the staging table from ``_image`` in one
commit (Iceberg keeps the previous version; the ledger of applied sources is carried in the new
commit), then the dbt model is fully refreshed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from ingestion.config import names
from ingestion.dynamodb import decode, detect, schema_file, type_rules, typed_columns, types
from ingestion.dynamodb.tables import TableConfig
from ingestion.lake import ingest, ledger, staging

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Rebuilt:
    schema: types.Schema
    rows: int
    changed: tuple[str, ...]  # "attribute: old type -> new type"


def rebuild_staging(spark: SparkSession, table: TableConfig) -> Rebuilt:
    name = names.staging_table(table.name)
    if not spark.catalog.tableExists(names.staging_table(table.name)):
        raise staging.StagingError(f"{table.name}: nothing staged yet, nothing to rebuild")
    carried = ledger.carried(spark, table.name)
    existing = schema_file.load_schema(table.name, ingest.declared_keys(table))
    columns_only = {
        n: {"column": e["column"]}
        for n, e in (existing.overrides if existing else {}).items()
        if "column" in e
    }
    staged = spark.table(name)
    images = staged.select(F.expr(decode.parse_item("`_image`")).alias("_attrs"))
    stats = detect.statistics(images)
    detected = ingest.with_keys(
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
    for key, value in staging.TABLE_PROPERTIES.items():
        writer = writer.tableProperty(key, value)
    try:
        (
            writer.partitionedBy(F.days("_ingested_at"))
            .option(f"snapshot-property.{ledger.LEDGER}", carried)
            .createOrReplace()
        )
    except Exception as exc:
        raise staging.StagingError(
            f"{table.name}: staging not rebuilt (unchanged): {staging.spark_reason(exc)}"
        ) from exc
    schema_file.write_schema(detected)
    count = spark.table(name).count()
    log.info(
        "%s: staging rebuilt with %d rows; %d column types changed", table.name, count, len(changed)
    )
    return Rebuilt(detected, count, changed)
