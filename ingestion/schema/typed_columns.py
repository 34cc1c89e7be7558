"""One attribute value -> its column value, and an item's image -> the table's typed columns.

``typed`` gives the value decoded to the column type, null when absent, NULL, or when it does
not fit. So "it fits" is always ``is_absent(value) or decoded is not null`` (``fits``): the
decision is made once, and top-level scalars stay plain expressions that Spark compiles.

**Layouts.** A struct column's map is decoded from ``VALUE.M``, an array column's list from
``VALUE.L``. In the generic parse both are JSON text, parsed again where a column needs their
content (a list of maps: the item, the list's text, each element's text). A ``Layout`` says, per
route into a column (the attribute, then its map's values, then their lists' elements...),
whether ``M`` and ``L`` arrive typed (``map<key, VALUE>``, ``array<VALUE>``) or as text, so that
the decode reads values Spark's JSON parser filled directly. They arrive typed only where every
column type met at that route needs them so: a ``string`` column there renders maps and lists
from their text, so a route holding one keeps the text. Maps stay maps (never structs), so the
decode still sees every key and a key the column lacks still makes the value not fit.

**Types of the first items.** Types learnt from a batch's first items (``types.Schema.sampled``)
are proven by the pass that stages the batch: at every path, a value of a descriptor detection
did not see there in those items does not fit (``guarded``), and a value that does not fit fails
the batch with ``SAMPLE_MISFIT`` before its commit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ingestion.dynamodb.numbers import canonical_number, fits_decimal, fits_long
from ingestion.dynamodb.values import (
    DESCRIPTORS,
    field,
    is_absent,
    parse_list,
    parse_map,
    sql_string,
    text_sql,
    value_ddl,
)
from ingestion.schema.item_json import set_descriptor
from ingestion.schema.type_rules import DETECTED_MARK
from ingestion.schema.types import Attribute, ColumnType

# The message a batch staged with types from its first items (``Schema.sampled``) fails with when a
# value does not fit them: staging (ingestion/catalog/schema_choice.py) then detects the types from
# every item and stages the batch again.
SAMPLE_MISFIT = "dynamodb-lakehouse: values the first items' types do not describe"


def seen_descriptors(info: dict[str, Any] | None) -> list[str] | None:
    """The descriptors a value may have where detection saw ``info`` (its ``dynamodb_types``),
    for a schema learnt from the first items: those seen there (NULL always, being no value);
    where only NULL was seen, S too (its type, text, is what S would give). None: any (a
    declared entry, or no detection record)."""
    if not info or DETECTED_MARK not in info:
        return None
    kinds = [d for d in info[DETECTED_MARK] if d != "NULL"]
    return kinds or ["S"]


def guarded(value: str, decoded_sql: str, seen: dict[str, Any] | None) -> str:
    """``decoded_sql`` (the SQL of ``value`` decoded), null where ``value`` has a descriptor not
    in ``seen_descriptors(seen)``."""
    kinds = seen_descriptors(seen)
    others = [d for d in DESCRIPTORS if kinds is not None and d not in kinds and d != "NULL"]
    if not others:
        return decoded_sql
    unseen = " or ".join(f"{field(value, d)} is not null" for d in others)
    return f"case when not ({unseen}) then {decoded_sql} end"


def seen_below(
    seen: dict[str, Any] | None, step: str, name: str | None = None
) -> dict[str, Any] | None:
    """Detection's record of a struct field (``step`` ``fields``) or of a list's elements."""
    if not seen or step not in seen:
        return None
    found = seen[step] if name is None else seen[step].get(name)
    return found if isinstance(found, dict) else None


@dataclass(frozen=True)
class Layout:
    """One route: whether ``M`` / ``L`` arrive typed, and the routes below them."""

    maps: Layout | None = None  # the route into a typed map's values; None: M is text
    lists: Layout | None = None  # the route into a typed list's elements; None: L is text

    def value_ddl(self) -> str:
        mapped = f"map<string,{self.maps.value_ddl()}>" if self.maps else "string"
        listed = f"array<{self.lists.value_ddl()}>" if self.lists else "string"
        return value_ddl(mapped, listed)

    @property
    def typed(self) -> bool:
        return self.maps is not None or self.lists is not None


TEXT = Layout()


def layout(types: list[ColumnType]) -> Layout:
    """The layout of a route where values of ``types`` are decoded."""
    if any(t.kind == "string" for t in types):
        return TEXT
    fields = [f.type for t in types if t.kind == "struct" for f in t.fields]
    elements = [t.element for t in types if t.kind == "array" and t.element is not None]
    return Layout(layout(fields) if fields else None, layout(elements) if elements else None)


def typed_attributes_ddl(columns: list[tuple[str, ColumnType]]) -> str | None:
    """The type that parses an item's nested attributes typed (``struct<name: VALUE>``, one
    field per attribute whose layout types anything), or None when none does."""
    typed = [(name, layout([t])) for name, t in columns]
    fields = [f"{_quote(name)}:{shape.value_ddl()}" for name, shape in typed if shape.typed]
    return f"struct<{','.join(fields)}>" if fields else None


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


# The message an item with attributes the schema does not know yet fails its batch with:
# staging (ingestion/catalog/schema_choice.py) adds them to the schema and stages the batch again.
NEW_ATTRIBUTES = "dynamodb-lakehouse: attributes not in the schema yet"
UNKNOWN_DESCRIPTOR = (
    "table {table}: a value with an unknown type descriptor (expected one of "
    + ", ".join(DESCRIPTORS)
    + ") in attribute(s) "
)


def _bind(expression: str, name: str, body: str) -> str:
    """``body`` with ``name`` bound to ``expression``, evaluated once (a one-element transform)."""
    return f"transform(array({expression}), {name} -> {body})[0]"


def fits(value: str, decoded_sql: str) -> str:
    return f"({is_absent(value)} or {decoded_sql} is not null)"


def _exact_fit(value: str, decoded_sql: str) -> str:
    """A map's field given back exactly: absent, or decoded exactly (``NULL`` is not absent)."""
    return f"({value} is null or {decoded_sql} is not null)"


def _null(descriptor: str) -> str:
    if descriptor in ("BOOL", "NULL"):
        return "cast(null as boolean)"
    return (
        "cast(null as array<string>)"
        if descriptor in ("SS", "NS", "BS")
        else "cast(null as string)"
    )


def _value_of(descriptor: str, element: str, shape: Layout) -> str:
    """A set element as a VALUE struct of that descriptor (typed as ``shape`` says)."""
    nulls = {
        "M": f"cast(null as map<string,{shape.maps.value_ddl()}>)" if shape.maps else None,
        "L": f"cast(null as array<{shape.lists.value_ddl()}>)" if shape.lists else None,
    }
    members = ", ".join(
        f"'{d}', {element if d == descriptor else nulls.get(d) or _null(d)}" for d in DESCRIPTORS
    )
    return f"named_struct({members})"


def typed(
    value: str,
    column_type: ColumnType,
    depth: int = 0,
    shape: Layout = TEXT,
    compiled: bool = False,
    seen: dict[str, Any] | None = None,
    exact: Exact | None = None,
) -> str:
    """SQL for the value decoded to ``column_type``: null when absent, NULL or not fitting.
    ``shape``: whether the value's ``M`` and ``L`` arrive typed or as text (``Layout``);
    ``compiled``: a typed map at the top decoded by plain expressions, not in a lambda.
    ``seen``: detection's record of the path, for types of the first items (``guarded``).
    ``exact``: null also where the column cannot give the value back exactly (``Exact``)."""
    decoded = _typed(value, column_type, depth, shape, compiled, seen, exact)
    return guarded(value, decoded, seen)


@dataclass(frozen=True)
class Exact:
    """The decode that is null where the column cannot give the value back exactly (decision
    0012's remainder): ``NULL`` at any depth below the top, a descriptor the column does not
    stand for (anything but ``S`` in a ``string`` column, a set in a column of lists, a list in
    a set's column). Where it is not null it equals the plain decode. ``sets``: the set
    descriptor the top-level array column stands for (``item_json.set_descriptor``); None: a
    list (nested arrays always are)."""

    sets: str | None = None


def _typed(
    value: str,
    column_type: ColumnType,
    depth: int,
    shape: Layout,
    compiled: bool,
    seen: dict[str, Any] | None,
    exact: Exact | None = None,
) -> str:
    kind = column_type.kind
    if kind == "string":
        return field(value, "S") if exact is not None else text_sql(value)
    if kind == "boolean":
        return field(value, "BOOL")
    if kind == "binary":
        return f"unbase64({field(value, 'B')})"
    if kind == "bigint":
        number = field(value, "N")
        return (
            f"case when {fits_long(number)} then cast(cast({number} as decimal(38,0)) as "
            f"bigint) end"
        )
    if kind == "number":
        return canonical_number(field(value, "N"))
    if kind == "decimal":
        number = field(value, "N")
        fitted = fits_decimal(number, column_type.precision, column_type.scale)
        return f"case when {fitted} then cast({number} as {column_type.sql()}) end"
    if kind == "struct":
        return _struct(value, column_type, depth, shape, compiled, seen, exact)
    if kind == "array":
        return _array(value, column_type, depth, shape, seen, exact)
    raise ValueError(f"unknown column type {column_type}")


def _struct(
    value: str,
    column_type: ColumnType,
    depth: int,
    shape: Layout,
    compiled: bool = False,
    seen: dict[str, Any] | None = None,
    exact: Exact | None = None,
) -> str:
    below = shape.maps or TEXT
    nested = None if exact is None else Exact()
    fit = fits if exact is None else _exact_fit
    known = ", ".join(sql_string(f.name) for f in column_type.fields)

    def body(m: str, field_value) -> str:
        keys = [f"{m}[{sql_string(f.name)}]" for f in column_type.fields]
        every = " and ".join(fit(key, field_value(i, key)) for i, key in enumerate(keys))
        only_known = f"size(array_except(map_keys({m}), array({known}))) = 0"
        built = ", ".join(
            f"{sql_string(f.column)}, {field_value(i, key)}"
            for i, (key, f) in enumerate(zip(keys, column_type.fields, strict=True))
        )
        return (
            f"case when {m} is not null and {every} and {only_known} then named_struct({built}) end"
        )

    def decode(i: int, key: str) -> str:
        name = column_type.fields[i].name
        return typed(
            key,
            column_type.fields[i].type,
            depth + 1,
            below,
            seen=seen_below(seen, "fields", name),
            exact=nested,
        )

    if shape.maps and depth == 0 and compiled:
        # A typed map at the top: plain expressions, compiled (no lambda to bind values in);
        # Spark evaluates each field's decode once (common subexpressions).
        return body(field(value, "M"), decode)
    m, r = f"m{depth}", f"r{depth}"
    keys = [f"{m}[{sql_string(f.name)}]" for f in column_type.fields]
    decoded = ", ".join(f"'f{i}', {decode(i, key)}" for i, key in enumerate(keys))
    entries = field(value, "M") if shape.maps else parse_map(value)
    inner = body(m, lambda i, key: f"{r}.f{i}")
    return _bind(entries, m, _bind(f"named_struct({decoded})", r, inner))


def _array(
    value: str,
    column_type: ColumnType,
    depth: int,
    shape: Layout,
    seen: dict[str, Any] | None = None,
    exact: Exact | None = None,
) -> str:
    assert column_type.element is not None
    es, e, rs = f"es{depth}", f"e{depth}", f"rs{depth}"
    below = shape.lists or TEXT
    listed = field(value, "L") if shape.lists else parse_list(value)
    sets = {
        s: f"transform({field(value, s)}, x -> {_value_of(s[0], 'x', below)})"
        for s in ("SS", "NS", "BS")
    }
    if exact is None:
        elements = f"coalesce({listed}, {', '.join(sets.values())})"
    else:  # only what the column stands for: the one set, or else a list
        elements = sets[exact.sets] if exact.sets else listed
    nested = None if exact is None else Exact()
    element = typed(
        e, column_type.element, depth + 1, below, seen=seen_below(seen, "element"), exact=nested
    )
    pairs = f"transform({es}, {e} -> named_struct('e', {e}, 'v', {element}))"
    values = f"transform({rs}, p -> p.v)"
    sets_sorted = (
        f"case when {field(value, 'L')} is null then array_sort({values}) else {values} end"
    )
    element_fits = fits("p.e", "p.v") if exact is None else "p.v is not null"
    fitted = f"{es} is not null and forall({rs}, p -> {element_fits})"
    return _bind(elements, es, _bind(pairs, rs, f"case when {fitted} then {sets_sorted} end"))


def _attribute(name: str) -> str:
    return f"`_attrs`[{sql_string(name)}]"


# Up to this many attributes, nested attributes are decoded from a typed parse of the image and
# a top-level map by compiled expressions (its fields' decode twice in the plan, evaluated once).
# Beyond, the text path alone: the generated code of a wide item must stay within a
# 1 GB driver heap (tests/dynamodb/test_hostile.py: 1,000 attributes ran out of it in Janino).
TYPED_ATTRIBUTES = 100


def decoded(
    attributes: list[Attribute],
    strict: bool = False,
    prefix: str = "__c",
    guard: str = "",
    exactly: bool = False,
):
    """A function adding ``<prefix><i>``, each attribute decoded to its column type (null when
    it does not fit): nested ones from ``<prefix>typed`` (their maps and lists filled by
    Spark's JSON parser once, ingestion.schema.typed_columns) where the table is narrow enough, the
    rest from ``_attrs``. Absence, keys and drift are decided from ``_attrs`` either way.
    ``guard``: SQL a row must meet to be decoded at all (an entity's rows); null elsewhere.
    ``exactly``: also ``<prefix>inexact``, the names of the attributes whose column cannot give
    their value back exactly (``Exact``; drifted ones among them), found in the same decode:
    a nested attribute is decoded exactly first, and plainly only where that gives null."""
    narrow = len(attributes) <= TYPED_ATTRIBUTES
    nested = typed_attributes_ddl([(a.name, a.type) for a in attributes if not a.key])
    nested = nested if narrow else None
    parsed = f"{prefix}typed"

    def when(sql: str) -> str:
        return f"case when {guard} then {sql} end" if guard else sql

    def source(attribute: Attribute) -> tuple[str, Layout]:
        shape = layout([attribute.type])
        if nested is None or attribute.key or not shape.typed:
            return _attribute(attribute.name), TEXT
        return f"`{parsed}`.`{attribute.name.replace('`', '``')}`", shape

    def exact_first(attribute: Attribute) -> bool:
        return exactly and not attribute.key and attribute.type.kind in ("struct", "array")

    def decode(attribute: Attribute, exact: Exact | None = None) -> str:
        value, shape = source(attribute)
        seen = attribute.info if strict and not attribute.key else None
        return when(typed(value, attribute.type, 0, shape, compiled=narrow, seen=seen, exact=exact))

    def given_back(i: int, attribute: Attribute) -> str:
        """True when the column gives the attribute's value back exactly (or it is absent)."""
        value = _attribute(attribute.name)
        if attribute.type.kind == "string":
            exact = field(value, "S")
        else:
            exact = f"`{prefix}{'s' if exact_first(attribute) else ''}{i}`"
        return f"({value} is null or {exact} is not null)"

    def add(df: DataFrame) -> DataFrame:
        if nested is not None:
            df = df.withColumn(parsed, F.expr(when(f"from_json(`_image`, {sql_string(nested)})")))
        firsts = [
            F.expr(decode(a, Exact(set_descriptor(a)))).alias(f"{prefix}s{i}")
            for i, a in enumerate(attributes)
            if exact_first(a)
        ]
        if firsts:
            df = df.select("*", *firsts)
        values = []
        for i, attribute in enumerate(attributes):
            sql = decode(attribute)
            if exact_first(attribute):  # the plain decode only where the exact one gave null
                sql = f"coalesce(`{prefix}s{i}`, {sql})"
            values.append(F.expr(sql).alias(f"{prefix}{i}"))
        df = df.select("*", *values)
        if not exactly:
            return df
        flags = ", ".join(
            f"case when not {given_back(i, a)} then {sql_string(a.name)} end"
            for i, a in enumerate(attributes)
            if not a.key
        )
        inexact = f"array_compact(array({flags}))" if flags else "cast(array() as array<string>)"
        return df.withColumn(f"{prefix}inexact", F.expr(when(inexact)))

    return add
