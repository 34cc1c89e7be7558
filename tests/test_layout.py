"""The house keeps its shape: the import contract, small modules and functions, a docstring per
room, and a README and docs/ that match the code (every command in the README's table exists,
every command exists in the table, every link resolves)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support import ROOT

PACKAGE = ROOT / "ingestion"
# A module is one concept, as long as it needs: its line cap is lifted (the modules split only
# to meet it are folded back as the house is rebuilt). A function still stays readable.
MAX_FUNCTION_LINES = 70
MAX_ROOM_MODULES = 12


def _rooms() -> list[str]:
    return sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))


def _layers() -> list[list[str]]:
    """The layers contract of ``pyproject.toml``, top to bottom, as room names."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (contract,) = config["tool"]["importlinter"]["contracts"]
    assert "ignore_imports" not in contract
    return [
        [name.strip().removeprefix("ingestion.") for name in re.split(r"[|:]", layer)]
        for layer in contract["layers"]
    ]


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_the_import_contract_holds() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    done = subprocess.run(
        [str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 kept, 0 broken" in done.stdout


def test_every_room_is_a_layer_of_the_contract() -> None:
    in_contract = {name for layer in _layers() for name in layer}
    assert set(_rooms()) <= in_contract
    assert in_contract <= set(_rooms()) | {p.stem for p in PACKAGE.glob("*.py")}


@pytest.mark.parametrize("room", _rooms())
def test_every_room_names_its_modules_and_what_it_may_import(room: str) -> None:
    """The docstring of a room's ``__init__`` lists each of its modules (``- ``name``: ...``) and,
    after "May import:", exactly the rooms below it in the layers contract."""
    init = PACKAGE / room / "__init__.py"
    docstring = ast.get_docstring(ast.parse(init.read_text()))
    assert docstring, f"{init} has no docstring"
    modules = {p.stem for p in init.parent.glob("*.py") if p.stem != "__init__"}
    assert len(modules) <= MAX_ROOM_MODULES, f"{room}: {len(modules)} modules"
    listed = set(re.findall(r"^- ``(\w+)``:", docstring, flags=re.M))
    assert listed == modules, f"{room}: listed {sorted(listed)}, has {sorted(modules)}"
    layers = _layers()
    (level,) = [i for i, layer in enumerate(layers) if room in layer]
    below = {name for layer in layers[level + 1 :] for name in layer}
    allowed = docstring[docstring.index("May import:") :]
    assert set(re.findall(r"``ingestion\.(\w+)``", allowed)) == below, room


def test_functions_stay_small() -> None:
    too_long = []
    for path in _modules():
        text = path.read_text()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                if size > MAX_FUNCTION_LINES:
                    too_long.append(f"{path.relative_to(ROOT)}: {node.name}() {size} lines")
    assert not too_long
    assert not [p for p in _modules() if p.stem in ("utils", "helpers", "misc", "common")]


def _command_names() -> set[str]:
    from ingestion.cli.main import parser

    (sub,) = [a for a in parser()._actions if a.dest == "command"]
    return set(sub.choices)  # type: ignore[attr-defined]


def test_the_readme_command_table_matches_the_cli() -> None:
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("<!-- commands:start -->") : readme.index("<!-- commands:end -->")]
    listed = set(re.findall(r"^\| `([a-z-]+)", table, flags=re.M))
    assert listed == _command_names()


def _links(markdown: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", markdown.read_text(), flags=re.S)
    return re.findall(r"\]\(([^)\s]+)\)", text)


def test_every_link_in_the_readme_and_docs_resolves() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    assert len(pages) > 5
    broken = []
    for page in pages:
        for link in _links(page):
            if re.match(r"^[a-z]+://|^mailto:", link):
                continue
            target = link.split("#", 1)[0]
            if target and not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {link}")
    assert not broken
