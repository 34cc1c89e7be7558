"""A final table's YAML runs the merge's own key tests, not dbt's.

``dynamodb_unique`` and ``dynamodb_not_null`` (``macros/tests/``) answer dbt's ``unique`` and
``not_null`` at the cost of the merge (scoped to the keys it touched; Iceberg's null counts). A
model YAML that says ``unique``/``not_null`` asks for dbt's whole-table tests: rather than let every
merge read the whole table unnoticed, the merge stops before it starts with one line naming the test
to write instead.

Decision: refuse, not rewrite the user's YAML: it is the user's file (descriptions, tests of
their own), and the fix is one word per column. A test that was only renamed is the exception
(``RENAMED``): the merge's own ``unique_combination_of_columns`` became
``dynamodb_unique_combination_of_columns`` so that it does not shadow dbt-utils' test of that
name (docs/decisions/0011). Its arguments and meaning are the same, so there is nothing for the
user to decide: the merge rewrites that one word in the table's YAML and says so.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import yaml

from ingestion.config import settings
from ingestion.config.errors import LakehouseError
from ingestion.dynamodb.tables import TableConfig

log = logging.getLogger(__name__)

SCOPED = {"unique": "dynamodb_unique", "not_null": "dynamodb_not_null"}
# Generic tests of the project renamed, old name -> new: a YAML that names the old one is
# rewritten in place (same arguments, same meaning).
RENAMED = {"unique_combination_of_columns": "dynamodb_unique_combination_of_columns"}


class ModelTestError(LakehouseError):
    """A final table's YAML does not parse, or names dbt's built-in key test instead of the
    merge's scoped one."""


def _test_name(test: Any) -> str:
    return test if isinstance(test, str) else next(iter(test), "")


def migrate_renamed_tests(path: Path) -> list[str]:
    """Rewrite each test of ``RENAMED`` under its new name in the model YAML at ``path`` (a list
    item naming the test, as ``add-table`` writes it; a namespaced ``dbt_utils.`` test is not
    the project's and stays). Returns the old names rewritten."""
    text = path.read_text()
    rewritten = []
    for old, new in RENAMED.items():
        text, count = re.subn(rf"(?m)^(\s*-\s*){old}(\s*:|\s*$)", rf"\g<1>{new}\g<2>", text)
        if count:
            rewritten.append(old)
    if rewritten:
        path.write_text(text)
    return rewritten


def migrate_models(project: Path | None = None) -> list[Path]:
    """``migrate_renamed_tests`` on every final model's YAML (``models/marts/``), each rewrite
    said in a warning; returns the files rewritten. Run before anything parses the project: a
    merge, ``doctor``'s ``dbt parse``, and the EMR job's archive (built from the files on disk)."""
    project = project or settings.project_dir()
    rewritten = []
    for path in sorted((project / "models" / "marts").glob("*.yml")):
        for old in migrate_renamed_tests(path):
            log.warning(
                "%s: the test %s is now %s (renamed so that it does not shadow dbt-utils' test "
                "of that name); the file was updated",
                path.relative_to(project),
                old,
                RENAMED[old],
            )
            rewritten.append(path)
    return rewritten


def check_model_tests(tables: list[TableConfig], project: Path | None = None) -> None:
    """Migrate renamed tests (``migrate_models``), then raise ``ModelTestError`` for the first
    final-table column whose tests say ``unique`` or ``not_null``."""
    project = project or settings.project_dir()
    migrate_models(project)
    for table in tables:
        path = project / "models" / "marts" / f"{table.name}.yml"
        if not path.exists():
            continue
        try:
            models = (yaml.safe_load(path.read_text()) or {}).get("models") or []
        except yaml.YAMLError as exc:
            where = getattr(exc, "problem_mark", None)
            at = f" at line {where.line + 1}, column {where.column + 1}" if where else ""
            problem = getattr(exc, "problem", None) or "not YAML"
            raise ModelTestError(
                f"{path.relative_to(project)} does not parse{at}: {problem}. Fix the file; "
                "nothing was merged"
            ) from None
        for model in models:
            if model.get("name") != table.name:
                continue
            for column in model.get("columns") or []:
                tests = (column.get("data_tests") or []) + (column.get("tests") or [])
                for name in map(_test_name, tests):
                    if name in SCOPED:
                        raise ModelTestError(
                            f"{path.relative_to(project)}: column {column.get('name')} tests "
                            f"`{name}`: write `{SCOPED[name]}` (the same test at the cost of the "
                            "merge; `add-table` writes it since the tests were renamed)"
                        )
