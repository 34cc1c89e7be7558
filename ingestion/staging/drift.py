"""Schema drift: staged values that did not fit their column, per attribute and source.

Such a row is staged with the column null and the value whole in ``_rest`` (in ``_image``, the whole
item, in a table staged before decision 0012); ``_drift`` lists the attributes. ``rebuild``
re-derives the columns with types that fit.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from ingestion.catalog import duckdb_engine, table_metadata
from ingestion.catalog.table import Table
from ingestion.config import names
from ingestion.schema.item_json import IMAGE


@dataclass(frozen=True)
class Drift:
    """Values of one attribute that did not fit its column (kept in ``_rest``, column null)."""

    attribute: str
    source: str
    rows: int
    example: str
    entity: str = ""  # a single-table design's: the entity table whose column it is


def drift_report(
    spark: SparkSession, table: str | Table, batches: str | list[str] | None = None
) -> list[Drift]:
    """Per attribute and source: rows whose value did not fit the column, with one example value
    (its DynamoDB JSON); of one batch or a list of batches, or of the whole table. Reads only
    the rows that have drift. ``table``: its name, or its handle, whose change log's columns
    as read say whether it can hold drift (no catalog look-up)."""
    if isinstance(table, Table):
        columns = table.change_log.columns if table.change_log is not None else {}
        if "_drift" not in columns:
            return []
        staged = spark.table(table.staging_name)
    else:
        name = names.staging_table(table)
        if not spark.catalog.tableExists(name):
            return []
        staged = spark.table(name)
        if "_drift" not in staged.columns:
            return []
    if isinstance(batches, str):
        staged = staged.where(F.col("_batch_id") == batches)
    elif batches is not None:
        staged = staged.where(F.col("_batch_id").isin(batches))
    entity = F.col("_entity") if "_entity" in staged.columns else F.lit("")  # a single-table design
    kept = _kept(staged.columns)
    rows = (
        staged.where(F.col("_drift").isNotNull())
        .select(
            "_source",
            F.expr(kept).alias("_kept"),
            entity.alias("entity"),
            F.explode("_drift").alias("attribute"),
        )
        .groupBy("attribute", "_source", "entity")
        .agg(
            F.count(F.lit(1)).alias("rows"),
            F.first(F.expr("from_json(`_kept`, 'map<string,string>')[attribute]")).alias("example"),
        )
        .orderBy("attribute", "_source", "entity")
        .collect()  # one row per attribute, source and entity
    )
    return [
        Drift(r["attribute"], r["_source"], int(r["rows"]), r["example"] or "", r["entity"] or "")
        for r in rows
    ]


def drift_report_without_spark(table: str) -> list[Drift]:
    """``drift_report`` of the whole table without Spark (``catalog.table_metadata.files``)."""
    metadata = table_metadata.FileReader().read(names.STAGING, table)
    if metadata is None or "_drift" not in metadata.columns:
        return []
    kept = _kept(list(metadata.columns))
    rows = duckdb_engine.query(
        names.STAGING,
        table,
        "select attribute, _source, count(*), "
        "first(json_extract(_kept::JSON, '$.\"' || replace(attribute, '\"', '\\\"') || "
        "'\"')::VARCHAR) "
        f"from (select _source, {kept} as _kept, unnest(_drift) as attribute from {{table}} "
        "where _drift is not null) group by attribute, _source order by attribute, _source",
    )
    return [Drift(str(a), str(s), int(n), str(e or "")) for a, s, n, e in rows]


def _kept(columns: list[str]) -> str:
    """SQL (Spark and DuckDB alike) of what keeps a drifted value whole: the remainder
    (``_rest``, decision 0012), the whole item in a table staged before it, or, in a table with
    both (an append of the older form after a rebuild moved it), whichever the row has."""
    if IMAGE in columns and "_rest" in columns:
        return f"coalesce({IMAGE}, _rest)"
    return IMAGE if IMAGE in columns else "_rest"
