"""Helpers every test folder shares (``tests/`` is on ``sys.path``): where the repository is, a
private copy of the project for tests that change its configuration, a ``books`` item, and the
keys a final table holds. Fixtures live in ``conftest.py``; the local S3 endpoint, the
independent readers and the reference model in their own modules beside this one."""

from __future__ import annotations

import functools
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
"""The repository root (it holds ``dbt_project.yml``)."""

NOT_COPIED = (".venv", ".lakehouse", ".lakehouse-lint", ".git", "target", "logs", "__pycache__")


def copy_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the project (configuration, models, macros, schemas) that the test may change;
    ``LAKEHOUSE_PROJECT_DIR`` points at it until the test ends. The copy starts with dbt's
    partial parse of the unchanged project (``parsed_project``): dbt re-parses only the files the
    test changes, not the whole project (about 3 s a copy)."""
    copy = tmp_path / "project"
    shutil.copytree(parsed_project(), copy)
    monkeypatch.setenv("LAKEHOUSE_PROJECT_DIR", str(copy))
    return copy


@functools.cache
def parsed_project() -> Path:
    """One copy of the project per test session, parsed by dbt once (``dbt parse``, in this
    process, with the session's environment): what ``copy_project`` copies, ``target/`` with
    it. dbt checks the saved parse against the copy's own files, profile and variables, and
    parses again whatever differs, so a stale parse costs time, never a wrong manifest."""
    from dbt.cli.main import dbtRunner

    from ingestion.config import settings

    settings.export_environment()  # the variables every later dbt command sees: one parse fits
    template = Path(os.environ["LAKEHOUSE_HOME"]) / "parsed-project"
    shutil.rmtree(template, ignore_errors=True)  # a parse that failed earlier in the session
    shutil.copytree(ROOT, template, ignore=shutil.ignore_patterns(*NOT_COPIED))
    folder = str(template)
    done = dbtRunner().invoke(
        ["parse", "--project-dir", folder, "--profiles-dir", folder, "--quiet"]
    )
    assert done.success, done.exception
    shutil.rmtree(template / "logs", ignore_errors=True)
    return template


def book(key: str, title: str) -> dict[str, Any]:
    """A ``books`` item in DynamoDB JSON: its key and a title."""
    return {"id": {"S": key}, "title": {"S": title}}


def final_ids(spark: Any, table: str = "books") -> list[str]:
    """The ``id`` of every row of ``lakehouse.<table>`` as of now, sorted."""
    spark.sql(f"refresh table lake.lakehouse.{table}")
    return sorted(r[0] for r in spark.table(f"lake.lakehouse.{table}").select("id").collect())


# A final table's YAML from before the tests' rename (merge.model_tests.RENAMED): the key test
# under its old name, in the model's data tests.
OLD_KEY_TEST = (
    "      - unique_combination_of_columns:\n"
    "          arguments:\n"
    "            combination_of_columns: [customer_id, order_id]\n"
)


def with_old_key_test(path: Path) -> str:
    """``orders.yml`` at ``path`` given ``OLD_KEY_TEST`` (written back); returns its text as
    the migration leaves it: the same test under its new name."""
    text = path.read_text()
    marker = "    data_tests:\n"
    assert marker in text
    path.write_text(text.replace(marker, marker + OLD_KEY_TEST, 1))
    return text.replace(marker, marker + OLD_KEY_TEST.replace("- unique", "- dynamodb_unique"), 1)
