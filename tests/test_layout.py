"""The house keeps its shape: the import contract, one name per module, no two modules importing
each other, a short docstring per room, and a README and docs/ that match the code (every command
in the README's table exists, every command exists in the table, every link resolves).

No size caps: a module is one concept and a function one step, as long as each needs (the caps
made modules that existed only to stay under a number)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support import ROOT

PACKAGE = ROOT / "ingestion"
# What a room's docstring is for: what the room does, in a few lines. Which rooms it may import
# is the contract's to say (pyproject.toml), and the contract is checked.
MAX_ROOM_DOCSTRING_LINES = 6


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
def test_every_room_says_what_it_is_for_in_a_few_lines(room: str) -> None:
    init = PACKAGE / room / "__init__.py"
    docstring = ast.get_docstring(ast.parse(init.read_text()))
    assert docstring, f"{init} has no docstring"
    assert len(docstring.splitlines()) <= MAX_ROOM_DOCSTRING_LINES, room
    assert "May import" not in docstring, f"{room}: the import rules are the contract's"


def test_no_two_modules_share_a_name() -> None:
    """``tables.py`` in two rooms is two things under one name: a reader cannot tell which a
    traceback, a log line or a docs page means."""
    names: dict[str, list[str]] = {}
    for path in _modules():
        if path.stem not in ("__init__", "__main__"):
            names.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert not {name: paths for name, paths in names.items() if len(paths) > 1}
    assert not [p for p in _modules() if p.stem in ("utils", "helpers", "misc", "common")]


def _dotted(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(path: Path, known: set[str]) -> set[str]:
    """The project modules ``path`` imports, wherever the import stands (``TYPE_CHECKING`` and
    function bodies too): ``from ingestion.x import y`` is module ``ingestion.x.y`` when that is
    a module, else ``ingestion.x``."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module in known:
            for alias in node.names:
                child = f"{node.module}.{alias.name}"
                found.add(child if child in known else node.module)
    return found


def test_no_two_modules_import_each_other() -> None:
    modules = {_dotted(p): p for p in _modules()}
    imports = {name: _imported(path, set(modules)) for name, path in modules.items()}
    assert imports["ingestion.maintenance.verify"] >= {
        "ingestion.maintenance.verify_log"
    }  # it can see one
    pairs = sorted(
        (a, b) for a, targets in imports.items() for b in targets if a < b and a in imports[b]
    )
    assert not pairs


def _command_names() -> set[str]:
    from ingestion.cli.app import parser

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


def test_no_line_opts_out_of_the_format() -> None:
    """Every line of the code, the tests and the benchmarks is `ruff format`'s and within the
    line length (`ruff check`'s E501): none opts out with ruff's skip comment."""
    markers = ("# fmt" + ": skip", "# fmt" + ": off")
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for room in ("ingestion", "bench", "tests")
        for path in sorted((ROOT / room).rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if any(marker in line for marker in markers)
    ]
    assert found == []


def test_every_sql_line_is_within_the_configured_length() -> None:
    """sqlfluff skips the macros (dbt's templater renders models, not macros), so its
    `max_line_length` is held here over every SQL file of the dbt project."""
    config = (ROOT / ".sqlfluff").read_text()
    found = re.search(r"^max_line_length\s*=\s*(\d+)", config, re.MULTILINE)
    assert found, ".sqlfluff names no max_line_length"
    limit = int(found.group(1))
    long = [
        f"{path.relative_to(ROOT)}:{number} ({len(line)})"
        for room in ("macros", "models")
        for path in sorted((ROOT / room).rglob("*.sql"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if len(line) > limit
    ]
    assert long == []
