"""dbt's parsed project, kept in this process while what dbt parses stays the same: the files of
the project it reads, the environment variables they read and the flags that change a parse. A
merge's `dbt run` and `dbt test`, the tables of a `sync` and a watch's ticks then skip dbt's
parse. Even a partial parse that finds nothing changed reads its saved state, hashes every file
and writes `target/manifest.json` again: 0.45 s of a merge's `dbt run` and 0.65 s of its
`dbt test`, profiled (docs/performance.md, "A small merge").

dbt supports this: ``dbtRunner(manifest=...)`` runs a command on a manifest parsed before. What it
does not do is undo a command's compilation on that manifest: a node keeps its compiled SQL and
the flag that says its ephemeral models' CTEs are injected, so the next command would run that
node without them. ``Kept.fresh`` puts back the fields compiling a node sets
(``COMPILED_FIELDS``) as the parse left them, before each command.

What a user sees of it: ``target/manifest.json`` is the parse's (written when the project is
parsed, without compiled SQL); each command's compiled SQL is in its ``run_results.json``."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ingestion.spark import spark_config

# What dbt parses, by dbt_project.yml's keys, with dbt's defaults; the files at the project's
# root that a parse reads. Python files count in the models' folders only (dbt's Python models):
# the tests' folder of this repository holds the project's pytest files, which dbt never reads.
FOLDERS = {
    "model-paths": ["models"],
    "macro-paths": ["macros"],
    "test-paths": ["tests"],
    "seed-paths": ["seeds"],
    "snapshot-paths": ["snapshots"],
    "analysis-paths": ["analyses"],
    "docs-paths": [],
    "packages-install-path": "dbt_packages",
}
ROOT_FILES = (
    ".dbtignore",
    "dbt_project.yml",
    "profiles.yml",
    "packages.yml",
    "dependencies.yml",
    "selectors.yml",
)
PARSED = {".sql", ".yml", ".yaml", ".md", ".csv", ".jinja"}
# The environment a parse can read: every variable a parsed file names in env_var() (profiles.yml,
# dbt_project.yml, the models and macros), and by prefix the project's own variables and dbt's.
# DYNAMODB_LAKEHOUSE_RUN, the merge's values, is read only while executing (macros/run_var.sql).
# A name built at run time (env_var(some_variable)) is not seen: say so in the docs of the model.
ENVIRONMENT = ("LAKEHOUSE_", "DBT_")
# The flags of a command that change what dbt parses; their values are part of the key.
PARSE_FLAGS = {"--vars", "--target", "-t", "--profile", "--target-path"}
# A node's fields that compiling it sets (dbt.artifacts.resources CompiledResource, and
# dbt.compilation's relation name and compiled path), where the node has them.
COMPILED_FIELDS = (
    "compiled",
    "compiled_code",
    "extra_ctes_injected",
    "extra_ctes",
    "compiled_path",
    "relation_name",
)


def parse_flags(args: list[str]) -> list[str]:
    """The flags of ``args`` that change a parse, with their values, in their order."""
    found = []
    for n, arg in enumerate(args):
        name = arg.split("=", 1)[0]
        if name in PARSE_FLAGS:
            found += [arg] if "=" in arg else args[n : n + 2]
    return found


def _project_file(project: Path) -> dict[str, Any]:
    try:
        loaded = yaml.safe_load((project / "dbt_project.yml").read_text())
    except (OSError, yaml.YAMLError):
        return {}  # dbt's own parse says what is wrong with it
    return loaded if isinstance(loaded, dict) else {}


def key(project: Path, flags: list[str]) -> str:
    """What a parse of ``project`` with ``flags`` depends on, hashed: every file dbt reads there
    (its path and its bytes, as dbt's partial parsing compares them), the environment variables
    they name and the project's (``ENVIRONMENT``), and the flags."""
    digest = hashlib.sha256()
    for part in (str(project), *flags):
        digest.update(part.encode() + b"\0")
    config = _project_file(project)
    files = [project / name for name in ROOT_FILES]
    for setting, default in FOLDERS.items():
        given = config.get(setting, default)
        for folder in [given] if isinstance(given, str) else given or []:
            code = PARSED | ({".py"} if setting == "model-paths" else set())
            files += [f for f in (project / folder).rglob("*") if f.suffix in code]
    named = {"PWD"}
    for path in sorted(set(files)):
        try:
            content = path.read_bytes()
        except (FileNotFoundError, IsADirectoryError):
            continue
        digest.update(str(path.relative_to(project)).encode() + b"\0" + content + b"\0")
        named |= spark_config.env_var_names(content.decode(errors="replace"))
    environment = dict(os.environ)  # one copy: a thread may set a variable meanwhile
    named |= {name for name in environment if name.startswith(ENVIRONMENT)}
    for name in sorted(named):
        digest.update(f"{name}={environment.get(name)}".encode() + b"\0")
    return digest.hexdigest()


def target_path(project: Path, flags: Sequence[str] = ()) -> Path:
    """Where dbt writes its artifacts: the command's ``--target-path`` (among ``flags``), else
    ``DBT_TARGET_PATH``, else dbt_project.yml's ``target-path``, else ``target``, under the
    project (a relative path: dbt's own rule)."""
    given: str | None = None
    for n, flag in enumerate(flags):
        if flag == "--target-path" and n + 1 < len(flags):
            given = flags[n + 1]
        elif flag.startswith("--target-path="):
            given = flag.split("=", 1)[1]
    given = given or os.environ.get("DBT_TARGET_PATH") or _project_file(project).get("target-path")
    return project / str(given or "target")


@dataclass
class Kept:
    """A manifest parsed under ``key``, and each node's compilation fields as parsed."""

    key: str
    manifest: Any
    parsed: dict[str, tuple[tuple[str, ...], tuple[Any, ...]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for unique_id, node in self.manifest.nodes.items():
            if hasattr(node, "compiled"):
                present = tuple(name for name in COMPILED_FIELDS if hasattr(node, name))
                values = tuple(getattr(node, name) for name in present)
                values = tuple(list(v) if isinstance(v, list) else v for v in values)
                self.parsed[unique_id] = (present, values)

    def fresh(self) -> Any:
        """The manifest with every node as the parse left it (not as a command compiled it)."""
        for unique_id, (present, values) in self.parsed.items():
            node = self.manifest.nodes.get(unique_id)
            if node is None:
                continue
            for name, value in zip(present, values, strict=True):
                # a list copied inline: a helper taking the compiled SQL would be a stop of the
                # table's trace (tests/table_trace.py), which counts calls receiving its names
                setattr(node, name, list(value) if isinstance(value, list) else value)
            if hasattr(node, "_pre_injected_sql"):
                node._pre_injected_sql = None
        return self.manifest


_kept: Kept | None = None  # this process's; one project at a time


def kept(key_now: str) -> Any | None:
    """The manifest kept under ``key_now``, fresh; None when there is none or what it was
    parsed from has changed."""
    if _kept is None or _kept.key != key_now:
        return None
    return _kept.fresh()


def keep(key_then: str, manifest: Any) -> None:
    """Keep ``manifest``, parsed from what ``key_then`` describes."""
    global _kept
    _kept = Kept(key_then, manifest)


def forget() -> None:
    """Parse again at the next command (a test that swaps the project under a process)."""
    global _kept
    _kept = None
