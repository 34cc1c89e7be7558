"""The migration of a change log staged before decision 0012 (`_image`, the whole item on every
row) to the typed columns and the remainder `_rest`: `rebuild` on a large table, beside a first
load of the same rows.

For the `orders` sample at ``--items`` (default 1M), in one scratch lakehouse, each step a process
with a 1 GB driver heap (LAKEHOUSE_DRIVER_MEMORY=1g), wall clock with the JVM's start:

(a) floor: the typed read of every value of the export (bench/export_to_final.py's floor step);
(b) ``ddb-lakehouse sync --table orders EXPORT`` into a fresh lakehouse: the first load;
then, not timed, the staging and final tables rewritten as a version before decision 0012 left
them (``_image`` in place of ``_rest``, the item encoded from the columns: what that version
staged), a fingerprint of every row's values taken first;
(c) ``ddb-lakehouse rebuild --table orders``: the migration. Both tables must come back with
``_rest`` and without ``_image``, the final table with the same fingerprint (every row's typed
columns, ``_rest``, ``_operation``, ``_version`` and ``_source``) and as many rows.

No target: the issue asks for the cost in the docs (docs/tables-and-types.md); the ratios to (a)
and (b) are the figures.

Usage: .venv/bin/python bench/migration.py [--items 1000000]
Writes bench/results/migration.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import export_to_final
import results_file  # bench/ is on sys.path when a benchmark runs as a script

# The columns the fingerprint holds besides the typed ones: what the rows say, not when or by
# which batch a rebuild rewrote them.
KEPT = ("_rest", "_operation", "_version", "_source")


def to_older_form() -> None:
    """Run in its own process (``--to-older``): rewrite `orders`' staging and final tables with
    ``_image`` (the item, encoded from the columns and ``_rest``) in place of ``_rest``, in one
    overwrite commit each, through a scratch table (a table is not overwritten from its own
    scan); print the final table's fingerprint and row count as one JSON line."""
    from pyspark.sql import functions as F

    from ingestion.catalog import table_types
    from ingestion.dynamodb.tables import get_table
    from ingestion.schema import item_json
    from ingestion.spark.spark_config import build_spark

    spark = build_spark("bench migration: the older form")
    schema = table_types.stored_schema(spark, get_table("orders"))
    assert schema is not None, "orders has no kept types: did the sync run?"
    before = fingerprint(spark, "lake.lakehouse.orders")
    for namespace in ("staging", "lakehouse"):
        table = f"lake.{namespace}.orders"
        scratch = f"lake.{namespace}.orders_older_form"
        final = item_json.final_table_schema(schema, "orders")
        rows = item_json.with_staged_image(spark.table(table), final).drop("_rest")
        rows.writeTo(scratch).using("iceberg").createOrReplace()
        spark.sql(f"alter table {table} add column _image string")
        spark.sql(f"alter table {table} drop column _rest")
        columns = spark.table(table).columns
        spark.table(scratch).select(*columns).writeTo(table).overwrite(F.lit(True))
        spark.sql(f"drop table {scratch} purge")
    print(json.dumps(before))


def fingerprint(spark, table: str) -> dict:  # type: ignore[no-untyped-def]
    """Rows and the sum of every row's hash over the typed columns and ``KEPT``."""
    from pyspark.sql import functions as F

    frame = spark.table(table)
    columns = [c for c in frame.columns if not c.startswith("_") or c in KEPT]
    row = frame.agg(F.count(F.lit(1)), F.sum(F.xxhash64(*columns).cast("decimal(38,0)"))).first()
    return {"rows": row[0], "hash": str(row[1]), "columns": sorted(columns)}


def check_after() -> None:
    """Run in its own process (``--after``): both tables in the new form; print the final
    table's fingerprint as one JSON line."""
    from ingestion.spark.spark_config import build_spark

    spark = build_spark("bench migration: after")
    for namespace in ("staging", "lakehouse"):
        columns = spark.table(f"lake.{namespace}.orders").columns
        assert "_rest" in columns and "_image" not in columns, (namespace, columns)
    print(json.dumps(fingerprint(spark, "lake.lakehouse.orders")))


def last_json(command: list[str], env: dict[str, str]) -> dict:
    done = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(scratch: Path, items: int, log: Path) -> dict:
    from ingestion.samples import sample_exports

    project = export_to_final.project_copy(scratch)
    folder = sample_exports.write_samples(scratch / "exports", items, seed=1, tables=["orders"])[
        "orders"
    ]
    env = dict(export_to_final.step_environment(project), LAKEHOUSE_HOME=str(scratch / "home"))
    cli = [sys.executable, "-m", "ingestion.cli"]
    here, probe = str(export_to_final.HERE), str(Path(__file__).resolve())
    typed = scratch / "typed_schema.json"
    subprocess.run([sys.executable, here, "--infer", str(folder), str(typed)], env=env, check=True)
    floor_s, _ = export_to_final.timed(
        [sys.executable, here, "--floor", str(folder), str(typed)], env, log
    )
    sync_s, sync_rss = export_to_final.timed(
        [*cli, "sync", "--table", "orders", str(folder)], env, log
    )
    before = last_json([sys.executable, probe, "--to-older"], env)
    rebuild_s, rebuild_rss = export_to_final.timed([*cli, "rebuild", "--table", "orders"], env, log)
    after = last_json([sys.executable, probe, "--after"], env)
    assert before["rows"] == items, f"{before['rows']} rows before the rebuild, not {items}"
    assert after == before, f"the rebuild changed the final table: {before} -> {after}"
    return {
        "table": "orders",
        "items": items,
        "seconds": {"floor": floor_s, "first_load_sync": sync_s, "rebuild": rebuild_s},
        "rebuild_vs_first_load": round(rebuild_s / sync_s, 2),
        "rebuild_vs_floor": round(rebuild_s / floor_s, 2),
        "peak_driver_rss_mb": {"first_load_sync": sync_rss, "rebuild": rebuild_rss},
        "rows_equal": True,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--to-older", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--after", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.to_older:
        to_older_form()
        return 0
    if args.after:
        check_after()
        return 0
    scratch = Path(tempfile.mkdtemp(prefix="lakehouse-bench-migration-"))
    log = scratch.parent / f"{scratch.name}.log"
    try:
        figures = run(scratch, args.items, log)
        # Written before the scratch goes: this process's project is the copy inside it.
        results_file.write(
            "migration",
            {"driver_memory": "1g", **figures},
            f".venv/bin/python bench/migration.py --items {args.items}",
        )
    finally:
        os.environ.pop("LAKEHOUSE_PROJECT_DIR", None)
        subprocess.run(["rm", "-rf", str(scratch)], check=False)
    print(f"migration: log {log}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
