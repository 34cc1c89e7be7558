"""Where a first load's time goes (a full export into a table with no schema yet, to its final
table), beside what a design could reach, in one run and one process: the profile behind
`bench/export_to_final.py`'s sync figures.

One full export of ``--items`` items of ``--table`` (`orders`: nested, a list of maps and a map)
is written (not timed). Then, in this one process and SparkSession (1 GB driver heap):

(a) floors, each warm (a first read not timed): Spark's JSON reader with the export's own typed
    schema (inferred beforehand, not timed) building every value (``noop``); that read written to
    an Iceberg table (zstd); the lines read as text, the envelope and the item parsed, the item
    kept as ``_image``, written; a second table written from that one (a final table's copy).
    Parse once, stage, copy: the least a design with a change log and a final table does.
(b) one ``sync`` of the export into a fresh lakehouse with no schema file, through the CLI's own
    entry point, warm (no JVM start: P1's ratio is bench/export_to_final.py's, one process per
    step), each step timed by wrapping the function that does it (detection, staging, the
    line counts, ledger reads, the drift check, ``dbt run``, ``dbt test``, the merge log; ledger
    reads also happen inside other steps: the steps overlap and do not add up);
(c) the two passes taken apart (``noop`` writes, with the types the sync detected): staging's
    rows built up (the envelope, the item as ``map<attribute, VALUE>``, every typed column) and
    the keys with one attribute at a time; detection's pass built up (the parse and a column
    per path, the checks that an item fits the first items' shape, the statistics).

Usage: .venv/bin/python bench/first_load_profile.py [--items 1000000] [--table orders]
Writes bench/results/first_load_profile.json.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC
from pathlib import Path
from typing import Any

import project
import results_file  # bench/ is on sys.path when a benchmark runs as a script

# (label, module, function): the steps of a first `sync`, each the cumulative time of its function.
STEPS = [
    ("line counts of every file", "ingestion.staging.exports", "check_line_counts"),
    ("schema detection", "ingestion.staging.exports", "table_schema"),
    (
        "staging (decode, _image, write, commit)",
        "ingestion.staging.exports",
        "stage_with_evolution",
    ),
    ("ledger reads", "ingestion.catalog.ledger", "entries"),
    ("drift check of unmerged batches", "ingestion.jobs.apply", "adopt_before_merge"),
    ("dbt run", "ingestion.merge.runner", "_dbt_run"),
    ("dbt run + dbt test", "ingestion.merge.dbt_process", "dbt_invoke"),
    ("merge log", "ingestion.merge.runner", "record_merged"),
    ("merge (all of it)", "ingestion.jobs.apply", "run_merge"),
]


def timed_steps(times: dict[str, float]) -> None:
    """Wrap each step's function so that its calls add their wall time to ``times``."""
    import importlib

    for label, module_name, name in STEPS:
        module = importlib.import_module(module_name)
        original: Callable[..., Any] = getattr(module, name)

        def wrapper(*args: Any, _f=original, _label=label, **kwargs: Any) -> Any:
            began = time.monotonic()
            try:
                return _f(*args, **kwargs)
            finally:
                times[_label] = times.get(_label, 0.0) + time.monotonic() - began

        setattr(module, name, functools.wraps(original)(wrapper))


def floors(spark: Any, folder: Path, typed: Any) -> dict[str, float]:
    """(a): the floors, each after one untimed warm-up of the first."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from ingestion.sources import manifest

    paths = [str(f.path) for f in manifest.read_export(folder, verify=False).files]
    spark.sql("create namespace if not exists lake.bench_floor")

    def read() -> Any:
        return spark.read.schema(typed).json(paths).where("Item is not null").select("Item.*")

    def with_image() -> Any:
        envelope = T.StructType([T.StructField("Item", T.StringType())])
        lines = spark.read.text(paths).select(F.from_json("value", envelope).alias("l"))
        images = lines.select(F.col("l.Item").alias("_image"))
        item = typed["Item"].dataType
        return images.select(F.from_json("_image", item).alias("i"), "_image").select(
            "i.*", "_image"
        )

    def write(frame: Any, name: str) -> None:
        frame.writeTo(f"lake.bench_floor.{name}").using("iceberg").tableProperty(
            "write.parquet.compression-codec", "zstd"
        ).createOrReplace()

    def seconds(step: Callable[[], None]) -> float:
        began = time.monotonic()
        step()
        return round(time.monotonic() - began, 1)

    seconds(lambda: read().write.format("noop").mode("overwrite").save())  # warm-up
    return {
        "typed read (the floor's reader)": seconds(
            lambda: read().write.format("noop").mode("overwrite").save()
        ),
        "typed read written to Iceberg": seconds(lambda: write(read(), "typed")),
        "text, envelope + item parsed, _image kept, written": seconds(
            lambda: write(with_image(), "staged")
        ),
        "a second table written from that one": seconds(
            lambda: write(spark.table("lake.bench_floor.staged").drop("_image"), "final")
        ),
    }


def _noop(frame: Any) -> float:
    began = time.monotonic()
    frame.write.format("noop").mode("overwrite").save()
    return round(time.monotonic() - began, 1)


def breakdown(spark: Any, folder: Path, table_name: str) -> dict[str, float]:
    """(c): staging's and detection's passes taken apart."""
    from datetime import datetime

    from ingestion.catalog import table_types
    from ingestion.dynamodb import decode
    from ingestion.dynamodb.tables import get_table
    from ingestion.schema import detect, shapes
    from ingestion.sources import manifest
    from ingestion.staging import append

    table = get_table(table_name)
    schema = table_types.stored_schema(spark, table)
    assert schema is not None
    export = manifest.read_export(folder, verify=False)
    lines = spark.read.text([str(f.path) for f in export.files])
    now = datetime.now(UTC)
    out = {
        "staging: the envelope": _noop(lines.transform(decode.with_envelope)),
        "staging: + the item as a map": _noop(
            lines.transform(decode.with_envelope).transform(decode.with_image)
        ),
        "staging: + every typed column, _rest, _drift": _noop(
            append.read_export(spark, export, schema, "b", now).drop("_image")
        ),
    }
    rows = append.read_export(spark, export, schema, "b", now).drop("_image")
    keys = [a.column for a in schema.attributes if a.key]
    for attribute in schema.attributes:
        if not attribute.key:  # the keys' checks and one column: Spark prunes the others
            label = f"staging: the keys + {attribute.name} ({attribute.type.sql()})"
            out[label] = _noop(rows.select(*keys, attribute.column))
    first = [r[0] for r in lines.select("value").limit(detect.SAMPLE_ITEMS).collect()]
    top = shapes.from_items(detect._sample_items(first, True))
    flagged, plan = shapes.flagged(lines, top)
    out["detection: the parse, a column per path"] = _noop(flagged.drop(shapes.MISFIT))
    out["detection: + the shape checks"] = _noop(flagged)
    began = time.monotonic()
    shapes.statistics(flagged, plan)
    out["detection: + the statistics"] = round(time.monotonic() - began, 1)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--table", default="orders")
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="lakehouse-bench-first-load-"))
    os.environ.update(
        SPARK_LOCAL_IP="127.0.0.1",
        LAKEHOUSE_DRIVER_MEMORY="1g",
        LAKEHOUSE_HOME=str(scratch / "home"),
    )
    try:
        copy = project.copy(scratch / "project", orders_buckets=None)
        shutil.rmtree(copy / "schemas")
        (copy / "schemas").mkdir()  # no schema file: the first load detects the types
        from pyspark.sql.types import StructType

        from ingestion.cli.app import main as cli
        from ingestion.samples import sample_exports
        from ingestion.sources import manifest
        from ingestion.spark.spark_config import build_spark

        folder = sample_exports.write_samples(scratch / "exports", args.items, 1, [args.table])[
            args.table
        ]
        spark = build_spark("bench first load")
        paths = [str(f.path) for f in manifest.read_export(folder, verify=False).files]
        typed = StructType.fromJson(json.loads(spark.read.json(paths).schema.json()))
        floor = floors(spark, folder, typed)
        times: dict[str, float] = {}
        timed_steps(times)
        began = time.monotonic()
        code = cli(["sync", "--table", args.table, str(folder)])
        total = time.monotonic() - began
        if code != 0:
            raise SystemExit(f"first_load_profile: sync exited {code}")
        rows = spark.table(f"lake.lakehouse.{args.table}").count()
        assert rows == args.items, f"{rows} final rows, expected {args.items}"
        parts = breakdown(spark, folder, args.table)
        steps = {label: round(times.get(label, 0.0), 1) for label, _, _ in STEPS}
        steps["dbt test"] = round(steps["dbt run + dbt test"] - steps["dbt run"], 1)
        least = (
            floor["text, envelope + item parsed, _image kept, written"]
            + floor["a second table written from that one"]
        )
        results_file.write(
            "first_load_profile",
            {
                "table": args.table,
                "items": args.items,
                "sync_s": round(total, 1),
                "steps_s": steps,
                "floors_s": floor,
                "parse_stage_copy_s": round(least, 1),
                "passes_taken_apart_s": parts,
                # In this warm process, after the floors: not P1's ratio (bench/export_to_final.py).
                "warm_sync_vs_floor": round(total / floor["typed read (the floor's reader)"], 2),
                "sync_vs_parse_stage_copy": round(total / least, 2),
                "final_rows": rows,
            },
            f".venv/bin/python bench/first_load_profile.py --items {args.items} --table "
            f"{args.table}",
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
