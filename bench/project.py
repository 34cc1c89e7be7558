"""A copy of the project for a benchmark: schema files and table layouts of its own, so that a run
never writes into the repository. Used through LAKEHOUSE_PROJECT_DIR (ingestion/config/settings)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def project_files(folder: str, names: list[str]) -> set[str]:
    """What a copy leaves out: the repository's tooling, data and caches (the top-level `tests`
    and `bench` only: `macros/tests` holds the generic data tests)."""
    top = {".venv", ".git", "bench", "tests"} if Path(folder) == ROOT else set()
    caches = {"target", "logs", "__pycache__"}
    return {n for n in names if n in top or n in caches or n.startswith(".lakehouse")}


def copy(destination: Path, orders_buckets: int | None = 16) -> Path:
    """The project copied to ``destination`` with `orders` bucketed ``orders_buckets`` ways (None:
    not bucketed), and made the project of this process (LAKEHOUSE_PROJECT_DIR)."""
    shutil.copytree(ROOT, destination, ignore=project_files)
    config = destination / "dbt_project.yml"
    line = f"      buckets: {orders_buckets}\n" if orders_buckets else ""
    text, found = re.subn(
        r"(\n    orders:\n(?:      .*\n)*?)      buckets: \d+\n",
        lambda m: m.group(1) + line,
        config.read_text(),
    )
    assert found == 1, "dbt_project.yml: no `buckets:` line in the orders entry"
    config.write_text(text)
    os.environ["LAKEHOUSE_PROJECT_DIR"] = str(destination)
    return destination


def buckets_argument(value: str) -> int | None:
    """``--buckets N`` or ``--buckets none``."""
    return None if value == "none" else int(value)
