"""Full-export ingest throughput, next to the floor measured in the same run.

floor:  Spark reads the export's files with the explicit envelope schema and counts rows
        (the JSON decode no pipeline can avoid);
ingest: `ingest_export` (manifest + MD5 check, typed decode, one Iceberg commit).

Usage: .venv/bin/python bench/ingest_full_export.py [--items 200000] [--table books]
Writes bench/results/ingest_full_export.json and prints a Markdown row.
"""

from __future__ import annotations

import argparse
import gzip
import os
import tempfile
import time
from pathlib import Path

import results_file  # bench/ is on sys.path when a benchmark runs as a script


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=200_000)
    parser.add_argument("--table", default="books", choices=["books", "orders"])
    args = parser.parse_args(argv)

    scratch = Path(tempfile.mkdtemp(prefix="lakehouse-bench-"))
    os.environ["LAKEHOUSE_HOME"] = str(scratch / "home")
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"

    from pyspark.sql import functions as F

    from ingestion import decode, manifest, sample
    from ingestion.ingest import ingest_export
    from ingestion.spark_config import build_spark
    from ingestion.tables import get_table

    started = time.monotonic()
    folder = sample.write_samples(scratch / "exports", args.items, seed=1, tables=[args.table])[
        args.table
    ]
    generate_s = time.monotonic() - started
    export = manifest.read_export(folder, verify=False)
    compressed = sum(f.path.stat().st_size for f in export.files)
    raw = sum(len(gzip.decompress(f.path.read_bytes())) for f in export.files)

    spark = build_spark("bench")
    paths = [str(f.path) for f in export.files]
    spark.read.text(paths).count()  # warm-up: JVM, file listing

    started = time.monotonic()
    floor_rows = (
        spark.read.text(paths)
        .select(F.from_json("value", decode.ENVELOPE).alias("l"))
        .where(F.col("l.Item").isNotNull())
        .count()
    )
    floor_s = time.monotonic() - started

    started = time.monotonic()
    result = ingest_export(spark, get_table(args.table), str(folder))
    ingest_s = time.monotonic() - started
    assert result.rows == floor_rows == args.items, (result.rows, floor_rows)

    figures = results_file.write(
        "ingest_full_export",
        {
            "table": args.table,
            "items": args.items,
            "compressed_mb": round(compressed / 1e6, 1),
            "raw_mb": round(raw / 1e6, 1),
            "floor_seconds": round(floor_s, 2),
            "ingest_seconds": round(ingest_s, 2),
            "ingest_items_per_s": round(args.items / ingest_s),
            "ingest_raw_mb_per_s": round(raw / 1e6 / ingest_s, 1),
            "ingest_compressed_mb_per_s": round(compressed / 1e6 / ingest_s, 2),
            "ratio_to_floor": round(ingest_s / floor_s, 2),
            "sample_generation_seconds": round(generate_s, 1),
        },
        f"make bench  # = .venv/bin/python bench/ingest_full_export.py --items {args.items} --table {args.table}",
    )
    print(
        "\n| benchmark | items | raw MB | floor s | ingest s | items/s | raw MB/s | ingest / floor |\n"
        "|---|---|---|---|---|---|---|---|\n"
        f"| full-export ingest ({args.table}) | {args.items:,} | {figures['raw_mb']} | {floor_s:.1f} | "
        f"{ingest_s:.1f} | {figures['ingest_items_per_s']:,} | {figures['ingest_raw_mb_per_s']} | "
        f"{figures['ratio_to_floor']}x |"
    )
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
