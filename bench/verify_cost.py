"""`verify` of a full export against the final table it was synced into, beside its floor.

For the `orders` sample (nested) at ``--items`` (default 1M): one full export written and synced
into a fresh lakehouse (set-up, timed for the record only), then, as separate processes, wall
clock with the JVM's start, each with a 1 GB driver heap (LAKEHOUSE_DRIVER_MEMORY=1g):

(a) floor: the typed read of every value of the export (bench/export_to_final.py's floor step);
(b) ``ddb-lakehouse verify --table orders EXPORT`` (it must exit 0: the table is equal).

Target (issue: prove the lakehouse equals DynamoDB): (b) <= 2.0x (a), in the same run.

Usage: .venv/bin/python bench/verify_cost.py [--items 1000000]
Writes bench/results/verify_cost.json.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import export_to_final
import results_file  # bench/ is on sys.path when a benchmark runs as a script

TARGET = 2.0


def run(scratch: Path, items: int) -> dict:
    from ingestion.samples import exports as sample_exports

    project = export_to_final.project_copy(scratch)
    folder = sample_exports.write_samples(scratch / "exports", items, seed=1, tables=["orders"])[
        "orders"
    ]
    env = dict(
        os.environ,
        SPARK_LOCAL_IP="127.0.0.1",
        LAKEHOUSE_DRIVER_MEMORY="1g",
        LAKEHOUSE_PROJECT_DIR=str(project),
        PYTHONPATH=str(export_to_final.ROOT),
        LAKEHOUSE_HOME=str(scratch / "home"),
    )
    log = scratch / "verify_cost.log"
    cli = [sys.executable, "-m", "ingestion.cli"]
    started = time.monotonic()
    subprocess.run([*cli, "sync", "--table", "orders", str(folder)], env=env, check=True)
    sync_s = time.monotonic() - started
    typed = scratch / "typed_schema.json"
    here = str(export_to_final.HERE)
    subprocess.run([sys.executable, here, "--infer", str(folder), str(typed)], env=env, check=True)
    floor_s, _ = export_to_final.timed([sys.executable, here, "--floor", str(folder), str(typed)], env, log)  # fmt: skip
    verify_s, rss = export_to_final.timed(
        [*cli, "verify", "--table", "orders", str(folder)], env, log
    )  # exits 0 only when the table is equal (export_to_final.timed stops the run otherwise)
    return {
        "items": items,
        "sync_seconds": round(sync_s, 1),
        "floor_seconds": floor_s,
        "verify_seconds": verify_s,
        "ratio_to_floor": round(verify_s / floor_s, 2),
        "verify_peak_driver_rss_mb": rss,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=1_000_000)
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="lakehouse-bench-verify-"))
    try:
        figures = run(scratch, args.items)
        # Written before the scratch goes: this process's project is the copy inside it.
        results_file.write(
            "verify_cost",
            {"table": "orders", "target_ratio_to_floor": TARGET, **figures},
            f".venv/bin/python bench/verify_cost.py --items {args.items}",
        )
    finally:
        subprocess.run(["rm", "-rf", str(scratch)], check=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
