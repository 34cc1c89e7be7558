"""A merge with the table's history on, against the same merge without it (issue 54: <= 1.3x).

Two processes, one after the other, each in a fresh lakehouse and its own copy of the project:
``orders`` without history, then ``orders`` with ``history: true`` in its entry (the first
merge writes the history's model). Each step is a command, run in the process
(bench/lakehouse.py). In each, not timed: the sample's full export of N items synced
(``sync``: ingest and the first build, of the history too, with the tests), then one
incremental export of 10,000 changes of existing orders applied (the process's first merge of a
batch). Then, timed, ``ROUNDS`` incremental exports of 10,000 changes each (every tenth a
delete; the same orders and changes in both processes, drawn from the full export's files by a
hash of key and round): the ingest, and the merge with its tests, as ``sync`` runs them. The
figure is the median merge of each process, and their ratio: the merge is what the history adds
to (the ingest is the same). Rows are checked: the final tables of the two processes hold the
same keys and versions, and the history's current rows are the final table's.

Usage: .venv/bin/python bench/history_cost.py [--items 1000000]
Writes bench/results/history_cost.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import lakehouse
import project
import results_file

HERE = Path(__file__).resolve()
ROUNDS = 3
CHANGES = 10_000
TARGET = 1.3


def enable_history(root: Path) -> None:
    """``orders`` with ``history: true`` in the copy, as docs/history.md says to turn it on for a
    configured table (the first merge writes the history's model)."""
    config = root / "dbt_project.yml"
    text = config.read_text()
    entry = "\n    orders:\n"
    assert text.count(entry) == 1, "dbt_project.yml: no orders entry"
    config.write_text(text.replace(entry, entry + "      history: true\n"))


def side(scratch: Path, items: int, history: bool) -> dict:
    """One process's figures (module docstring)."""
    from apply_cost import export_lines, incremental_export
    from pyspark.sql import functions as F

    from ingestion.samples import sample_exports
    from ingestion.spark.spark_config import build_spark

    root = project.copy(scratch / "project", None)
    if history:
        enable_history(root)
    folder = sample_exports.write_samples(scratch / "exports", items, seed=1, tables=["orders"])[
        "orders"
    ]
    spark = build_spark("bench history cost")  # the session the commands below share
    began = time.monotonic()
    lakehouse.cli("sync", "--table", "orders", str(folder))  # the first build, with its tests
    first_build_s = time.monotonic() - began
    start = lakehouse.export_time(folder)
    # The export's items (DynamoDB JSON) with their keys, to draw each round's orders from.
    exported = spark.read.text(lakehouse.export_data_files(folder)).select(
        "value",
        F.get_json_object("value", "$.Item.customer_id.S").alias("customer_id"),
        F.get_json_object("value", "$.Item.order_id.S").alias("order_id"),
    )
    merges, ingests = [], []
    for number in range(ROUNDS + 1):  # the first: the process's first merge of a batch
        # The same orders in both processes: ordered by a hash of the key and the round, not
        # sampled (a sample follows the files' layout, which the first run found to differ). A
        # round's change of an order an earlier round changed overwrites it whole (PutItem).
        picked = (
            exported.orderBy(F.xxhash64("customer_id", "order_id", F.lit(number)))
            .select("value")
            .limit(CHANGES)
            .collect()
        )
        images = [json.loads(r["value"])["Item"] for r in picked]
        window = start + timedelta(hours=number)
        lines = export_lines(images, window, random.Random(number))
        incremental = incremental_export(scratch, lines, window, random.Random(number))
        began = time.monotonic()
        lakehouse.cli("ingest", "--table", "orders", str(incremental), echo=False)
        ingested = time.monotonic()
        lakehouse.cli("merge", "--table", "orders", echo=False)
        if number:
            ingests.append(ingested - began)
            merges.append(time.monotonic() - ingested)
    final = spark.table("lake.lakehouse.orders").select("customer_id", "order_id", "_version")
    figures = {
        "history": history,
        "first_build_seconds": round(first_build_s, 1),
        "ingest_seconds": [round(s, 2) for s in ingests],
        "merge_seconds": [round(s, 2) for s in merges],
        "merge_median_seconds": round(statistics.median(merges), 2),
        "final_rows": final.count(),
        "final_checksum": final.select(
            F.sum(F.xxhash64("customer_id", "order_id", "_version"))
        ).first()[0],
    }
    if history:
        table = spark.table("lake.lakehouse.orders__history")
        current = table.where("_valid_to is null and _operation not in ('delete', 'ttl_delete')")
        current = current.select("customer_id", "order_id", "_version")
        differ = current.exceptAll(final).count() + final.exceptAll(current).count()
        assert differ == 0, f"the history's current rows and the final table differ in {differ}"
        figures["history_rows"] = table.count()
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--side", choices=["without", "with"], help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.side:
        scratch = Path(os.environ["LAKEHOUSE_HOME"]).parent
        args.out.write_text(json.dumps(side(scratch, args.items, args.side == "with")))
        return 0
    sides = {}
    for name in ("without", "with"):
        scratch = Path(tempfile.mkdtemp(prefix=f"lakehouse-bench-history-{name}-"))
        env = dict(os.environ, LAKEHOUSE_HOME=str(scratch / "home"), SPARK_LOCAL_IP="127.0.0.1")
        out = scratch / "side.json"
        command = [sys.executable, str(HERE), "--items", str(args.items), "--side", name]
        subprocess.run([*command, "--out", str(out)], env=env, check=True)
        sides[name] = json.loads(out.read_text())
        print(f"history_cost: {name} history: {sides[name]}", flush=True)
        subprocess.run(["rm", "-rf", str(scratch)], check=False)
    without, with_ = sides["without"], sides["with"]
    assert (without["final_rows"], without["final_checksum"]) == (
        with_["final_rows"],
        with_["final_checksum"],
    ), "the two final tables differ"
    results_file.write(
        "history_cost",
        {
            "table": "orders",
            "items": args.items,
            "changes": CHANGES,
            "rounds": ROUNDS,
            "target_ratio": TARGET,
            "without_history": without,
            "with_history": with_,
            "ratio": round(with_["merge_median_seconds"] / without["merge_median_seconds"], 2),
        },
        f".venv/bin/python bench/history_cost.py --items {args.items}",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
