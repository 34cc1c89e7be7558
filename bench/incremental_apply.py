"""One incremental export of 1% changes (10% of them deletes) applied to a final table of N rows.

Builds `orders` from a full export of N items (ingest + merge, not timed as the figure), writes one
incremental export changing 1% of the keys, then times its ingest and its merge (dbt run + dbt
test) and reads the files the merge commit wrote from its Iceberg snapshot summary.

Usage: .venv/bin/python bench/incremental_apply.py [--items 1000000]
Writes bench/results/incremental_apply.json and prints a Markdown row.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import results_file  # bench/ is on sys.path when a benchmark runs as a script


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=1_000_000)
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="lakehouse-bench-"))
    os.environ["LAKEHOUSE_HOME"] = str(scratch / "home")
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"

    from ingestion import ingest, manifest, merge, sample
    from ingestion.spark_config import build_spark
    from ingestion.tables import get_table

    full = sample.write_samples(scratch / "exports", args.items, seed=1, tables=["orders"])[
        "orders"
    ]
    export = manifest.read_export(full, verify=False)
    spark = build_spark("bench incremental")
    orders = get_table("orders")
    started = time.monotonic()
    ingest.ingest_export(spark, orders, str(full))
    merge.run_merge(spark, [orders])
    baseline_s = time.monotonic() - started

    rng = random.Random(7)
    rows = spark.table("lake.lakehouse.orders").select("_image").sample(0.01, seed=7).collect()
    start = export.export_time
    assert start is not None
    lines = []
    for i, row in enumerate(rows):
        image = json.loads(row["_image"])
        keys = {"customer_id": image["customer_id"], "order_id": image["order_id"]}
        micros = {"N": str(int((start + timedelta(seconds=1 + i % 3000)).timestamp() * 1e6))}
        if i % 10 == 0:
            lines.append(
                {"Metadata": {"WriteTimestampMicros": micros}, "Keys": keys, "OldImage": image}
            )
        else:
            new = dict(image, status={"S": rng.choice(sample.STATUSES)})
            lines.append(
                {
                    "Metadata": {"WriteTimestampMicros": micros},
                    "Keys": keys,
                    "OldImage": image,
                    "NewImage": new,
                }
            )
    incremental = sample.write_export(
        scratch / "exports",
        "orders",
        [iter(lines)],
        start + timedelta(hours=1, minutes=5),
        rng,
        window=(start, start + timedelta(hours=1), "NEW_AND_OLD_IMAGES"),
    )
    started = time.monotonic()
    ingest.ingest_export(spark, orders, str(incremental))
    ingest_s = time.monotonic() - started
    started = time.monotonic()
    counts, _ = merge.run_merge(spark, [orders])
    merge_s = time.monotonic() - started
    latest = (
        spark.table("lake.lakehouse.orders.snapshots")
        .orderBy("committed_at", ascending=False)
        .first()
    )
    assert latest is not None
    summary = dict(latest["summary"])
    results_file.write(
        "incremental_apply",
        {
            "table_rows": args.items,
            "changes": len(lines),
            "deletes": sum(1 for line in lines if "NewImage" not in line),
            "baseline_full_ingest_and_merge_seconds": round(baseline_s, 1),
            "incremental_ingest_seconds": round(ingest_s, 1),
            "merge_seconds": round(merge_s, 1),
            "inserted_updated_deleted": [counts[0].inserted, counts[0].updated, counts[0].deleted],
            "merge_commit": {
                k: summary.get(k)
                for k in (
                    "added-data-files",
                    "added-records",
                    "added-delete-files",
                    "added-position-deletes",
                    "total-data-files",
                )
            },
        },
        f".venv/bin/python bench/incremental_apply.py --items {args.items}",
    )
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
