"""Small commands as a user runs them (each a process, 2 cores), next to the floor in the same run:
``ddb-lakehouse --help`` (the CLI's import time, nothing else).

Measured, interleaved for ``--rounds`` rounds on a books table of ``--items`` items (staged and
merged once before, not measured): ``status``; ``sync --stream`` with no change file settled;
``merge`` with nothing new; ``query --engine duckdb`` of a count; ``status`` and ``merge`` on the
Spark path (``LAKEHOUSE_NO_LIGHT=1``: what every one of them cost before
``ingestion/catalog``); and a plain ``dbt run`` of the table with nothing new (it starts
Spark as dbt-spark does; issue 73 asks it to cost what ``merge`` with nothing new costs).
Target (issue 31): ``status`` and the ``sync`` with nothing new at most 4x the floor.

Usage: .venv/bin/python bench/small_commands.py [--items 10000] [--rounds 5]
Writes bench/results/small_commands.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import results_file  # bench/ is on sys.path when a benchmark runs as a script

ROOT = Path(__file__).resolve().parent.parent
TARGET_RATIO = 4.0


def run(args: list[str], env: dict[str, str]) -> float:
    """One command's seconds: the CLI's, or (``dbt`` first) dbt's own as a user types it."""
    started = time.monotonic()
    command = (
        [str(Path(sys.executable).parent / "dbt"), *args[1:]]
        if args[0] == "dbt"
        else [sys.executable, "-m", "ingestion.cli", *args]
    )
    done = subprocess.run(
        command,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)

    from ingestion.samples import sample_exports

    scratch = Path(tempfile.mkdtemp(prefix="lakehouse-bench-"))
    env = {
        **os.environ,
        "LAKEHOUSE_HOME": str(scratch / "home"),
        "LAKEHOUSE_SCHEMA_DIR": str(ROOT / "schemas"),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "LAKEHOUSE_TARGET": "local",
    }
    env.pop("LAKEHOUSE_NO_LIGHT", None)
    full = sample_exports.write_samples(scratch / "exports", args.items, 7, ["books"])["books"]
    stream = scratch / "streams"
    (stream / "books").mkdir(parents=True)
    run(["init"], env)
    run(["sync", "--table", "books", str(full)], env)  # the table the commands look at

    commands = {
        "help (floor)": ["--help"],
        "status": ["status", "--table", "books"],
        "sync, nothing new": ["sync", "--table", "books", "--stream", str(stream), "--settle", "0"],
        "merge, nothing new": ["merge", "--table", "books"],
        "query --engine duckdb": [
            "query",
            "--engine",
            "duckdb",
            "select count(*) from lakehouse.books",
        ],
        "status on Spark (before)": ["status", "--table", "books"],
        "merge, nothing new, on Spark": ["merge", "--table", "books"],
        # A plain `dbt run` (issue 73): it starts Spark as dbt-spark does, asks which batches are
        # new and commits nothing; its target folder kept out of the repository.
        "plain dbt run, nothing new": [
            "dbt",
            "run",
            "--select",
            "books",
            "--project-dir",
            str(ROOT),
            "--profiles-dir",
            str(ROOT),
            "--target-path",
            str(scratch / "target"),
            "--log-path",
            str(scratch / "logs"),
        ],
    }
    seconds: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.rounds):
        for name, command in commands.items():
            extra = {"LAKEHOUSE_NO_LIGHT": "1"} if "Spark" in name else {}
            seconds[name].append(round(run(command, {**env, **extra}), 3))
    medians = {name: round(statistics.median(s), 3) for name, s in seconds.items()}
    floor = medians["help (floor)"]
    ratios = {name: round(m / floor, 2) for name, m in medians.items()}
    met = all(ratios[n] <= TARGET_RATIO for n in ("status", "sync, nothing new"))
    results_file.write(
        "small_commands",
        {
            "items": args.items,
            "rounds": args.rounds,
            "seconds": seconds,
            "median_seconds": medians,
            "ratio_to_help": ratios,
            "target_ratio": TARGET_RATIO,
            "target_met": met,
        },
        f".venv/bin/python bench/small_commands.py --items {args.items} --rounds {args.rounds}",
    )
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
