"""dbt's modules imported ahead, on a thread, while a command stages or starts Spark
(ingestion.merge.dbt_process.load_dbt_meanwhile). Each case runs in a fresh interpreter: this test
process has imported dbt already."""

from __future__ import annotations

import subprocess
import sys

from support import ROOT

AHEAD = """
import sys
from ingestion.merge import dbt_process, runner  # noqa: F401 (the run's module, as a merge has)

assert "dbt.cli.main" not in sys.modules  # nothing of the package imports dbt by itself
loading = dbt_process.load_dbt_meanwhile()
assert loading is not None and not loading.daemon
assert dbt_process.load_dbt_meanwhile() is None  # once a process
loading.join(120)
assert "dbt.cli.main" in sys.modules
print("loaded ahead")
"""

FAILING = """
import importlib.abc, logging, sys
from ingestion.merge import dbt_process

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "dbt.cli.main":
            raise ImportError("dbt is broken here")
        return None

logging.basicConfig(level=logging.DEBUG, stream=sys.stdout, format="%(message)s")
sys.meta_path.insert(0, Refuse())
loading = dbt_process.load_dbt_meanwhile()
loading.join(120)
assert "dbt.cli.main" not in sys.modules
sys.meta_path.pop(0)
from dbt.cli.main import dbtRunner  # the command's own import, which reports what fails
print("imported by the command")
"""


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


def test_dbt_is_imported_on_a_thread_of_its_own_once() -> None:
    done = _run(AHEAD)
    assert done.returncode == 0, done.stderr
    assert "loaded ahead" in done.stdout


def test_an_import_that_fails_ahead_is_logged_and_left_to_the_command() -> None:
    done = _run(FAILING)
    assert done.returncode == 0, done.stderr
    assert "dbt's modules could not be imported ahead" in done.stdout
    assert "dbt is broken here" in done.stdout
    assert "imported by the command" in done.stdout
