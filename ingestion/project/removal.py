"""``remove-table``'s project side: a table's configuration entry, its source entry, its dbt
model files and its schema file taken out again, the inverse of ``onboarding.add_table``.

The YAML files keep their comments: the table's block is cut out as text (its first line and
every deeper-indented line after it), then the result is parsed back and must equal the
configuration without that one table before anything is written.
"""

from __future__ import annotations

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
    """The files a table owns that exist: its dbt models and its schema file."""
    root = root or settings.project_dir()
    owned = [*scaffold.files_for(table, root), schema_file.schema_path(table.name)]
    return [p for p in owned if p.exists()]


def remove_table_files(table: TableConfig) -> list[Path]:
    """Take the table out of the project: its entry in ``dbt_project.yml`` and the source's
    ``__sources.yml``, its dbt model files and its schema file; the paths changed or deleted."""
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
    files = table_files(table, root)
    project_path.write_text(project_text)
    sources.write_text(sources_text)
    for path in files:
        path.unlink()
    return [project_path, sources, *files]
