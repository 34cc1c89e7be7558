"""Where a `watch` tick's time goes, beside its floor, in one run: the profile behind the freshness
figures (bench/freshness.py).

Sets up ``--tables`` stream tables as bench/freshness.py does (`books`, `hot_02`...), then, in
this one process and SparkSession, writes one second of changes (``--rate`` a second in total,
one change file per table) and runs one tick of all tables, ``--ticks`` times. The last ticks
(all but the first, a warm-up) are profiled with cProfile: the wall time of each step a tick
takes, per table, and dbt's own time per model (target/run_results.json).

Then each statement dbt ran for the last tick's models (taken from its log: the view of the
changes, the `describe`s, the `max(_version)` queries, the MERGE) is run again directly in the
same session, three rounds, the last reported: how much of a model's time is its SQL, not dbt.

The floor, measured after in the same process: per table one Spark job that reads the same
number of changes from a JSON file with a typed schema and appends them to an Iceberg table,
and one `MERGE INTO` (delete, update, insert) of them into a second Iceberg table of 500 rows.
That is the least a tick can do with a staging change log and a final table.

Usage: .venv/bin/python bench/tick_profile.py [--tables 10] [--ticks 4] [--rate 50]
       [--stats FILE]  (FILE: the raw cProfile stats of the profiled ticks, for pstats)
Writes bench/results/tick_profile.json.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import re
import tempfile
import time
from pathlib import Path

import freshness  # bench/ is on sys.path when a benchmark runs as a script
import project
import results_file

# (label, the function whose cumulative time it is): the steps of ingestion.jobs.watch.tick.
STEPS = [
    ("tick", "ingestion/jobs/watch.py", "tick"),
    ("ingest (all of it)", "ingestion/staging/streams.py", "ingest_stream"),
    ("  decode plan (typed columns)", "ingestion/schema/typed_rows.py", "transform"),
    ("  drift report", "ingestion/staging/drift.py", "drift_report"),
    ("  stored types", "ingestion/catalog/table_types.py", "stored_document"),
    ("  files to stage", "ingestion/staging/streams.py", "_classified"),
    ("  ledger reads", "ingestion/catalog/table.py", "ledger"),
    ("merge (all of it)", "ingestion/merge/runner.py", "run_merge"),
    ("  dbt run", "ingestion/merge/runner.py", "_dbt_run"),
    ("  counts", "ingestion/merge/merge_counts.py", "commit_counts"),
    ("  drift adoption check", "ingestion/maintenance/adopt.py", "adopt_before_merge"),
    ("  batches to merge", "ingestion/catalog/table.py", "new_batches"),
    ("  snapshot lookups", "ingestion/catalog/table.py", "snapshot"),
    ("  merge log record", "ingestion/catalog/merge_log.py", "record_merged"),
]


def cumulative(stats: pstats.Stats, path: str, function: str) -> float:
    found = 0.0
    # cProfile counts a recursive function's time once, at its outermost call
    for (file, _, name), (_, _, _, cum, _) in stats.stats.items():  # type: ignore[attr-defined]
        if file.endswith(path) and name == function:
            found += cum
    return found


STAMP = re.compile(r"^\d\d:\d\d:\d\d\.\d+ \[")
KINDS = (
    ("create", "view of the changes"),
    ("describe", "describe"),
    ("select max", "max(_version)"),
    ("merge", "merge"),
)


def last_statements(log: Path) -> dict[str, list[str]]:
    """Per model, the statements of its last run in dbt's log (from its view to its MERGE)."""
    lines, found, i = log.read_text().splitlines(), {}, 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if '/* {"app": "dbt"' not in line or "On model." not in line:
            continue
        model = line.split("On model.", 1)[1].split(":", 1)[0].rsplit(".", 1)[-1]
        body = [line.split("*/", 1)[1]]
        while i < len(lines) and not STAMP.match(lines[i]):
            body.append(lines[i])
            i += 1
        sql = "\n".join(body).strip()
        if sql.lower().startswith("create or replace temporary view"):
            found[model] = [sql]
        elif model in found:
            found[model].append(sql)
    return found


def model_sql(spark, log: Path) -> dict[str, float]:
    """Seconds per model of each kind of statement, run directly (the last of three rounds), and
    of the changes alone (a count of the view)."""
    statements = last_statements(log)
    for _ in range(3):
        took = {label: 0.0 for _, label in KINDS}
        for sqls in statements.values():
            for sql in sqls:
                label = next((lb for start, lb in KINDS if sql.lower().startswith(start)), None)
                if label is not None:
                    started = time.monotonic()
                    spark.sql(sql).collect()
                    took[label] += time.monotonic() - started
    started = time.monotonic()
    for model in statements:
        spark.sql(f"select count(*) from {model}__dbt_tmp").collect()
    took["the changes alone (count of the view)"] = time.monotonic() - started
    return {label: round(value / max(1, len(statements)), 3) for label, value in took.items()}


def floor(spark, tables: int, changes: int, ticks: int) -> float:
    """Seconds per tick of the floor (module docstring), the first tick a warm-up."""
    spark.sql("create namespace if not exists lake.floor")
    for t in range(tables):
        spark.sql(
            f"create table lake.floor.s{t} (id string, price double, v bigint, op string) using "
            f"iceberg"
        )
        spark.sql(
            f"create table lake.floor.f{t} (id string, price double, v bigint) using iceberg "
            f"tblproperties ('write.delete.mode'='merge-on-read', "
            f"'write.update.mode'='merge-on-read', 'write.merge.mode'='merge-on-read')"
        )
        spark.sql(f"insert into lake.floor.f{t} select concat('k', id), 1.0, 0 from range(500)")
    source = Path(tempfile.mkdtemp(prefix="floor-"))
    took = []
    for tick in range(ticks):
        for t in range(tables):
            lines = (
                json.dumps(
                    {
                        "id": f"k{(i * 7 + tick) % 600}",
                        "price": 2.0,
                        "v": tick * 1000 + i,
                        "op": "D" if i % 20 == 0 else "U",
                    }
                )
                for i in range(changes)
            )
            (source / f"t{t}.json").write_text("\n".join(lines))
        started = time.monotonic()
        for t in range(tables):
            read = spark.read.schema("id string, price double, v bigint, op string")
            read.json(str(source / f"t{t}.json")).writeTo(f"lake.floor.s{t}").append()
            spark.sql(f"""merge into lake.floor.f{t} f
                using (select * from lake.floor.s{t} where v >= {tick * 1000}) s on f.id = s.id
                when matched and s.op = 'D' then delete
                when matched then update set price = s.price, v = s.v
                when not matched and s.op != 'D' then
                    insert (id, price, v) values (s.id, s.price, s.v)""")
        took.append(time.monotonic() - started)
    return sum(took[1:]) / max(1, len(took) - 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tables", type=int, default=10)
    parser.add_argument("--ticks", type=int, default=4, help="ticks, the first a warm-up")
    parser.add_argument("--rate", type=int, default=50, help="changes a second, in total")
    parser.add_argument("--stats", type=Path, help="also write the raw cProfile stats there")
    args = parser.parse_args(argv)
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    scratch = Path(tempfile.mkdtemp(prefix="lakehouse-bench-"))
    os.environ["LAKEHOUSE_HOME"] = str(scratch / "home")
    copy = project.copy(scratch / "project")
    names = freshness.hot_tables(args.tables)
    freshness.set_up(scratch, names, 500)

    from ingestion.dynamodb.tables import get_table
    from ingestion.jobs import watch as watching
    from ingestion.spark.spark_config import build_spark

    spark = build_spark("bench tick profile")
    tables = [get_table(name) for name in names]
    location = scratch / "streams"
    options = watching.WatchOptions(
        stream=str(location), interval=0, settle=0, maintain_every=0, dbt_artifacts=True
    )  # run_results.json: dbt's own time per model
    writer = argparse.Namespace(rate=args.rate, seconds=1, items=500)
    progress, profile, seconds, dbt_models = watching.Progress(), cProfile.Profile(), [], []
    for number in range(1, args.ticks + 1):
        freshness.write_changes(location, names, writer)
        started = time.monotonic()
        if number > 1:
            profile.enable()
        done = watching.tick(spark, tables, options, number, progress)
        profile.disable()
        assert not [t.error for t in done if t.error], done
        if number > 1:
            seconds.append(time.monotonic() - started)
            run = json.loads((copy / "target" / "run_results.json").read_text())
            dbt_models += [r["execution_time"] for r in run["results"]]
    profiled = len(seconds)
    stats = pstats.Stats(profile)
    if args.stats:
        stats.dump_stats(str(args.stats))
    per_table = len(tables) * profiled
    steps = {
        label: round(cumulative(stats, path, function) / per_table, 3)
        for label, path, function in STEPS
    }
    sql_only = model_sql(spark, copy / "logs" / "dbt.log")
    floor_tick = floor(spark, len(tables), args.rate // len(tables), args.ticks)
    tick_seconds = sum(seconds) / profiled
    figures = {
        "tables": len(tables),
        "changes_per_table_per_tick": args.rate // len(tables),
        "ticks_profiled": profiled,
        "tick_s": round(tick_seconds, 2),
        "per_table_s": steps,
        "dbt_model_execution_mean_s": round(sum(dbt_models) / max(1, len(dbt_models)), 3),
        "model_sql_run_directly_per_model_s": sql_only,
        "floor_tick_s": round(floor_tick, 2),
        "floor_per_table_s": round(floor_tick / len(tables), 3),
        "tick_vs_floor": round(tick_seconds / floor_tick, 2),
    }
    results_file.write(
        "tick_profile",
        figures,
        f".venv/bin/python bench/tick_profile.py --tables {args.tables} --ticks {args.ticks} "
        f"--rate {args.rate}",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
