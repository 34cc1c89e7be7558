"""Apply cost against its floor, a plain Spark MERGE INTO, at several table sizes.

For each size N (default 1M, 5M and 10M `orders` items) one process, in a fresh lakehouse:

1. Set-up (timed for the record only): the orders sample's full export of N items synced into
   the final table (``ddb-lakehouse sync``: `orders`, in a copy of the project with the layout
   below); the final table copied into ``lake.bench.orders_floor`` (same partitioning,
   merge-on-read).
2. Two cases, one after the other, each 10,000 changes of existing orders:
   ``random``: 10,000 orders changed once, every tenth change a delete (an incremental export,
   NEW_AND_OLD_IMAGES: an export holds one line per item, its net change over the window);
   ``hot``: 1,000 orders changed 10 times each (10,000 stream changes in the change files the
   project's Lambda module writes; the latest per key decides), every tenth order's last change
   a delete. Hot keys arrive by the stream: an export never holds two lines of one item.
   Before them, not counted for the target, each case once more (``first random``, ``first hot``):
   the process's first tested apply of an export and of stream files, and its first MERGE INTO
   of a batch, which pay the JVM's and dbt's one-time costs (code compiled at its first use,
   dbt's first parse of the test nodes, the stream reader's first plan). A `watch` or another
   long-lived process pays them once; a `sync` process pays them every time, which
   ``--processes`` measures. Their figures are recorded beside the cases (``first_apply``, per
   case).
   The changed orders are drawn from the full export's files (DynamoDB JSON, as the cases write
   it), distinct across the cases.
   For each case, in the same warm process (bench/lakehouse.py: the commands, in-process):
   (b) the project's apply: ``ddb-lakehouse ingest`` of the export or the change files, then
       ``ddb-lakehouse merge`` (`dbt run`, `dbt test` scoped to the batch, the report), timed as
       one, as a long-lived process (`watch`) runs them: a merge there takes the final table's
       row count from the merge before it, where a `sync` process counts the rows afresh
       (``--processes`` measures that; figures before 2026-12-07 forgot the count here);
   (a) the floor: the latest change per key of the same batch, precomputed from the staged rows
       into a table (not timed), then one MERGE INTO the copy (delete, update, insert; no version
       guard, no tests, no report), timed.
   Then the copy and the final table are checked equal (keys and versions).
   Last, ``untested random`` and ``untested hot``: the same two cases staged by ``ingest`` and
   merged by dbt's own ``dbt run`` of the model on the project parsed beforehand (no `dbt test`:
   the project's ``merge`` always tests; the model finds its batches in SQL), each beside its own
   floor: a bound, not a target (no design of the tests takes the
   tested apply below it), recorded as ``cases_without_tests``.
   (c) the design's floor: what this design must pay beyond (a) even if every other statement
       cost nothing: (a), plus one append of the batch's staged rows (materialised first, so
       only the write and its commit are timed) to a copy of the change log (its schema), plus dbt's
       own time in the apply's `dbt run` and `dbt test` (each ``dbtRunner.invoke``'s wall time,
       dbt's own entry point, less the time its Spark statements took to run and fetch). A change
       log, a dbt merge and its dbt tests are the product's design: (c) / (a) above 2.0 says the
       target cannot be met on this design, whatever the code.

Ratios are (b) / (a) per case and size; growth is (b) at 10x the rows over (b). Targets (issue
53): (b) <= 2.0x (a); (b)'s growth per 10x rows <= 1.2x (a)'s own growth over the same sizes
(``target_growth_per_10x``: that factor; bench/report.py compares).

The final table (and the floor's copy) is laid out as the docs advise for its size: not bucketed
below a few GB (bench/buckets.py measured bucketing slower at 1M rows); ``--buckets N`` sets it.

**As processes** (``--processes``), as a user runs each, JVM start included, for each size N:
the full export synced into a fresh lakehouse (``ddb-lakehouse sync``, not timed), the final
table's item columns copied to a plain table (not timed), then one incremental export of 10,000
changes (8,000 updates, 1,000 inserts, 1,000 deletes; NEW_AND_OLD_IMAGES) and, timed:
(b) ``ddb-lakehouse sync`` of it (ingest, ``dbt run``, ``dbt test``, the report), against
(a) the floor: ``spark-submit`` of a plain job (``--plain-merge``) that reads the export's files
    with a typed schema (Spark's own, inferred beforehand, not timed), builds each column from
    its descriptor, takes the latest change per key and runs one MERGE INTO the plain table
    (delete, update, insert). The same Spark settings and catalog as the project's.
Then both tables are checked equal (keys, status, total). Target (issue: every apply at the cost
its design allows): (b) <= 1.5x (a).

Usage: .venv/bin/python bench/apply_cost.py [--sizes 1000000 5000000 10000000] [--buckets N]
       [--add] [--processes]
Writes bench/results/apply_cost.json (``--processes``: bench/results/apply_process.json).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import lakehouse
import project
import results_file  # bench/ is on sys.path when a benchmark runs as a script

HERE = Path(__file__).resolve()
CHANGES = 10_000
FLOOR = "lake.bench.orders_floor"
# Each case's start, in hours after the full export: its window's (an export) or its changes'. The
# untested random export's window starts where the random one's ended (hour 2) and ends at hour 5,
# its changes at hour 4: newer than the hot case's, which the floor (no version guard) needs.
HOURS = {
    "first random": 0,
    "first hot": 1,
    "random": 1,
    "hot": 3,
    "untested random": 4,
    "untested hot": 5,
}
WINDOW_STARTS = {"untested random": 2}
# Each case's seed, fixed: a case draws the same changes in every run.
SEEDS = {
    "first random": 5,
    "first hot": 6,
    "random": 7,
    "hot": 8,
    "untested random": 9,
    "untested hot": 10,
}
LATEST = "lake.bench.latest_changes"


def export_lines(images: list[dict], start, rng: random.Random) -> list[dict]:
    """``random``: one incremental-export line per order, every tenth a delete."""
    from ingestion.samples.items import STATUSES

    lines = []
    for i, image in enumerate(images):
        keys = {"customer_id": image["customer_id"], "order_id": image["order_id"]}
        micros = {"N": str(int((start + timedelta(seconds=1 + i % 3000)).timestamp() * 1e6))}
        line = {"Metadata": {"WriteTimestampMicros": micros}, "Keys": keys, "OldImage": image}
        if i % 10:
            line["NewImage"] = dict(image, status={"S": rng.choice(STATUSES)})
        lines.append(line)
    return lines


def stream_records(images: list[dict], start, rng: random.Random) -> list[dict]:
    """``hot``: ten stream changes per order, in time order, every tenth order's last a delete."""
    from ingestion.samples import stream as sample_stream
    from ingestion.samples.items import STATUSES

    records, sequence, second = [], 1, int(start.timestamp())
    for turn in range(10):
        for i, image in enumerate(images):
            keys = {"customer_id": image["customer_id"], "order_id": image["order_id"]}
            if turn == 9 and i % 10 == 0:
                new, event = None, "REMOVE"
            else:
                new, event = dict(image, status={"S": rng.choice(STATUSES)}), "MODIFY"
            records.append(
                sample_stream.stream_record("orders", event, keys, image, new, second, sequence)
            )
            image = new or image
            images[i] = image
            sequence += 1
        second += 1
    return records


def incremental_export(
    scratch: Path, lines: list[dict], start, rng: random.Random, window_start=None
) -> Path:
    """One incremental export of ``orders`` (NEW_AND_OLD_IMAGES) of the hour from ``start``
    (from ``window_start`` to the end of that hour, when given: the window chains on from the
    export before)."""
    from ingestion.samples import sample_exports

    return sample_exports.write_export(
        scratch / "exports",
        "orders",
        [iter(lines)],
        start + timedelta(hours=1, minutes=5),
        rng,
        window=(window_start or start, start + timedelta(hours=1), "NEW_AND_OLD_IMAGES"),
    )


def floor_merge(spark, batch: str) -> float:
    """(a): the batch's latest change per key, precomputed; then one plain MERGE INTO, timed."""
    from pyspark.sql import functions as F

    staged = spark.table("lake.staging.orders").where(F.col("_batch_id") == batch)
    # One batch's latest change of a key: the highest version, then the stream's sequence
    # (docs/exports-and-the-ledger.md); a batch never holds two changes equal in both.
    order = F.struct(F.col("_version"), F.coalesce(F.col("_sequence"), F.lit("")))
    latest = (
        staged.groupBy("customer_id", "order_id")
        .agg(F.max_by(F.struct(*staged.columns), order).alias("latest"))
        .select("latest.*")
        .withColumn("_inserted_batch_id", F.lit(batch))  # as the final table's (decision 0014)
    )
    latest.writeTo(LATEST).using("iceberg").createOrReplace()
    started = time.monotonic()
    spark.sql(
        f"merge into {FLOOR} as t using {LATEST} as c "
        "on t.customer_id = c.customer_id and t.order_id = c.order_id "
        "when matched and c._operation = 'delete' then delete "
        "when matched then update set * "
        "when not matched and c._operation != 'delete' then insert *"
    )
    return time.monotonic() - started


def staging_append_floor(spark, batch: str) -> float:
    """The batch's staged rows, materialised, appended to a table of the change log's schema:
    the write and commit that staging a batch cannot avoid, timed alone."""
    from pyspark.sql import functions as F

    staged = spark.table("lake.staging.orders").where(F.col("_batch_id") == batch)
    spark.sql(
        "create table if not exists lake.bench.staging_floor using iceberg "
        "as select * from lake.staging.orders where false"
    )
    rows = staged.localCheckpoint(eager=True)
    started = time.monotonic()
    rows.writeTo("lake.bench.staging_floor").append()
    return time.monotonic() - started


def new_batch(spark) -> str:
    """The one batch staged and not merged yet: in the change log, not in the merge log (the
    table ``status`` names)."""
    found = spark.sql(
        "select distinct _batch_id from lake.staging.orders where _batch_id not in "
        "(select batch_id from lake.staging.dynamodb_lakehouse_merges "
        "where table_name = 'orders')"
    ).collect()
    assert len(found) == 1, f"expected one batch to merge, found {len(found)}"
    return found[0][0]


def count_sql_time(spans: list[tuple[float, float]]) -> None:
    """Every Spark statement dbt runs, its execution and its fetch (dbt-spark's session cursor
    runs a SELECT lazily, at the fetch), appended to ``spans`` as (start, end)."""
    from dbt.adapters.spark import session

    def timed(method):
        def run(self, *args):
            began = time.monotonic()
            try:
                return method(self, *args)
            finally:
                spans.append((began, time.monotonic()))

        return run

    session.Cursor.execute = timed(session.Cursor.execute)
    session.Cursor.fetchall = timed(session.Cursor.fetchall)


def covered(spans: list[tuple[float, float]]) -> float:
    """The time the spans cover (statements on dbt test's threads overlap: counted once)."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(spans):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


def size_run(scratch: Path, size: int, buckets: int | None) -> dict:
    from dbt.cli.main import dbtRunner
    from pyspark.sql import functions as F

    from ingestion.samples import sample_exports
    from ingestion.sources.change_file_writer import write_batch
    from ingestion.spark.spark_config import build_spark

    project_dir = project.copy(scratch / "project", buckets)
    started = time.monotonic()
    folder = sample_exports.write_samples(scratch / "exports", size, seed=1, tables=["orders"])[
        "orders"
    ]
    generated_s = time.monotonic() - started
    spark = build_spark("bench apply cost")  # the session every command below shares
    started = time.monotonic()
    lakehouse.cli("sync", "--table", "orders", str(folder))  # its first build, with its tests
    baseline_s = time.monotonic() - started
    spark.sql("create namespace if not exists lake.bench")
    properties = ", ".join(
        f"'{r['key']}'='{r['value']}'"
        for r in spark.sql("show tblproperties lake.lakehouse.orders").collect()
        if r["key"].startswith(("write.", "format-version"))
    )
    started = time.monotonic()
    spark.sql(
        f"create table {FLOOR} using iceberg "
        + (f"partitioned by (bucket({buckets}, customer_id)) " if buckets else "")
        + f"tblproperties ({properties}) as select * from lake.lakehouse.orders"
    )
    copy_s = time.monotonic() - started
    rows = spark.table("lake.lakehouse.orders").count()

    # The dbt commands' own times (the rest of run_merge: batch choice, report, merge log), and
    # of each the time outside its SQL statements (dbt's own work: parse, graph, compile).
    dbt_times: list[tuple[str, float]] = []
    dbt_own: list[float] = []
    spans: list[tuple[float, float]] = []
    count_sql_time(spans)
    invoke = dbtRunner.invoke  # dbt's own entry point, which the project's merge calls

    def timed_invoke(self, args, **kwargs):
        began = time.monotonic()
        spans.clear()
        try:
            return invoke(self, args, **kwargs)
        finally:
            dbt_times.append((args[0], time.monotonic() - began))
            dbt_own.append(dbt_times[-1][1] - covered(spans))

    dbtRunner.invoke = timed_invoke
    start = lakehouse.export_time(folder)
    pool = export_images(spark, folder, CHANGES * len(HOURS), rows)
    cases = []
    for number, case in enumerate(HOURS):
        seed = SEEDS[case]
        rng = random.Random(seed)
        images = pool[number * CHANGES : (number + 1) * CHANGES]
        # Each export's window starts where the last one ended (a chain, or ingest refuses the
        # gap); each batch is newer than every earlier one, as the floor (no version guard)
        # assumes: the random export's window ends after the first hot case's stream changes.
        window_start = start + timedelta(hours=HOURS[case])
        dbt_times.clear()
        dbt_own.clear()
        if case.endswith("random"):
            lines = export_lines(images, window_start, rng)
            chained = (
                start + timedelta(hours=WINDOW_STARTS[case]) if case in WINDOW_STARTS else None
            )
            incremental = incremental_export(scratch, lines, window_start, rng, chained)
            began = time.monotonic()
            lakehouse.cli("ingest", "--table", "orders", str(incremental))
        else:
            records = stream_records(images[: CHANGES // 10], window_start, rng)
            location = scratch / f"stream-{number}"
            for first in range(0, len(records), 1000):  # files of 1,000 changes, as Lambda sends
                written, failed = write_batch(records[first : first + 1000], str(location))
                assert failed is None and written
            began = time.monotonic()
            lakehouse.cli("ingest", "--table", "orders", "--stream", str(location), "--settle", "0")
        ingest_s = time.monotonic() - began
        batch = new_batch(spark)  # not timed: the merge asks it again
        changes = spark.table("lake.staging.orders").where(F.col("_batch_id") == batch)
        keys = changes.select("customer_id", "order_id").distinct().count()
        staged = changes.count()
        floor_s = floor_merge(spark, batch)
        append_s = staging_append_floor(spark, batch)
        if case.startswith("untested"):
            where = ["--project-dir", str(project_dir), "--profiles-dir", str(project_dir)]
            where.append("--quiet")
            parsed = invoke(dbtRunner(), ["parse", *where]).result  # unpatched: not timed
        began = time.monotonic()
        if case.startswith("untested"):
            # No tests: dbt's own `dbt run` of the model, as a plain dbt user runs it (the
            # project's `merge` always tests), on the project parsed beforehand (not timed, as
            # the project's merge keeps its parse); plain dbt prints no counts.
            assert dbtRunner(manifest=parsed).invoke(["run", "--select", "orders", *where]).success
            merge_s = time.monotonic() - began
            counts = dict.fromkeys(("inserted", "updated", "deleted"))  # plain dbt prints none
        else:
            counts = lakehouse.merged(lakehouse.cli("merge", "--table", "orders"), "orders")
            merge_s = time.monotonic() - began
        final = spark.table("lake.lakehouse.orders").select("customer_id", "order_id", "_version")
        copy = spark.table(FLOOR).select("customer_id", "order_id", "_version")
        differ = final.exceptAll(copy).count() + copy.exceptAll(final).count()
        assert differ == 0, f"{case}: the floor's copy and the final table differ in {differ} rows"
        summary = dict(
            spark.table("lake.lakehouse.orders.snapshots")
            .orderBy(F.col("committed_at").desc())
            .first()["summary"]
        )
        apply_s = ingest_s + merge_s
        design_floor_s = floor_s + append_s + sum(dbt_own)
        cases.append(
            {
                "case": case,
                "changes": staged,
                "keys": keys,
                "floor_merge_seconds": round(floor_s, 1),
                "apply_seconds": round(apply_s, 1),
                "ratio_to_floor": round(apply_s / floor_s, 2),
                "ingest_seconds": round(ingest_s, 1),
                "merge_seconds": round(merge_s, 1),
                "dbt_seconds": {name: round(s, 1) for name, s in dbt_times},
                "dbt_own_seconds": {
                    name: round(own, 2) for (name, _), own in zip(dbt_times, dbt_own, strict=True)
                },
                "staging_append_floor_seconds": round(append_s, 2),
                "design_floor_seconds": round(design_floor_s, 1),
                "design_floor_ratio": round(design_floor_s / floor_s, 2),
                "inserted_updated_deleted": [
                    counts["inserted"],
                    counts["updated"],
                    counts["deleted"],
                ],
                "changed_partitions": summary.get("changed-partition-count"),
            }
        )
        print(f"apply_cost: {size:,} rows, {cases[-1]}", flush=True)
    first = {c["case"].split()[1]: c for c in cases if c["case"].startswith("first")}
    return {
        "table_rows": rows,
        "first_apply": first,
        "generated_seconds": round(generated_s, 1),
        "baseline_ingest_and_merge_seconds": round(baseline_s, 1),
        "floor_copy_seconds": round(copy_s, 1),
        "cases": [c for c in cases if c["case"] in ("random", "hot")],
        # The same apply with no `dbt test` (and so no tests' rows cached): what no design of
        # the tests can take below (docs/performance.md, issue 53's stop).
        "cases_without_tests": [c for c in cases if c["case"].startswith("untested")],
    }


PROCESS_UPDATES, PROCESS_INSERTS, PROCESS_DELETES = 8_000, 1_000, 1_000
PLAIN = "lake.bench.orders_plain"


def process_lines(images: list[dict], new_items: list[dict], start) -> list[dict]:
    """The process mode's incremental export: updates, deletes (the first ``PROCESS_DELETES`` of
    ``images``), inserts (``new_items``), each its own key, one line each."""
    from ingestion.samples.items import STATUSES

    lines = []
    for i, image in enumerate(images):
        keys = {"customer_id": image["customer_id"], "order_id": image["order_id"]}
        micros = {"N": str(int((start + timedelta(seconds=1 + i % 3000)).timestamp() * 1e6))}
        line = {"Metadata": {"WriteTimestampMicros": micros}, "Keys": keys, "OldImage": image}
        if i >= PROCESS_DELETES:
            changed = STATUSES[(STATUSES.index(image["status"]["S"]) + 1) % len(STATUSES)]
            line["NewImage"] = dict(image, status={"S": changed})
        lines.append(line)
    for i, item in enumerate(new_items):
        keys = {"customer_id": item["customer_id"], "order_id": item["order_id"]}
        micros = {"N": str(int((start + timedelta(seconds=1 + i % 3000)).timestamp() * 1e6))}
        lines.append({"Metadata": {"WriteTimestampMicros": micros}, "Keys": keys, "NewImage": item})
    return lines


def _column(path: str, kind, read) -> str:
    """Spark SQL building a column of type ``kind`` from the DynamoDB JSON value at ``path``,
    which Spark's reader typed ``read`` (a struct of descriptors, or None where no line had
    it): the plain job's decode. A descriptor no line had gives null."""
    from pyspark.sql.types import ArrayType, BinaryType, BooleanType, StringType, StructType

    def descriptor(name: str):
        if not isinstance(read, StructType) or name not in read.fieldNames():
            return None
        return read[name].dataType

    def of(name: str, sql: str) -> str:
        return sql if descriptor(name) is not None else f"cast(null as {kind.simpleString()})"

    if isinstance(kind, StringType):
        return of("S", f"{path}.S")
    if isinstance(kind, BooleanType):
        return of("BOOL", f"{path}.BOOL")
    if isinstance(kind, BinaryType):
        return of("B", f"unbase64({path}.B)")
    if isinstance(kind, StructType):
        given = descriptor("M")
        known = given.fieldNames() if isinstance(given, StructType) else []
        fields = ", ".join(
            f"'{f.name}', "
            + _column(
                f"{path}.M.`{f.name}`",
                f.dataType,
                given[f.name].dataType if f.name in known else None,
            )
            for f in kind.fields
        )
        return of("M", f"if({path}.M is null, null, named_struct({fields}))")
    if isinstance(kind, ArrayType):
        given = descriptor("L")
        element = given.elementType if isinstance(given, ArrayType) else None
        return of("L", f"transform({path}.L, e -> {_column('e', kind.elementType, element)})")
    return of("N", f"cast({path}.N as {kind.simpleString()})")  # numbers


def plain_merge_job(folder: Path, schema_file: Path) -> None:
    """(a) of ``--processes``, under ``spark-submit``: the typed read of the incremental export,
    each column built from its descriptor, the latest change per key, one MERGE INTO."""
    from pyspark.sql.types import StructType

    from ingestion.spark.spark_config import build_spark

    spark = build_spark("bench plain merge")
    schema = StructType.fromJson(json.loads(schema_file.read_text()))
    paths = lakehouse.export_data_files(folder)
    spark.read.schema(schema).json(paths).createOrReplaceTempView("export_lines")
    target = spark.table(PLAIN).schema
    new_image = schema["NewImage"].dataType
    known = new_image.fieldNames()
    keys = ("customer_id", "order_id")
    columns = ", ".join(
        f"coalesce(NewImage.{f.name}.S, Keys.{f.name}.S) as {f.name}"
        if f.name in keys
        else f"{_new_image_column(f, new_image, known)} as `{f.name}`"
        for f in target.fields
    )
    spark.sql(
        f"select {columns}, NewImage is null as deleted, "
        "cast(Metadata.WriteTimestampMicros.N as bigint) as version from export_lines"
    ).createOrReplaceTempView("changes")
    spark.sql(
        "select latest.* from (select max_by(struct(*), version) as latest from changes "
        "group by customer_id, order_id)"
    ).createOrReplaceTempView("latest")
    names = [f"`{f.name}`" for f in target.fields]
    spark.sql(
        f"merge into {PLAIN} as t using latest as c "
        "on t.customer_id = c.customer_id and t.order_id = c.order_id "
        "when matched and c.deleted then delete "
        f"when matched then update set {', '.join(f't.{n} = c.{n}' for n in names)} "
        f"when not matched and not c.deleted then insert ({', '.join(names)}) "
        f"values ({', '.join(f'c.{n}' for n in names)})"
    )


def process_setup(picked_out: Path, folder: Path, schema_out: Path) -> None:
    """Not timed, its own process after the full export's sync: the plain table (the final
    table's item columns), the images of the orders to change, and the typed schema of the
    incremental export's lines (written by the parent once the images are known: ``folder``
    is only read when ``schema_out`` is asked for)."""
    from ingestion.spark.spark_config import build_spark

    spark = build_spark("bench process setup")
    if schema_out.name != "-":
        schema_out.write_text(spark.read.json(lakehouse.export_data_files(folder)).schema.json())
        return
    final = spark.table("lake.lakehouse.orders")
    items = [f"`{c}`" for c in final.columns if not c.startswith("_")]
    spark.sql("create namespace if not exists lake.bench")
    properties = ", ".join(
        f"'{r['key']}'='{r['value']}'"
        for r in spark.sql("show tblproperties lake.lakehouse.orders").collect()
        if r["key"].startswith(("write.", "format-version"))
    )
    spark.sql(
        f"create or replace table {PLAIN} using iceberg tblproperties ({properties}) "
        f"as select {', '.join(items)} from lake.lakehouse.orders"
    )
    rows = final.count()
    changed = PROCESS_UPDATES + PROCESS_DELETES
    picked_out.write_text(json.dumps(export_images(spark, folder, changed, rows, seed=7)))


def process_check(out: Path) -> None:
    """Not timed: the final table and the plain table hold the same orders, value by value."""
    from ingestion.spark.spark_config import build_spark

    spark = build_spark("bench process check")
    plain = spark.table(PLAIN)
    final = spark.table("lake.lakehouse.orders").select(*plain.columns)
    differ = final.exceptAll(plain).count() + plain.exceptAll(final).count()
    out.write_text(json.dumps({"rows": final.count(), "differ": differ}))


def process_run(scratch: Path, size: int, buckets: int | None, log: Path) -> dict:
    """One size of ``--processes`` (module docstring)."""
    import export_to_final

    from ingestion.samples import sample_exports
    from ingestion.samples.items import order_item
    from ingestion.spark import spark_config

    copy = project.copy(scratch / "project", buckets)
    folder = sample_exports.write_samples(scratch / "exports", size, seed=1, tables=["orders"])[
        "orders"
    ]
    env = dict(export_to_final.step_environment(copy), LAKEHOUSE_HOME=str(scratch / "home"))
    env.pop("LAKEHOUSE_DRIVER_MEMORY")  # the profile's driver memory, as a user runs it
    cli = [sys.executable, "-m", "ingestion.cli"]
    began = time.monotonic()
    export_to_final.timed([*cli, "sync", "--table", "orders", str(folder)], env, log)
    baseline_s = time.monotonic() - began
    picked, schema = scratch / "picked.json", scratch / "typed_schema.json"
    here = [sys.executable, str(HERE)]
    subprocess.run([*here, "--process-setup", str(picked), str(folder), "-"], env=env, check=True)
    images = json.loads(picked.read_text())
    rng = random.Random(11)
    new_items = [order_item(size + i, rng) for i in range(PROCESS_INSERTS)]
    start = lakehouse.export_time(folder)
    incremental = incremental_export(scratch, process_lines(images, new_items, start), start, rng)
    subprocess.run(
        [*here, "--process-setup", str(picked), str(incremental), str(schema)], env=env, check=True
    )
    conf = spark_config.spark_conf()  # the profile's master and driver memory, as sync has them
    spark_submit = str(Path(sys.executable).parent / "spark-submit")
    plain = [spark_submit, "--master", conf.get("spark.master", "local[*]")]
    plain += ["--driver-memory", conf.get("spark.driver.memory", "2g"), str(HERE)]
    plain += ["--plain-merge", str(incremental), str(schema)]
    submit_env = dict(env, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    floor_s, floor_rss = export_to_final.timed(plain, submit_env, log)
    sync_s, sync_rss = export_to_final.timed(
        [*cli, "sync", "--table", "orders", str(incremental)], env, log
    )
    checked = scratch / "check.json"
    subprocess.run([*here, "--process-check", str(checked)], env=env, check=True)
    check = json.loads(checked.read_text())
    assert check["differ"] == 0, (
        f"the final table and the plain table differ in {check['differ']} rows"
    )
    return {
        "size": size,
        "changes": {
            "updates": PROCESS_UPDATES,
            "inserts": PROCESS_INSERTS,
            "deletes": PROCESS_DELETES,
        },
        "table_rows_after": check["rows"],
        "first_sync_seconds": round(baseline_s, 1),
        "plain_merge_job_seconds": floor_s,
        "sync_seconds": sync_s,
        "ratio_to_floor": round(sync_s / floor_s, 2),
        "peak_driver_rss_mb": {"plain_merge_job": floor_rss, "sync": sync_rss},
    }


def per_10x(runs: list[dict], case: str) -> list[float]:
    """(b)'s growth between consecutive sizes, scaled to 10x the rows (5M over 1M: ^(1/0.7))."""
    points = [
        (r["size"], c["apply_seconds"]) for r in runs for c in r["cases"] if c["case"] == case
    ]
    return [
        round((b / a) ** (1 / math.log10(m / n)), 2)
        for (n, a), (m, b) in zip(points, points[1:], strict=False)
    ]


def export_images(spark, folder: Path, count: int, rows: int, seed: int = 5) -> list[dict]:
    """``count`` distinct items of the full export in ``folder`` (of ``rows`` items), drawn at
    random (``seed``), as DynamoDB JSON: the images the cases change. Read from the export's
    files, as a user's own job would (the final table holds typed columns, not DynamoDB JSON);
    a case's change of an item an earlier case changed overwrites it whole, as DynamoDB's
    PutItem does."""
    from pyspark.sql import functions as F

    lines = spark.read.text(lakehouse.export_data_files(folder))
    picked = (
        lines.sample(min(1.0, (2 * count + 100) / rows), seed=seed)  # surely at least ``count``
        .orderBy(F.rand(seed=seed))  # the sample is in file order: spread it over all
        .limit(count)
        .collect()
    )
    images = [json.loads(r["value"])["Item"] for r in picked]
    assert len(images) == count, f"the export gave {len(images)} items, not {count}"
    return images


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 5_000_000, 10_000_000])
    parser.add_argument(
        "--buckets",
        type=project.buckets_argument,
        default=None,
        help="the final table's buckets (default none: the docs' advice below a few GB, "
        "bench/buckets.py)",
    )
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)  # one size, in its process
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument(
        "--add",
        action="store_true",
        help="keep the sizes of the last results file that this run does not measure (sizes "
        "measured in another run of the same code: both commands are recorded)",
    )
    parser.add_argument("--processes", action="store_true", help="the apply as processes (above)")
    parser.add_argument("--plain-merge", nargs=2, type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--process-setup", nargs=3, type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--process-check", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.plain_merge:
        plain_merge_job(*args.plain_merge)
        return 0
    if args.process_setup:
        process_setup(*args.process_setup)
        return 0
    if args.process_check:
        process_check(args.process_check)
        return 0
    if args.processes:
        return processes(args)
    if args.size:
        scratch = Path(os.environ["LAKEHOUSE_HOME"]).parent
        args.out.write_text(json.dumps(size_run(scratch, args.size, args.buckets)))
        return 0
    runs = []
    for size in args.sizes:
        scratch = Path(tempfile.mkdtemp(prefix=f"lakehouse-bench-apply-{size}-"))
        env = dict(os.environ, LAKEHOUSE_HOME=str(scratch / "home"), SPARK_LOCAL_IP="127.0.0.1")
        out = scratch / "run.json"
        command = [sys.executable, str(HERE), "--size", str(size), "--out", str(out)]
        command += ["--buckets", str(args.buckets or "none")]
        subprocess.run(command, env=env, check=True)
        runs.append({"size": size, **json.loads(out.read_text())})
        subprocess.run(["rm", "-rf", str(scratch)], check=False)
    command = (
        f".venv/bin/python bench/apply_cost.py --sizes {' '.join(map(str, args.sizes))} "
        f"--buckets {args.buckets or 'none'}"
    )
    if args.add:
        last = json.loads((results_file.folder() / "apply_cost.json").read_text())
        kept = [r for r in last["runs"] if r["size"] not in args.sizes]
        runs = sorted(kept + runs, key=lambda r: r["size"])
        command = f"{last['command']}; then {command} --add"
    growth = {case: per_10x(runs, case) for case in ("random", "hot")}
    results_file.write(
        "apply_cost",
        {
            "table": "orders",
            "buckets": args.buckets,
            "target_ratio_to_floor": 2.0,
            "target_growth_per_10x": 1.2,
            "growth_between_sizes": growth,
            "runs": runs,
        },
        command,
    )
    return 0


def processes(args: argparse.Namespace) -> int:
    """``--processes``: one run per size, each in a fresh scratch folder; apply_process.json."""
    runs, own = [], os.environ.get("LAKEHOUSE_PROJECT_DIR")
    for size in args.sizes:
        scratch = Path(tempfile.mkdtemp(prefix=f"lakehouse-bench-process-{size}-"))
        log = scratch / "steps.log"
        try:
            runs.append(process_run(scratch, size, args.buckets, log))
        except BaseException:
            print(f"apply_cost --processes: the steps' output is in {log}", file=sys.stderr)
            raise
        print(f"apply_cost --processes: {runs[-1]}", flush=True)
        subprocess.run(["rm", "-rf", str(scratch)], check=False)
        # project.copy made the scratch copy this process's project: this checkout's again
        os.environ["LAKEHOUSE_PROJECT_DIR"] = own or str(project.ROOT)
    command = (
        f".venv/bin/python bench/apply_cost.py --processes --sizes "
        f"{' '.join(map(str, args.sizes))} --buckets {args.buckets or 'none'}"
    )
    results_file.write(
        "apply_process",
        {"table": "orders", "buckets": args.buckets, "target_ratio_to_floor": 1.5, "runs": runs},
        command,
    )
    return 0


def _new_image_column(field: Any, new_image: Any, known: Any) -> str:
    """The column of ``field`` read from the stream line's NewImage (the floor's decode)."""
    found = new_image[field.name].dataType if field.name in known else None
    return _column(f"NewImage.`{field.name}`", field.dataType, found)


if __name__ == "__main__":
    raise SystemExit(main())
