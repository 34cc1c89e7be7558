"""A final table's (or a change log's) rows given back as the items they stand for: their typed
columns and remainder through the encoder of decision 0012 (``ingestion.schema.item_json``), or
``_image`` where a table staged before it keeps the whole item. And ``strict``: one form of a
DynamoDB JSON value, independent of the encoder, to compare what it gives back with the items
the tests wrote (numbers by value, sets in any order, NULL kept apart from absent)."""

from __future__ import annotations

import base64
import json
from typing import Any

from ingestion.catalog import table_types
from ingestion.dynamodb.tables import get_table
from ingestion.schema.canonical import number, number_text
from ingestion.schema.item_json import final_table_schema, with_staged_image


def strict(value: dict[str, Any]) -> Any:
    """A DynamoDB JSON value in one form: numbers by value, sets sorted, binary as bytes, map keys
    in any order, NULL kept (it is not absent)."""
    ((descriptor, inner),) = value.items()
    if descriptor == "N":
        return ("N", number_text(number(inner)))
    if descriptor == "B":
        return ("B", base64.b64decode(inner, validate=True))
    if descriptor == "SS":
        return ("SS", sorted(inner))
    if descriptor == "NS":
        return ("NS", sorted(number_text(number(x)) for x in inner))
    if descriptor == "BS":
        return ("BS", sorted(base64.b64decode(x, validate=True) for x in inner))
    if descriptor == "M":
        return ("M", {k: strict(v) for k, v in inner.items()})
    if descriptor == "L":
        return ("L", [strict(v) for v in inner])
    return (descriptor, inner)


def strict_item(item: dict[str, Any]) -> dict[str, Any]:
    return {name: strict(value) for name, value in item.items()}


def strict_items(items: dict[Any, dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    """Each item of a mapping in the strict form, under its key."""
    return {key: strict_item(item) for key, item in items.items()}


def final_items(spark, table: str, final: str | None = None) -> list[tuple[dict[str, Any], Any]]:
    """Each row of ``lake.lakehouse.<final or table>`` (``final``: an entity's table of the
    single-table design ``table``) as (its item, the row), read fresh."""
    name = final or table
    spark.sql(f"refresh table lake.lakehouse.{name}")
    return items_of(spark.table(f"lake.lakehouse.{name}"), spark, table, name)


def items_of(
    frame, spark, table: str, final: str | None = None
) -> list[tuple[dict[str, Any], Any]]:
    """Rows of ``table``'s change log, or of its final table ``final``, as (item, row)."""
    schema = table_types.stored_schema(spark, get_table(table))
    assert schema is not None, f"{table}: no types kept"
    if final is not None:
        schema = final_table_schema(schema, final)
    return [(json.loads(r["_image"]), r) for r in with_staged_image(frame, schema).collect()]
