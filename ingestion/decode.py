"""DynamoDB JSON lines -> typed, flattened columns, with Spark's own functions only.

Every line is parsed once against an explicit envelope schema (no inference), the item image once
into ``map<attribute, VALUE>`` (ingestion.values), and each attribute of the table's schema is
decoded by its column type. A value that does not fit its column (a ``bigint`` column meets
``3.5``) is never rounded, truncated or silently nulled: the column is null, the attribute is
listed in the row's ``_drift`` column, and the row keeps its whole image in ``_image``.

Three things stop the batch instead (``raise_error`` fails the write: nothing is committed), each
with a message naming the file: a line that is not an item, a key that is missing or does not
fit, and an attribute the schema does not know yet (ingestion adds it to the schema and retries).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ingestion.schema import Attribute, ColumnType, Schema
from ingestion.values import (
    DESCRIPTORS,
    field,
    fits_decimal,
    fits_long,
    is_absent,
    parse_item,
    parse_list,
    parse_map,
    sql_string,
    text_sql,
)

ENVELOPE = T.StructType(
    [
        T.StructField("Item", T.StringType()),
        T.StructField("Keys", T.StringType()),
        T.StructField("NewImage", T.StringType()),
        T.StructField("OldImage", T.StringType()),
        T.StructField(
            "Metadata",
            T.StructType(
                [
                    T.StructField(
                        "WriteTimestampMicros", T.StructType([T.StructField("N", T.StringType())])
                    )
                ]
            ),
        ),
    ]
)
NEW_ATTRIBUTES = "dynamodb-lakehouse: attributes not in the schema yet"


def with_envelope(df: DataFrame) -> DataFrame:
    """``value`` (one line of text) -> ``_line`` (the parsed envelope) and ``_source_file``."""
    return df.select(
        F.from_json(F.col("value"), ENVELOPE).alias("_line"),
        F.input_file_name().alias("_source_file"),
    )


def _fail(message: str) -> str:
    return f"raise_error(concat({sql_string(message)}, _source_file))"


def with_image(df: DataFrame) -> DataFrame:
    """``_image``: the item's DynamoDB JSON (full export ``Item``), ``_attrs``: it as a map."""
    image = "coalesce(`_line`.Item, `_line`.NewImage)"
    checked = F.expr(
        f"case when `_line` is null or {image} is null then "
        f"{_fail('a line is not a DynamoDB JSON item (no Item or NewImage) in ')} else {image} end"
    )
    return df.withColumn("_image", checked).withColumn("_attrs", F.expr(parse_item("_image")))


# --- one value -> struct<v: column type, ok: fits> ---------------------------------------------


def _result(value: str, ok: str) -> str:
    return f"named_struct('v', {value}, 'ok', {ok})"


def _bind(expression: str, name: str, body: str) -> str:
    """``body`` with ``name`` bound to ``expression``, evaluated once (a one-element transform)."""
    return f"transform(array({expression}), {name} -> {body})[0]"


def _value_of(descriptor: str, element: str) -> str:
    """A set element as a VALUE struct of that descriptor."""
    members = ", ".join(
        f"'{d}', {element if d == descriptor else 'cast(null as ' + ('boolean' if d in ('BOOL', 'NULL') else 'array<string>' if d in ('SS', 'NS', 'BS') else 'string') + ')'}"
        for d in DESCRIPTORS
    )
    return f"named_struct({members})"


def typed(value: str, column_type: ColumnType, depth: int = 0) -> str:
    """SQL for ``struct<v, ok>``: the value decoded to ``column_type``, and whether it fitted
    (an absent or NULL value fits, as null)."""
    absent = is_absent(value)
    kind = column_type.kind
    if kind == "string":
        return _bind(
            text_sql(value), f"t{depth}", _result(f"t{depth}", f"t{depth} is not null or {absent}")
        )
    if kind == "boolean":
        return _result(field(value, "BOOL"), f"{field(value, 'BOOL')} is not null or {absent}")
    if kind == "binary":
        return _result(
            f"unbase64({field(value, 'B')})", f"{field(value, 'B')} is not null or {absent}"
        )
    if kind in ("bigint", "decimal"):
        number = field(value, "N")
        if kind == "bigint":
            fits, cast = fits_long(number), f"cast(cast({number} as decimal(38,0)) as bigint)"
        else:
            fits = fits_decimal(number, column_type.precision, column_type.scale)
            cast = f"cast({number} as {column_type.sql()})"
        ok = f"f{depth}"
        return _bind(fits, ok, _result(f"case when {ok} then {cast} end", f"{ok} or {absent}"))
    if kind == "struct":
        return _struct(value, column_type, depth, absent)
    if kind == "array":
        return _array(value, column_type, depth, absent)
    raise ValueError(f"unknown column type {column_type}")


def _struct(value: str, column_type: ColumnType, depth: int, absent: str) -> str:
    m, r = f"m{depth}", f"r{depth}"
    decoded = ", ".join(
        f"'f{i}', {typed(f'{m}[{sql_string(f.name)}]', f.type, depth + 1)}"
        for i, f in enumerate(column_type.fields)
    )
    built = ", ".join(
        f"{sql_string(f.column)}, {r}.f{i}.v" for i, f in enumerate(column_type.fields)
    )
    known = ", ".join(sql_string(f.name) for f in column_type.fields)
    fits = " and ".join(f"{r}.f{i}.ok" for i in range(len(column_type.fields)))
    fitted = f"{m} is not null and {fits} and forall(map_keys({m}), k -> array_contains(array({known}), k))"
    body = _result(f"case when {fitted} then named_struct({built}) end", f"{absent} or ({fitted})")
    return _bind(parse_map(value), m, _bind(f"named_struct({decoded})", r, body))


def _array(value: str, column_type: ColumnType, depth: int, absent: str) -> str:
    assert column_type.element is not None
    es, e, rs = f"es{depth}", f"e{depth}", f"rs{depth}"
    elements = (
        f"coalesce({parse_list(value)}, "
        + ", ".join(
            f"transform({field(value, s)}, x -> {_value_of(s[0], 'x')})" for s in ("SS", "NS", "BS")
        )
        + ")"
    )
    values = f"transform({rs}, r -> r.v)"
    sets_sorted = (
        f"case when {field(value, 'L')} is null then array_sort({values}) else {values} end"
    )
    fitted = f"{es} is not null and forall({rs}, r -> r.ok)"
    body = _result(f"case when {fitted} then {sets_sorted} end", f"{absent} or ({fitted})")
    decoded = f"transform({es}, {e} -> {typed(e, column_type.element, depth + 1)})"
    return _bind(elements, es, _bind(decoded, rs, body))


# --- the item -> typed columns -----------------------------------------------------------------


def _attribute(name: str) -> str:
    return f"`_attrs`[{sql_string(name)}]"


def with_typed_columns(schema: Schema, table: str):
    """The schema's attributes as typed columns (keys first, never null) and ``_drift``."""
    attributes = list(schema.attributes)
    known = ", ".join(sql_string(a.name) for a in attributes)
    unknown = f"array_except(map_keys(`_attrs`), array({known}))"

    def key_column(i: int, attribute: Attribute, first: bool) -> F.Column:
        where = f"table {table}: key attribute {attribute.name!r}"
        checks = []
        if first:
            checks.append(
                f"when size({unknown}) > 0 then raise_error(concat({sql_string(NEW_ATTRIBUTES + ': ')}, "
                f"array_join({unknown}, ', '), ' in ', _source_file))"
            )
        checks.append(
            f"when {is_absent(_attribute(attribute.name))} then "
            f"{_fail(f'{where} is missing in an item of ')}"
        )
        misfit = f"not `__c{i}`.ok"
        if attribute.type.kind == "string":  # a string column takes any value: a key only S
            misfit += f" or {field(_attribute(attribute.name), 'S')} is null"
        checks.append(
            f"when {misfit} then "
            f"{_fail(f'{where} is not a value that fits {attribute.type.sql()} in ')}"
        )
        return F.expr(f"case {' '.join(checks)} else `__c{i}`.v end").alias(attribute.column)

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
                columns.append(F.col(f"`__c{i}`.v").alias(attribute.column))
        drift = ", ".join(
            f"case when not `__c{i}`.ok then {sql_string(a.name)} end"
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
