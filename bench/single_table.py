"""What splitting a single-table design costs: one full export of the sample table `app` (users,
their orders and addresses, a few items of no entity: ``ingestion.samples.single_table``)
synced into a fresh lakehouse three ways, each as its own process (`ddb-lakehouse sync`, the
command a user runs: the export read once, staged, merged, tested):

- ``unsplit``: `app` without a rule, one final table of every entity's attributes (the floor);
- ``key``: split by the sort key's prefix (`--entity-key sk`), four final tables;
- ``attribute``: split by the `type` attribute, four final tables, each entity's merge reading
  every change of the table (decision 0009).

The three run in turn, ``--rounds`` times (the machine is noisy: each split run is reported with
its ratio to the unsplit run of the same round). The merge's seconds are read from the
command's own summary line. No target: issue 35 asks for the ratio.

Usage: .venv/bin/python bench/single_table.py [--users 100000] [--rounds 2]
Writes bench/results/single_table.json.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import project
import results_file  # bench/ is on sys.path when a benchmark runs as a script

RULES = {
    "unsplit": [],
    "key": ["--entity-key", "sk", "--entity", "USER", "--entity", "ORDER", "--entity", "ADDRESS"],
    "attribute": [
        "--entity-attribute",
        "type",
        "--entity",
        "user",
        "--entity",
        "order",
        "--entity",
        "address",
    ],
}


def cli(env: dict[str, str], *args: str) -> tuple[float, str]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "ingestion.cli", *args],
        env=env,
        cwd=project.ROOT,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if done.returncode != 0:
        raise SystemExit(f"`{' '.join(args)}` failed: {done.stdout[-2000:]}{done.stderr[-2000:]}")
    return time.monotonic() - started, done.stdout


def one_sync(work: Path, rule: str, export: Path, number: int) -> dict:
    """A fresh project and lakehouse, the table added with ``rule``, the export synced."""
    copy = work / f"{rule}-{number}"
    project.copy(copy / "project")
    env = {
        **os.environ,
        "LAKEHOUSE_PROJECT_DIR": str(copy / "project"),
        "LAKEHOUSE_HOME": str(copy / "home"),
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    cli(env, "init")
    cli(env, "add-table", "app", "--partition-key", "pk:S", "--sort-key", "sk:S", *RULES[rule])
    seconds, out = cli(env, "sync", "--table", "app", str(export))
    merge = re.search(r"merge \(dbt run \+ dbt test\): ([0-9.]+)s", out)
    tables = re.findall(r"\| lakehouse\.(\S+)\s*\| (\d+)", out)
    return {
        "rule": rule,
        "sync_seconds": round(seconds, 1),
        "merge_seconds": float(merge.group(1)) if merge else None,
        "final_tables": {name: int(rows) for name, rows in tables},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    from ingestion.samples import single_table

    with tempfile.TemporaryDirectory(prefix="single-table-") as folder:
        work = Path(folder)
        export = single_table.write_single_table(work / "exports", args.users, seed=7)
        items = len(single_table.items(args.users, seed=7))
        rounds = []
        for number in range(args.rounds):
            runs = [one_sync(work, rule, export, number) for rule in RULES]
            floor = runs[0]["sync_seconds"]
            for run in runs:
                run["ratio_to_unsplit"] = round(run["sync_seconds"] / floor, 2)
            rounds.append(runs)
            print(runs, flush=True)
        results_file.write(  # while a project copy (its Spark settings) is still there
            "single_table",
            {"users": args.users, "items": items, "rounds": rounds},
            " ".join(["bench/single_table.py", *sys.argv[1:]]),
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
