"""The table configuration: one entry per DynamoDB table, read by ingestion/ and by the dbt models.

It lives in ``dbt_project.yml`` under ``vars: dynamodb_tables:`` so that dbt reads it with
``var()`` and Python reads it with YAML: one place, no copy. ``add-table`` appends to it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ingestion import settings
from ingestion.naming import column_name

KEY_TYPES = {"S": "string", "N": "decimal(38,0)", "B": "binary"}
# Simple type mapping (issue "lossless types" replaces it with detection): descriptor -> column type.
DEFAULT_COLUMN_TYPES = {
    "S": "string",
    "N": "decimal(38,9)",
    "BOOL": "boolean",
    "B": "binary",
    "SS": "array<string>",
    "NS": "array<decimal(38,9)>",
    "BS": "array<binary>",
    "M": "string",  # the map's DynamoDB JSON, kept whole
    "L": "string",  # the list's DynamoDB JSON, kept whole
}
METADATA_COLUMNS = (
    "_operation",
    "_version",
    "_source",
    "_source_file",
    "_batch_id",
    "_ingested_at",
    "_image",
)
_TABLE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,127}$")


class TableConfigError(ValueError):
    """The table configuration is invalid or names an unknown table."""


@dataclass(frozen=True)
class Attribute:
    name: str  # the DynamoDB attribute name, case-sensitive
    descriptor: str  # S, N, BOOL, B, SS, NS, BS, M, L
    column_type: str

    @property
    def column(self) -> str:
        return column_name(self.name)


@dataclass(frozen=True)
class TableConfig:
    name: str
    partition_key: Attribute
    sort_key: Attribute | None = None
    attributes: tuple[Attribute, ...] = field(default_factory=tuple)

    @property
    def keys(self) -> tuple[Attribute, ...]:
        return (self.partition_key,) + ((self.sort_key,) if self.sort_key else ())

    @property
    def columns(self) -> tuple[Attribute, ...]:
        """Key columns first, then the declared attributes."""
        return self.keys + self.attributes


def parse_key(spec: str, table: str) -> Attribute:
    """``ATTR:TYPE`` with TYPE one of S, N, B."""
    name, sep, descriptor = spec.rpartition(":")
    if not sep or not name or descriptor not in KEY_TYPES:
        raise TableConfigError(
            f"table {table}: key {spec!r} must be ATTRIBUTE:TYPE with TYPE one of S, N, B"
        )
    return Attribute(name, descriptor, KEY_TYPES[descriptor])


def parse_attribute(name: str, spec: str, table: str) -> Attribute:
    """``DESCRIPTOR`` or ``DESCRIPTOR column_type`` (e.g. ``N bigint``, ``N decimal(10,2)``)."""
    descriptor, _, column_type = str(spec).strip().partition(" ")
    if descriptor not in DEFAULT_COLUMN_TYPES:
        raise TableConfigError(
            f"table {table}: attribute {name!r} has unknown type {descriptor!r} "
            f"(expected one of {', '.join(DEFAULT_COLUMN_TYPES)})"
        )
    column_type = column_type.strip() or DEFAULT_COLUMN_TYPES[descriptor]
    if descriptor in ("SS", "NS", "BS") and not column_type.startswith("array<"):
        column_type = f"array<{column_type}>"
    return Attribute(name, descriptor, column_type)


def table_from_entry(name: str, entry: dict[str, Any]) -> TableConfig:
    if not _TABLE_NAME.match(name):
        raise TableConfigError(f"table name {name!r} must match {_TABLE_NAME.pattern}")
    if "partition_key" not in entry:
        raise TableConfigError(f"table {name}: partition_key is required")
    sort_key = parse_key(entry["sort_key"], name) if entry.get("sort_key") else None
    config = TableConfig(
        name=name,
        partition_key=parse_key(entry["partition_key"], name),
        sort_key=sort_key,
        attributes=tuple(
            parse_attribute(a, s, name) for a, s in (entry.get("attributes") or {}).items()
        ),
    )
    seen: dict[str, str] = {m: "a metadata column" for m in METADATA_COLUMNS}
    for attribute in config.columns:
        if attribute.column in seen:
            raise TableConfigError(
                f"table {name}: attribute {attribute.name!r} maps to column {attribute.column!r}, "
                f"already used by {seen[attribute.column]}"
            )
        seen[attribute.column] = f"attribute {attribute.name!r}"
    return config


def project_file() -> Path:
    return settings.project_dir() / "dbt_project.yml"


def load_tables(path: Path | None = None) -> dict[str, TableConfig]:
    raw = yaml.safe_load((path or project_file()).read_text()) or {}
    entries = (raw.get("vars") or {}).get("dynamodb_tables") or {}
    return {name: table_from_entry(name, entry or {}) for name, entry in entries.items()}


def get_table(name: str) -> TableConfig:
    tables = load_tables()
    if name not in tables:
        known = ", ".join(sorted(tables)) or "none"
        raise TableConfigError(
            f"unknown table {name!r} (configured: {known}); register it with "
            f"`ddb-lakehouse add-table {name} --partition-key ATTR:TYPE`"
        )
    return tables[name]
