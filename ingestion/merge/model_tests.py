"""A final table's YAML runs the merge's own key tests, not dbt's.

``dynamodb_unique`` and ``dynamodb_not_null`` (``macros/tests/``) answer dbt's ``unique`` and
``not_null`` at the cost of the merge (scoped to the keys it touched; Iceberg's null counts). A
model YAML written by an earlier ``add-table`` still says ``unique``/``not_null``, which now
means dbt's whole-table tests: rather than let every merge read the whole table unnoticed, the
merge stops before it starts with one line naming the test to write instead.

Decision: refuse, not rewrite the user's YAML: it is the user's file (descriptions, tests of
their own), and the fix is one word per column.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ingestion.config import settings
from ingestion.config.errors import LakehouseError
from ingestion.dynamodb.tables import TableConfig

SCOPED = {"unique": "dynamodb_unique", "not_null": "dynamodb_not_null"}


class ModelTestError(LakehouseError):
    """A final table's YAML names dbt's built-in key test instead of the merge's scoped one."""


def _test_name(test: Any) -> str:
    return test if isinstance(test, str) else next(iter(test), "")


def check_model_tests(tables: list[TableConfig], project: Path | None = None) -> None:
    """Raise ``ModelTestError`` for the first final-table column whose tests say ``unique`` or
    ``not_null``."""
    project = project or settings.project_dir()
    for table in tables:
        path = project / "models" / "marts" / f"{table.name}.yml"
        if not path.exists():
            continue
        models = (yaml.safe_load(path.read_text()) or {}).get("models") or []
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
