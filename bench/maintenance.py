"""Maintenance after many small merges: files, delete files, snapshots and metadata before and
after `maintain`, with an independent reader (DuckDB, no Spark) looping over the table meanwhile.

`maintain` runs with ``--no-check`` (its closing whole-table `dbt test` reads, it commits
nothing). Sets up `books` from a full export (`sync`), then runs `--merges` small merges as a user's
commands run them (the Lambda module's writer writes one change file, `ingest --stream` stages
it, `merge` applies it with its tests: upserts and deletes; bench/lakehouse.py). Then:
  1. DuckDB and Spark read the table, value by value, and must agree (before);
  2. `maintain` with the default retention (24 h) while a DuckDB reader loops: compaction and the
     ledger checkpoint, nothing expires (everything is younger than the retention);
  3. `maintain` as if run two days later (``--retention-hours 0``), while the reader loops:
     snapshots older than the retention expire (the last 5 kept), merged superseded changes
     leave the staging change log;
  4. DuckDB and Spark agree again, and both equal the items the export and change files leave
     (computed in plain Python).

Usage: .venv/bin/python bench/maintenance.py [--merges 100] [--changes 20] [--items 2000]
Writes bench/results/maintenance.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import lakehouse
import results_file  # bench/ is on sys.path when a benchmark runs as a script

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

COLUMNS = "id, title, author, price, pages, in_stock, _operation, _version, _sequence, _rest"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--merges", type=int, default=100, help="small merges before maintain")
    parser.add_argument("--changes", type=int, default=20, help="changes per merge")
    parser.add_argument("--items", type=int, default=2000, help="books in the full export")
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="lakehouse-bench-"))
    home = scratch / "home"
    os.environ["LAKEHOUSE_HOME"] = str(home)
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"

    import readers

    from ingestion.samples import expected_state, sample_exports
    from ingestion.samples import stream as sample_stream
    from ingestion.sources.change_file_writer import write_batch
    from ingestion.spark.spark_config import build_spark

    spark = build_spark("bench-maintenance")  # the session every command below shares
    spark.sparkContext.setLogLevel("ERROR")
    export = sample_exports.write_samples(scratch / "exports", args.items, 5, ["books"])["books"]
    lakehouse.cli("sync", "--table", "books", str(export), echo=False)
    records = [
        r
        for batch in sample_stream.books_stream_records(args.items, 5, args.merges * args.changes)
        for r in batch
    ]
    batches = [records[i : i + args.changes] for i in range(0, len(records), args.changes)]
    batches = batches[: args.merges]
    for batch in batches:
        write_batch(batch, str(scratch / "replay"))
    expected = expected_state.expected_items([export, scratch / "replay" / "books"], ["id"])

    merge_seconds = []
    for number, batch in enumerate(batches, 1):
        started = time.monotonic()
        write_batch(batch, str(scratch / "streams"))
        stream = str(scratch / "streams")
        lakehouse.cli("ingest", "--table", "books", "--stream", stream, "--settle", "0", echo=False)
        lakehouse.cli("merge", "--table", "books", echo=False)
        merge_seconds.append(time.monotonic() - started)
        if number % 10 == 0:
            print(f"merge {number}/{len(batches)}: {merge_seconds[-1]:.1f}s", flush=True)

    def state() -> dict:
        spark.sql("refresh table lake.lakehouse.books")
        name = "lake.lakehouse.books"
        data_files, delete_files = lakehouse.live_files(spark, name)
        return {
            "data_files": data_files,
            "delete_files": delete_files,
            "snapshots": spark.table(f"{name}.snapshots").count(),
            "staging_snapshots": spark.table("lake.staging.books.snapshots").count(),
            "staging_rows": spark.table("lake.staging.books").count(),
            "metadata_kb": round(lakehouse.metadata_bytes(spark, name) / 1024, 1),
        }

    def agree() -> int:
        by_spark = sorted(
            tuple(r) for r in spark.sql(f"select {COLUMNS} from lake.lakehouse.books").collect()
        )
        by_duckdb = sorted(readers.read_rows(readers.connect(), home, "books", COLUMNS))
        assert by_duckdb == by_spark, "DuckDB and Spark differ"
        keys = sorted(json.dumps([{"S": row[0]}]) for row in by_spark)
        assert keys == sorted(expected), "the table differs from the items the inputs leave"
        return len(by_spark)

    def with_reader(work):
        started = time.monotonic()
        with readers.reading(home, "books", len(expected)) as loop:
            report = work()
        return report, time.monotonic() - started, loop.reads, loop.failures

    rows = agree()
    before = state()
    print(f"before maintain: {before}", flush=True)
    young, young_seconds, young_reads, young_failures = with_reader(
        lambda: lakehouse.cli("maintain", "--table", "books", "--no-check")
    )
    compacted = state()
    # As a run two days later: every snapshot but the last five is past the retention (the
    # commands take no clock; a retention of 0 hours makes the same cut).
    old, old_seconds, old_reads, old_failures = with_reader(
        lambda: lakehouse.cli(
            "maintain", "--table", "books", "--retention-hours", "0", "--no-check"
        )
    )
    after = state()
    assert agree() == rows
    spark.stop()
    failures = young_failures + old_failures
    figures = {
        "items": args.items,
        "merges": len(batches),
        "changes": sum(len(b) for b in batches),
        "merge_seconds_mean": round(sum(merge_seconds) / len(merge_seconds), 2),
        "rows": rows,
        "before": before,
        "after_maintain": compacted,
        "after_maintain_2_days_later": after,
        "maintain_seconds": [round(young_seconds, 1), round(old_seconds, 1)],
        "pruned_staging_rows": pruned(young) + pruned(old),
        "reader_reads": young_reads + old_reads,
        "reader_failures": len(failures),
        "first_failures": failures[:3],
        "duckdb_equals_spark": True,  # asserted before and after, value by value
    }
    command = " ".join(["bench/maintenance.py", *(argv if argv is not None else sys.argv[1:])])
    results_file.write("maintenance", figures, f".venv/bin/python {command.strip()}")
    return 1 if failures else 0


def pruned(report: str) -> int:
    """The superseded staged rows a ``maintain`` said it removed from the change log."""
    found = re.findall(r"(\d+) superseded changes removed from staging", report)
    return sum(int(n) for n in found)


if __name__ == "__main__":
    sys.exit(main())
