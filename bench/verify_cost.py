"""`verify` of a full export against the final table it was synced into, beside its floor.

For the `orders` sample (nested) at ``--items`` (default 1M): one full export written and synced
into a fresh lakehouse (set-up, timed for the record only), then, as separate processes, wall
clock with the JVM's start, each with a 1 GB driver heap (LAKEHOUSE_DRIVER_MEMORY=1g):

(a) floor: the typed read of every value of the export (bench/export_to_final.py's floor step);
(b) ``ddb-lakehouse verify --table orders EXPORT`` (it must exit 0: the table is equal).

Target (issue: prove the lakehouse equals DynamoDB): (b) <= 2.0x (a), in the same run.

Then, not timed against the floor: a profile of verify's first pass in one more process, each
step on its own, run twice (cold, then warm): the session, the table's types from the catalog,
the export's parse alone and with its fingerprints, the final table's read alone and with its
fingerprints (``profile`` in the results; docs/proving-it.md shows it).

Usage: .venv/bin/python bench/verify_cost.py [--items 1000000]
Writes bench/results/verify_cost.json.
"""

from __future__ import annotations

import argparse
import json
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
    from ingestion.samples import sample_exports

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
    floor_s, _ = export_to_final.timed(
        [sys.executable, here, "--floor", str(folder), str(typed)], env, log
    )
    verify_s, rss = export_to_final.timed(
        [*cli, "verify", "--table", "orders", str(folder)], env, log
    )  # exits 0 only when the table is equal (export_to_final.timed stops the run otherwise)
    profiled = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--profile", str(folder)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return {
        "items": items,
        "profile": json.loads(profiled.stdout.strip().splitlines()[-1]),
        "sync_seconds": round(sync_s, 1),
        "floor_seconds": floor_s,
        "verify_seconds": verify_s,
        "ratio_to_floor": round(verify_s / floor_s, 2),
        "verify_peak_driver_rss_mb": rss,
    }


def profile(folder: str) -> None:
    """The first pass's steps, each on its own, cold then warm; prints them as one JSON line."""
    from pyspark.sql import functions as F

    from ingestion.catalog import table_types
    from ingestion.config import names
    from ingestion.dynamodb import tables
    from ingestion.maintenance import fingerprints
    from ingestion.sources import manifest
    from ingestion.spark.spark_config import build_spark

    steps: dict[str, list[float]] = {}

    def timed(step: str, action) -> None:  # type: ignore[no-untyped-def]
        began = time.monotonic()
        action()
        steps.setdefault(step, []).append(round(time.monotonic() - began, 2))

    spark = None

    def session() -> None:
        nonlocal spark
        spark = build_spark("bench verify profile")

    timed("session", session)
    assert spark is not None
    table = tables.get_table("orders")
    schema = None

    def types() -> None:
        nonlocal schema
        schema = table_types.current_schema(spark, table)

    timed("types from the catalog", types)
    assert schema is not None
    paths = [str(f.path) for f in manifest.read_export(folder, verify=False).files]
    items = fingerprints.read_export(spark, paths, schema)
    final = spark.table(names.final_table("orders"))
    plain = F.xxhash64(*[a.column for a in schema.attributes]).alias("h")
    for _ in range(2):
        timed(
            "export: parse",
            lambda: items.select(F.size("Item").alias("h")).agg(F.sum("h")).collect(),
        )
        timed(
            "export: parse + fingerprint",
            lambda: (
                fingerprints.export_fingerprints(items, schema)
                .agg(F.sum(F.col(fingerprints.FINGERPRINT)))
                .collect()
            ),
        )
        timed("final: read", lambda: final.select(plain).agg(F.sum("h")).collect())
        timed(
            "final: read + fingerprint",
            lambda: (
                fingerprints.final_fingerprints(final, schema)
                .agg(F.sum(F.col(fingerprints.FINGERPRINT)))
                .collect()
            ),
        )
    print(json.dumps(steps))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--profile", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.profile:
        profile(args.profile)
        return 0
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
