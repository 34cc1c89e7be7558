"""bench/ reaches the project through its public entry points (bench/lakehouse.py says which and
why), so that a figure measures what a user runs and a refactoring inside ``ingestion`` never
breaks a benchmark it does not change. No Spark: the benchmarks' imports, read from their source.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"

# The public entry points: the commands, the producers of the inputs AWS writes (the samples in
# AWS's layout, the Lambda function's change-file writer), Spark built with the project's
# configuration (floors, reads of the lakehouse's tables), and the package itself (its path).
PUBLIC = re.compile(
    r"ingestion(\.cli(\..*)?|\.samples(\..*)?|\.sources\.change_file_writer|\.stream_writer"
    r"|\.spark\.spark_config)?"
)

# Benchmarks that import internals, each with the modules and why (a benchmark that needs one
# no longer leaves this list: the second test fails until it does).
PROBE = "a profile of internal steps by design: it times each step alone, which no command does"
INTERNAL = {
    "decoder_probe.py": (None, PROBE),
    "first_load_profile.py": (None, PROBE),
    "tick_profile.py": (None, PROBE),
    # Its figure is `verify`'s, run as a command; its profile times verify's steps one by one.
    "verify_cost.py": (
        {
            "ingestion.catalog.table_types",
            "ingestion.config.names",
            "ingestion.dynamodb.tables",
            "ingestion.maintenance.fingerprints",
            "ingestion.sources.manifest",
        },
        PROBE,
    ),
    # The floor of staging's design writes with staging's own table properties.
    "export_to_final.py": ({"ingestion.staging.staging_table"}, "the design floor's properties"),
    # It writes the on-disk form of an earlier version (``_image`` in place of ``_rest``), which
    # no command of this version writes, to time `rebuild` migrating it.
    "migration.py": (
        {
            "ingestion.catalog.table_types",
            "ingestion.dynamodb.tables",
            "ingestion.schema.item_json",
        },
        "an earlier version's tables, written with this version's encoder",
    ),
}


def imported(path: Path) -> set[str]:
    """Every ``ingestion`` module a file imports, anywhere in it (benchmarks import inside their
    functions, after setting the environment the project reads)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # ``from ingestion.merge import runner`` imports ingestion.merge.runner; ``from
            # ingestion.cli import main`` imports a name of ingestion.cli
            for alias in node.names:
                module = f"{node.module}.{alias.name}"
                found.add(module if _is_module(module) else node.module)
    return {m for m in found if m == "ingestion" or m.startswith("ingestion.")}


def _is_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def internals(path: Path) -> set[str]:
    """What a file imports beyond the public entry points."""
    return {m for m in imported(path) if not PUBLIC.fullmatch(m)}


def test_every_benchmark_reaches_the_project_through_its_entry_points() -> None:
    reached = {}
    for path in sorted(BENCH.glob("*.py")):
        if path.name in INTERNAL:
            allowed, _ = INTERNAL[path.name]
            if allowed is None:
                continue
            extra = internals(path) - allowed
        else:
            extra = internals(path)
        if extra:
            reached[path.name] = sorted(extra)
    assert reached == {}, (
        f"benchmarks importing internals (bench/lakehouse.py says how not to): {reached}"
    )


def test_every_listed_exception_still_needs_its_place() -> None:
    """A benchmark converted to the commands leaves ``INTERNAL``; an exception naming internals
    names only those it still imports."""
    stale = {}
    for name, (allowed, _) in INTERNAL.items():
        path = BENCH / name
        assert path.exists(), f"{name} is listed but gone"
        found = internals(path)
        if not found or (allowed is not None and not allowed <= found):
            stale[name] = sorted(found)
    assert stale == {}, f"listed as importing internals, but no longer (or not those): {stale}"


def test_the_rule_sees_an_internal_import_inside_a_function(tmp_path: Path) -> None:
    """The check reads imports wherever they are, and tells a public module from an internal."""
    source = tmp_path / "b.py"
    source.write_text(
        "def main():\n"
        "    from ingestion.cli import main\n"
        "    from ingestion.samples import stream\n"
        "    from ingestion.spark.spark_config import build_spark\n"
        "    from ingestion.merge import runner\n"
        "    import ingestion.staging.exports\n"
    )
    assert internals(source) == {"ingestion.merge.runner", "ingestion.staging.exports"}
