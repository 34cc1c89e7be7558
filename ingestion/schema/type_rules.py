"""The type rules: detection statistics -> column types. Never ``double``; ``NULL`` never
decides a type; a conflict or a number beyond ``decimal(38,s)`` is kept as exact text.

One place to change a rule: ``number_type`` (numbers), ``_Resolver.resolve`` (one value's
descriptors), ``_Resolver._struct`` / ``_array`` (maps and lists), ``key_type`` (keys).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ingestion.dynamodb.naming import column_name
from ingestion.schema.types import (
    GLUE_TYPE_MAX,
    MAX_FIELDS,
    MAX_TYPED_DEPTH,
    RESERVED_COLUMNS,
    STRING,
    Attribute,
    ColumnType,
    Schema,
    SchemaError,
    StructField,
    about,
    check_unique,
    parse_type,
)


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


# Detection records the DynamoDB types it saw on every entry it types; an entry a person wrote
# does not carry them: that is how a declared type is told from a detected one
# (``schema_file.is_declared``).
DETECTED_MARK = "dynamodb_types"


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
        info: dict[str, Any] = {DETECTED_MARK: _seen(types)}
        override = self._override(path)
        if "type" in override:
            column_type = parse_type(str(override["type"]), override, where)
            if DETECTED_MARK in override:  # a detected entry kept as it was
                return column_type, info
            return column_type, {  # a person's declaration, kept as written
                k: v for k, v in override.items() if k not in ("column", "type")
            }
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
            present = sum(
                s.count for t, s in self.stats.by_path.get(child, {}).items() if t != "NULL"
            )
            sub["nullable"] = present < parent
            column = self._override(child).get("column") or column_name(name)
            fields.append(StructField(name, column, column_type))
            field_info[name] = sub
        check_unique([(f.name, f.column) for f in fields], where, set())
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


def _within_glue(
    column_type: ColumnType, info: dict[str, Any], override: dict[str, Any], where: str
) -> tuple[ColumnType, dict[str, Any]]:
    """A detected type longer than Glue accepts is kept as JSON text (a commit of it would fail,
    and every later one); a declared one is refused, naming the limit."""
    length = len(column_type.sql())
    if "type" in override and DETECTED_MARK not in override:
        raise SchemaError(
            f"{where}: its declared type is {length} characters long and the Glue Data Catalog "
            f"refuses a column type over {GLUE_TYPE_MAX}: declare it string (kept as JSON text) "
            "or declare fewer fields"
        )
    note = (
        f"its type would be {length} characters, over the {GLUE_TYPE_MAX} the Glue Data "
        "Catalog accepts: plain JSON text"
    )
    return STRING, {**info, "note": note}


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
        with about(name):
            if name in keys:
                column_type, info = key_type(table, name, keys[name], types)
                attributes.append(Attribute(name, column, column_type, key=True, info=info))
                continue
            column_type, info = resolver.resolve(path, where)
            if len(column_type.sql()) > GLUE_TYPE_MAX:
                column_type, info = _within_glue(column_type, info, resolver._override(path), where)
        info["nullable"] = present < stats.items
        attributes.append(Attribute(name, column, column_type, info=info))
    check_unique([(a.name, a.column) for a in attributes], f"table {table}", set(RESERVED_COLUMNS))
    return Schema(table, tuple(attributes), stats.items, source, tuple(resolver.conflicts))


def key_type(
    table: str, name: str, descriptor: str, types: dict[str, NodeStats]
) -> tuple[ColumnType, dict[str, Any]]:
    """A key takes its declared type, never widened to text."""
    info: dict[str, Any] = {"dynamodb_types": _seen(types), "nullable": False}
    other = set(types) - {descriptor}
    if other:
        raise SchemaError(
            f"table {table}: key attribute {name!r} is declared {descriptor} but the data also "
            f"holds "
            f"{', '.join(sorted(other))}: check the table's partition_key/sort_key in "
            f"dbt_project.yml"
        )
    if descriptor == "S":
        return STRING, info
    if descriptor == "B":
        return ColumnType("binary"), info
    if descriptor == "N" and descriptor in types:
        info.update(_number_info(types["N"]))
    return NUMBER_KEY, info


# Decision: a numeric key's column holds its canonical exact text (``numbers.canonical_number``),
# never a type guessed from the first export: ids 1 and 2 made it bigint, and a later valid key
# 2.5 then failed its whole batch. No decimal(38,s) holds every number DynamoDB accepts (38
# digits, exponents -130..+125), and a key must hold every one. Athena: ``where id = '42'``, or
# ``cast(id as decimal(38,0))`` for arithmetic.
NUMBER_KEY = ColumnType("number")


def key_types(table_keys: list[tuple[str, str]]) -> dict[str, ColumnType]:
    """Declared key types before detection (N: its canonical exact text)."""
    mapping = {"S": STRING, "B": ColumnType("binary"), "N": NUMBER_KEY}
    return {name: mapping[descriptor] for name, descriptor in table_keys}
