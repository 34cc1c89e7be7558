"""A staged row's typed columns, and its remainder, back to the item's DynamoDB JSON (decision
0012): the one encoder everything that re-derives an item reads, in Spark SQL.

Staging writes ``_rest`` in place of the whole item (``_image``) a table staged before 0012
keeps; ``with_staged_image`` gives every reader the item from either.

``with_item_json`` gives the item's DynamoDB JSON text from the row's columns, each attribute
from its column (absent when the column is null), and from the remainder (``_rest``: the
top-level attributes the columns cannot give back exactly, as DynamoDB JSON), whose attributes
take the place of their columns. ``rest_sql`` builds that remainder while staging types a row
(``typed_rows``): the attributes that drifted, that are or hold ``NULL``, or whose value (at any
depth) has a descriptor its column does not stand for, as the decode found them in its one pass
(``typed_columns.Exact``).

Numbers are written in their canonical text (no exponent, no leading or trailing zero), sets with
their elements as the column holds them (sets are unordered), maps with the keys the schema names.
``verify`` does not use this module: it is the proof (``ingestion.schema.canonical``).

In a single-table design a row's columns are its keys and its entity's section (in the entity's
struct column); an unmatched item's other attributes have no column and are all in ``_rest``.
Where the types do
not record which set a column stands for (a nested array, a declared type), a set is kept whole
in the remainder: never lost, only not yet as small as it could be.
"""

from __future__ import annotations

import json
from dataclasses import replace

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ingestion.config.names import quote
from ingestion.dynamodb.entities import ENTITY_COLUMN
from ingestion.dynamodb.numbers import canonical_number
from ingestion.dynamodb.values import sql_string
from ingestion.schema.types import Attribute, ColumnType, Schema

IMAGE = "_image"  # the whole item, as tables staged before decision 0012 keep it
SETS = ("SS", "NS", "BS")


def _name(key: str) -> str:
    """A JSON object key, as a SQL string literal: ``"key":``."""
    return sql_string(json.dumps(key) + ":")


def number_text(value: str) -> str:
    """SQL: the canonical text of the number ``value`` (a ``bigint`` or ``decimal`` column).
    Spark writes a small decimal in scientific form (``1.5E-10``): the canonical rule of numeric
    keys reads that form too."""
    return canonical_number(f"cast({value} as string)")


def base64_text(value: str) -> str:
    """SQL: ``value``'s bytes in base64, one line (Spark's ``base64`` may break it every 76
    characters, ``spark.sql.chunkBase64String.enabled``)."""
    return f"regexp_replace(base64({value}), '[\\r\\n]', '')"


def _field(value: str, column: str) -> str:
    return f"{value}.{quote(column)}"


def _scalar(descriptor: str, text: str) -> str:
    return f"to_json(named_struct('{descriptor}', {text}))"


def value_json(
    value: str, column: ColumnType, descriptor: str | None = None, depth: int = 0
) -> str:
    """SQL: the DynamoDB JSON text of ``value`` (SQL of a non-null column value of type
    ``column``); ``descriptor`` says which set an ``array`` column holds (None: a list)."""
    kind = column.kind
    if kind in ("string", "number"):
        return _scalar("S" if kind == "string" else "N", value)
    if kind == "boolean":
        return _scalar("BOOL", value)
    if kind == "binary":
        return _scalar("B", base64_text(value))
    if kind in ("bigint", "decimal"):
        return _scalar("N", number_text(value))
    element = f"e{depth}"
    if kind == "array" and descriptor in SETS:
        assert column.element is not None
        item = {
            "SS": element,
            "NS": number_text(element) if column.element.kind in ("bigint", "decimal") else element,
            "BS": base64_text(element),
        }[descriptor]
        return _scalar(descriptor, f"transform({value}, {element} -> {item})")
    if kind == "array":
        assert column.element is not None
        inner = value_json(element, column.element, None, depth + 1)
        return (
            f"concat('{{\"L\":[', array_join(transform({value}, {element} -> {inner}), ','), ']}}')"
        )
    assert kind == "struct", kind
    parts = [
        f"if({_field(value, f.column)} is null, null, "
        f"concat({_name(f.name)}, {value_json(_field(value, f.column), f.type, None, depth + 1)}))"
        for f in column.fields
    ]
    return f"concat('{{\"M\":{{', concat_ws(',', {', '.join(parts) or 'null'}), '}}}}')"


def set_descriptor(attribute: Attribute) -> str | None:
    """The set an ``array`` attribute's column holds: the one set descriptor detection saw for
    it, and no list (None: a list, or a declared type)."""
    if attribute.type.kind != "array":
        return None
    seen = [d for d in (attribute.info.get("dynamodb_types") or {}) if d != "NULL"]
    return seen[0] if len(seen) == 1 and seen[0] in SETS else None


Placed = tuple[Attribute, str]  # an attribute and the SQL of its column in a staged row


def _sections(schema: Schema) -> list[tuple[str | None, list[Placed]]]:
    """Per kind of staged row, its attributes and where their columns are: one kind for a
    table's own types; for a single-table design one per entity with a section (``_entity`` =
    its final table; keys at top level, the section's columns in its struct column), then
    (None) every other row, whose only columns are the keys (an unmatched item's attributes
    have none: they are all in the remainder)."""
    keys = [(a, quote(a.column)) for a in schema.attributes if a.key]
    if schema.rule is None:
        return [(None, [(a, quote(a.column)) for a in schema.attributes])]
    kinds: list[tuple[str | None, list[Placed]]] = []
    for _, final in schema.rule.values:
        section = schema.entity(final)
        placed = [
            (a, f"{quote(final)}.{quote(a.column)}")
            for a in (section.attributes if section else ())
            if not a.key
        ]
        if placed:
            kinds.append((final, keys + placed))
    return [*kinds, (None, keys)]


def _by_entity(schema: Schema, sql) -> str:
    """SQL: ``sql(placed)`` of each kind of row (``_sections``), chosen by the row's
    ``_entity`` in a single-table design."""
    kinds = _sections(schema)
    if len(kinds) == 1:
        return sql(kinds[0][1])
    whens = " ".join(
        f"when {sql_string(final)} then {sql(placed)}" for final, placed in kinds if final
    )
    return f"(case `{ENTITY_COLUMN}` {whens} else {sql(kinds[-1][1])} end)"


def _item(placed: list[Placed], taken: str) -> str:
    parts = []
    for a, column in placed:
        name = sql_string(a.name)
        parts.append(
            f"case when {taken}[{name}] is not null then concat({_name(a.name)}, {taken}[{name}]) "
            f"when {column} is null then null "
            f"else concat({_name(a.name)}, {value_json(column, a.type, set_descriptor(a))}) end"
        )
    names = ", ".join(sql_string(a.name) for a, _ in placed) or "''"
    unnamed = (
        f"map_filter(coalesce({taken}, cast(map() as map<string,string>)), (k, v) -> not "
        f"array_contains(array({names}), k))"
    )
    others = f"(case when size({unnamed}) = 0 then null else {_members(unnamed)} end)"
    return f"concat('{{', concat_ws(',', {', '.join([*parts, others])}), '}}')"


def item_json(schema: Schema, taken: str = "`_taken`") -> str:
    """SQL: the item's DynamoDB JSON text from a staged row's columns and ``taken``, its
    remainder parsed (SQL of a ``map<string,string>`` of attribute to DynamoDB JSON, or null)."""
    return _by_entity(schema, lambda placed: _item(placed, taken))


def with_item_json(
    frame: DataFrame, schema: Schema, rest: str = "_rest", out: str = "_item"
) -> DataFrame:
    """``frame`` with ``out``: each row's item as DynamoDB JSON (``item_json``), from its columns
    and its remainder ``rest``."""
    taken = "_Item$taken"  # no column is named so: column names are [a-z0-9_] or a person's
    _check_free(frame, out)
    return (
        frame.withColumn(taken, F.expr(f"from_json(`{rest}`, 'map<string,string>')"))
        .withColumn(out, F.expr(item_json(schema, f"`{taken}`")))
        .drop(taken)
    )


def with_staged_image(frame: DataFrame, schema: Schema) -> DataFrame:
    """Staged rows (or a final table's) with ``_image``, the item's DynamoDB JSON: the column
    itself in a table staged before decision 0012 (it has no ``_rest``), else encoded from the
    columns and ``_rest`` by ``schema``, the types the rows were staged with (for a final table,
    ``final_table_schema``). A table with both (an append of the older form committed after a
    rebuild moved it to the new one) takes each row's ``_image`` where it has one."""
    if IMAGE in frame.columns and "_rest" not in frame.columns:
        return frame
    schema = _present(schema, frame)
    if IMAGE not in frame.columns:
        return with_item_json(frame, schema, out=IMAGE)
    encoded = "_Staged$encoded"
    return (
        with_item_json(frame, schema, out=encoded)
        .withColumn(IMAGE, F.coalesce(F.col(IMAGE), F.col(encoded)))
        .drop(encoded)
    )


def _present(schema: Schema, frame: DataFrame) -> Schema:
    """``schema`` without the attributes whose column ``frame`` lacks: types kept before the
    append that adds their column (``table_types.store``), or read from an older snapshot. No
    row of ``frame`` has a value there: any such value is in its remainder."""
    fields = {f.name: f.dataType for f in frame.schema.fields}

    def has(columns: set[str], attributes: tuple[Attribute, ...]) -> tuple[Attribute, ...]:
        return tuple(a for a in attributes if a.key or a.column in columns)

    kept = replace(schema, attributes=has(set(fields), schema.attributes))
    if schema.rule is None:
        return kept
    sections = []
    for section in schema.entities:
        struct = fields.get(section.table)
        names = set(getattr(struct, "fieldNames", lambda: [])())
        sections.append(replace(section, attributes=has(names, section.attributes)))
    return replace(kept, entities=tuple(sections))


def final_table_schema(schema: Schema, final: str) -> Schema:
    """The types of the final table ``final`` of the table ``schema`` types, as its columns lie:
    the table's own; an entity's table's keys and section, all at top level; an unmatched
    table's keys alone (its items' other attributes are in ``_rest``)."""
    if schema.rule is None:
        return schema
    keys = [a for a in schema.attributes if a.key]
    section = schema.entity(final)
    own = [a for a in (section.attributes if section else ()) if not a.key]
    return replace(schema, table=final, attributes=(*keys, *own), entities=(), rule=None)


def rest_sql(names: list[str], inexact: str, attrs: str, image: str) -> str:
    """SQL: the remainder of a row typed from the item ``image`` (DynamoDB JSON text; ``attrs``
    its ``parse_item``), a JSON object of the attributes its columns cannot give back, null when
    there is none: those in ``inexact`` (SQL of an array of names, found by the decode:
    ``typed_columns.decoded``) and those not in ``names`` (no column)."""
    listed = ", ".join(sql_string(n) for n in names) or "''"
    known = f"array({listed})"
    unnamed = f"array_except(map_keys({attrs}), {known})"
    # The item's text is parsed again (as attribute -> text) only for the rare row with a
    # remainder: CASE evaluates its branches lazily.
    rest = (
        f"map_filter(from_json({image}, 'map<string,string>'), (k, v) -> "
        f"not array_contains({known}, k) or array_contains({inexact}, k))"
    )
    return (
        f"case when size({inexact}) = 0 and size({unnamed}) = 0 then null else {_object(rest)} end"
    )


def _check_free(frame: DataFrame, out: str) -> None:
    if out in frame.columns:
        raise ValueError(f"column {out!r} exists already: an attribute's column of that name")


def _members(entries: str) -> str:
    """SQL: the members of a JSON object (``"key":value,...``) from ``entries``, a
    ``map<string,string>`` whose values are JSON text already."""
    key = "regexp_extract(to_json(array(e.key)), '^\\\\[(.*)\\\\]$', 1)"
    return f"array_join(transform(map_entries({entries}), e -> concat({key}, ':', e.value)), ',')"


def _object(entries: str) -> str:
    return f"concat('{{', {_members(entries)}, '}}')"
