"""One attribute value -> its column value, and an item's image -> the table's typed columns.

``typed`` gives the value decoded to the column type, null when absent, NULL, or when it does
not fit. So "it fits" is always ``is_absent(value) or decoded is not null`` (``fits``): the
decision is made once, and top-level scalars stay plain expressions that Spark compiles.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ingestion.dynamodb.decode import fail
from ingestion.dynamodb.numbers import canonical_number, fits_decimal, fits_long
from ingestion.dynamodb.types import Attribute, ColumnType, Schema
from ingestion.dynamodb.values import (
    DESCRIPTORS,
    descriptor,
    field,
    is_absent,
    parse_list,
    parse_map,
    sql_string,
    text_sql,
)

# The message an item with attributes the schema does not know yet fails its batch with:
# ingestion (lake/ingest.py) adds them to the schema and stages the batch again.
NEW_ATTRIBUTES = "dynamodb-lakehouse: attributes not in the schema yet"


def _bind(expression: str, name: str, body: str) -> str:
    """``body`` with ``name`` bound to ``expression``, evaluated once (a one-element transform)."""
    return f"transform(array({expression}), {name} -> {body})[0]"


def fits(value: str, decoded: str) -> str:
    return f"({is_absent(value)} or {decoded} is not null)"


def _null(descriptor: str) -> str:
    if descriptor in ("BOOL", "NULL"):
        return "cast(null as boolean)"
    return (
        "cast(null as array<string>)"
        if descriptor in ("SS", "NS", "BS")
        else "cast(null as string)"
    )


def _value_of(descriptor: str, element: str) -> str:
    """A set element as a VALUE struct of that descriptor."""
    members = ", ".join(f"'{d}', {element if d == descriptor else _null(d)}" for d in DESCRIPTORS)
    return f"named_struct({members})"


def typed(value: str, column_type: ColumnType, depth: int = 0) -> str:
    """SQL for the value decoded to ``column_type``: null when absent, NULL or not fitting."""
    kind = column_type.kind
    if kind == "string":
        return text_sql(value)
    if kind == "boolean":
        return field(value, "BOOL")
    if kind == "binary":
        return f"unbase64({field(value, 'B')})"
    if kind == "bigint":
        number = field(value, "N")
        return f"case when {fits_long(number)} then cast(cast({number} as decimal(38,0)) as bigint) end"
    if kind == "number":
        return canonical_number(field(value, "N"))
    if kind == "decimal":
        number = field(value, "N")
        fitted = fits_decimal(number, column_type.precision, column_type.scale)
        return f"case when {fitted} then cast({number} as {column_type.sql()}) end"
    if kind == "struct":
        return _struct(value, column_type, depth)
    if kind == "array":
        return _array(value, column_type, depth)
    raise ValueError(f"unknown column type {column_type}")


def _struct(value: str, column_type: ColumnType, depth: int) -> str:
    m, r = f"m{depth}", f"r{depth}"
    keys = [f"{m}[{sql_string(f.name)}]" for f in column_type.fields]
    decoded = ", ".join(
        f"'f{i}', {typed(key, f.type, depth + 1)}"
        for i, (key, f) in enumerate(zip(keys, column_type.fields, strict=True))
    )
    built = ", ".join(f"{sql_string(f.column)}, {r}.f{i}" for i, f in enumerate(column_type.fields))
    known = ", ".join(sql_string(f.name) for f in column_type.fields)
    every = " and ".join(fits(key, f"{r}.f{i}") for i, key in enumerate(keys))
    fitted = f"{m} is not null and {every} and forall(map_keys({m}), k -> array_contains(array({known}), k))"
    body = f"case when {fitted} then named_struct({built}) end"
    return _bind(parse_map(value), m, _bind(f"named_struct({decoded})", r, body))


def _array(value: str, column_type: ColumnType, depth: int) -> str:
    assert column_type.element is not None
    es, e, rs = f"es{depth}", f"e{depth}", f"rs{depth}"
    elements = (
        f"coalesce({parse_list(value)}, "
        + ", ".join(
            f"transform({field(value, s)}, x -> {_value_of(s[0], 'x')})" for s in ("SS", "NS", "BS")
        )
        + ")"
    )
    pairs = f"transform({es}, {e} -> named_struct('e', {e}, 'v', {typed(e, column_type.element, depth + 1)}))"
    values = f"transform({rs}, p -> p.v)"
    sets_sorted = (
        f"case when {field(value, 'L')} is null then array_sort({values}) else {values} end"
    )
    fitted = f"{es} is not null and forall({rs}, p -> {fits('p.e', 'p.v')})"
    return _bind(elements, es, _bind(pairs, rs, f"case when {fitted} then {sets_sorted} end"))


def _attribute(name: str) -> str:
    return f"`_attrs`[{sql_string(name)}]"


UNKNOWN_DESCRIPTOR = (
    "table {table}: a value with an unknown type descriptor (expected one of "
    + ", ".join(DESCRIPTORS)
    + ") in attribute(s) "
)


def with_typed_columns(schema: Schema, table: str):
    """The schema's attributes as typed columns (keys first, never null) and ``_drift``."""
    attributes = list(schema.attributes)
    known = ", ".join(sql_string(a.name) for a in attributes)
    unknown = f"array_except(map_keys(`_attrs`), array({known}))"

    def key_column(i: int, attribute: Attribute, first: bool) -> F.Column:
        where = f"table {table}: key attribute {attribute.name!r}"
        checks = []
        if first:
            untyped = f"map_filter(`_attrs`, (k, v) -> v is not null and {descriptor('v')} is null)"
            checks.append(
                f"when size({untyped}) > 0 then raise_error(concat("
                f"{sql_string(UNKNOWN_DESCRIPTOR.format(table=table))}, "
                f"array_join(map_keys({untyped}), ', '), ' of an item of ', _source_file))"
            )
            checks.append(
                f"when size({unknown}) > 0 then raise_error(concat({sql_string(NEW_ATTRIBUTES + ': ')}, "
                f"array_join({unknown}, ', '), ' in ', _source_file))"
            )
        checks.append(
            f"when {is_absent(_attribute(attribute.name))} then "
            f"{fail(f'{where} is missing in an item of ')}"
        )
        misfit = f"not {fits(_attribute(attribute.name), f'`__c{i}`')}"
        if attribute.type.kind == "string":  # a string column takes any value: a key only S
            misfit += f" or {field(_attribute(attribute.name), 'S')} is null"
        checks.append(
            f"when {misfit} then "
            f"{fail(f'{where} is not a value that fits {attribute.type.sql()} in ')}"
        )
        return F.expr(f"case {' '.join(checks)} else `__c{i}` end").alias(attribute.column)

    def transform(df: DataFrame) -> DataFrame:
        decoded = df.select(
            "*",
            *[
                F.expr(typed(_attribute(a.name), a.type)).alias(f"__c{i}")
                for i, a in enumerate(attributes)
            ],
        )
        columns, first = [], True
        for i, attribute in enumerate(attributes):
            if attribute.key:
                columns.append(key_column(i, attribute, first))
                first = False
            else:
                columns.append(F.col(f"`__c{i}`").alias(attribute.column))
        drift = ", ".join(
            f"case when not {fits(_attribute(a.name), f'`__c{i}`')} then {sql_string(a.name)} end"
            for i, a in enumerate(attributes)
            if not a.key
        )
        drifted = f"filter(array({drift}), x -> x is not null)" if drift else "array()"
        return decoded.select(
            *columns,
            "*",
            F.expr(f"case when size({drifted}) > 0 then {drifted} end")
            .cast("array<string>")
            .alias("_drift"),
        ).drop("_attrs", "_line", *[f"__c{i}" for i in range(len(attributes))])

    return transform
