"""Schema detection throughput and driver memory, next to Spark's read floor in the same run.

floor:  Spark reads the export's files with the explicit envelope schema and counts rows;
detect: ``ddb-lakehouse detect-schema`` in this process (bench/lakehouse.py), as a user runs
        it: the export's manifest read and its files' checksums verified, every item scanned
        (nodes of every value, aggregated by path and type), its schema file written aside.
        Figures before 2026-12-07 timed the scan alone.
Driver memory: the JVM heap in use is sampled every 0.2 s during each run, with the heap capped
by LAKEHOUSE_DRIVER_MEMORY (default here 1g); the peak is reported for a small and a large export,
so growth with the item count would show.

Usage: .venv/bin/python bench/detect_schema.py [--items 1000000] [--small 100000] [--table books]
Writes bench/results/detect_schema.json and prints a Markdown row.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import lakehouse
import results_file  # bench/ is on sys.path when a benchmark runs as a script


def _peak_heap_mb(spark, work: Callable[[], object]) -> tuple[object, float, float]:
    """Run ``work``; return its result, its seconds and the peak JVM heap in use (MB)."""
    runtime = spark.sparkContext._jvm.java.lang.Runtime.getRuntime()
    peak = 0.0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, (runtime.totalMemory() - runtime.freeMemory()) / 2**20)
            done.wait(0.2)

    spark.sparkContext._jvm.java.lang.System.gc()
    sampler = threading.Thread(target=sample, daemon=True)
    started = time.monotonic()
    sampler.start()
    try:
        result = work()
    finally:
        done.set()
        sampler.join()
    return result, time.monotonic() - started, round(peak, 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--small", type=int, default=100_000)
    parser.add_argument("--table", default="books", choices=["books", "orders"])
    args = parser.parse_args(argv)

    scratch = Path(tempfile.mkdtemp(prefix="lakehouse-bench-"))
    os.environ["LAKEHOUSE_HOME"] = str(scratch / "home")
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ.setdefault("LAKEHOUSE_DRIVER_MEMORY", "1g")

    from pyspark.sql import functions as F

    from ingestion.samples import sample_exports
    from ingestion.spark.spark_config import build_spark

    spark = build_spark("bench detect-schema")  # the session the command below shares
    runs = []
    for items in (args.small, args.items):
        folder = sample_exports.write_samples(
            scratch / f"exports-{items}", items, seed=1, tables=[args.table]
        )[args.table]
        paths = lakehouse.export_data_files(folder)
        spark.read.text(paths).count()  # warm-up: file listing, JIT

        def floor(paths: list[str] = paths) -> int:
            return (
                spark.read.text(paths)
                .select(F.from_json("value", "Item string").alias("l"))
                .where(F.col("l.Item").isNotNull())
                .count()
            )

        def detect_it(folder: Path = folder, items: int = items) -> tuple[int, int]:
            """``detect-schema``: (items scanned, attributes found), as the command prints them."""
            out = scratch / f"schema-{items}.json"
            text = lakehouse.cli(
                "detect-schema",
                str(folder),
                "--table",
                args.table,
                "-o",
                str(out),
                echo=False,
                stderr=True,
            )
            scanned = re.search(r"(\d+) items scanned", text)
            assert scanned, text
            attributes = lakehouse.table_with(text, "attribute")
            return int(scanned.group(1)), len(attributes)

        floor_rows, floor_s, floor_heap = _peak_heap_mb(spark, floor)
        detected, detect_s, detect_heap = _peak_heap_mb(spark, detect_it)
        scanned, attributes = detected
        assert floor_rows == items and scanned == items, (floor_rows, scanned)
        runs.append(
            {
                "items": items,
                "floor_seconds": round(floor_s, 2),
                "detect_seconds": round(detect_s, 2),
                "detect_items_per_s": round(items / detect_s),
                "ratio_to_floor": round(detect_s / floor_s, 2),
                "peak_heap_mb_floor": floor_heap,
                "peak_heap_mb_detect": detect_heap,
                "attributes": attributes,
            }
        )
        print(json.dumps(runs[-1]), flush=True)

    results_file.write(
        "detect_schema",
        {"table": args.table, "runs": runs},
        f".venv/bin/python bench/detect_schema.py --items {args.items} --small {args.small} "
        f"--table {args.table}",
    )
    print(
        "\n| items | floor s | detect s | items/s | detect / floor | peak heap MB (floor / detect) "
        "|"
    )
    print("|---|---|---|---|---|---|")
    for r in runs:
        print(
            f"| {r['items']:,} | {r['floor_seconds']} | {r['detect_seconds']} | "
            f"{r['detect_items_per_s']:,} | {r['ratio_to_floor']}x | "
            f"{r['peak_heap_mb_floor']} / {r['peak_heap_mb_detect']} |"
        )
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
