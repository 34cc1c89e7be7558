"""``remove-table``'s project side: a table's configuration entry, its source entry, its dbt
model files and its schema file taken out again, the inverse of ``onboarding.add_table``.

The YAML files keep their comments: the table's block is cut out as text (its first line and
every deeper-indented line after it), then the result is parsed back and must equal the
configuration without that one table before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from ingestion.config import settings
from ingestion.dynamodb.tables import TableConfig, load_tables
from ingestion.project import scaffold
from ingestion.project.onboarding import OnboardingError, sources_path
from ingestion.schema import schema_file


def _cut_block(text: str, first_line: str) -> str:
    """``text`` without the block that starts with the line ``first_line`` (exactly, without
    its line end) and runs over every following line indented deeper, or blank."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.rstrip("\n") == first_line]
    if len(starts) != 1:
        raise OnboardingError(f"cannot find exactly one line {first_line.strip()!r} to remove")
    start = starts[0]
    indent = len(first_line) - len(first_line.lstrip())
    end = start + 1
    while end < len(lines) and (
        not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > indent
    ):
        end += 1
    return "".join(lines[:start] + lines[end:])


def table_files(table: TableConfig, root: Path | None = None) -> list[Path]:
    """The files a table owns that exist: its dbt models (its history's too, also one left from
    before `history: true` was taken out: it would name a staging model no longer there) and its
    schema file."""
    root = root or settings.project_dir()
    models = scaffold.files_for(table.model_copy(update={"history": True}), root)
    owned = [*models, schema_file.schema_path(table.name)]
    return [p for p in owned if p.exists()]


@dataclass(frozen=True)
class Removal:
    """The project's files as they will be without a table, computed and checked before
    anything is deleted (the table's data included)."""

    texts: dict[Path, str]  # dbt_project.yml and __sources.yml without the table's entries
    files: list[Path]  # the table's own files, to delete

    @property
    def paths(self) -> list[Path]:
        return [*self.texts, *self.files]


def plan_removal(table: TableConfig) -> Removal:
    """The table taken out of the project, checked, nothing written: its entries in
    ``dbt_project.yml`` and ``__sources.yml`` cut, its dbt model files and its schema file."""
    root = settings.project_dir()
    project_path = root / "dbt_project.yml"
    sources = sources_path(root)
    project_text = _cut_block(project_path.read_text(), f"    {table.name}:")
    sources_text = _cut_block(sources.read_text(), f"      - name: {table.name}")
    before = load_tables(project_path)
    after_entries = (yaml.safe_load(project_text).get("vars") or {}).get("dynamodb_tables") or {}
    if set(after_entries) != set(before) - {table.name}:
        raise OnboardingError(f"{project_path}: removing {table.name} would change other tables")
    listed = yaml.safe_load(sources_text)["sources"][-1].get("tables", [])
    if any(t.get("name") == table.name for t in listed):
        raise OnboardingError(f"{sources}: {table.name} is listed more than once")
    return Removal({project_path: project_text, sources: sources_text}, table_files(table, root))


def apply_removal(removal: Removal) -> list[Path]:
    """Write the planned files and delete the table's own; the paths changed or deleted."""
    for path, text in removal.texts.items():
        path.write_text(text)
    for path in removal.files:
        path.unlink(missing_ok=True)
    return removal.paths
