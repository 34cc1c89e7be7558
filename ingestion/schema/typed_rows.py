"""An item's image -> a staging row's typed columns: keys checked (never null), the other
attributes decoded, drift flagged in ``_drift``, the remainder in ``_rest``; by the decoder in the
JVM (decision 0013, ``item_decoder``), or in Spark SQL (``typed_columns``: the reference the
decoder is tested against, and what stream rejects' key check reads); for a single-table design
(decision 0009), ``_entity`` and one struct column per entity, so two entities' types never meet
in one column.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ingestion.config.names import quote
from ingestion.dynamodb.decode import fail
from ingestion.dynamodb.entities import ENTITY_COLUMN, EntityRule, entity_sql
from ingestion.dynamodb.values import descriptor, field, is_absent, sql_string
from ingestion.schema import item_decoder, item_json, typed_columns
from ingestion.schema.typed_columns import (
    NEW_ATTRIBUTES,
    UNKNOWN_DESCRIPTOR,
    _attribute,
    decoded,
    fits,
)
from ingestion.schema.types import Attribute, Schema


def _key_column(i: int, attribute: Attribute, first: bool, table: str, unknown: str) -> Column:
    """A key's typed column; the first key's case also fails the batch on an unknown type
    descriptor, and on attributes the schema does not know (``unknown``: SQL of their names)."""
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
            f"when size({unknown}) > 0 then "
            f"raise_error(concat({sql_string(NEW_ATTRIBUTES + ': ')}, "
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
        f"when {misfit} then {fail(f'{where} is not a value that fits {attribute.type.sql()} in ')}"
    )
    return F.expr(f"case {' '.join(checks)} else `__c{i}` end").alias(attribute.column)


def _unknown(attributes: list[Attribute]) -> str:
    known = ", ".join(sql_string(a.name) for a in attributes)
    return f"array_except(map_keys(`_attrs`), array({known}))"


def _drift(attributes: list[Attribute], prefix: str, strict: bool) -> str:
    """The names of the attributes whose value does not fit (null when none); with ``strict``
    (types of the first items), a failure of the batch with ``SAMPLE_MISFIT`` instead."""
    drift = ", ".join(
        f"case when not {fits(_attribute(a.name), f'`{prefix}{i}`')} then {sql_string(a.name)} end"
        for i, a in enumerate(attributes)
        if not a.key
    )
    drifted = f"filter(array({drift}), x -> x is not null)" if drift else "array()"
    found = drifted
    if strict:
        found = (
            f"raise_error(concat({sql_string(typed_columns.SAMPLE_MISFIT + ': ')}, "
            f"array_join({drifted}, ', '), ' in ', _source_file))"
        )
    return f"case when size({drifted}) > 0 then {found} end"


def _keys(
    df: DataFrame, keys: list[Attribute], table: str, unknown: str
) -> tuple[DataFrame, list[Column]]:
    decoded_keys = df.transform(decoded(keys))
    return decoded_keys, [_key_column(i, a, i == 0, table, unknown) for i, a in enumerate(keys)]


def _rest(names: list[str], inexact: str) -> str:
    return item_json.rest_sql(names, inexact, "`_attrs`", f"`{item_json.IMAGE}`")


def with_typed_columns(schema: Schema, table: str):
    """The schema's attributes as typed columns (keys first, never null), ``_drift`` and
    ``_rest`` (``item_json.rest_sql``). A schema of the first items' types
    (``Schema.sampled``) stages strictly: a value they do not describe fails the batch with
    ``SAMPLE_MISFIT`` (it would be a drift otherwise)."""
    attributes = list(schema.attributes)
    keys = [a for a in attributes if a.key]
    rest = [a for a in attributes if not a.key]

    def transform(df: DataFrame) -> DataFrame:
        given = list(df.columns)
        df, key_columns = _keys(df, keys, table, _unknown(attributes))
        df = df.transform(decoded(rest, schema.sampled is not None, "__v", exactly=True))
        values = [F.col(f"`__v{i}`").alias(a.column) for i, a in enumerate(rest)]
        drift = _drift(rest, "__v", schema.sampled is not None)
        remainder = _rest([a.name for a in attributes], "`__vinexact`")
        scratch = _scratch(df, given)
        return df.select(
            *key_columns,
            *values,
            "*",
            F.expr(drift).cast("array<string>").alias("_drift"),
            F.expr(remainder).alias("_rest"),
        ).drop(*scratch)

    return transform


DECODED = "_Typed$decoded"  # the decoder's row; no column is named so (``item_json._check_free``)
KEYS_ONLY = "(`_line`.Item is null and `_line`.NewImage is null and `_line`.OldImage is null)"


def typed_rows(schema: Schema, table: str):
    """The transform that types staging rows by ``schema`` (rows with ``_source_file`` and
    ``value``, the line of an export or change file, or else ``_image``, the item's DynamoDB
    JSON, and ``_line``, the parsed envelope, where they have one): the decoder of decision
    0013 (``item_decoder``), one parse of each line or item. It adds the typed
    columns (``row_columns``), ``_drift`` and ``_rest``; a single-table design's rows keep an
    ``_entity`` they have (a rebuild). A row the decoder refuses fails the batch with its
    message and the line's file, raised with the first key's column."""

    def transform(df: DataFrame) -> DataFrame:
        given = schema.rule is not None and ENTITY_COLUMN in df.columns
        lines = "value" in df.columns
        name = item_decoder.registered(df.sparkSession, schema, table, given, lines)
        entity = f"`{ENTITY_COLUMN}`" if given else "cast(null as string)"
        if lines:  # the decoder takes the image out of the line: one parse of it
            call = f"{name}(`value`, {entity}, cast(null as boolean))"
        else:
            keys_only = KEYS_ONLY if "_line" in df.columns else "false"
            call = f"{name}(`_image`, {entity}, {keys_only})"
        decoded = df.withColumn(DECODED, F.expr(call))
        row = f"`{DECODED}`"
        fields = item_decoder.columns(schema)
        (first, first_column), others = fields[0], fields[1:]
        error = f"{row}.`{item_decoder.ERROR}`"
        typed = [
            F.expr(
                f"case when {error} is not null then raise_error(concat({error}, _source_file)) "
                f"else {row}.`{first}` end"
            ).alias(first_column)
        ]
        typed += [F.expr(f"{row}.`{field}`").alias(column) for field, column in others]
        kept = [
            quote(c) for c in df.columns if c not in ("value", "_attrs", "_line", ENTITY_COLUMN)
        ]
        return decoded.select(
            *typed,
            *kept,
            F.expr(f"{row}.`_drift`").alias("_drift"),
            F.expr(f"{row}.`_rest`").alias("_rest"),
        )

    return transform


def typed_rows_sql(schema: Schema, table: str):
    """The same transform as ``typed_rows``, decoded in Spark SQL (rows also with ``_attrs``,
    the item as ``map<attribute, VALUE>``): the reference ``tests/schema/test_item_decoder.py``
    compares the decoder (decision 0013) with."""
    decode = (
        with_typed_columns(schema, table)
        if schema.rule is None
        else with_entity_columns(schema, schema.rule, table)
    )
    # The line (the decoder's input) is no column of its: an attribute may be named `value`.
    return lambda df: df.drop("value").transform(decode)


def with_entity_columns(schema: Schema, rule: EntityRule, table: str):
    """``_entity`` (``entities.entity_sql``), the keys as typed columns, and per entity with
    attributes one struct column named by its final table, holding its attributes' typed
    columns on its own rows (null on the others'), each decoded by that entity's types only;
    ``_drift`` and ``_rest`` by the row's entity (an unmatched item's attributes have no column:
    all are in ``_rest``). An entity with no section yet takes no attribute: any is new
    (``NEW_ATTRIBUTES``)."""
    keys = [a for a in schema.attributes if a.key]
    sections = [(final, schema.entity(final)) for _, final in rule.values]
    entities = [(f, [a for a in s.attributes if not a.key], s) for f, s in sections if s]
    entities = [(f, attrs, s) for f, attrs, s in entities if attrs]
    unknown_by = " ".join(
        f"when {sql_string(final)} then {_unknown(keys + list(s.attributes if s else []))}"
        for final, s in sections
    )
    unknown = f"(case `{ENTITY_COLUMN}` {unknown_by} else array() end)"

    def transform(df: DataFrame) -> DataFrame:
        if ENTITY_COLUMN not in df.columns:  # staged rows typed again keep theirs (rebuild)
            df = df.withColumn(ENTITY_COLUMN, F.expr(entity_sql(rule)))
        given = list(df.columns)
        df, key_columns = _keys(df, keys, table, unknown)
        structs, drifts, rests = [], [], []
        for j, (final, attributes, section) in enumerate(entities):
            guard = f"`{ENTITY_COLUMN}` = {sql_string(final)}"
            strict = section.sampled is not None
            df = df.transform(decoded(attributes, strict, f"__e{j}_", guard, exactly=True))
            fields = ", ".join(
                f"{sql_string(a.column)}, `__e{j}_{i}`" for i, a in enumerate(attributes)
            )
            structs.append(
                F.expr(f"case when {guard} then named_struct({fields}) end").alias(final)
            )
            drifts.append(f"when {sql_string(final)} then {_drift(attributes, f'__e{j}_', strict)}")
            names = [a.name for a in keys + attributes]
            rests.append(f"when {sql_string(final)} then {_rest(names, f'`__e{j}_inexact`')}")
        drift = f"case `{ENTITY_COLUMN}` {' '.join(drifts)} end" if drifts else "null"
        unmatched = _rest([a.name for a in keys], "cast(array() as array<string>)")
        remainder = f"case `{ENTITY_COLUMN}` {' '.join(rests)} else {unmatched} end"
        scratch = _scratch(df, given)
        return df.select(
            *key_columns,
            *structs,
            "*",
            F.expr(drift).cast("array<string>").alias("_drift"),
            F.expr(remainder).alias("_rest"),
        ).drop(*scratch)

    return transform


def _scratch(df: DataFrame, given: list[str]) -> list[str]:
    """The decode's working columns (those it added to ``given``, and the parsed line and
    image), dropped once the typed columns are taken from them."""
    return [c for c in df.columns if c not in given] + ["_attrs", "_line"]


def row_columns(schema: Schema) -> list[Column]:
    """A staging row's typed columns, in order: the attributes', or for a single-table design
    the keys', ``_entity`` and each entity's struct column (quoted: a person may name a column
    with a dot or a backtick)."""
    rule = schema.rule
    if rule is None:
        return [F.col(quote(a.column)) for a in schema.attributes]
    structs = [
        final
        for _, final in rule.values
        if (s := schema.entity(final)) and any(not a.key for a in s.attributes)
    ]
    keys = [a.column for a in schema.attributes if a.key]
    return [F.col(quote(c)) for c in [*keys, ENTITY_COLUMN, *structs]]
