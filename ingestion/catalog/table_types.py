"""A table's column types, kept with its staging table: the one truth every job reads.

The detected and adopted types are a schema document (the schema file's format, written by
``schema_file.to_json``) in the staging table's property ``dynamodb-lakehouse.schema``. It is
set in the commit that creates the table, in the commit of a ``rebuild`` that changes types
(``createOrReplace`` with the property: a replace and its types never disagree), and before an
append that adds columns (a crash in between leaves a document that names a column the table
does not have yet: the next append adds it). A job in a fresh folder or container reads it,
with Spark or without (it is in the table's metadata, for pyiceberg too).

``schemas/<table>.json`` stays what a person writes: their declared types and names are applied
on top (``schema_file.declared_entries``) whenever types are detected, never replaced.
"""

from __future__ import annotations

import json
import logging

from pyspark.sql import SparkSession

from ingestion.catalog import entity_types, table_metadata
from ingestion.config import names
from ingestion.dynamodb.tables import TableConfig
from ingestion.dynamodb.values import sql_string
from ingestion.schema import schema_file, types

log = logging.getLogger(__name__)

PROPERTY = names.SCHEMA_PROPERTY


def document(schema: types.Schema) -> str:
    """The schema as the property's value: compact JSON, keys in a stable order."""
    return json.dumps(schema_file.to_json(schema), ensure_ascii=False, separators=(",", ":"))


def stored_document(spark: SparkSession, table: str) -> str | None:
    """The property's text, or None (no staging table yet, or one whose types are kept in no
    property: then only in the schema file)."""
    # Fresh from the catalog: another process may have rebuilt the table.
    metadata = table_metadata.read(spark, names.staging_table(table), fresh=True)
    return metadata.properties.get(PROPERTY) if metadata is not None else None


def parse(text: str, table: TableConfig, staging: str | None = None) -> types.Schema:
    """A stored document as a schema, its keys typed as the table declares them; for a
    single-table design, with its entities' sections (``entity_types.sections``). ``staging``:
    the change log's name, when the caller has it (errors name it)."""
    table_metadata.READS[("types", table.name)] += 1
    where = f"{staging or names.staging_table(table.name)} property {PROPERTY}"
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise types.SchemaError(f"{where}: not JSON: {exc}") from exc
    keys = schema_file.declared_keys(table)
    parsed = schema_file.parse_document(raw, where, table.name, keys)
    return entity_types.sections(schema_file.from_file(parsed), raw, table, where)


def stored_schema(spark: SparkSession, table: TableConfig) -> types.Schema | None:
    """The types kept with the staging table, or None when none are kept yet."""
    text = stored_document(spark, table.name)
    return parse(text, table) if text else None


def kept_without_spark(table: TableConfig) -> types.Schema | None:
    """The kept types read from the staging table's metadata file, without Spark (for a message
    written after Spark's JVM died: ``spark.out_of_memory``), or None when they cannot be read
    there (the Glue catalog, no types kept, anything unreadable)."""
    try:
        files = table_metadata.files()
        if files is None:
            return None
        metadata = files.read(names.STAGING, table.name)
        text = metadata.properties.get(PROPERTY) if metadata is not None else None
        return parse(text, table) if text else None
    except Exception:  # noqa: BLE001 (a hint for an error message: never a second failure)
        log.debug("%s: kept types not readable without Spark", table.name, exc_info=True)
        return None


def current_schema(spark: SparkSession, table: TableConfig) -> types.Schema | None:
    """The table's types: those kept with its staging table; before its first commit (or for a
    staging table that keeps none), a complete schema file; else None (detect them)."""
    stored = stored_schema(spark, table)
    if stored is not None:
        return stored
    existing = schema_file.table_schema_file(table)
    # A single-table design's first types are its entities' (detected, their declarations kept).
    if existing is not None and existing.complete and table.entities is None:
        return schema_file.from_file(existing)
    return None


def store(spark: SparkSession, table: TableConfig, schema: types.Schema) -> bool:
    """Add the attributes of ``schema`` that the kept types lack (the table exists), before an
    append that adds their columns; False when there are none. Only adds: a process that read
    the types before another one rebuilt them can never write its older types back."""
    current = stored_document(spark, table.name)
    kept = parse(current, table) if current else None
    if kept is not None:
        grown = entity_types.union(kept, schema)
        if grown is None:
            return False
        schema = grown
    text = document(schema)
    if current == text:
        return False
    spark.sql(
        f"alter table {names.staging_table(table.name)} set tblproperties "
        f"({sql_string(PROPERTY)} = {sql_string(text)})"
    )
    log.info("%s: column types kept with the staging table", table.name)
    return True
