"""One error family: every exception class of the project derives from ``LakehouseError``, and the
CLI turns any of them, a new one included, into one line and the error's exit status."""

from __future__ import annotations

import argparse
import importlib
import inspect
import pkgutil

import pytest

import ingestion
from ingestion import cli
from ingestion.cli import table_commands
from ingestion.config.errors import LakehouseError


def _exception_classes() -> list[type[BaseException]]:
    found = []
    for module in pkgutil.walk_packages(ingestion.__path__, "ingestion."):
        if module.name.endswith("__main__"):
            continue
        loaded = importlib.import_module(module.name)
        for _, value in inspect.getmembers(loaded, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__ == module.name:
                found.append(value)
    return found


def test_every_error_of_the_project_belongs_to_the_family() -> None:
    classes = _exception_classes()
    assert len(classes) >= 19  # the 19 of the issue, and QueryError, ModelTestError...
    strays = [f"{c.__module__}.{c.__name__}" for c in classes if not issubclass(c, LakehouseError)]
    assert strays == []


def test_the_cli_prints_any_error_of_the_family_on_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    class BrandNew(LakehouseError):
        exit_status = 3

    def fails(args: argparse.Namespace) -> int:
        raise BrandNew("the table is not ready: run init first")

    monkeypatch.setattr(table_commands, "run_init", fails)
    assert cli.main(["init"]) == 3
    assert capsys.readouterr().err == "error: the table is not ready: run init first\n"


def test_an_error_outside_the_family_keeps_its_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    def bug(args: argparse.Namespace) -> int:
        raise KeyError("a bug of the project")

    monkeypatch.setattr(table_commands, "run_init", bug)
    with pytest.raises(KeyError):
        cli.main(["init"])
