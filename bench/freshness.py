"""Freshness: how long a change takes from its change file landing to being visible in its final
table, with one `watch` serving 1 stream table and then 10 (`--tables 1,10`), in one run.

Each run sets up its tables in a project copy (`books` from a full export; `hot_02`... added with
`add-table --cadence stream` and seeded from a stream file; not timed), then starts one
`ddb-lakehouse watch --table books [--table hot_02 ...] --interval N` as its own process
(compaction every 6 ticks) and, once it has warmed up, writes change files through the Lambda
module's writer (ingestion.sources.change_file_writer.write_batch, as the deployed function does):
each second one file per table, `--rate` changes a second in total (updates, inserts, 5%
deletes). After `--seconds` it waits for watch to merge the last file, stops it with SIGTERM and
reads, for every file, the moment the merge that made it visible was recorded (the merge log's
`merged_at`, written right after `dbt run` committed). Latency of a change = that moment - the
moment its file landed.

Usage: .venv/bin/python bench/freshness.py [--rate 50] [--seconds 180] [--interval 10]
       [--tables 1,10]
Writes bench/results/freshness.json.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import lakehouse
import results_file  # bench/ is on sys.path when a benchmark runs as a script

# A tick's line: "tick N: ..." for one table, "tick N TABLE: ..." for several.
TICK = re.compile(
    r"tick (\d+)( \w+)?: (\d+) files, (\d+) changes, .* ([\d.]+)s \(ingest ([\d.]+), "
    r"merge ([\d.]+), maintain ([\d.]+)\)"
)


# p95 targets, seconds: one stream table (`books`, issue 33's P3) and each of ten tables served
# by one watch (issue 32).
ONE_TABLE_TARGET = 10
PER_TABLE_TARGET = 20


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def hot_tables(count: int) -> list[str]:
    """``books`` and ``count - 1`` more stream tables of its shape (``hot_02``...), added to the
    benchmark's project copy with `add-table --cadence stream`."""
    names = ["books"] + [f"hot_{i:02d}" for i in range(2, count + 1)]
    for name in names[1:]:
        done = subprocess.run(
            [
                str(Path(sys.executable).parent / "ddb-lakehouse"),
                "add-table",
                name,
                "--partition-key",
                "id:S",
                "--cadence",
                "stream",
            ],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stdout + done.stderr
    return names


def set_up(scratch: Path, names: list[str], items_count: int) -> None:
    """`books` from a full export, each other table from a stream file of as many inserts:
    their staging and final tables exist before the clock starts (not timed)."""
    from ingestion.samples import sample_exports
    from ingestion.sources.change_file_writer import write_batch
    from ingestion.spark.spark_config import build_spark

    full = sample_exports.write_samples(scratch / "exports", items_count, seed=3, tables=["books"])
    spark = build_spark("bench freshness setup")  # the session the commands below share
    lakehouse.cli("ingest", "--table", "books", str(full["books"]), echo=False)
    for name in names[1:]:
        rng = random.Random(name)
        records = [
            _record(name, "INSERT", f"book-{i:08d}", i, rng, 10**19 + i)[0]
            for i in range(items_count)
        ]
        written, failed = write_batch(records, str(scratch / "seed"))
        assert failed is None and written
        seed = str(scratch / "seed")
        lakehouse.cli("ingest", "--table", name, "--stream", seed, "--settle", "0", echo=False)
    lakehouse.cli("merge", *(a for n in names for a in ("--table", n)), echo=False)
    spark.stop()


def _record(table: str, event: str, key: str, number: int, rng: random.Random, sequence: int):
    from ingestion.samples import items
    from ingestion.samples import stream as sample_stream

    item = items.book_item(number, rng)
    item["id"] = {"S": key}
    old, new = {
        "INSERT": (None, item),
        "MODIFY": (item, dict(item, price={"N": "9.99"})),
        "REMOVE": ({"id": {"S": key}}, None),
    }[event]
    keys = {"id": {"S": key}}
    return sample_stream.stream_record(
        table, event, keys, old, new, int(time.time()), sequence
    ), key


def write_changes(location: Path, names: list[str], args: argparse.Namespace) -> dict:
    """``args.rate`` changes a second in total for ``args.seconds``, one file per table a second
    (updates, inserts, 5% deletes); each change's sequence number -> (table, its file's landing
    time)."""
    from ingestion.sources.change_file_writer import write_batch

    rng = random.Random(11)
    keys = {name: [f"book-{i:08d}" for i in range(args.items)] for name in names}
    landed: dict[int, tuple[str, float]] = {}
    sequence, next_id = 10**20, args.items
    started = time.time()
    while time.time() - started < args.seconds:
        second_started = time.time()
        for t, name in enumerate(names):
            share = args.rate // len(names) + (1 if t < args.rate % len(names) else 0)
            records = []
            for _ in range(share):
                sequence, roll = sequence + 1, rng.random()
                if roll < 0.05 and len(keys[name]) > 10:
                    key = keys[name].pop(rng.randrange(len(keys[name])))
                    records.append(_record(name, "REMOVE", key, 0, rng, sequence)[0])
                elif roll < 0.25:
                    next_id += 1
                    key = f"book-{next_id:08d}"
                    keys[name].append(key)
                    records.append(_record(name, "INSERT", key, next_id, rng, sequence)[0])
                else:
                    key = rng.choice(keys[name])
                    records.append(_record(name, "MODIFY", key, int(key[5:]), rng, sequence)[0])
            if records:
                written, failed = write_batch(records, str(location))
                assert failed is None and written
                at = time.time()
                for record in records:
                    landed[int(record["dynamodb"]["SequenceNumber"])] = (name, at)
        time.sleep(max(0.0, 1.0 - (time.time() - second_started)))
    return landed


def latencies(names: list[str], landed: dict) -> tuple[dict[str, list[float]], int]:
    """Per table, the latency of every change (its batch's merge recorded - its file landed), and
    the changes not merged: each staged change found by its sequence number (``_sequence``), its
    batch's merge time in the merge log (``status`` names the table)."""
    from ingestion.spark.spark_config import build_spark

    spark = build_spark("bench freshness results")
    merged_at = {
        row["batch_id"]: row["micros"] / 1e6
        for row in spark.sql(
            "select batch_id, unix_micros(merged_at) as micros "
            "from lake.staging.dynamodb_lakehouse_merges"
        ).collect()
    }
    found: dict[str, list[float]] = {name: [] for name in names}
    for name in names:
        for row in spark.sql(f"select _sequence, _batch_id from lake.staging.{name}").collect():
            sequence = int(row["_sequence"]) if row["_sequence"] else None  # staging pads it
            if sequence not in landed:
                continue
            _, at = landed[sequence]
            if row["_batch_id"] in merged_at:
                found[name].append(merged_at[row["_batch_id"]] - at)
    spark.stop()
    return found, len(landed) - sum(len(v) for v in found.values())


def run(count: int, args: argparse.Namespace) -> dict:
    """One watch of ``count`` stream tables (``books`` first) at ``args.rate`` changes a
    second in total, in its own scratch lakehouse and project copy."""
    import project

    scratch = Path(tempfile.mkdtemp(prefix="lakehouse-bench-"))
    os.environ["LAKEHOUSE_HOME"] = str(scratch / "home")
    project.copy(scratch / "project")
    names = hot_tables(count)
    set_up(scratch, names, args.items)
    location, log_path = scratch / "streams", scratch / "watch.log"
    command = [str(Path(sys.executable).parent / "ddb-lakehouse"), "watch"]
    for name in names:
        command += ["--table", name]
    command += ["--stream", str(location), "--interval", f"{args.interval:g}", "--settle", "1"]
    command += ["--maintain-every", "6"]
    with log_path.open("w") as log:
        watcher = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        # Changes start once watch has warmed up (a process start's one-off cost, reported apart).
        deadline = time.time() + 600
        while "watching " not in log_path.read_text() and time.time() < deadline:
            time.sleep(0.5)
        warm = re.search(r"warmed up in ([\d.]+)s", log_path.read_text())
        landed = write_changes(location, names, args)
        deadline = time.time() + 10 * args.interval + 300
        while any(location.glob("*/*.json.gz")) and time.time() < deadline:
            time.sleep(1)
        time.sleep(args.interval + 5)  # the tick that staged the last files merges them
    finally:
        watcher.send_signal(signal.SIGTERM)
        watcher.wait(timeout=300)
    found, unmerged = latencies(names, landed)
    ticks = [TICK.search(line) for line in log_path.read_text().splitlines()]
    busy = [m for m in ticks if m and int(m.group(3)) > 0]

    def mean(group: int) -> float:
        return round(statistics.mean(float(m.group(group)) for m in busy), 2) if busy else 0.0

    every = [x for values in found.values() for x in values]
    per_table = {n: round(percentile(v, 0.95), 1) for n, v in found.items() if v}
    return {
        "tables": count,
        "changes_written": len(landed),
        "changes_measured": len(every),
        "changes_not_merged": unmerged,
        "latency_s": {
            "p50": round(percentile(every, 0.5), 1) if every else None,
            "p95": round(percentile(every, 0.95), 1) if every else None,
            "max": round(max(every), 1) if every else None,
        },
        "p95_per_table_s": per_table,
        "worst_table_p95_s": max(per_table.values()) if per_table else None,
        "warm_up_s": float(warm.group(1)) if warm else None,
        "ticks_with_changes": len({m.group(1) for m in busy}),
        "tick_table_mean_s": {
            "ingest": mean(6),
            "merge": mean(7),
            "maintain": mean(8),
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=int, default=50, help="changes per second, in total")
    parser.add_argument("--seconds", type=int, default=180, help="how long the writer writes")
    parser.add_argument("--interval", type=float, default=10.0, help="watch --interval")
    parser.add_argument("--items", type=int, default=500, help="items of each table at the start")
    parser.add_argument(
        "--tables", default="1,10", help="stream tables in the one watch, one run each (1,10)"
    )
    args = parser.parse_args(argv)
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    runs = [run(int(n), args) for n in args.tables.split(",")]
    one = runs[0]
    figures = {
        "rate_changes_per_s": args.rate,
        "writer_seconds": args.seconds,
        "watch_interval_s": args.interval,
        # One table's figures (`books`), under the keys the report reads:
        "changes_written": one["changes_written"],
        "changes_measured": one["changes_measured"],
        "changes_not_merged": one["changes_not_merged"],
        "latency_s": one["latency_s"],
        "target_p95_s": ONE_TABLE_TARGET,
        "warm_up_s": one["warm_up_s"],
        "runs": runs,
        "target_p95_per_table_s": PER_TABLE_TARGET,
        "target_met": all(
            r["worst_table_p95_s"] is not None
            and r["worst_table_p95_s"]
            <= (ONE_TABLE_TARGET if r["tables"] == 1 else PER_TABLE_TARGET)
            and r["changes_not_merged"] == 0
            for r in runs
        ),
    }
    results_file.write(
        "freshness",
        figures,
        f".venv/bin/python bench/freshness.py --rate {args.rate} --seconds {args.seconds} "
        f"--interval {args.interval:g} --tables {args.tables}",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
