"""The staging table a batch is appended to: its properties, its creation, its column order.

A table is created empty before its first append, its types kept in it (``table_types``), or,
for a first batch staged with types of its first items (``types.Schema.sampled``), by the
commit that stages it: then the table and the types it keeps exist only once a staging pass
proved them on every item, and a pass that fails or is killed leaves no table behind.
"""

from __future__ import annotations

import logging

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.readwriter import DataFrameWriterV2

from ingestion.catalog import table_metadata, table_types
from ingestion.config import names
from ingestion.config.errors import LakehouseError
from ingestion.config.names import quote_table
from ingestion.dynamodb.tables import TableConfig
from ingestion.dynamodb.values import sql_string
from ingestion.schema.item_json import IMAGE, set_descriptor
from ingestion.schema.types import Schema

log = logging.getLogger(__name__)

ENTITY_VALUES, WHOLE_KEY = "dynamodb-lakehouse.entity-values", "whole-key"
TABLE_PROPERTIES = {
    "format-version": "2",
    "write.format.default": "parquet",
    "write.parquet.compression-codec": "zstd",
    # New attributes in the table configuration become new columns on the next append.
    "write.spark.accept-any-schema": "true",
    # Iceberg reads commit retries from the table, not the catalog: a stream ingest, a merge
    # and maintenance may commit at once (the default 4 retries give up too early).
    "commit.retry.num-retries": "10",
    # Under an entity key rule a key with no '#' is its own entity value; a change log staged
    # before that sent such items to the unmatched table (``maintenance.entity_moves``).
    ENTITY_VALUES: WHOLE_KEY,
}
# "true" from the rebuild that moved rows to another entity until every final table of the entry
# is built again (a full refresh): a kill in between leaves it, and the next merge refreshes.
ENTITIES_MOVED = "dynamodb-lakehouse.entities-moved"


# How a staging write lays its rows out, whatever the table's property says (a table created with
# another one included): as they come. Iceberg's default for a partitioned table, `hash`,
# shuffles every row by partition first; but every row of a batch has the batch's one
# `_ingested_at`, so that shuffle sends each row to the same single partition and only costs: the
# whole export serialised once more on a first load, two stages instead of one on a `watch` tick.
# Each task writes its own file instead (a file per input split); `maintain` compacts them.
STAGING_DISTRIBUTION = "none"


class CreatedMeanwhile(LakehouseError):
    """Types still to be proven, and the staging table exists: another process created it since
    they were chosen (only a first load chooses them). Never kept with it: the run stops."""


def prepared(
    spark: SparkSession, table: TableConfig, rows: DataFrame, schema: Schema
) -> tuple[DataFrame, bool]:
    """``rows`` in the staging table's column order, and whether their write creates the table
    (``schema`` holds types still to be proven: ``CreatedMeanwhile`` if it exists), with the
    whole item (``_image``) or the remainder (``_rest``) as the table keeps it. Otherwise
    the table exists once this returns: created empty, or its kept types brought up to
    ``schema``."""
    exists = spark.catalog.tableExists(names.staging_table(table.name))
    if schema.sampled is not None:
        if exists:
            raise CreatedMeanwhile(names.staging_table(table.name))
        return rows.drop(IMAGE), True
    metadata = table_metadata.read(spark, names.staging_table(table.name)) if exists else None
    # A table staged before decision 0012 keeps the whole item and no remainder: its own form,
    # until `rebuild` rewrites it; every other takes the remainder.
    old_form = (
        metadata is not None and IMAGE in metadata.columns and "_rest" not in metadata.columns
    )
    rows = rows.drop("_rest") if old_form else rows.drop(IMAGE)
    _ensure_table(spark, table, rows, schema)
    if not old_form:
        _check_same_types(spark, table, schema)
    return _in_table_order(spark, table.name, rows), False


class TypesChangedMeanwhile(LakehouseError):
    """The types kept with the staging table changed since this run read them: another process
    rebuilt it. Nothing is staged; the same command again stages under the new types."""


def _check_same_types(spark: SparkSession, table: TableConfig, schema: Schema) -> None:
    """Refuse rows typed by ``schema`` when the kept types give one of its attributes another
    type, or have its ``array`` column stand for another set (decision 0012): the remainder was
    found by ``schema``, and the encoder reads the kept types, so the item would not come back
    exactly (a set as a list)."""
    kept = table_types.stored_schema(spark, table)
    if kept is None:
        return
    pairs = [(kept, schema)] + [(kept.entity(e.table), e) for e in schema.entities]
    for held, ours in pairs:
        if held is None:  # an entity section the kept types lack yet: nothing to differ from
            continue
        for attribute in ours.attributes:
            other = held.get(attribute.name)
            if other is not None and (
                other.type != attribute.type or set_descriptor(other) != set_descriptor(attribute)
            ):
                raise TypesChangedMeanwhile(
                    f"{table.name}: nothing staged: the types kept with "
                    f"{names.staging_table(table.name)} changed since this run read them (another "
                    f"process rebuilt it: {attribute.name!r} is {other.type.sql()} there); run "
                    "the command again"
                )


def written(writer: DataFrameWriterV2, schema: Schema, create: bool) -> None:
    """Run the staging write: an append, or the creation of the table by its first commit."""
    if not create:
        writer.option("merge-schema", "true").append()
        return
    for key, value in {
        **TABLE_PROPERTIES,
        table_types.PROPERTY: table_types.document(schema),
    }.items():
        writer = writer.tableProperty(key, value)
    writer.using("iceberg").partitionedBy(F.days("_ingested_at")).create()


def _ensure_table(spark: SparkSession, table: TableConfig, rows: DataFrame, schema: Schema) -> None:
    """The staging table, created with its column types kept in it (``table_types``), or the
    existing one, its kept types brought up to ``schema`` before the append adds columns."""
    name = table.name
    if spark.catalog.tableExists(names.staging_table(name)):
        table_types.store(spark, table, schema)
        return
    properties = ", ".join(
        f"{sql_string(k)}={sql_string(v)}"
        for k, v in {**TABLE_PROPERTIES, table_types.PROPERTY: table_types.document(schema)}.items()
    )
    columns = ", ".join(
        f"{quote_table(f.name)} {f.dataType.simpleString()}" for f in rows.schema.fields
    )
    spark.sql(
        f"create table if not exists {names.staging_table(name)} ({columns}) using iceberg "
        f"partitioned by (days(`_ingested_at`)) tblproperties ({properties})"
    )
    log.info("created %s", names.staging_table(name))


def _in_table_order(spark: SparkSession, table: str, rows: DataFrame) -> DataFrame:
    """The table's columns in its order, then new ones (Iceberg appends them at the end)."""
    metadata = table_metadata.read(spark, names.staging_table(table))  # no plan to analyse
    existing = [c for c in (metadata.columns if metadata else {}) if c in rows.columns]
    return rows.select(*existing, *[c for c in rows.columns if c not in existing])
