"""What `buckets` buys: the same merges into `orders` unbucketed and bucketed 4, 16 and 64 ways.

One process, one change log: the orders sample's full export of N items (default 1M) is ingested
once. Then for each layout (none, 4, 16, 64 buckets), in turn:

1. a copy of the project whose `orders` entry says that `buckets` (LAKEHOUSE_PROJECT_DIR), and
   the final table rebuilt from the change log in it (``ddb-lakehouse rebuild``, as the docs say
   for a changed `buckets`, which rebuilds the change log too; the first layout after its first
   build by ``merge``, so that every layout merges into a rebuilt change log; timed for the
   record only);
2. ``tick``: 50 orders changed once each by the stream (the change files of the project's Lambda
   module), staged by ``ingest --stream`` and merged by ``merge`` (dbt run, scoped dbt test,
   report) as a `watch` tick does, three times, the median kept;
3. ``batch``: 10,000 orders changed once each by an incremental export (every tenth a delete),
   ingested and merged the same way.

Every step is a command, run in this process (bench/lakehouse.py). The changed orders are drawn
from the full export's files. Per layout and case: the merge's seconds (``merge``; the ingest
does not depend on the layout), the buckets its commit changed (``changed-partition-count``), the
data files of the final table, and the ratio to the unbucketed layout measured in the same run
(the floor). Each layout's changes pick other orders; the change log grows by the same amount
between layouts.

Usage: .venv/bin/python bench/buckets.py [--items 1000000]
Writes bench/results/buckets.json.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import lakehouse
import project
import results_file  # bench/ is on sys.path when a benchmark runs as a script
from apply_cost import export_images, export_lines

LAYOUTS = (None, 4, 16, 64)
TICK, TICKS, BATCH = 50, 3, 10_000


def last_commit(spark) -> dict:
    from pyspark.sql import functions as F

    snapshots = spark.table("lake.lakehouse.orders.snapshots")
    return dict(snapshots.orderBy(F.col("committed_at").desc()).first()["summary"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=1_000_000)
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="lakehouse-bench-buckets-"))
    os.environ["LAKEHOUSE_HOME"] = str(scratch / "home")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    try:
        runs = measure(scratch, args.items)
    finally:
        os.environ.pop("LAKEHOUSE_PROJECT_DIR", None)  # the copies go; results use the project
        shutil.rmtree(scratch, ignore_errors=True)
    floor = {case["case"]: case["merge_seconds"] for case in runs[0]["cases"]}
    for run in runs:
        for case in run["cases"]:
            case["ratio_to_unbucketed"] = round(case["merge_seconds"] / floor[case["case"]], 2)
    results_file.write(
        "buckets",
        {"table": "orders", "table_rows": args.items, "runs": runs},
        f".venv/bin/python bench/buckets.py --items {args.items}",
    )
    return 0


def measure(scratch: Path, items: int) -> list[dict]:
    from ingestion.samples import sample_exports
    from ingestion.samples import stream as sample_stream
    from ingestion.samples.items import STATUSES
    from ingestion.sources.change_file_writer import write_batch
    from ingestion.spark.spark_config import build_spark

    folder = sample_exports.write_samples(scratch / "exports", items, seed=1, tables=["orders"])[
        "orders"
    ]
    start = lakehouse.export_time(folder)
    spark = build_spark("bench buckets")  # the session every command below shares
    project.copy(scratch / "project-none", LAYOUTS[0])
    lakehouse.cli("ingest", "--table", "orders", str(folder), echo=False)

    def pick_images(count: int, seed: int) -> list[dict]:
        return export_images(spark, folder, count, items, seed)

    # Stream ticks a month after the export (newer than every export line), incremental windows
    # chained from the full export's time, one hour each.
    runs, sequence, moment = [], 1, start + timedelta(days=30)
    for number, buckets in enumerate(LAYOUTS):
        if number:  # the entry's `buckets` changed: a full refresh, as the docs say
            project.copy(scratch / f"project-{buckets}", buckets)
        else:  # the first build, then a rebuild as every other layout has (of staging too)
            lakehouse.cli("merge", "--table", "orders", echo=False)
        began = time.monotonic()
        lakehouse.cli("rebuild", "--table", "orders", echo=False)
        rebuild_s = time.monotonic() - began
        created = spark.sql("show create table lake.lakehouse.orders").first()[0]
        layout = f"CLUSTERED BY (customer_id)\nINTO {buckets} BUCKETS" if buckets else "BUCKETS"
        assert (layout in created) == bool(buckets), created
        rng = random.Random(11 + number)
        ticks = []
        for tick in range(TICKS):
            moment += timedelta(minutes=1)
            records = []
            for image in pick_images(TICK, seed=100 * number + tick):
                keys = {"customer_id": image["customer_id"], "order_id": image["order_id"]}
                new = dict(image, status={"S": rng.choice(STATUSES)})
                second = int(moment.timestamp())
                records.append(
                    sample_stream.stream_record(
                        "orders", "MODIFY", keys, image, new, second, sequence
                    )
                )
                sequence += 1
            location = scratch / f"stream-{number}-{tick}"
            written, failed = write_batch(records, str(location))
            assert failed is None and written
            stream = str(location)
            lakehouse.cli("ingest", "--table", "orders", "--stream", stream, "--settle", "0")
            began = time.monotonic()
            lakehouse.cli("merge", "--table", "orders", echo=False)
            ticks.append((time.monotonic() - began, last_commit(spark)))
        window = start + timedelta(hours=number)
        images = pick_images(BATCH, seed=100 * number + 99)
        incremental = sample_exports.write_export(
            scratch / "exports",
            "orders",
            [iter(export_lines(images, window, rng))],
            window + timedelta(hours=1, minutes=5),
            rng,
            window=(window, window + timedelta(hours=1), "NEW_AND_OLD_IMAGES"),
        )
        lakehouse.cli("ingest", "--table", "orders", str(incremental), echo=False)
        began = time.monotonic()
        lakehouse.cli("merge", "--table", "orders", echo=False)
        batch_s, batch_commit = time.monotonic() - began, last_commit(spark)
        files = spark.sql(
            "select count(*) from lake.lakehouse.orders.files where content = 0"
        ).first()[0]
        median = sorted(ticks, key=lambda t: t[0])[len(ticks) // 2]
        cases = [
            {
                "case": "tick",
                "changes": TICK,
                "merge_seconds": round(median[0], 2),
                "all_seconds": [round(t[0], 2) for t in ticks],
                "changed_buckets": median[1].get("changed-partition-count"),
            },
            {
                "case": "batch",
                "changes": BATCH,
                "merge_seconds": round(batch_s, 2),
                "changed_buckets": batch_commit.get("changed-partition-count"),
            },
        ]
        runs.append(
            {
                "buckets": buckets,
                "rebuild_seconds": round(rebuild_s, 1),
                "data_files": files,
                "cases": cases,
            }
        )
        print(f"buckets: {runs[-1]}", flush=True)
    return runs


if __name__ == "__main__":
    sys.exit(main())
