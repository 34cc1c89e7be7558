"""The table configuration: one entry per DynamoDB table, read by ingestion/ and by the dbt models.

It lives in ``dbt_project.yml`` under ``vars: dynamodb_tables:`` so that dbt reads it with
``var()`` and Python reads it with YAML: one place, no copy. ``add-table`` appends to it.
An entry holds the table's keys; the columns come from the table's schema file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ingestion.config import names, settings
from ingestion.config.errors import LakehouseError
from ingestion.dynamodb.entities import EntityRule, parse_rule, register_finals
from ingestion.dynamodb.naming import column_name
from ingestion.sources.s3_uri import LocationError, parse_s3_uri

KEY_DESCRIPTORS = ("S", "N", "B")
MAX_BUCKETS = 1024
TTL_MODES = ("delete", "keep")
_TABLE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,127}$")  # a lakehouse (and dbt, Glue) table name
# A DynamoDB table name: 3 to 255 of a-z A-Z 0-9 _ . - (the DynamoDB API reference).
_DYNAMODB_NAME = re.compile(r"^[A-Za-z0-9_.-]{3,255}$")
# Every key a table entry may hold (docs/tables-and-types.md lists them in one table).
ENTRY_KEYS = (
    "partition_key",
    "sort_key",
    "dynamodb_table",
    "table_arn",
    "export_to",
    "buckets",
    "ttl_deletes",
    "adopt_drift",
    "cadence",
    "heal",
    "verify",
    "entities",
)
# How a deployment keeps the table fresh (``ddb-lakehouse deploy render``): from its stream
# through the one long-running ``watch``, or from a daily incremental export.
CADENCES = ("daily", "stream")
# How often a deployment verifies the table against a full export (``verify --from-dynamodb``).
VERIFY_SCHEDULES = ("weekly", "daily", "off")
_TABLE_ARN = re.compile(
    r"^arn:aws[a-z-]*:dynamodb:[a-z0-9-]+:\d{12}:table/([A-Za-z0-9_.-]{3,255})$"
)


class TableConfigError(LakehouseError):
    """The table configuration is invalid or names an unknown table."""


@dataclass(frozen=True)
class Key:
    name: str  # the DynamoDB attribute name, case-sensitive
    descriptor: str  # S, N or B

    @property
    def column(self) -> str:
        return column_name(self.name)


@dataclass(frozen=True)
class TableConfig:
    """A table's identity and keys. Its other columns live in its schema file (ingestion.schema.types)."""

    name: str  # the lakehouse name: staging.<name>, lakehouse.<name>, the dbt models
    partition_key: Key
    sort_key: Key | None = None
    ttl_deletes: str = "delete"  # what a TTL expiry does to the final row: delete | keep
    table_arn: str | None = None  # the DynamoDB table, for `export`
    export_to: str | None = None  # s3://BUCKET/PREFIX where `export` asks DynamoDB to write
    buckets: int | None = None  # final table partitioned by bucket(N, partition key column)
    adopt_drift: bool = True  # a value that does not fit its column widens it (upkeep.adopt)
    dynamodb_table: str = ""  # the DynamoDB table's own name (default: ``name``)
    cadence: str = "daily"  # how a deployment syncs it: daily | stream (CADENCES)
    heal: bool = False  # sync --from-dynamodb heals a broken chain with a full export
    verify: str = "weekly"  # how often a deployment verifies it (VERIFY_SCHEDULES)
    entities: EntityRule | None = None  # a single-table design's rule (ingestion.dynamodb.entities)
    staging: str = ""  # an entity's final table: the entry whose change log it reads

    @property
    def dynamodb_name(self) -> str:
        """The DynamoDB table's name: what its exports' ARNs and its stream files are under."""
        return self.dynamodb_table or self.name

    @property
    def keys(self) -> tuple[Key, ...]:
        return (self.partition_key,) + ((self.sort_key,) if self.sort_key else ())

    @property
    def key_descriptors(self) -> dict[str, str]:
        return {k.name: k.descriptor for k in self.keys}


def parse_key(spec: str, table: str) -> Key:
    """``ATTR:TYPE`` with TYPE one of S, N, B."""
    name, sep, descriptor = spec.rpartition(":")
    if not sep or not name or descriptor not in KEY_DESCRIPTORS:
        raise TableConfigError(
            f"table {table}: key {spec!r} must be ATTRIBUTE:TYPE with TYPE one of S, N, B"
        )
    return Key(name, descriptor)


def lakehouse_name(dynamodb_name: str) -> str:
    """The lakehouse name of a DynamoDB table: the column-name rule (``App.Users`` ->
    ``app_users``, ``orders-prod`` -> ``orders_prod``), and a leading ``t_`` when the result
    would not start with a letter."""
    check_dynamodb_name(dynamodb_name)
    derived = column_name(dynamodb_name).strip("_") or "t"
    return derived if derived[0].isalpha() else f"t_{derived}"


def is_lakehouse_name(name: str) -> bool:
    return bool(_TABLE_NAME.match(name))


def check_dynamodb_name(dynamodb_name: str) -> None:
    if not _DYNAMODB_NAME.match(dynamodb_name):
        raise TableConfigError(
            f"{dynamodb_name!r} is no DynamoDB table name: 3 to 255 characters of a-z, A-Z, "
            "0-9, '_', '.' and '-'"
        )


def _source(name: str, entry: dict[str, Any]) -> str:
    """The entry's ``dynamodb_table`` ("" for the entry's own name), checked with its
    ``table_arn``: both name the one DynamoDB table its exports and stream files come from."""
    dynamodb_table = str(entry.get("dynamodb_table") or "")
    if dynamodb_table:
        check_dynamodb_name(dynamodb_table)
    table_arn = entry.get("table_arn")
    if table_arn is not None:
        found = _TABLE_ARN.match(str(table_arn))
        if not found:
            raise TableConfigError(
                f"table {name}: table_arn {table_arn!r} is no DynamoDB table ARN "
                "(arn:aws:dynamodb:REGION:ACCOUNT:table/NAME)"
            )
        if found.group(1) != (dynamodb_table or name):
            raise TableConfigError(
                f"table {name}: table_arn names table {found.group(1)!r}, but this entry is "
                f"DynamoDB table {dynamodb_table or name!r}"
            )
    return dynamodb_table


def _choice(
    name: str, entry: dict[str, Any], key: str, allowed: tuple[str, ...], default: str
) -> str:  # noqa: E501
    value = entry.get(key, default)
    if value not in allowed:
        raise TableConfigError(
            f"table {name}: {key} is {value!r}; expected one of {', '.join(allowed)}"
        )
    return str(value)


def _buckets(name: str, entry: dict[str, Any]) -> int | None:
    buckets = entry.get("buckets")
    if buckets is not None and (
        isinstance(buckets, bool) or not isinstance(buckets, int) or not 2 <= buckets <= MAX_BUCKETS
    ):
        raise TableConfigError(
            f"table {name}: buckets is {buckets!r}; expected a whole number from 2 to {MAX_BUCKETS}"
        )
    return buckets


def _flag(name: str, entry: dict[str, Any], key: str, default: bool) -> bool:
    value = entry.get(key, default)
    if not isinstance(value, bool):
        raise TableConfigError(f"table {name}: {key} is {value!r}; expected true or false")
    return value


def table_from_entry(name: str, entry: dict[str, Any]) -> TableConfig:
    if not _TABLE_NAME.match(name):
        raise TableConfigError(
            f"table name {name!r} must match {_TABLE_NAME.pattern} (the lakehouse name; a "
            "DynamoDB name such as 'App.Users' goes in the entry's dynamodb_table, which "
            "`add-table App.Users` writes)"
        )
    if "attributes" in entry:
        raise TableConfigError(
            f"table {name}: attribute types live in the table's schema file (schemas/{name}.json, "
            "written by `ddb-lakehouse detect-schema`), not in dbt_project.yml"
        )
    if name in (names.MERGE_LOG, names.LEASES, names.VERIFY_LOG) or name.endswith(
        names.REJECTS_SUFFIX
    ):
        raise TableConfigError(
            f"table name {name!r} is the project's own (the merge log, the verify log, the leases, or a table's "
            f"staging.<table>{names.REJECTS_SUFFIX}): choose another lakehouse name (--name)"
        )
    unknown = sorted(set(entry) - set(ENTRY_KEYS))
    if unknown:
        raise TableConfigError(
            f"table {name}: unknown key(s) {', '.join(unknown)}; a table entry may hold "
            f"{', '.join(ENTRY_KEYS)} (docs/tables-and-types.md)"
        )
    if "partition_key" not in entry:
        raise TableConfigError(f"table {name}: partition_key is required")
    dynamodb_table = _source(name, entry)
    sort_key = parse_key(entry["sort_key"], name) if entry.get("sort_key") else None
    partition_key = parse_key(entry["partition_key"], name)
    keys = (partition_key,) + ((sort_key,) if sort_key else ())
    ttl = _choice(name, entry, "ttl_deletes", TTL_MODES, "delete")
    export_to = entry.get("export_to")
    if export_to is not None:
        try:
            parse_s3_uri(str(export_to))
        except LocationError as exc:
            raise TableConfigError(
                f"table {name}: export_to must be s3://BUCKET/PREFIX: {exc}"
            ) from exc
    buckets = _buckets(name, entry)
    adopt, heal = _flag(name, entry, "adopt_drift", True), _flag(name, entry, "heal", False)
    cadence = _choice(name, entry, "cadence", CADENCES, "daily")
    # YAML reads a bare ``off`` as false: taken as the "off" it was written as.
    verify = _choice(name, {"verify": "off"} if entry.get("verify") is False else entry, "verify", VERIFY_SCHEDULES, "weekly")  # fmt: skip
    config = TableConfig(
        name,
        partition_key,
        sort_key,
        ttl,
        entry.get("table_arn"),
        export_to,
        buckets,
        adopt,
        dynamodb_table if dynamodb_table != name else "",
        cadence,
        heal,
        verify,
        parse_rule(name, entry.get("entities"), {k.name: k.descriptor for k in keys}),
    )
    if sort_key and sort_key.column == config.partition_key.column:
        raise TableConfigError(
            f"table {name}: partition and sort key map to one column {sort_key.column!r}"
        )
    return config


def project_file() -> Path:
    return settings.project_dir() / "dbt_project.yml"


def load_tables(path: Path | None = None) -> dict[str, TableConfig]:
    raw = yaml.safe_load((path or project_file()).read_text()) or {}
    entries = (raw.get("vars") or {}).get("dynamodb_tables") or {}
    tables = {name: table_from_entry(name, entry or {}) for name, entry in entries.items()}
    check_distinct(tables.values())
    return tables


def check_distinct(tables: Any) -> None:
    """Two entries for one DynamoDB table would stage its exports twice; a table's DynamoDB
    name that is another table's lakehouse name would make ``--table`` ambiguous."""
    tables = list(tables)
    lakehouse = {t.name for t in tables}
    register_finals(tables)
    for table in tables:
        if table.dynamodb_name != table.name and table.dynamodb_name in lakehouse:
            raise TableConfigError(
                f"table {table.name} is DynamoDB table {table.dynamodb_name!r}, which is also "
                "another entry's lakehouse name: --table would be ambiguous; rename one"
            )
    seen: dict[str, str] = {}
    for table in tables:
        other = seen.setdefault(table.dynamodb_name, table.name)
        if other != table.name:
            raise TableConfigError(
                f"tables {other} and {table.name} are both DynamoDB table "
                f"{table.dynamodb_name!r}: keep one entry"
            )


def get_table(name: str) -> TableConfig:
    """A configured table by its lakehouse name or its DynamoDB name."""
    tables = load_tables()
    if name in tables:
        return tables[name]
    by_dynamodb = [t for t in tables.values() if t.dynamodb_name == name]
    if by_dynamodb:
        return by_dynamodb[0]
    known = ", ".join(sorted(tables)) or "none"
    raise TableConfigError(
        f"unknown table {name!r} (configured: {known}); register it with "
        f"`ddb-lakehouse add-table {name} --partition-key ATTR:TYPE`"
    )
