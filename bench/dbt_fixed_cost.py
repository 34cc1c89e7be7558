"""dbt's fixed cost per merge, in the warm process that `watch` and `merge` use, next to a floor.

On a table of a few rows, so that what is measured is what dbt costs whatever the data:
floor:     one Spark query on the final table (a warm session's cost of any SQL round trip);
parse:     `dbt parse` with the same vars as the run before (dbt's partial parsing holds);
parse_new_vars: `dbt parse` with other vars than the run before, as every merge passes (its
           batches): dbt parses the whole project again;
run:       `dbt run` of one table with no new batch (compile, introspection, an empty MERGE);
test:      `dbt test` of one table with its change-log tests scoped to no key (the key tests,
           unique and not_null, still read the final table);
merge:     `run_merge` of one table with one new batch of one stream change (run + test +
           the inserted/updated/deleted report), as a `watch` tick pays it.
Each is run --repeat times after a warm-up; the median is reported.

Usage: .venv/bin/python bench/dbt_fixed_cost.py [--repeat 5]
Writes bench/results/dbt_fixed_cost.json and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import results_file  # bench/ is on sys.path when a benchmark runs as a script


def _median_seconds(work: Callable[[], object], repeat: int) -> float:
    work()  # warm-up
    times = []
    for _ in range(repeat):
        started = time.monotonic()
        work()
        times.append(time.monotonic() - started)
    return round(statistics.median(times), 2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)

    scratch = Path(tempfile.mkdtemp(prefix="lakehouse-bench-"))
    os.environ["LAKEHOUSE_HOME"] = str(scratch / "home")
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["LAKEHOUSE_PROGRESS_SECONDS"] = "0"

    from ingestion.dynamodb.tables import get_table
    from ingestion.merge import runner
    from ingestion.samples import sample_exports
    from ingestion.samples import stream as sample_stream
    from ingestion.sources.change_file_writer import write_batch
    from ingestion.spark.spark_config import build_spark
    from ingestion.staging.exports import ingest_export
    from ingestion.staging.streams import ingest_stream

    spark = build_spark("bench dbt fixed cost")
    table = get_table("books")
    folder = sample_exports.write_samples(scratch / "exports", 20, seed=3, tables=["books"])
    ingest_export(spark, table, str(folder["books"]))
    runner.run_merge(spark, [table])
    select = ["--select", "stg_dynamodb__books+"]
    no_batch = json.dumps({"dynamodb_batches": {"books": []}})
    no_key = json.dumps({"dynamodb_test_batches": {"books": []}})
    stream_dir = scratch / "streams"
    sequence = iter(range(10**6, 10**7))

    def one_change_merged() -> object:
        number = next(sequence)
        key = {"id": {"S": "book-00000001"}}
        new = {**key, "title": {"S": f"edition {number}"}}
        record = sample_stream.stream_record("books", "MODIFY", key, None, new, time.time(), number)
        write_batch([record], str(stream_dir))
        ingest_stream(spark, table, str(stream_dir), settle_seconds=0.0)
        return runner.run_merge(spark, [table])

    figures = {
        "floor_seconds": _median_seconds(
            lambda: spark.sql("select count(*) from lake.lakehouse.books").collect(), args.repeat
        ),
        "parse_seconds": _median_seconds(lambda: runner.dbt_invoke(["parse"]), args.repeat),
        "parse_new_vars_seconds": _median_seconds(
            lambda: runner.dbt_invoke(
                [
                    "parse",
                    "--vars",
                    json.dumps({"dynamodb_batches": {"books": [str(next(sequence))]}}),
                ]
            ),
            args.repeat,
        ),
        "run_seconds": _median_seconds(
            lambda: runner.dbt_invoke(["run", *select, "--vars", no_batch]), args.repeat
        ),
        "test_seconds": _median_seconds(
            lambda: runner.dbt_invoke(["test", *select, "--vars", no_key]), args.repeat
        ),
        "merge_one_change_seconds": _median_seconds(one_change_merged, args.repeat),
    }
    figures["ratios_to_floor"] = {
        k.removesuffix("_seconds"): round(v / figures["floor_seconds"], 1)
        for k, v in figures.items()
        if k != "floor_seconds"
    }
    results_file.write(
        "dbt_fixed_cost",
        {
            "table_rows": spark.table("lake.lakehouse.books").count(),
            "repeat": args.repeat,
            **figures,
        },
        f".venv/bin/python bench/dbt_fixed_cost.py --repeat {args.repeat}",
    )
    print("\n| step | median s | x floor |")
    print("|---|---|---|")
    for key, value in figures.items():
        if key.endswith("_seconds"):
            ratio = figures["ratios_to_floor"].get(key.removesuffix("_seconds"), 1.0)
            print(f"| {key.removesuffix('_seconds')} | {value} | {ratio} |")
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
