"""``add-table``: register a user's DynamoDB table in one command.

Appends its entry to the table configuration (``dbt_project.yml`` vars) and its source to
``__sources.yml``, then writes its dbt models. Both YAML files keep their comments: the entries
are appended as text (their last block is the list being extended), then the result is parsed
back and checked before anything is written. Nothing is written when any check fails.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from ingestion.config import names, settings
from ingestion.config.errors import LakehouseError
from ingestion.dynamodb.tables import (
    check_distinct,
    check_dynamodb_name,
    is_lakehouse_name,
    lakehouse_name,
    load_tables,
    table_from_entry,
)
from ingestion.project import scaffold


class OnboardingError(LakehouseError):
    """The table cannot be added (exists already, invalid key...)."""


def sources_path(root: Path) -> Path:
    return root / "models/staging/dynamodb/__sources.yml"


def names_for(dynamodb_name: str, lakehouse: str | None = None) -> tuple[str, str]:
    """(lakehouse name, DynamoDB name) of a table added as ``dynamodb_name``: the lakehouse
    name derived by the column-name rule unless given."""
    if lakehouse is None and is_lakehouse_name(dynamodb_name):
        # Decision: a name that is already a lakehouse name is taken as it is, also one
        # DynamoDB would not allow (shorter than 3 characters): exports are matched by it, so a
        # wrong one stages nothing; refusing it would only stop tests and sketches.
        return dynamodb_name, dynamodb_name
    check_dynamodb_name(dynamodb_name)
    name = lakehouse or lakehouse_name(dynamodb_name)
    if lakehouse is None and not is_lakehouse_name(name):
        raise OnboardingError(
            f"DynamoDB table {dynamodb_name!r} gives lakehouse name {name[:40]!r}..., longer "
            "than the 128 characters a lakehouse name may have: choose one with --name"
        )
    return name, dynamodb_name


def entity_block(
    key: str | None, attribute: str | None, values: list[str] | None
) -> dict[str, Any] | None:
    """The ``entities`` block of ``add-table``'s ``--entity-key``/``--entity-attribute`` and
    ``--entity VALUE[=TABLE]`` options (validated with the rest of the entry)."""
    if not key and not attribute:
        if values:
            raise OnboardingError("--entity needs --entity-key KEY or --entity-attribute ATTR")
        return None
    if not values:
        raise OnboardingError(
            "a single-table design lists its entities: --entity VALUE[=TABLE], once each"
        )
    listed = {v.partition("=")[0]: v.partition("=")[2] or None for v in values}
    return {"key": key} | {"values": listed} if key else {"attribute": attribute, "values": listed}


def add_table(
    dynamodb_name: str,
    partition_key: str,
    sort_key: str | None,
    buckets: int | None = None,
    lakehouse: str | None = None,
    cadence: str = "daily",
    entities: dict[str, Any] | None = None,
    history: bool = False,
) -> list[Path]:
    """Register DynamoDB table ``dynamodb_name`` as lakehouse table ``lakehouse`` (derived from
    it by default); the files written."""
    root = settings.project_dir()
    project_path = root / "dbt_project.yml"
    sources_file = sources_path(root)
    name, dynamodb_name = names_for(dynamodb_name, lakehouse)
    configured = load_tables(project_path)
    if name in configured:
        holder = configured[name].dynamodb_name
        if holder == dynamodb_name and history and not configured[name].history:
            raise OnboardingError(
                f"table {name!r} is already configured in {project_path}: to keep its history, "
                f"add `history: true` to its entry (vars.dynamodb_tables.{name}); the next merge "
                f"writes lakehouse.{names.history_table(name)}'s model and builds it from the "
                "changes staged from then on (docs/history.md)"
            )
        if holder == dynamodb_name:
            raise OnboardingError(f"table {name!r} is already configured in {project_path}")
        raise OnboardingError(
            f"DynamoDB tables {holder!r} and {dynamodb_name!r} both map to lakehouse table "
            f"{name!r} ({holder!r} is configured in {project_path}): add {dynamodb_name!r} "
            "with --name NAME to give it another"
        )
    for other in configured.values():
        if other.dynamodb_name == dynamodb_name:
            raise OnboardingError(
                f"DynamoDB table {dynamodb_name!r} is already configured as {other.name!r}"
            )
    entry: dict[str, object] = {"partition_key": partition_key}
    if dynamodb_name != name:
        entry["dynamodb_table"] = dynamodb_name
    if sort_key:
        entry["sort_key"] = sort_key
    if buckets is not None:
        entry["buckets"] = buckets
    if cadence != "daily":
        entry["cadence"] = cadence
    if entities:
        entry["entities"] = entities
    if history:
        entry["history"] = True
    table = table_from_entry(name, entry)  # validates names and keys
    check_distinct([*configured.values(), table])  # entity tables named as no other table

    project_text = project_path.read_text().rstrip("\n") + "\n" + _entry_text(name, entry)
    sources_text = sources_file.read_text().rstrip("\n") + "\n"
    sources_text += (
        f"      - name: {name}\n        description: Change log of the DynamoDB table "
        f"`{dynamodb_name}`.\n"
    )
    _check_appended(project_text, sources_text, name, project_path, sources_file)

    files = scaffold.files_for(table, root)
    clashes = [str(p) for p in files if p.exists()]
    if clashes:
        raise OnboardingError(f"table {name!r}: files exist already: {', '.join(clashes)}")
    project_path.write_text(project_text)
    sources_file.write_text(sources_text)
    for path, content in files.items():
        path.write_text(content)
    return [project_path, sources_file, *files]


def _entry_text(name: str, entry: dict[str, Any]) -> str:
    """A table entry as the lines ``add-table`` appends to ``dbt_project.yml``."""
    text = f"    {name}:\n"
    if "dynamodb_table" in entry:
        text += f"      dynamodb_table: {json.dumps(entry['dynamodb_table'])}\n"
    text += f"      partition_key: {json.dumps(entry['partition_key'])}\n"
    if entry.get("sort_key"):
        text += f"      sort_key: {json.dumps(entry['sort_key'])}\n"
    for key in ("buckets", "cadence"):
        if key in entry:
            text += f"      {key}: {entry[key]}\n"
    if entry.get("history"):
        text += "      history: true\n"
    if "entities" in entry:  # YAML quotes a value it would read as no string (`ON`, `01`)
        block = yaml.safe_dump({"entities": entry["entities"]}, sort_keys=False, default_style=None)
        text += "".join(f"      {line}\n" for line in block.splitlines())
    return text


def _check_appended(
    project_text: str, sources_text: str, name: str, project_path: Path, sources_file: Path
) -> None:
    tables = (yaml.safe_load(project_text).get("vars") or {}).get("dynamodb_tables") or {}
    if name not in tables:
        raise OnboardingError(
            f"{project_path}: `vars: dynamodb_tables:` must be the last block of the file "
            "for add-table to extend it"
        )
    sources = yaml.safe_load(sources_text)["sources"]
    if not any(t.get("name") == name for t in sources[-1].get("tables", [])):
        raise OnboardingError(f"{sources_file}: the source's `tables:` list must come last")
