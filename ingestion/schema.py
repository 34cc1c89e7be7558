"""A table's column mapping: DynamoDB attribute -> column name and type, kept in a schema file.

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

The type rules (``resolve``) turn detection statistics into types; they never pick ``double`` and
never let ``NULL`` decide a type.
"""

from __future__ import annotations

import json
import os
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ingestion import settings
from ingestion.naming import column_name, quote

METADATA_COLUMNS = (
    "_operation",
    "_version",
    "_sequence",
    "_source",
    "_source_file",
    "_batch_id",
    "_ingested_at",
    "_image",
    "_drift",
)
SCALARS = ("string", "boolean", "binary", "bigint")
MAX_TYPED_DEPTH = 6  # deeper nesting is kept as JSON text (a column type stays readable)
MAX_FIELDS = 500  # a map with more distinct keys is a dictionary: kept as JSON text
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
_KEY_KINDS = {"string": ("string",), "binary": ("binary",), "decimal": ("bigint", "decimal")}
_DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")


class SchemaError(ValueError):
    """A schema file is invalid, or detection found something a person must decide."""


@dataclass(frozen=True)
class ColumnType:
    kind: str  # string, boolean, binary, bigint, decimal, struct, array
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

    @property
    def names(self) -> list[str]:
        return [a.name for a in self.attributes]

    def get(self, name: str) -> Attribute | None:
        return next((a for a in self.attributes if a.name == name), None)

    def with_attributes(self, added: list[Attribute]) -> Schema:
        return Schema(
            self.table, self.attributes + tuple(added), self.items, self.source, self.conflicts
        )


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
        _check_unique([(f.name, f.column) for f in parsed], where, set())
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
            f"{where}: unknown type descriptor {descriptor!r} (expected one of {', '.join(SIMPLE_TYPES)})"
        )
    column_type = column_type.strip() or SIMPLE_TYPES[descriptor]
    if descriptor in ("SS", "NS", "BS") and not column_type.startswith("array"):
        column_type = f"array<{column_type}>"
    return parse_type(column_type, None, where)


def _check_unique(pairs: list[tuple[str, str]], where: str, reserved: set[str]) -> None:
    """Two names mapping to one column, or a name taking a metadata column: the error says how
    to map them in the schema file."""
    seen: dict[str, str] = {}
    for name, column in pairs:
        if column in reserved:
            raise SchemaError(
                f"{where}: attribute {name!r} maps to column {column!r}, a metadata column of the "
                f"staging and final tables; map it to another column in the schema file, e.g. "
                f'"attributes": {{{json.dumps(name)}: {{"column": "{column.lstrip("_")}_attr"}}}}'
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
    _check_unique(
        [(a.name, a.column) for a in schema.attributes],
        f"table {schema.table}",
        set(METADATA_COLUMNS),
    )


# --- schema files -----------------------------------------------------------------------------


def schema_dir() -> Path:
    configured = os.environ.get("LAKEHOUSE_SCHEMA_DIR")
    return Path(configured) if configured else settings.project_dir() / "schemas"


def schema_path(table: str) -> Path:
    return schema_dir() / f"{table}.json"


@dataclass(frozen=True)
class SchemaFile:
    """A schema file as written: typed attributes, and entries still to detect (overrides)."""

    table: str
    typed: dict[str, Attribute]
    overrides: dict[str, dict[str, Any]]  # every entry, as written (column names, partial fields)
    raw: dict[str, Any]

    @property
    def complete(self) -> bool:
        return set(self.typed) == set(self.overrides)


def read_schema_file(path: Path, table: str, keys: dict[str, ColumnType]) -> SchemaFile:
    try:
        raw = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise SchemaError(f"{path}: not a readable JSON schema file: {exc}") from exc
    if not isinstance(raw, dict):
        raise SchemaError(f"{path}: a schema file is a JSON object")
    simple = "attributes" not in raw and all(isinstance(v, str) for v in raw.values())
    entries: dict[str, Any] = raw if simple else raw.get("attributes")  # type: ignore[assignment]
    if not isinstance(entries, dict):
        raise SchemaError(f'{path}: "attributes" must be an object of attribute name -> entry')
    typed: dict[str, Attribute] = {}
    overrides: dict[str, dict[str, Any]] = {}
    for name, entry in entries.items():
        where = f"{path}: attribute {name!r}"
        if isinstance(entry, str):
            entry = {"type": simple_type(entry, where).sql(), "simple": entry}
        if not isinstance(entry, dict):
            raise SchemaError(f'{where}: expected an object or a type descriptor such as "N"')
        overrides[name] = entry
        column = entry.get("column") or column_name(name)
        if name in keys:
            key = parse_type(str(entry["type"]), entry, where) if "type" in entry else keys[name]
            if key.kind not in _KEY_KINDS[keys[name].kind]:
                raise SchemaError(
                    f"{where}: a key of this table's declared type can't be {key.sql()}"
                )
            typed[name] = Attribute(name, column, key, key=True, info=_info(entry))
        elif "type" in entry:
            column_type = parse_type(str(entry["type"]), entry, where)
            typed[name] = Attribute(name, column, column_type, info=_info(entry))
    _check_unique([(a.name, a.column) for a in typed.values()], str(path), set(METADATA_COLUMNS))
    return SchemaFile(table, typed, overrides, raw)


def _info(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k not in ("column", "type", "fields", "element")}


def load_schema(table: str, keys: dict[str, ColumnType]) -> SchemaFile | None:
    path = schema_path(table)
    return read_schema_file(path, table, keys) if path.exists() else None


def _entry(column_type: ColumnType, column: str | None, info: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = {} if column is None else {"column": column}
    if column_type.kind == "struct":
        entry["type"] = "struct"
        entry["fields"] = {
            f.name: _entry(f.type, f.column, info.get("fields", {}).get(f.name, {}))
            for f in column_type.fields
        }
    elif (
        column_type.kind == "array"
        and column_type.element
        and column_type.element.kind in ("struct", "array")
    ):
        entry["type"] = "array"
        entry["element"] = _entry(column_type.element, None, info.get("element", {}))
    else:
        entry["type"] = column_type.sql()
    entry.update({k: v for k, v in info.items() if k not in ("fields", "element")})
    return entry


def to_json(schema: Schema) -> dict[str, Any]:
    document: dict[str, Any] = {"table": schema.table}
    if schema.items is not None:
        document["items"] = schema.items
    if schema.source:
        document["source"] = schema.source
    if schema.conflicts:
        document["conflicts"] = list(schema.conflicts)
    document["attributes"] = {
        a.name: ({"key": True} if a.key else {}) | _entry(a.type, a.column, a.info)
        for a in schema.attributes
    }
    return document


def write_schema(schema: Schema, path: Path | None = None) -> Path:
    path = path or schema_path(schema.table)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(to_json(schema), indent=2, ensure_ascii=False) + "\n")
    temporary.replace(path)  # atomic: a reader never sees half a file
    return path


def from_file(schema_file: SchemaFile, order: list[str] | None = None) -> Schema:
    names = order or list(schema_file.overrides)
    attributes = tuple(schema_file.typed[n] for n in names if n in schema_file.typed)
    keys = tuple(a for a in attributes if a.key)
    rest = tuple(a for a in attributes if not a.key)
    raw = schema_file.raw
    return Schema(
        schema_file.table,
        keys + rest,
        raw.get("items") if isinstance(raw.get("items"), int) else None,
        raw.get("source") if isinstance(raw.get("source"), str) else None,
    )


# --- the type rules ---------------------------------------------------------------------------


@dataclass
class NodeStats:
    """What detection saw at one path for one DynamoDB type."""

    count: int
    integer_digits: int | None = None
    fraction_digits: int | None = None
    fits_long: bool | None = None


Path_ = tuple[str | None, ...]  # attribute, then map keys; None steps into a list's elements


@dataclass
class Stats:
    items: int
    by_path: dict[Path_, dict[str, NodeStats]]
    wide: dict[str, int] = field(default_factory=dict)  # attribute -> distinct nested paths

    def __post_init__(self) -> None:
        self.children: dict[Path_, list[Path_]] = defaultdict(list)
        for path in self.by_path:
            if len(path) > 1:
                self.children[path[:-1]].append(path)


def number_type(stats: NodeStats) -> ColumnType:
    """All integral within 64 bits: bigint; else decimal(38, s) when every value fits with
    s = the most fractional digits seen; else the number's exact text. Never double."""
    if stats.fits_long:
        return ColumnType("bigint")
    integer, fraction = stats.integer_digits or 0, stats.fraction_digits or 0
    if integer + fraction <= 38:
        return ColumnType("decimal", 38, fraction)
    return STRING


def _seen(types: dict[str, NodeStats]) -> dict[str, int]:
    return {t: s.count for t, s in sorted(types.items())}


def _number_info(stats: NodeStats) -> dict[str, Any]:
    return {
        "max_integer_digits": stats.integer_digits,
        "max_fraction_digits": stats.fraction_digits,
    }


class _Resolver:
    def __init__(self, stats: Stats, overrides: dict[str, dict[str, Any]]):
        self.stats = stats
        self.overrides = overrides
        self.conflicts: list[str] = []

    def _override(self, path: Path_) -> dict[str, Any]:
        entry: Any = self.overrides.get(str(path[0]), {})
        for step in path[1:]:
            if not isinstance(entry, dict):
                return {}
            entry = (
                entry.get("element", {}) if step is None else entry.get("fields", {}).get(step, {})
            )
        return entry if isinstance(entry, dict) else {}

    def resolve(self, path: Path_, where: str) -> tuple[ColumnType, dict[str, Any]]:
        types = self.stats.by_path.get(path, {})
        info: dict[str, Any] = {"dynamodb_types": _seen(types)}
        override = self._override(path)
        if "type" in override:
            return parse_type(str(override["type"]), override, where), info
        real = {t: s for t, s in types.items() if t != "NULL"}
        if not real:
            info["note"] = "only NULL seen: text"
            return STRING, info
        if len(real) > 1:
            note = f"conflicting types {', '.join(sorted(real))}: stored as text"
            info["note"] = note
            self.conflicts.append(f"{where}: {note}")
            return STRING, info
        ((kind, node),) = real.items()
        if kind in ("N", "NS"):
            info.update(_number_info(node))
            number = number_type(node)
            if number == STRING:
                info["note"] = "numbers beyond decimal(38,s): their exact text"
            return (number if kind == "N" else ColumnType("array", element=number)), info
        if kind in ("S", "BOOL", "B"):
            return ColumnType({"S": "string", "BOOL": "boolean", "B": "binary"}[kind]), info
        if kind in ("SS", "BS"):
            return ColumnType(
                "array", element=ColumnType("string" if kind == "SS" else "binary")
            ), info
        depth = len(path)
        if depth > MAX_TYPED_DEPTH or (len(path) == 1 and str(path[0]) in self.stats.wide):
            info["note"] = "nested too deep or too many distinct keys: plain JSON text"
            return STRING, info
        if kind == "M":
            return self._struct(path, where, info)
        return self._array(path, where, info)

    def _struct(
        self, path: Path_, where: str, info: dict[str, Any]
    ) -> tuple[ColumnType, dict[str, Any]]:
        children = [c for c in self.stats.children.get(path, []) if c[-1] is not None]
        if not children:
            info["note"] = "only empty maps seen: plain JSON text"
            return STRING, info
        if len(children) > MAX_FIELDS:
            info["note"] = f"{len(children)} distinct keys (a dictionary): plain JSON text"
            return STRING, info
        parent = self.stats.by_path[path]["M"].count
        fields, field_info = [], {}
        for child in sorted(children, key=lambda p: (column_name(str(p[-1])), str(p[-1]))):
            name = str(child[-1])
            column_type, sub = self.resolve(child, f"{where}.{name}")
            present = sum(n for t, n in sub["dynamodb_types"].items() if t != "NULL")
            sub["nullable"] = present < parent
            column = self._override(child).get("column") or column_name(name)
            fields.append(StructField(name, column, column_type))
            field_info[name] = sub
        _check_unique([(f.name, f.column) for f in fields], where, set())
        info["fields"] = field_info
        return ColumnType("struct", fields=tuple(fields)), info

    def _array(
        self, path: Path_, where: str, info: dict[str, Any]
    ) -> tuple[ColumnType, dict[str, Any]]:
        element = path + (None,)
        element_types = {t for t in self.stats.by_path.get(element, {}) if t != "NULL"}
        if len(element_types) != 1:
            what = (
                "only empty lists"
                if not element_types
                else f"elements of types {', '.join(sorted(element_types))}"
            )
            info["note"] = f"{what}: plain JSON text"
            return STRING, info
        column_type, sub = self.resolve(element, where + "[]")
        info["element"] = sub
        return ColumnType("array", element=column_type), info


def resolve(
    table: str,
    stats: Stats,
    keys: dict[str, str],
    overrides: dict[str, dict[str, Any]] | None = None,
    source: str | None = None,
) -> Schema:
    """The schema from detection statistics. ``keys``: key attribute -> declared descriptor."""
    resolver = _Resolver(stats, overrides or {})
    attributes = []
    names = sorted({str(p[0]) for p in stats.by_path if len(p) == 1} | set(keys))
    key_order = list(keys)
    for name in sorted(
        names,
        key=lambda n: (n not in keys, key_order.index(n) if n in keys else 0, column_name(n), n),
    ):
        where = f"table {table}: attribute {name!r}"
        path: Path_ = (name,)
        types = stats.by_path.get(path, {})
        present = sum(s.count for t, s in types.items() if t != "NULL")
        column = resolver._override(path).get("column") or column_name(name)
        if name in keys:
            column_type, info = key_type(table, name, keys[name], types)
            attributes.append(Attribute(name, column, column_type, key=True, info=info))
            continue
        column_type, info = resolver.resolve(path, where)
        info["nullable"] = present < stats.items
        attributes.append(Attribute(name, column, column_type, info=info))
    _check_unique([(a.name, a.column) for a in attributes], f"table {table}", set(METADATA_COLUMNS))
    return Schema(table, tuple(attributes), stats.items, source, tuple(resolver.conflicts))


def key_type(
    table: str, name: str, descriptor: str, types: dict[str, NodeStats]
) -> tuple[ColumnType, dict[str, Any]]:
    """A key takes its declared type, never widened to text."""
    info: dict[str, Any] = {"dynamodb_types": _seen(types), "nullable": False}
    other = set(types) - {descriptor}
    if other:
        raise SchemaError(
            f"table {table}: key attribute {name!r} is declared {descriptor} but the data also holds "
            f"{', '.join(sorted(other))}: check the table's partition_key/sort_key in dbt_project.yml"
        )
    if descriptor == "S":
        return STRING, info
    if descriptor == "B":
        return ColumnType("binary"), info
    if descriptor == "N" and descriptor in types:
        info.update(_number_info(types["N"]))
        number = number_type(types["N"])
        if number == STRING:
            raise SchemaError(
                f"table {table}: key attribute {name!r} holds numbers no decimal(38,s) can hold exactly"
            )
        return number, info
    return ColumnType("decimal", 38, 0), info


def key_types(table_keys: list[tuple[str, str]]) -> dict[str, ColumnType]:
    """Declared key types before detection (N: decimal(38,0) unless a schema file says more)."""
    mapping = {"S": STRING, "B": ColumnType("binary"), "N": ColumnType("decimal", 38, 0)}
    return {name: mapping[descriptor] for name, descriptor in table_keys}
