"""The column type model: DynamoDB attribute -> column name and type, as a schema file holds it.

``schemas/<table>.json`` (``$LAKEHOUSE_SCHEMA_DIR`` overrides the folder) is written by detection
and meant to be read and edited by people. Its full form::

    {"table": "books", "items": 500, "source": "...",
     "attributes": {
       "Title":   {"column": "title", "type": "string", "dynamodb_types": {"S": 498, "NULL": 2}},
       "price":   {"column": "price", "type": "decimal(38,2)", "max_integer_digits": 3, ...},
       "details": {"column": "details", "type": "struct", "fields": {"Publisher": {...}}},
       "editions": {"column": "editions", "type": "array", "element": {"type": "struct", ...}},
       "tags":    {"column": "tags", "type": "array<string>"}}}

Types: ``string``, ``boolean``, ``binary``, ``bigint``, ``decimal(p,s)``, ``array<T>`` or ``array``
with ``element``, ``struct`` with ``fields``. A ``string`` column takes any value as text (numbers
with their exact digits, maps, lists and sets as plain JSON), so ``"type": "string"`` is also how
a map used as a dictionary is kept as JSON. An entry without ``type`` is detected; an entry with
only ``column`` renames. The simple form of AWS's sample utility, ``{"quantity": "N"}``, is read
too (and ``"N bigint"``, ``"N decimal(10,2)"``).

The type rules that fill it from detection live in ``ingestion.schema.type_rules`` (never
``double``, ``NULL`` never decides a type); reading and writing the file, in
``ingestion.schema.schema_file``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from ingestion.config.errors import LakehouseError
from ingestion.config.names import quote
from ingestion.dynamodb.entities import EntityRule
from ingestion.dynamodb.naming import column_name

METADATA_COLUMNS = (
    "_operation",
    "_version",
    "_sequence",
    "_source",
    "_source_file",
    "_batch_id",
    "_ingested_at",
    "_rest",
    "_drift",
)
# The final table's own metadata column (decision 0014): the batch whose change inserted the row,
# which the merge writes (macros/strategies/merge_with_delete.sql, dynamodb_inserted_batch_column).
INSERTED_BATCH = "_inserted_batch_id"
# A history's own columns (docs/history.md): when a version holds. Named as the other metadata
# columns are, so that no attribute's column can take them (an attribute ``valid_from`` is as
# good as any): reserved in every table, since history can be turned on later.
VALID_FROM, VALID_TO = "_valid_from", "_valid_to"
HISTORY_COLUMNS = (VALID_FROM, VALID_TO)
# No attribute's column takes a metadata column's name, nor ``_image``: the whole item, which a
# table staged before decision 0012 keeps in place of ``_rest``.
RESERVED_COLUMNS = frozenset((*METADATA_COLUMNS, "_image", INSERTED_BATCH, *HISTORY_COLUMNS))
SCALARS = ("string", "boolean", "binary", "bigint")
MAX_TYPED_DEPTH = 6  # deeper nesting is kept as JSON text (a column type stays readable)
MAX_FIELDS = 500  # a map with more distinct keys is a dictionary: kept as JSON text
# What the Glue Data Catalog accepts of a column (its API's Column: Name, Type): a table whose
# column is longer is refused at every commit, so detection keeps within them.
GLUE_NAME_MAX = 255
GLUE_TYPE_MAX = 131_072
SIMPLE_TYPES = {
    "S": "string",
    "N": "decimal(38,9)",
    "B": "binary",
    "BOOL": "boolean",
    "NULL": "string",
    "SS": "array<string>",
    "NS": "array<decimal(38,9)>",
    "BS": "array<binary>",
    "M": "string",
    "L": "string",
}
# A numeric key is ``number`` (its canonical exact text, in a string column); a schema file
# written before that may still type it bigint or decimal (then a key that does not fit is a
# damaged line).
_KEY_KINDS = {
    "string": ("string",),
    "binary": ("binary",),
    "number": ("number", "string", "bigint", "decimal"),
}
_DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")


class SchemaError(LakehouseError):
    """A schema file is invalid, or detection found something a person must decide.
    ``attribute``: the top-level attribute it is about, when it is about one (drift adoption
    names it in its advice)."""

    def __init__(self, message: str, attribute: str | None = None) -> None:
        super().__init__(message)
        self.attribute = attribute


@contextmanager
def about(attribute: str) -> Iterator[None]:
    """A ``SchemaError`` raised inside is about ``attribute`` (unless it names one already)."""
    try:
        yield
    except SchemaError as exc:
        exc.attribute = exc.attribute or attribute
        raise


@dataclass(frozen=True)
class ColumnType:
    kind: str  # string, boolean, binary, bigint, decimal, struct, array; number (a key)
    precision: int = 0
    scale: int = 0
    fields: tuple[StructField, ...] = ()
    element: ColumnType | None = None

    def sql(self) -> str:
        if self.kind == "decimal":
            return f"decimal({self.precision},{self.scale})"
        if self.kind == "array":
            assert self.element is not None
            return f"array<{self.element.sql()}>"
        if self.kind == "number":  # a numeric key's canonical exact text
            return "string"
        if self.kind == "struct":
            return (
                "struct<" + ",".join(f"{quote(f.column)}:{f.type.sql()}" for f in self.fields) + ">"
            )
        return self.kind

    @property
    def depth(self) -> int:
        if self.kind == "struct":
            return 1 + max((f.type.depth for f in self.fields), default=0)
        if self.kind == "array" and self.element is not None:
            return 1 + self.element.depth
        return 0


@dataclass(frozen=True)
class StructField:
    name: str  # the DynamoDB map key
    column: str  # the struct field's name
    type: ColumnType


STRING = ColumnType("string")


@dataclass(frozen=True)
class Attribute:
    name: str  # the DynamoDB attribute name, case-sensitive
    column: str
    type: ColumnType
    key: bool = False
    info: dict[str, Any] = field(default_factory=dict, compare=False)  # detection statistics


@dataclass(frozen=True)
class Schema:
    table: str
    attributes: tuple[Attribute, ...]
    items: int | None = None
    source: str | None = None
    conflicts: tuple[str, ...] = ()
    # Types learnt from the first ``sampled`` items only, not yet proven on the rest: staging
    # such a schema fails on any value they would not describe exactly (``typed_columns``), and
    # the source is then detected whole (``catalog.schema_choice.stage_with_evolution``). None: the
    # types are proven (detected from every item, declared, or kept by a commit).
    sampled: int | None = None
    # A single-table design's (decision 0009): one schema per entity, named by its final table,
    # its keys and its own attributes; ``attributes`` then holds the keys only.
    entities: tuple[Schema, ...] = ()
    rule: EntityRule | None = None  # the single-table design's rule these sections follow

    def entity(self, final: str) -> Schema | None:
        return next((e for e in self.entities if e.table == final), None)

    @property
    def names(self) -> list[str]:
        return [a.name for a in self.attributes]

    def get(self, name: str) -> Attribute | None:
        return next((a for a in self.attributes if a.name == name), None)

    def with_attributes(self, added: list[Attribute]) -> Schema:
        return replace(self, attributes=self.attributes + tuple(added))


# --- types from text --------------------------------------------------------------------------


def parse_type(text: str, entry: dict[str, Any] | None = None, where: str = "") -> ColumnType:
    """``bigint``, ``decimal(10,2)``, ``array<string>``, or ``struct``/``array`` described by
    the entry's ``fields``/``element``."""
    text = text.strip().lower()
    entry = entry or {}
    if text in SCALARS:
        return ColumnType(text)
    if match := _DECIMAL.match(text):
        precision, scale = int(match[1]), int(match[2])
        if not 1 <= precision <= 38 or scale > precision:
            raise SchemaError(
                f"{where}: {text} is not a valid decimal (precision 1-38, scale <= precision)"
            )
        return ColumnType("decimal", precision, scale)
    if text.startswith("array<") and text.endswith(">"):
        return ColumnType("array", element=parse_type(text[6:-1], None, where))
    if text == "array":
        element = entry.get("element")
        if not isinstance(element, dict) or "type" not in element:
            raise SchemaError(f'{where}: type array needs an "element" with a "type"')
        return ColumnType("array", element=parse_type(element["type"], element, where + "[]"))
    if text == "struct":
        fields = entry.get("fields")
        if not isinstance(fields, dict) or not fields:
            raise SchemaError(f'{where}: type struct needs "fields"')
        parsed = []
        for name, sub in fields.items():
            if not isinstance(sub, dict) or "type" not in sub:
                raise SchemaError(f'{where}.{name}: a struct field needs a "type"')
            column = sub.get("column") or column_name(name)
            parsed.append(
                StructField(name, column, parse_type(sub["type"], sub, f"{where}.{name}"))
            )
        check_unique([(f.name, f.column) for f in parsed], where, set())
        return ColumnType("struct", fields=tuple(parsed))
    raise SchemaError(
        f"{where}: unknown type {text!r} (expected string, boolean, binary, bigint, "
        "decimal(p,s), array<T>, array with element, struct with fields)"
    )


def simple_type(spec: str, where: str) -> ColumnType:
    """``N`` or ``N bigint``: a type descriptor, optionally followed by the column type."""
    descriptor, _, column_type = spec.strip().partition(" ")
    if descriptor not in SIMPLE_TYPES:
        raise SchemaError(
            f"{where}: unknown type descriptor {descriptor!r} (expected one of "
            f"{', '.join(SIMPLE_TYPES)})"
        )
    column_type = column_type.strip() or SIMPLE_TYPES[descriptor]
    if descriptor in ("SS", "NS", "BS") and not column_type.startswith("array"):
        column_type = f"array<{column_type}>"
    return parse_type(column_type, None, where)


def check_unique(pairs: list[tuple[str, str]], where: str, reserved: set[str]) -> None:
    """Two names mapping to one column, or a name taking a metadata column, or (a table's own
    column, ``reserved`` given) a name too long for Glue: the error says how to map them in the
    schema file."""
    seen: dict[str, str] = {}
    for name, column in pairs:
        if reserved and len(column) > GLUE_NAME_MAX:
            raise SchemaError(
                f"{where}: attribute {name[:60]!r}... maps to a column name of {len(column)} "
                f"characters, and the Glue Data Catalog refuses one over {GLUE_NAME_MAX}; give it "
                'a shorter column in the schema file: "attributes": {"<the name>": {"column": '
                '"<at most 255 characters>"}}',
                name,
            )
        if column in reserved:
            raise SchemaError(
                f"{where}: attribute {name!r} maps to column {column!r}, a metadata column of the "
                f"staging and final tables; map it to another column in the schema file, e.g. "
                f'"attributes": {{{json.dumps(name)}: {{"column": "{column.lstrip("_")}_attr"}}}}',
                name,
            )
        if column in seen:
            raise SchemaError(
                f"{where}: attributes {seen[column]!r} and {name!r} both map to column {column!r}; "
                f"give one of them another column in the schema file, e.g. "
                f'"attributes": {{{json.dumps(name)}: {{"column": "{column}_2"}}}} '
                '(for a nested map key, the same under the attribute\'s "fields")'
            )
        seen[column] = name


def check_columns(schema: Schema) -> None:
    check_unique(
        [(a.name, a.column) for a in schema.attributes],
        f"table {schema.table}",
        set(RESERVED_COLUMNS),
    )


# --- schema files -----------------------------------------------------------------------------


# --- the type rules ---------------------------------------------------------------------------
