"""Staged rows typed again from their items: what a drift adoption or ``rebuild`` writes
(``maintenance.rebuild``), and what a table's history is re-derived with after it
(``merge.history_types``). The item of a row is given back from its columns and its remainder
``_rest`` by the types the row was written with (``item_json.with_staged_image``), then decoded by
the new types exactly as an ingest decodes it: a value is never cast from one column type to
another."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ingestion.dynamodb import decode
from ingestion.dynamodb.entities import ENTITY_COLUMN
from ingestion.dynamodb.tables import TableConfig
from ingestion.schema import item_json, typed_rows, types
from ingestion.schema.item_json import IMAGE
from ingestion.staging import append


def retyped(
    staged: DataFrame,
    schema: types.Schema,
    table: TableConfig,
    staged_with: types.Schema | None = None,
    keep: tuple[str, ...] = (),
) -> DataFrame:
    """Staged rows typed again from their item by ``schema``, each keeping its ``_entity``
    (under a key rule derived again first: ``maintenance.rebuild``), with their remainder by
    ``schema`` and no ``_image``. The item: ``_image``, or given back from the columns and the
    remainder by ``staged_with``, the types the rows were staged with. ``keep``: columns of the
    rows carried as they are (a history's validity)."""
    if staged_with is not None:
        staged = item_json.with_staged_image(staged, staged_with)
    if IMAGE not in staged.columns:
        raise append.StagingError(
            f"{table.name}: its staged rows have no item to rebuild from: no _image, and no "
            "types kept with the staging table to read their columns and _rest by"
        )
    metadata = [c for c in types.METADATA_COLUMNS if c not in ("_drift", "_rest")]
    metadata += [ENTITY_COLUMN] if schema.rule is not None else []
    return (
        staged.select(*metadata, *keep, IMAGE)
        .withColumn("_attrs", F.expr(decode.parse_item(f"`{IMAGE}`")))
        .transform(typed_rows.typed_rows(schema, table.name))
        .select(*typed_rows.row_columns(schema), *types.METADATA_COLUMNS, *keep)
    )
