"""Schema files: ``schemas/<table>.json`` read, written and turned into a ``Schema``.

``$LAKEHOUSE_SCHEMA_DIR`` overrides the folder. The file is written by detection and meant to
be read and edited by people; its format is described in ``docs/tables-and-types.md`` and in
``ingestion.schema.types``. The type *rules* that fill it live in
``ingestion.schema.type_rules``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ingestion.config import settings
from ingestion.dynamodb.naming import column_name
from ingestion.dynamodb.tables import TableConfig
from ingestion.schema import type_rules
from ingestion.schema.types import (
    _KEY_KINDS,
    RESERVED_COLUMNS,
    Attribute,
    ColumnType,
    Schema,
    SchemaError,
    about,
    check_unique,
    parse_type,
    simple_type,
)


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
    return parse_document(raw, str(path), table, keys)


def parse_document(
    raw: Any, where_from: str, table: str, keys: dict[str, ColumnType]
) -> SchemaFile:
    """A schema document (a schema file's JSON, or the one stored with the staging table)."""
    if not isinstance(raw, dict):
        raise SchemaError(f"{where_from}: a schema file is a JSON object")
    simple = "attributes" not in raw and all(isinstance(v, str) for v in raw.values())
    entries: Any = raw if simple else raw.get("attributes", {} if "entities" in raw else None)
    if not isinstance(entries, dict):
        raise SchemaError(
            f'{where_from}: "attributes" must be an object of attribute name -> entry'
        )
    typed: dict[str, Attribute] = {}
    overrides: dict[str, dict[str, Any]] = {}
    for name, entry in entries.items():
        with about(name):
            where = f"{where_from}: attribute {name!r}"
            if isinstance(entry, str):
                entry = {"type": simple_type(entry, where).sql(), "simple": entry}
            if not isinstance(entry, dict):
                raise SchemaError(f'{where}: expected an object or a type descriptor such as "N"')
            overrides[name] = entry
            column = entry.get("column") or column_name(name)
            if name in keys:
                key = keys[name]
                if "type" in entry:
                    key = parse_type(str(entry["type"]), entry, where)
                if key.kind not in _KEY_KINDS[keys[name].kind]:
                    raise SchemaError(
                        f"{where}: a key of this table's declared type can't be {key.sql()}"
                    )
                if keys[name].kind == "number" and key.kind == "string":
                    key = keys[name]  # a numeric key in a string column: its canonical text
                typed[name] = Attribute(name, column, key, key=True, info=_info(entry))
            elif "type" in entry:
                column_type = parse_type(str(entry["type"]), entry, where)
                typed[name] = Attribute(name, column, column_type, info=_info(entry))
    check_unique([(a.name, a.column) for a in typed.values()], where_from, set(RESERVED_COLUMNS))
    return SchemaFile(table, typed, overrides, raw)


# Decision: an entry a person wrote is told from one detection wrote by ``dynamodb_types``
# (``type_rules.DETECTED_MARK``): detection records the DynamoDB types it saw on every entry it
# types; a person's entry does not carry them. Only a person's type is a declaration, which
# adoption never changes; every other entry (detection's, such as the shipped ``books`` and
# ``orders`` files') keeps adopting drift.
DETECTED_MARK = type_rules.DETECTED_MARK


def is_declared(entry: Any) -> bool:
    """A type a person declared (not one detection wrote)."""
    return isinstance(entry, dict) and "type" in entry and DETECTED_MARK not in entry


def declared_entries(schema_file: SchemaFile | None) -> dict[str, dict[str, Any]]:
    """What re-detection must keep of a schema file: a person's entries whole (their types,
    names, nested fields), and of detected entries only the column names chosen."""
    entries = schema_file.overrides if schema_file else {}
    return {name: _kept(entry) for name, entry in entries.items() if isinstance(entry, dict)}


def _kept(entry: dict[str, Any]) -> dict[str, Any]:
    if is_declared(entry):
        return entry
    kept: dict[str, Any] = {"column": entry["column"]} if "column" in entry else {}
    if isinstance(entry.get("fields"), dict):
        kept["fields"] = {n: _kept(e) for n, e in entry["fields"].items() if isinstance(e, dict)}
    if isinstance(entry.get("element"), dict):
        kept["element"] = _kept(entry["element"])
    return kept


def _info(entry: dict[str, Any]) -> dict[str, Any]:
    """What an entry says besides its column and type, nested entries' included (their
    ``dynamodb_types`` mark them detected: dropped, a printed document would declare them)."""
    info = {k: v for k, v in entry.items() if k not in ("column", "type", "fields", "element")}
    if isinstance(entry.get("fields"), dict):
        info["fields"] = {n: _info(e) for n, e in entry["fields"].items() if isinstance(e, dict)}
    if isinstance(entry.get("element"), dict):
        info["element"] = _info(entry["element"])
    return info


def load_schema(table: str, keys: dict[str, ColumnType]) -> SchemaFile | None:
    path = schema_path(table)
    return read_schema_file(path, table, keys) if path.exists() else None


def declared_keys(table: TableConfig) -> dict[str, ColumnType]:
    """The key types a table's configuration declares (before any detection)."""
    return type_rules.key_types([(k.name, k.descriptor) for k in table.keys])


def table_schema_file(table: TableConfig) -> SchemaFile | None:
    """A configured table's schema file, its keys typed as declared; None before its first
    detection. The one way the project loads a table's schema. An entity's final table (a
    single-table design) has its section of its entry's file, ``entities: {<final>: ...}``."""
    if table.staging:
        path = schema_path(table.staging)
        if not path.exists():
            return None
        parent = read_schema_file(path, table.staging, declared_keys(table)).raw
        sections = parent.get("entities") or {}
        if not isinstance(sections, dict):
            raise SchemaError(f'{path}: "entities" must be an object of entity table -> section')
        check_sections(path, parent, sections, table)
        section = sections.get(table.name)
        if section is None:
            return None
        return parse_document(
            section, f"{path}: entities: {table.name}", table.name, declared_keys(table)
        )
    return load_schema(table.name, declared_keys(table))


def check_sections(path: Path, raw: dict[str, Any], sections: dict, table: TableConfig) -> None:
    """A single-table design's schema file declares per entity: a section of another name, or
    an attribute other than a key at the top, would be ignored, so it is refused."""
    finals = [final for _, final in table.entities.values] if table.entities else []
    unknown = sorted(set(sections) - set(finals))
    if unknown:
        raise SchemaError(
            f"{path}: entities {', '.join(unknown)} are no entity table of {table.staging}'s rule "
            f"(its entity tables: {', '.join(finals)})"
        )
    top = raw.get("attributes")
    top = top if isinstance(top, dict) else {}
    loose = sorted(set(top) - {k.name for k in table.keys})
    if loose:
        raise SchemaError(
            f"{path}: {', '.join(loose)} at the top: a single-table design declares per entity, "
            f'in "entities": {{"<entity table>": {{"attributes": ...}}}}'
        )


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
    if schema.sampled is not None:  # the counts are the first items' (detect.first_items_schema)
        document["sampled"] = schema.sampled
    document["attributes"] = {
        a.name: ({"key": True} if a.key else {}) | _entry(a.type, a.column, a.info)
        for a in schema.attributes
    }
    if schema.rule is not None:  # a single-table design: its rule, and a section per entity
        rule = schema.rule
        document["rule"] = {rule.by: rule.attribute, "values": dict(rule.values)}
        document["entities"] = {
            e.table: {k: v for k, v in to_json(e).items() if k != "table"} for e in schema.entities
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
