"""The table configuration: one entry per DynamoDB table, read by ingestion/ and by the dbt models.

It lives in ``dbt_project.yml`` under ``vars: dynamodb_tables:`` so that dbt reads it with
``var()`` and Python reads it with YAML: one place, no copy. ``add-table`` appends to it.
An entry holds the table's keys; the columns come from the table's schema file.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from ingestion.config import names, settings
from ingestion.config.errors import LakehouseError
from ingestion.dynamodb.entities import EntityRule, parse_rule, register_finals
from ingestion.dynamodb.naming import column_name
from ingestion.sources.s3_uri import LocationError, parse_s3_uri

KEY_DESCRIPTORS = ("S", "N", "B")
MAX_BUCKETS = 1024
_TABLE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,127}$")  # a lakehouse (and dbt, Glue) table name
# A DynamoDB table name: 3 to 255 of a-z A-Z 0-9 _ . - (the DynamoDB API reference).
_DYNAMODB_NAME = re.compile(r"^[A-Za-z0-9_.-]{3,255}$")
# How a deployment keeps the table fresh (``ddb-lakehouse deploy render``): from its stream
# through the one long-running ``watch``, or from a daily incremental export.
Cadence = Literal["daily", "stream"]
CADENCES: tuple[str, ...] = get_args(Cadence)
# How often a deployment verifies the table against a full export (``verify --from-dynamodb``).
VerifySchedule = Literal["weekly", "daily", "off"]
TtlMode = Literal["delete", "keep"]
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


def _key_problem(spec: str) -> str | None:
    name, sep, descriptor = spec.rpartition(":")
    if not sep or not name or descriptor not in KEY_DESCRIPTORS:
        return f"key {spec!r} must be ATTRIBUTE:TYPE with TYPE one of S, N, B"
    return None


def parse_key(spec: str, table: str) -> Key:
    """``ATTR:TYPE`` with TYPE one of S, N, B."""
    problem = _key_problem(spec)
    if problem:
        raise TableConfigError(f"table {table}: {problem}")
    name, _, descriptor = spec.rpartition(":")
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


Buckets = Annotated[int, Field(strict=True, ge=2, le=MAX_BUCKETS)]


class TableConfig(BaseModel):
    """A table: one entry of ``vars: dynamodb_tables:``, validated here and only here
    (``table_from_entry``): the keys an entry may hold, their types and defaults, and what they
    are read into (its keys as ``Key``s, its entity rule). Each entry key's description is its
    row of the docs' table of entry keys (``entry_keys_table``, in docs/tables-and-types.md; a
    test keeps them equal). ``name`` (the entry's own key in the mapping) and ``staging`` (an
    entity's final table, ``entities.final_tables``) are no entry keys."""

    # A number where a name or ARN goes (YAML reads an unquoted 2024 as one) is taken as its text.
    model_config = ConfigDict(extra="forbid", frozen=True, coerce_numbers_to_str=True)

    name: str = Field(description="", json_schema_extra={"entry_key": False})
    partition_key: Key = Field(
        description="`ATTRIBUTE:TYPE`, TYPE `S`, `N` or `B` (required; a type every one of an "
        "export's first 10 data lines contradicts is refused before Spark starts; a stream "
        "file's, by the ingest)"
    )
    sort_key: Key | None = Field(None, description="`ATTRIBUTE:TYPE`")
    dynamodb_table: str = Field(
        "",
        description="the DynamoDB table's own name, when it differs from the entry's",
        json_schema_extra={"shown_default": "the entry's name"},
    )
    table_arn: str | None = Field(
        None,
        description="the table's ARN (`export`, `sync --from-dynamodb`; when set, exports must "
        "carry exactly it)",
    )
    export_to: str | None = Field(
        None, description="`s3://BUCKET/PREFIX` where `export` asks DynamoDB to write"
    )
    buckets: Buckets | None = Field(
        None,
        description=f"2 to {MAX_BUCKETS}: the final table partitioned by `bucket(N, partition "
        "key)`",
    )
    ttl_deletes: TtlMode = Field(
        "delete",
        description="`delete` or `keep`: what a TTL expiry does to the final row (`keep`: the "
        "row stays, flagged, through later full exports, until its key is created again)",
    )
    adopt_drift: bool = Field(
        True,
        strict=True,
        description="`true` or `false`: adopt a value that does not fit its column",
    )
    history: bool = Field(
        False,
        strict=True,
        description="`true` or `false`: keep every version of every item in "
        "`lakehouse.<table>__history` (one per entity table of a single-table design), "
        "queryable as of any instant ([History](history.md))",
    )
    heal: bool = Field(
        False,
        strict=True,
        description="`true` or `false`: `sync --from-dynamodb` heals a chain of exports that "
        "cannot continue "
        "with a full export, as `--heal` does ([Proving it](proving-it.md))",
    )
    verify: VerifySchedule = Field(
        "weekly",
        description="how often a deployment verifies it against a full export (`deploy "
        "render`'s `<table>-verify` schedule): `weekly`, `daily` or `off` (YAML reads a bare "
        "`off` as `false`: taken as `off`)",
    )
    cadence: Cadence = Field(
        "daily",
        description="how a deployment keeps it fresh (`ddb-lakehouse deploy render`): `stream` "
        "(its DynamoDB stream, read by the one long-running `watch`) or `daily` (an incremental "
        "export a day, and a weekly `maintain`)",
    )
    # Its rule is read and checked by its own parser (ingestion.dynamodb.entities.parse_rule).
    entities: EntityRule | None = Field(
        None,
        description="a single-table design's rule: `key: KEY` (the text before the first `#` of "
        "a string key, all of it without one) or `attribute: ATTR` (its string value), and "
        "`values: {VALUE: final table name or null}` (null: `<table>__<value>`); one final table "
        "per value, and `<table>__unmatched` for items of no listed value ([Single-table "
        "designs](single-table-design.md))",
        json_schema_extra={"shown_default": "none: one final table"},
    )
    staging: str = Field("", description="", json_schema_extra={"entry_key": False})

    @model_validator(mode="before")
    @classmethod
    def _entry(cls, entry: Any, info: ValidationInfo) -> Any:
        """An entry as its mapping holds it, named by the context. Its rule is read by its own
        parser (``entities.parse_rule``) only with ``rule`` in the context: ``table_from_entry``
        validates the other keys first, so that their errors come first, as they read."""
        context = info.context or {}
        name = context.get("name")
        if name is None or not isinstance(entry, dict):
            return entry  # a copy of a validated table, or no mapping (refused below)
        own = sorted(k for k in ("name", "staging") if k in entry)
        if own:  # the names a table is given, never an entry's keys
            raise ValueError(
                f"unknown key(s) {', '.join(own)}; a table entry may hold "
                f"{', '.join(ENTRY_KEYS)} (docs/tables-and-types.md)"
            )
        values = {**entry, "name": name}
        if values.get("dynamodb_table") == name:  # the default, written out
            values["dynamodb_table"] = None
        if not context.get("rule"):
            values.pop("entities", None)
            return values
        keys = [entry["partition_key"], entry.get("sort_key") or None]
        descriptors = dict(str(k).rpartition(":")[::2] for k in keys if k)
        values["entities"] = parse_rule(name, entry.get("entities"), descriptors)
        return values

    @field_validator("partition_key", "sort_key", mode="before")
    @classmethod
    def _key(cls, spec: Any, info: ValidationInfo) -> Any:
        """``ATTRIBUTE:TYPE`` read into a ``Key``; an empty, null or false sort key: none."""
        if info.field_name == "sort_key" and not spec:
            return None
        if isinstance(spec, Key):
            return spec
        if isinstance(spec, (int, float)) and not isinstance(spec, bool):
            spec = str(spec)  # as every other text of an entry (``coerce_numbers_to_str``)
        if not isinstance(spec, str):
            raise PydanticCustomError("string_type", "Input should be a valid string")
        problem = _key_problem(spec)
        if problem:
            raise ValueError(problem)
        name, _, descriptor = spec.rpartition(":")
        return Key(name, descriptor)

    @field_validator("dynamodb_table", mode="before")
    @classmethod
    def _no_dynamodb_name(cls, name: Any) -> Any:
        return "" if name is None else name  # none: the entry's name

    @field_validator("dynamodb_table")
    @classmethod
    def _dynamodb_name(cls, name: str) -> str:
        if name:
            check_dynamodb_name(name)
        return name

    @field_validator("table_arn")
    @classmethod
    def _arn(cls, arn: str | None) -> str | None:
        if arn is not None and not _TABLE_ARN.match(arn):
            raise ValueError(
                f"table_arn {arn!r} is no DynamoDB table ARN (arn:aws:dynamodb:REGION:ACCOUNT:"
                "table/NAME)"
            )
        return arn

    @field_validator("export_to")
    @classmethod
    def _export_to(cls, uri: str | None) -> str | None:
        if uri is not None:
            try:
                parse_s3_uri(uri)
            except LocationError as exc:
                raise ValueError(f"export_to must be s3://BUCKET/PREFIX: {exc}") from None
        return uri

    @field_validator("verify", mode="before")
    @classmethod
    def _bare_off(cls, value: Any) -> Any:
        return "off" if value is False else value  # YAML reads a bare `off` as false

    @model_validator(mode="after")
    def _one_table(self) -> TableConfig:
        found = _TABLE_ARN.match(self.table_arn) if self.table_arn else None
        if found and found.group(1) != self.dynamodb_name:
            raise ValueError(
                f"table_arn names table {found.group(1)!r}, but this entry is DynamoDB table "
                f"{self.dynamodb_name!r}"
            )
        if self.sort_key and self.sort_key.column == self.partition_key.column:
            raise ValueError(f"partition and sort key map to one column {self.sort_key.column!r}")
        return self

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


def _entry_key(field: Any) -> bool:
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    return extra.get("entry_key", True) is not False


ENTRY_KEYS = tuple(k for k, f in TableConfig.model_fields.items() if _entry_key(f))


def _problem(errors: list[Any]) -> str:
    """The first of pydantic's errors, said as the project says an entry's problem."""
    extra = [str(e["loc"][0]) for e in errors if e["type"] == "extra_forbidden"]
    if "attributes" in extra:
        return (
            "attribute types live in the table's schema file (schemas/<table>.json, written by "
            "`ddb-lakehouse detect-schema`), not in dbt_project.yml"
        )
    if extra:
        return (
            f"unknown key(s) {', '.join(sorted(extra))}; a table entry may hold "
            f"{', '.join(ENTRY_KEYS)} (docs/tables-and-types.md)"
        )
    error = next((e for e in errors if e["type"] == "missing"), errors[0])
    key, value = (str(error["loc"][0]) if error["loc"] else ""), error.get("input")
    if error["type"] == "missing":
        return f"{key} is required"
    if error["type"] == "value_error":
        return str(error["ctx"]["error"])
    if key == "buckets":
        return f"buckets is {value!r}; expected a whole number from 2 to {MAX_BUCKETS}"
    if error["type"] == "bool_type":
        return f"{key} is {value!r}; expected true or false"
    if error["type"] == "literal_error":
        choices = get_args(TableConfig.model_fields[key].annotation)
        return f"{key} is {value!r}; expected one of {', '.join(choices)}"
    return f"{key} is {value!r}: {error['msg']}"


def entry_keys_table() -> str:
    """The docs' table of entry keys (docs/tables-and-types.md), from ``TableConfig``."""
    rows = ["| key | value | default |", "|---|---|---|"]
    for key, field in TableConfig.model_fields.items():
        if not _entry_key(field):
            continue
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        if "shown_default" in extra:
            default = str(extra["shown_default"])
        elif field.is_required():
            default = ""
        elif field.default is None:
            default = "none"
        elif isinstance(field.default, bool):
            default = f"`{str(field.default).lower()}`"
        else:
            default = f"`{field.default}`"
        rows.append(f"| `{key}` | {field.description} |{f' {default} ' if default else ' '}|")
    return "\n".join(rows) + "\n"


def table_from_entry(name: str, entry: dict[str, Any]) -> TableConfig:
    if not _TABLE_NAME.match(name):
        raise TableConfigError(
            f"table name {name!r} must match {_TABLE_NAME.pattern} (the lakehouse name; a "
            "DynamoDB name such as 'App.Users' goes in the entry's dynamodb_table, which "
            "`add-table App.Users` writes)"
        )
    if name in (names.MERGE_LOG, names.LEASES, names.VERIFY_LOG) or name.endswith(
        names.REJECTS_SUFFIX
    ):
        raise TableConfigError(
            f"table name {name!r} is the project's own (the merge log, the verify log, the leases, "
            f"or a table's "
            f"staging.<table>{names.REJECTS_SUFFIX}): choose another lakehouse name (--name)"
        )
    if not isinstance(entry, dict):
        raise TableConfigError(
            f"table {name}: its entry is {entry!r}; expected keys under it (partition_key: "
            "ATTR:TYPE, ...; docs/tables-and-types.md)"
        )
    try:
        TableConfig.model_validate(entry, context={"name": name})  # every key but the rule
        return TableConfig.model_validate(entry, context={"name": name, "rule": True})
    except ValidationError as exc:
        raise TableConfigError(f"table {name}: {_problem(exc.errors())}") from None


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
    finals = {f for t in tables for f in (t.entities.finals if t.entities else (t.name,))}
    for table in tables:
        for final in (
            (table.entities.finals if table.entities else (table.name,)) if table.history else ()
        ):
            if names.history_table(final) in finals:
                raise TableConfigError(
                    f"table {table.name}: its history {names.history_table(final)!r} (history: "
                    "true) is also a final table's name: rename that table or its entity"
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
    candidates = {t.name: t.name for t in tables.values()} | {
        t.dynamodb_name: t.name for t in tables.values()
    }
    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    close = close or [c for c in candidates if c.lower() == name.lower()]
    if close:
        raise TableConfigError(
            f"unknown table {name!r}: did you mean {candidates[close[0]]!r}? (configured: {known})"
        )
    raise TableConfigError(
        f"unknown table {name!r} (configured: {known}); register it with "
        f"`ddb-lakehouse add-table {name} --partition-key ATTR:TYPE`"
    )
