"""Where the commands find the project, as a new user meets it: the CLI from any folder (it
printed a 20-line traceback ending in FileNotFoundError for profiles/profiles.yml), a one-line
error when no project can be found, and plain `dbt` in the project folder with no flags (it
failed until DBT_PROFILES_DIR was set). No JVM: the status without Spark, and `dbt parse`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import ROOT

from ingestion.cli import main
from ingestion.config import settings


def test_the_cli_finds_its_project_from_any_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LAKEHOUSE_PROJECT_DIR")
    assert settings.project_dir() == ROOT  # the project the package is installed from
    assert main(["status", "--table", "books"]) == 0
    assert "books:" in capsys.readouterr().out


def test_no_project_to_be_found_is_one_line_naming_the_way_to_point_at_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LAKEHOUSE_PROJECT_DIR")
    monkeypatch.setattr(settings, "INSTALLED_ROOT", tmp_path / "site-packages")  # a wheel's
    assert main(["status", "--table", "books"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "give --project-dir DIR (or set LAKEHOUSE_PROJECT_DIR)" in err[0]
    # --project-dir points at it (and a folder that is no project is refused in one line).
    assert main(["--project-dir", str(tmp_path), "status", "--table", "books"]) == 2
    assert "holds no dbt_project.yml" in capsys.readouterr().err
    assert main(["--project-dir", str(ROOT), "status", "--table", "books"]) == 0


@pytest.mark.slow
def test_plain_dbt_finds_the_profile_in_the_project_folder(
    project_copy: Path, tmp_path: Path
) -> None:
    """`dbt parse` as typed in the project folder: no --profiles-dir, no DBT_PROFILES_DIR, and
    no ~/.dbt (dbt looks in the current folder first)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DBT_")}
    env["HOME"] = str(tmp_path)  # no ~/.dbt/profiles.yml
    dbt = str(Path(sys.executable).parent / "dbt")
    done = subprocess.run(
        [dbt, "parse"], cwd=project_copy, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
