"""Staging's decode in the JVM (decision 0013): the plan of a table's types for the decoder of
``java/dynamodb_lakehouse/decode/`` (``ItemDecoder``), its registration as a Spark SQL function,
and the type of the row it returns.

The decoder reads an item's DynamoDB JSON once and gives the staging row's typed columns, its
``_drift``, its ``_rest`` and ``_error`` (the message the batch fails with, less the line's
file): the same rows and messages as the decode in Spark SQL (``typed_columns``), which
``tests/schema/test_item_decoder.py`` compares on every case. The plan carries the types, what
detection saw (types of the first items) and every message a user can see, so the messages are
written in one place, here and in ``typed_rows``.

The jar is compiled by ``make setup`` (``ingestion.spark.jars``) and linked into PySpark's jars;
on EMR it ships beside the job archive and is named in ``spark.jars``
(``ingestion.aws.emr``). A Spark without it fails at the first decode with ``DecoderMissing``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pyspark.sql import SparkSession

from ingestion.config.errors import LakehouseError
from ingestion.config.names import quote
from ingestion.dynamodb.decode import NOT_AN_ITEM
from ingestion.dynamodb.entities import ENTITY_COLUMN
from ingestion.schema import typed_columns
from ingestion.schema.item_json import set_descriptor
from ingestion.schema.types import Attribute, ColumnType, Schema

DECODER_CLASS = "dynamodb_lakehouse.decode.ItemDecoder"
ERROR = "_error"


class DecoderMissing(LakehouseError):
    """The Spark session has no decoder jar on its classpath."""


def _type(column_type: ColumnType) -> dict[str, Any]:
    plan: dict[str, Any] = {"kind": column_type.kind}
    if column_type.kind == "decimal":
        plan |= {"precision": column_type.precision, "scale": column_type.scale}
    if column_type.fields:
        plan["fields"] = [{"name": f.name, "type": _type(f.type)} for f in column_type.fields]
    if column_type.element is not None:
        plan["element"] = _type(column_type.element)
    return plan


def _attribute(attribute: Attribute, strict: bool) -> dict[str, Any]:
    return {
        "name": attribute.name,
        "type": _type(attribute.type),
        "sets": set_descriptor(attribute),
        "seen": attribute.info if strict else None,
    }


def _key(attribute: Attribute, table: str) -> dict[str, Any]:
    where = f"table {table}: key attribute {attribute.name!r}"
    return {
        "name": attribute.name,
        "type": _type(attribute.type),
        "missing": f"{where} is missing in an item of ",
        "misfit": f"{where} is not a value that fits {attribute.type.sql()} in ",
    }


def plan(
    schema: Schema, table: str, entity_given: bool = False, lines: bool = False
) -> dict[str, Any]:
    """The decoder's plan for staging rows of ``schema`` (``table``: the name messages give).
    ``entity_given``: a single-table design's rows keep the ``_entity`` they are given (a
    rebuild) instead of deriving it. ``lines``: the decoder is given each line of the export
    or change file, not its image, and takes the image out itself (``decode.with_image``'s rule
    and message), in the same parse."""
    keys = [a for a in schema.attributes if a.key]
    document: dict[str, Any] = {
        "table": table,
        "lines": NOT_AN_ITEM if lines else None,
        "keys": [_key(a, table) for a in keys],
        "unknown_descriptor": typed_columns.UNKNOWN_DESCRIPTOR.format(table=table),
        "new_attributes": typed_columns.NEW_ATTRIBUTES,
        "sample_misfit": typed_columns.SAMPLE_MISFIT,
        "entities": None,
    }
    rule = schema.rule
    if rule is None:
        strict = schema.sampled is not None
        document["known"] = [a.name for a in schema.attributes]
        document["attributes"] = [_attribute(a, strict) for a in schema.attributes if not a.key]
        document["strict"] = strict
        return document
    sections = []
    for _, final in rule.values:
        section = schema.entity(final)
        own = [a for a in (section.attributes if section else ()) if not a.key]
        strict = section is not None and section.sampled is not None
        sections.append(
            {
                "final": final,
                "known": [a.name for a in keys + own],
                "attributes": [_attribute(a, strict) for a in own],
                "strict": strict,
            }
        )
    document["entities"] = {
        "by": rule.by,
        "attribute": rule.attribute,
        "values": [list(pair) for pair in rule.values],
        "unmatched": rule.unmatched,
        "given": entity_given,
        "sections": sections,
    }
    return document


def columns(schema: Schema) -> list[tuple[str, str]]:
    """(field of the decoder's row, the staging column it is) for the typed columns, in the
    row's order: the keys, then the attributes, or ``_entity`` and each entity's struct."""
    keys = [a for a in schema.attributes if a.key]
    found = [(f"k{i}", a.column) for i, a in enumerate(keys)]
    if schema.rule is None:
        others = [a for a in schema.attributes if not a.key]
        return found + [(f"a{i}", a.column) for i, a in enumerate(others)]
    found.append((ENTITY_COLUMN, ENTITY_COLUMN))
    structs = [final for final, attributes in _structs(schema)]
    return found + [(f"e{j}", final) for j, final in enumerate(structs)]


def _structs(schema: Schema) -> list[tuple[str, list[Attribute]]]:
    assert schema.rule is not None
    found = []
    for _, final in schema.rule.values:
        section = schema.entity(final)
        own = [a for a in (section.attributes if section else ()) if not a.key]
        if own:
            found.append((final, own))
    return found


def returned_ddl(schema: Schema) -> str:
    """The type of the decoder's row: its typed columns (``columns``), ``_drift``, ``_rest``,
    ``_error``."""
    types: dict[str, str] = {}
    keys = [a for a in schema.attributes if a.key]
    for i, a in enumerate(keys):
        types[f"k{i}"] = a.type.sql()
    if schema.rule is None:
        for i, a in enumerate(a for a in schema.attributes if not a.key):
            types[f"a{i}"] = a.type.sql()
    else:
        types[ENTITY_COLUMN] = "string"
        for j, (_, own) in enumerate(_structs(schema)):
            types[f"e{j}"] = (
                "struct<" + ",".join(f"{quote(a.column)}:{a.type.sql()}" for a in own) + ">"
            )
    types |= {"_drift": "array<string>", "_rest": "string", ERROR: "string"}
    return "struct<" + ",".join(f"{quote(name)}:{ddl}" for name, ddl in types.items()) + ">"


def registered(
    spark: SparkSession,
    schema: Schema,
    table: str,
    entity_given: bool = False,
    lines: bool = False,
) -> str:
    """The name of a SQL function ``f(image, entity, keys_only)`` that decodes by ``schema``
    (with ``lines``: ``f(line, entity, null)``, ``plan``): registered in ``spark`` once per
    plan (the name is the plan's digest)."""
    text = json.dumps(plan(schema, table, entity_given, lines), sort_keys=True)
    ddl = returned_ddl(schema)
    name = "lakehouse_decode_" + hashlib.sha256((text + ddl).encode()).hexdigest()[:16]
    if spark.catalog.functionExists(name):
        return name
    jvm: Any = spark._jvm  # type: ignore[attr-defined]
    if jvm is None:
        raise DecoderMissing("the Spark session has no JVM gateway: the decoder runs in the JVM")
    try:
        decoder = jvm.dynamodb_lakehouse.decode.ItemDecoder(text)
    except TypeError as exc:  # py4j: no such class on the JVM's classpath
        raise DecoderMissing(
            f"the decoder ({DECODER_CLASS}) is not on this Spark's classpath: run `make setup` "
            "(it compiles java/ and links the jar into PySpark's jars); on EMR, package and "
            "upload the job again (`ddb-lakehouse emr package`): the jar ships beside it"
        ) from exc
    returned = jvm.org.apache.spark.sql.types.DataType.fromDDL(ddl)
    spark._jsparkSession.udf().register(name, decoder, returned)  # type: ignore[attr-defined]
    return name
