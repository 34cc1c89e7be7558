"""The dbt files of one DynamoDB table: the staging model (ephemeral), the final model and its
schema YAML.

They are rendered from the Jinja templates in ``templates/`` (delimiters ``<< >>`` and
``<% %>``, so dbt's own ``{{ }}`` and ``{% %}`` stay as written). The attribute columns are not
listed: they come from the table's schema file (schemas/<table>.json) and reach the models
through ``select *``, so a new attribute needs no model change. The metadata columns'
descriptions are dbt ``{% docs %}`` blocks (models/docs/metadata_columns.md).

``add-table`` writes them for a user's table; the committed ``books`` and ``orders`` files are
exactly what this module renders (a test checks it), so every table is built the same way.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import jinja2

from ingestion.catalog import table_metadata
from ingestion.config import names
from ingestion.dynamodb.entities import final_tables, staged_under
from ingestion.dynamodb.tables import TableConfig
from ingestion.schema.types import METADATA_COLUMNS


@cache
def _templates() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
        variable_start_string="<<",
        variable_end_string=">>",
        block_start_string="<%",
        block_end_string="%>",
        comment_start_string="<#",
        comment_end_string="#>",
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # SQL and YAML, not HTML
    )


def render(template: str, table: TableConfig) -> str:
    return (
        _templates().get_template(template).render(table=table, metadata_columns=METADATA_COLUMNS)
    )


def files_for(table: TableConfig, root: Path) -> dict[Path, str]:
    """Path -> content of the dbt files of ``table``: of each of its entity tables, for a
    single-table design (their staging models read the entry's change log as theirs)."""
    staging = root / "models/staging" / names.SOURCE
    files: dict[Path, str] = {}
    for final in final_tables(table):
        model = names.staging_model(final.name)
        files |= {
            staging / f"{model}.sql": render("staging.sql.j2", final),
            staging / f"{model}.yml": render("staging.yml.j2", final),
            root / "models/marts" / f"{final.name}.sql": render("final.sql.j2", final),
            root / "models/marts" / f"{final.name}.yml": render("final.yml.j2", final),
        }
        if final.history:  # docs/history.md
            history = names.history_table(final.name)
            files |= {
                root / "models/marts" / f"{history}.sql": render("history.sql.j2", final),
                root / "models/marts" / f"{history}.yml": render("history.yml.j2", final),
            }
    return files


def write_missing(table: TableConfig, root: Path) -> list[Path]:
    """The dbt files of a single-table design's entity tables that do not exist yet, written
    (its rule was changed in ``dbt_project.yml`` and the table reset, docs/single-table-design.md);
    a person's edits to existing ones are kept. Nothing for a table without a rule."""
    if table.entities is None:
        return []
    missing = {path: text for path, text in files_for(table, root).items() if not path.exists()}
    for path, text in missing.items():
        path.write_text(text)
    return list(missing)


def write_missing_history(table: TableConfig, root: Path) -> list[Path]:
    """The history models of a table with ``history: true`` that do not exist yet, written (the
    key set in ``dbt_project.yml`` after ``add-table``: docs/history.md); the files written."""
    if not table.history:
        return []
    missing = {
        path: text
        for path, text in files_for(table, root).items()
        if path.stem.endswith(names.history_table("")) and not path.exists()
    }
    for path, text in missing.items():
        path.write_text(text)
    return list(missing)


def replaced_models(table: TableConfig, root: Path) -> tuple[list[Path], list[Path]]:
    """A table with a rule set after it was added: its own (unsplit) dbt files, which the rule's
    entity models replace. Those still as rendered are deleted; those a person edited are left
    and returned apart, to be named. (deleted, edited)"""
    if table.entities is None:
        return [], []
    unsplit = files_for(table.model_copy(update={"entities": None}), root)
    found = {path: text for path, text in unsplit.items() if path.exists()}
    deleted = [path for path, text in found.items() if path.read_text() == text]
    for path in deleted:
        path.unlink()
    return deleted, [path for path in found if path not in deleted]


def rule_in_force(table: TableConfig) -> bool:
    """Whether the table's change log was staged under its configured rule, or holds nothing yet
    (read without a JVM where the path without Spark serves; else assumed). A job refuses any other
    case, naming the reset: its models are then left as they are."""
    files = table_metadata.files()
    if files is None:
        return True
    staged = files.read(names.STAGING, table.name)
    if staged is None:
        return True
    return table.entities is not None and staged_under(table.entities, staged.properties)
