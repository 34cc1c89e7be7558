"""Full-export ingest against its floor, peak driver memory, and incremental apply scaling.

For each size N (default 100k, 1M and 5M `orders` items), in a fresh lakehouse:

1. ``ingest`` phase, its own process with ``spark.driver.memory=1g``:
   floor  = Spark reads the export's files with the explicit envelope schema and counts rows
            (the JSON decode no pipeline can avoid), measured in the same process just before;
   ingest = ``ingest_export`` (manifest + MD5 check, line counts, typed decode, one commit);
   peak   = the driver JVM's peak resident set (``VmHWM``), which must stay bounded: nothing is
            collected on the driver, so the 5M run finishes in a 1 GB heap.
2. ``apply`` phase, its own process (the profile's 2g): builds the final table (full ingest +
   merge, timed as the baseline), then one incremental export of ``--changes`` changes of
   existing orders (10% deletes), and times its ingest and its merge (`dbt run`; `dbt test` is
   timed apart). The merge commit's summary says how many files it touched.

Usage: .venv/bin/python bench/scale.py [--sizes 100000 1000000 5000000] [--changes 10000]
Writes bench/results/ingest_full_export.json, memory.json and incremental_apply.json.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import results_file  # bench/ is on sys.path when a benchmark runs as a script

HERE = Path(__file__).resolve()


def peak_rss_mb(spark) -> float:
    """Peak resident set of the driver JVM (this process's Spark gateway child)."""
    pid = spark.sparkContext._gateway.proc.pid
    status = Path(f"/proc/{pid}/status").read_text()
    assert Path(f"/proc/{pid}/comm").read_text().strip() == "java", "not the driver JVM"
    line = next(x for x in status.splitlines() if x.startswith("VmHWM:"))
    return round(int(line.split()[1]) / 1024, 1)


def ingest_phase(folder: Path) -> dict:
    from pyspark.sql import functions as F

    from ingestion.dynamodb import decode
    from ingestion.dynamodb.tables import get_table
    from ingestion.sources import manifest
    from ingestion.spark.spark_config import build_spark
    from ingestion.staging.exports import ingest_export

    export = manifest.read_export(folder, verify=False)
    paths = [str(f.path) for f in export.files]
    spark = build_spark("bench ingest")
    spark.read.text(paths).count()  # warm-up: JVM, file listing, page cache
    started = time.monotonic()
    floor_rows = (
        spark.read.text(paths)
        .select(F.from_json("value", decode.ENVELOPE).alias("l"))
        .where(F.col("l.Item").isNotNull())
        .count()
    )
    floor_s = time.monotonic() - started
    started = time.monotonic()
    result = ingest_export(spark, get_table("orders"), str(folder))
    ingest_s = time.monotonic() - started
    assert result.rows == floor_rows == export.item_count, (result.rows, floor_rows)
    return {
        "floor_seconds": round(floor_s, 2),
        "ingest_seconds": round(ingest_s, 2),
        "peak_driver_rss_mb": peak_rss_mb(spark),
        "driver_memory": spark.conf.get("spark.driver.memory"),
    }


def apply_phase(scratch: Path, folder: Path, changes: int) -> dict:
    from ingestion.dynamodb.tables import get_table
    from ingestion.merge import runner
    from ingestion.samples import sample_exports
    from ingestion.samples.items import STATUSES
    from ingestion.sources import manifest
    from ingestion.spark.spark_config import build_spark
    from ingestion.staging import exports

    export = manifest.read_export(folder, verify=False)
    spark = build_spark("bench apply")
    orders = get_table("orders")
    started = time.monotonic()
    runner.run_merge(spark, [orders], test=False)  # the export is staged by the ingest phase
    baseline_s = time.monotonic() - started
    rows = spark.table("lake.lakehouse.orders").count()
    picked = (
        spark.table("lake.lakehouse.orders")
        .select("_image")
        .sample(min(1.0, 1.2 * changes / rows), seed=7)
        .limit(changes)
        .collect()  # the changed orders' images: `changes` rows
    )
    rng = random.Random(7)
    start = export.export_time
    assert start is not None
    lines = []
    for i, row in enumerate(picked):
        image = json.loads(row["_image"])
        keys = {"customer_id": image["customer_id"], "order_id": image["order_id"]}
        micros = {"N": str(int((start + timedelta(seconds=1 + i % 3000)).timestamp() * 1e6))}
        line = {"Metadata": {"WriteTimestampMicros": micros}, "Keys": keys, "OldImage": image}
        if i % 10:  # every tenth change a delete
            line["NewImage"] = dict(image, status={"S": rng.choice(STATUSES)})
        lines.append(line)
    incremental = sample_exports.write_export(
        scratch / "exports",
        "orders",
        [iter(lines)],
        start + timedelta(hours=1, minutes=5),
        rng,
        window=(start, start + timedelta(hours=1), "NEW_AND_OLD_IMAGES"),
    )
    started = time.monotonic()
    exports.ingest_export(spark, orders, str(incremental))
    ingest_s = time.monotonic() - started
    started = time.monotonic()
    counts, _ = runner.run_merge(spark, [orders], test=False)
    merge_s = time.monotonic() - started
    summary = dict(
        spark.table("lake.lakehouse.orders.snapshots")
        .orderBy("committed_at")
        .collect()[-1]["summary"]
    )
    started = time.monotonic()
    runner.run_merge(spark, [orders])  # nothing left to merge: dbt run of no batch + dbt test
    test_s = time.monotonic() - started
    return {
        "table_rows": rows,
        "baseline_merge_seconds": round(baseline_s, 1),
        "changes": len(lines),
        "deletes": sum(1 for line in lines if "NewImage" not in line),
        "incremental_ingest_seconds": round(ingest_s, 1),
        "merge_seconds": round(merge_s, 1),
        "apply_seconds": round(ingest_s + merge_s, 1),
        "dbt_test_seconds": round(test_s, 1),
        "inserted_updated_deleted": [counts[0].inserted, counts[0].updated, counts[0].deleted],
        "merge_commit": {
            k: summary.get(k)
            for k in (
                "changed-partition-count",
                "added-data-files",
                "added-delete-files",
                "added-position-deletes",
                "total-data-files",
            )
        },
    }


def phase(name: str, scratch: Path, folder: Path, changes: int, memory: str | None) -> dict:
    """Run one phase in its own process (its own JVM: its own peak RSS and heap)."""
    env = dict(os.environ, LAKEHOUSE_HOME=str(scratch / "home"), SPARK_LOCAL_IP="127.0.0.1")
    if memory:
        env["LAKEHOUSE_DRIVER_MEMORY"] = memory
    out = scratch / f"{name}.json"
    command = [sys.executable, str(HERE), "--phase", name, "--scratch", str(scratch)]
    command += ["--folder", str(folder), "--changes", str(changes), "--out", str(out)]
    subprocess.run(command, env=env, check=True)
    return json.loads(out.read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000, 5_000_000])
    parser.add_argument("--changes", type=int, default=10_000)
    parser.add_argument("--ingest-memory", default="1g")
    parser.add_argument("--phase", choices=["ingest", "apply"], help=argparse.SUPPRESS)
    parser.add_argument("--scratch", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.phase:
        figures = (
            ingest_phase(args.folder)
            if args.phase == "ingest"
            else apply_phase(args.scratch, args.folder, args.changes)
        )
        args.out.write_text(json.dumps(figures))
        return 0

    from ingestion.samples import sample_exports
    from ingestion.sources import manifest

    ingests, applies = [], []
    for size in args.sizes:
        scratch = Path(tempfile.mkdtemp(prefix=f"lakehouse-bench-{size}-"))
        started = time.monotonic()
        folder = sample_exports.write_samples(scratch / "exports", size, seed=1, tables=["orders"])[
            "orders"
        ]
        generated_s = time.monotonic() - started
        export = manifest.read_export(folder, verify=False)
        compressed = sum(f.path.stat().st_size for f in export.files)
        raw = sum(len(gzip.decompress(f.path.read_bytes())) for f in export.files)
        print(f"scale: {size:,} items generated in {generated_s:.0f}s", flush=True)
        done = phase("ingest", scratch, folder, args.changes, args.ingest_memory)
        ingests.append(
            {
                "items": size,
                "files": len(export.files),
                "compressed_mb": round(compressed / 1e6, 1),
                "raw_mb": round(raw / 1e6, 1),
                **done,
                "ingest_items_per_s": round(size / done["ingest_seconds"]),
                "ingest_raw_mb_per_s": round(raw / 1e6 / done["ingest_seconds"], 1),
                "ingest_compressed_mb_per_s": round(compressed / 1e6 / done["ingest_seconds"], 2),
                "ratio_to_floor": round(done["ingest_seconds"] / done["floor_seconds"], 2),
            }
        )
        print(f"scale: ingest {ingests[-1]}", flush=True)
        applies.append(phase("apply", scratch, folder, args.changes, None))
        print(f"scale: apply {applies[-1]}", flush=True)
        subprocess.run(["rm", "-rf", str(scratch)], check=False)

    command = f".venv/bin/python bench/scale.py --sizes {' '.join(map(str, args.sizes))}"
    results_file.write(
        "ingest_full_export",
        {"table": "orders", "target_ratio_to_floor": 2.0, "runs": ingests},
        f"{command}  # ingest phase, driver memory {args.ingest_memory}",
    )
    results_file.write(
        "memory",
        {
            "table": "orders",
            "driver_memory": args.ingest_memory,
            "runs": [
                {"items": r["items"], "peak_driver_rss_mb": r["peak_driver_rss_mb"]}
                for r in ingests
            ],
        },
        f"{command}  # peak RSS of the ingest phase's driver JVM",
    )
    growth = [
        round(b["apply_seconds"] / a["apply_seconds"], 2)
        for a, b in zip(applies, applies[1:], strict=False)
    ]
    results_file.write(
        "incremental_apply",
        {
            "table": "orders",
            "target_growth_per_10x": 1.5,
            "growth_between_sizes": growth,
            "runs": applies,
        },
        f"{command} --changes {args.changes}  # apply phase",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
