"""Each item's fingerprint computed in the JVM, for ``verify``'s first pass: its key as text and a
64-bit hash of its canonical DynamoDB JSON, from the export's lines and from the final table's
typed columns alike (docs/proving-it.md, "What it compares, and how").

Shares nothing with the decode: the export is read by Spark's own JSON reader into DynamoDB
JSON's generic shape (every map a map: no name dropped), the final row encoded back from its
column types, both hashed by the Spark SQL text built here. Sound, not complete: equal
fingerprints mean ingestion.schema.canonical finds the items equal (but for a collision);
whatever the hash cannot decide hashes apart and goes to Python. A hash folds its parts in
order (``xxhash64`` skips a null part): each value tagged with its type, each map entry with its
name, sorted; absent and ``NULL`` alike in a map, ``NULL`` an element in a list; a number's text
without trailing fractional zeros; binary as bytes; a set as its sorted elements; a value of
another type than its column's, a name its column does not know, or a value deeper than the
columns as ``UNSURE``, which no row hashes to (never as absent).

Every expression is linear in the size of the column's type, whatever its depth: the first
``UNROLLED`` elements of a list whose elements hold no list (scalars, maps of scalars) are hashed
one by one (compiled), every other list by ``transform`` (interpreted), so no list is unrolled
inside another's element; inside a lambda a
map is bound once to a variable (a one-element ``transform``) and its names looked up there; the
export's top-level lookups of names run in projections of their own (``element_at``: not
inlined); the export is parsed with a type made from the columns' (``parse_type``), typed only
where a column reads a map's or a list's content.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from ingestion.config.names import quote
from ingestion.dynamodb.values import sql_string
from ingestion.schema.types import Attribute, ColumnType, Schema, StructField

UNROLLED = 8
# The columns added here: a ``$`` no column name has (ingestion.dynamodb.naming), so a table's own
# columns (``_keywords``, ``_bucket``...) never meet them.
FINGERPRINT = "fp$fingerprint"


def key_column(i: int) -> str:
    return f"fp$key{i}"


def key_names(frame: DataFrame) -> list[str]:
    return [c for c in frame.columns if c.startswith("fp$key")]


UNSURE = "xxhash64('?')"
NUMBERS = ("number", "bigint", "decimal")
_VARIABLES = itertools.count(1)  # a lambda's variable: unique in a process, so nesting is safe


def _variable() -> str:
    return f"fp_x{next(_VARIABLES)}"


def _hash(kind: str, *parts: str) -> str:
    return f"xxhash64({', '.join((sql_string(kind), *parts))})"


def _number(text: str) -> str:
    """A number's text with trailing fractional zeros dropped; any other spelling unchanged."""
    plain = f"instr({text}, '.') > 0 and instr(lower({text}), 'e') = 0"
    trimmed = f"trim(TRAILING '.' FROM trim(TRAILING '0' FROM {text}))"
    return f"(case when {plain} then {trimmed} else {text} end)"


def _at(value: str, kind: str) -> str:
    return f"{value}.`{kind}`"


def _bytes(text: str) -> str:
    """Base64 text's bytes (binary is hashed as bytes on both sides: Spark's ``base64`` may break
    a long value's text into lines)."""
    return f"unbase64({text})"


def _absent(value: str) -> str:
    return f"({value} is null or coalesce({_at(value, 'NULL')}, false))"


def _flat(column: ColumnType) -> bool:
    """No list anywhere in ``column``'s type (a scalar, or maps of them)."""
    return column.kind != "array" and all(_flat(f.type) for f in column.fields)


def _unrolled(column: ColumnType) -> bool:
    """Whether a list at a column of ``column``'s type is hashed element by element when short
    (compiled: ``transform`` is interpreted, 12 s more on ``orders``' list of maps at 1M items):
    only a list whose elements hold no list, so no unrolled list is ever inside another's
    element and the expression stays linear in the type's size (eight copies at most)."""
    return column.kind == "array" and column.element is not None and _flat(column.element)


def parse_type(columns: Sequence[ColumnType]) -> str:
    """DynamoDB JSON's generic shape for a value read at columns of ``columns``' types: ``M`` a
    ``map<name, VALUE>`` where one of them is a struct (VALUE: the same shape for every field's
    type at once), ``L`` an ``array<VALUE>`` where one is an array, raw text elsewhere (a map or
    list there is of another type: ``UNSURE``). Its size is the sum of the types' sizes: each
    type met once, never a copy per level."""
    fields = [f.type for c in columns if c.kind == "struct" for f in c.fields]
    elements = [c.element for c in columns if c.kind == "array" and c.element is not None]
    mapped = f"map<string, {parse_type(fields)}>" if fields else "string"
    listed = f"array<{parse_type(elements)}>" if elements else "string"
    return (
        "struct<S: string, N: string, B: string, BOOL: boolean, `NULL`: boolean, "
        f"SS: array<string>, NS: array<string>, BS: array<string>, M: {mapped}, L: {listed}>"
    )


# --- the export side ---------------------------------------------------------------------------


@dataclass
class _Lookups:
    """Columns added level by level, each a name's or an element's lookup computed once."""

    levels: list[list[tuple[str, str]]] = field(default_factory=list)
    count: int = 0

    def add(self, level: int, expression: str) -> str:
        while len(self.levels) <= level:
            self.levels.append([])
        name = f"_fp{self.count}"
        self.count += 1
        self.levels[level].append((name, expression))
        return name


def _scalar(value: str, column: ColumnType) -> str | None:
    kind = column.kind
    if kind == "string":
        return f"case when {_at(value, 'S')} is not null then {_hash('S', _at(value, 'S'))} end"
    if kind in NUMBERS:
        number = _number(_at(value, "N"))
        return f"case when {_at(value, 'N')} is not null then {_hash('N', number)} end"
    if kind == "boolean":
        text = f"cast({_at(value, 'BOOL')} as string)"
        return f"case when {_at(value, 'BOOL')} is not null then {_hash('BOOL', text)} end"
    if kind == "binary":
        return (
            f"case when {_at(value, 'B')} is not null then "
            f"{_hash('B', _bytes(_at(value, 'B')))} end"
        )
    return None


def _set(value: str, element: ColumnType) -> str:
    """``when`` branches for a set at an array column of ``element``s (none: such a set is
    another type)."""
    x = _variable()
    if element.kind == "string":
        hashed = f"transform(sort_array({_at(value, 'SS')}), {x} -> {_hash('S', x)})"
        return f" when {_at(value, 'SS')} is not null then {_hash('L', hashed)}"
    if element.kind in NUMBERS:
        pairs = f"transform({_at(value, 'NS')}, {x} -> struct(cast({x} as double), {_number(x)}))"
        hashed = f"transform(array_sort({pairs}), {x} -> {_hash('N', x + '.col2')})"
        return f" when {_at(value, 'NS')} is not null then {_hash('L', hashed)}"
    if element.kind == "binary":
        pairs = f"transform({_at(value, 'BS')}, {x} -> {_bytes(x)})"
        hashed = f"transform(array_sort({pairs}), {x} -> {_hash('B', x)})"
        return f" when {_at(value, 'BS')} is not null then {_hash('L', hashed)}"
    return ""


def _value(value: str, column: ColumnType, lookups: _Lookups | None, level: int) -> str:
    """The hash of a present value (not absent, not ``NULL``) at a column of ``column``'s type;
    ``UNSURE`` when it is of another type. ``lookups``: None inside a lambda (no staged
    columns there)."""
    scalar = _scalar(value, column)
    if scalar is not None:
        hashed = scalar
    elif column.kind == "struct" and lookups is None:  # in a lambda: the map bound once
        m = _variable()
        entries = _map(m, column.fields, None, level)
        hashed = (
            f"transform(array({_at(value, 'M')}), {m} -> case when {m} is not null then "
            f"{entries} end)[0]"
        )
    elif column.kind == "struct":
        entries = _map(_at(value, "M"), column.fields, lookups, level)
        hashed = f"case when {_at(value, 'M')} is not null then {entries} end"
    elif column.kind == "array":
        assert column.element is not None
        listed = _list(_at(value, "L"), column.element, lookups, level)
        sets = _set(value, column.element)
        hashed = f"case when {_at(value, 'L')} is not null then {listed}{sets} end"
    else:
        raise ValueError(f"unknown column type {column.sql()}")
    return f"coalesce({hashed}, {UNSURE})"


def _element(value: str, column: ColumnType, lookups: _Lookups | None, level: int) -> str:
    return (
        f"case when {_absent(value)} then {_hash('NULL')} else "
        f"{_value(value, column, lookups, level)} end"
    )


def _list(items: str, element: ColumnType, lookups: _Lookups | None, level: int) -> str:
    x = _variable()
    every = _hash("L", f"transform({items}, {x} -> {_element(x, element, None, level + 1)})")
    if lookups is None or not _flat(element):
        return every
    unrolled = []
    for i in range(UNROLLED):
        item = lookups.add(level, f"element_at({items}, {i + 1})")
        unrolled.append(
            f"case when size({items}) > {i} then {_element(item, element, lookups, level + 1)} end"
        )
    return f"case when size({items}) <= {UNROLLED} then {_hash('L', *unrolled)} else {every} end"


def _map(
    entries: str, fields: Sequence[Attribute | StructField], lookups: _Lookups | None, level: int
) -> str:
    """The hash of a map of the known names ``fields``; ``UNSURE`` when it holds another name."""
    parts, known = [], []
    for f in sorted(fields, key=lambda f: f.name):
        lookup = f"element_at({entries}, {sql_string(f.name)})"
        value = lookups.add(level, lookup) if lookups is not None else lookup
        known.append(f"case when {value} is not null then 1 else 0 end")
        hashed = _value(value, f.type, lookups, level + 1)
        parts.append(
            f"case when not {_absent(value)} then struct({sql_string(f.name)}, {hashed}) end"
        )
    count = " + ".join(known) or "0"
    return f"case when size({entries}) = {count} then {_hash('M', *parts)} else {UNSURE} end"


def _export_key(value: str) -> str:
    return (
        f"coalesce(concat('S', {_at(value, 'S')}), concat('N', {_number(_at(value, 'N'))}), "
        f"concat('B', hex({_bytes(_at(value, 'B'))})))"
    )


def read_export(spark: SparkSession, paths: list[str], schema: Schema) -> DataFrame:
    """The export's lines (``value``) and their items in DynamoDB JSON's generic shape
    (``Item``), deep enough for every column of ``schema``: the one parse both passes use, so
    an item's key is the same text in each."""
    parsed = F.from_json(
        "value", f"Item map<string, {parse_type([a.type for a in schema.attributes])}>"
    )
    return spark.read.text(paths).select("value", parsed.alias("line")).select("value", "line.Item")


def export_fingerprints(items: DataFrame, schema: Schema) -> DataFrame:
    """The key columns (``key_column``: the key attributes' text) and ``FINGERPRINT`` of each item
    of ``read_export``'s frame: one query, its lookups in nested projections (built as one text: a
    select per level would analyse the plan again each time)."""
    lookups = _Lookups()
    fingerprint = _map("Item", schema.attributes, lookups, 0)
    keys = [f"element_at(Item, {sql_string(a.name)})" for a in schema.attributes if a.key]
    view = f"fingerprint_items_{next(_VARIABLES)}"
    items.createOrReplaceTempView(view)
    query = f"select * from {view}"
    for level in lookups.levels:
        columns = ", ".join(f"{e} as {n}" for n, e in level)
        query = f"select *, {columns} from ({query})"
    selected = ", ".join(f"{_export_key(k)} as {quote(key_column(i))}" for i, k in enumerate(keys))
    session = items.sparkSession
    return session.sql(f"select {selected}, {fingerprint} as {quote(FINGERPRINT)} from ({query})")


def key_columns(expressions: list[str]) -> list[Column]:
    return [F.expr(e).alias(key_column(i)) for i, e in enumerate(expressions)]


def export_keys(schema: Schema) -> list[Column]:
    """The key columns of ``read_export``'s frame alone (for the second pass)."""
    keys = [f"element_at(Item, {sql_string(a.name)})" for a in schema.attributes if a.key]
    return key_columns([_export_key(k) for k in keys])


# --- the final side ----------------------------------------------------------------------------


def _final(value: str, column: ColumnType, bound: bool = False) -> str:
    """The hash of a final table's value of ``column``'s type, null when it is null. ``bound``:
    ``value`` is a lambda's variable (or a field of one), where a struct is bound to a variable
    of its own before its fields are read."""
    kind = column.kind
    if kind == "string":
        hashed = _hash("S", value)
    elif kind == "number":
        hashed = _hash("N", _number(value))
    elif kind == "boolean":
        hashed = _hash("BOOL", f"cast({value} as string)")
    elif kind == "binary":
        hashed = _hash("B", value)
    elif kind == "bigint":
        hashed = _hash("N", f"cast({value} as string)")
    elif kind == "decimal":
        hashed = _hash("N", _number(f"cast({value} as string)"))
    elif kind == "struct" and bound:
        s = _variable()
        fields = {f.name: f"{s}.{quote(f.column)}" for f in column.fields}
        return (
            f"transform(array({value}), {s} -> case when {s} is not null then "
            f"{_final_map(fields, column.fields, True)} end)[0]"
        )
    elif kind == "struct":
        fields = {f.name: f"{value}.{quote(f.column)}" for f in column.fields}
        hashed = _final_map(fields, column.fields)
    elif kind == "array":
        assert column.element is not None
        x = _variable()
        element = f"coalesce({_final(x, column.element, True)}, {_hash('NULL')})"
        hashed = _hash("L", f"transform({value}, {x} -> {element})")
        if _unrolled(column) and not bound:
            unrolled = [
                f"case when size({value}) > {i} then "
                f"coalesce({_final(f'{value}[{i}]', column.element)}, {_hash('NULL')}) end"
                for i in range(UNROLLED)
            ]
            hashed = (
                f"case when size({value}) <= {UNROLLED} then {_hash('L', *unrolled)} else "
                f"{hashed} end"
            )
    else:
        raise ValueError(f"unknown column type {column.sql()}")
    return f"case when {value} is not null then {hashed} end"


def _final_map(
    values: dict[str, str], fields: Sequence[Attribute | StructField], bound: bool = False
) -> str:
    parts = []
    for f in sorted(fields, key=lambda f: f.name):
        hashed = _final(values[f.name], f.type, bound)
        parts.append(
            f"case when {values[f.name]} is not null then struct({sql_string(f.name)}, {hashed}) "
            f"end"
        )
    return _hash("M", *parts)


def _final_key(value: str, column: ColumnType) -> str:
    if column.kind == "string":
        return f"concat('S', {value})"
    if column.kind == "binary":
        return f"concat('B', hex({value}))"
    if column.kind == "bigint":
        return f"concat('N', cast({value} as string))"
    return f"concat('N', {_number(f'cast({value} as string)')})"


def final_keys(schema: Schema) -> list[Column]:
    return key_columns([_final_key(quote(a.column), a.type) for a in schema.attributes if a.key])


def final_fingerprints(rows: DataFrame, schema: Schema, *kept: str) -> DataFrame:
    """The key columns, ``FINGERPRINT`` and the ``kept`` columns of a final table's rows."""
    values = {a.name: quote(a.column) for a in schema.attributes}
    fingerprint = _final_map(values, schema.attributes)
    return rows.select(*final_keys(schema), F.expr(fingerprint).alias(FINGERPRINT), *kept)
