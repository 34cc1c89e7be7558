"""A full export to a queryable final table, step by step, each step its own process.

For each table (the `orders` sample, nested, and `flat`, ten scalar attributes) and size N
(default 1M and 5M items): one full export written (not timed), a copy of the project (so that
detected schema files land in it, not in the repository), then, as separate processes, wall
clock with the JVM's start, every one with a 1 GB driver heap (LAKEHOUSE_DRIVER_MEMORY=1g):

(a) floor:  Spark reads the export's files with an explicit typed schema (the export's own,
            inferred beforehand and not timed) and builds every value of every item
            (``select Item.*``, ``noop`` write): the decode no pipeline avoids;
(b) ``ddb-lakehouse detect-schema``;
(c) ``ddb-lakehouse ingest`` with no schema file (detection included);
(d) ``ddb-lakehouse merge`` (dbt run + dbt test: the first build);
(e) ``ddb-lakehouse sync`` of the same export into a fresh lakehouse, no schema file;
(f) the design's floor: what a change log and a final table cost even if everything else cost
    nothing, in one process: the floor's typed read (with each line's text kept as the row's
    ``_image``, as staging keeps the raw item), each top-level value unwrapped from its type
    descriptor, written once as an Iceberg table with staging's table properties (zstd
    Parquet), then the final table created from it (``create table ... as select`` of the
    typed columns: the first build's copy); no decode of nested values, no detection, no
    checks, no ledger, no dbt, no tests. And (g), the same without ``_image``, read as (a) reads.
    (f) / (a) above 2.0 says P1 cannot be met on this design (a change log that keeps the raw
    item, and a final table), whatever the code; (g) says what a cheaper image could win.

Targets (issue: export to queryable table faster than AWS's own sample), as ratios to (a) of the
same run: detect <= 1.0x, ingest <= 2.0x, sync <= 2.0x. The final table is checked to hold N rows.

After the sync, the Parquet bytes per item of the staging change log and of the final table
(their live data files; the change log's size is a target of the typed change log's issue).

Each step's peak driver memory: the largest resident set (VmHWM) of the step's Java process,
sampled every half second from /proc (the heap inside it capped at 1 GB; a step that needed more
would fail, and the run with it).

Usage: .venv/bin/python bench/export_to_final.py [--sizes 1000000 5000000] [--tables orders flat]
       [--add]
Writes bench/results/export_to_final.json.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import lakehouse
import project
import results_file  # bench/ is on sys.path when a benchmark runs as a script

HERE = Path(__file__).resolve()
ROOT = HERE.parent.parent
TARGETS = {"detect": 1.0, "ingest": 2.0, "sync": 2.0}
FILES = 16  # data files per export, as AWS writes a table of this size


def flat_item(i: int, rng: random.Random) -> dict:
    return {
        "id": {"S": f"item-{i:09d}"},
        "name": {"S": f"name {rng.randrange(10**6)}"},
        "category": {"S": rng.choice(["a", "b", "c", "d"])},
        "amount": {"N": f"{rng.randrange(10**6) / 100:.2f}"},
        "quantity": {"N": str(rng.randrange(1, 100))},
        "score": {"N": str(rng.randrange(-(10**9), 10**9))},
        "active": {"BOOL": rng.random() < 0.5},
        "created_at": {"S": f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}T10:00:00Z"},
        "note": {"S": "x" * rng.randrange(0, 40)},
        "updated": {"N": str(1_700_000_000 + i)},
    }


def write_flat(out: Path, items: int) -> Path:
    from ingestion.samples import sample_exports

    rng = random.Random(1)

    def part(k: int) -> Iterator[dict]:
        for i in range(k, items, FILES):
            yield {"Item": flat_item(i, rng)}

    return sample_exports.write_export(
        out, "flat", [part(k) for k in range(FILES)], sample_exports.BASE_TIME, rng
    )


def project_copy(scratch: Path) -> Path:
    """The project, with a `flat` table configured and no schema files (detection runs)."""
    copy = project.copy(scratch / "project", orders_buckets=None)  # as the docs advise < 1 GB
    # A process of its own: a command pins the environment its children share (the project's
    # conf folder among it), which must not outlive this run's copy in the benchmark's process.
    add = [sys.executable, "-m", "ingestion.cli", "add-table", "flat", "--partition-key", "id:S"]
    subprocess.run(add, env=step_environment(copy), check=True, capture_output=True)
    return copy


def floor_process(folder: Path, schema_file: Path) -> None:
    """(a), run in its own process: the typed read of every value, nothing written."""
    from pyspark.sql.types import StructType

    from ingestion.spark.spark_config import build_spark

    spark = build_spark("bench floor")
    schema = StructType.fromJson(json.loads(schema_file.read_text()))
    paths = lakehouse.export_data_files(folder)
    frame = spark.read.schema(schema).json(paths).where("Item is not null").select("Item.*")
    frame.write.format("noop").mode("overwrite").save()


def design_floor_process(folder: Path, schema_file: Path, image: bool) -> None:
    """(f) and (g), in their own process: the typed read, the staging-like table (with each
    line's text as ``_image`` for (f)), the final table copied from it. A top-level attribute of
    one type descriptor is written as its value (``Item.total.N`` as ``total``), as staging
    writes a column, not the descriptor's wrapper. (g) reads as the floor does (Spark's JSON
    reader); (f) reads the lines as text to keep them, then parses them. Prints the two parts'
    seconds (``design floor parts: READ_AND_STAGE COPY``)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    from ingestion.spark.spark_config import build_spark

    # The floor of staging's design writes with staging's own table properties: the one import
    # of an internal a benchmark keeps (tests/bench/test_bench_entry_points.py says why).
    from ingestion.staging.staging_table import TABLE_PROPERTIES

    spark = build_spark("bench design floor")
    schema = StructType.fromJson(json.loads(schema_file.read_text()))
    paths = lakehouse.export_data_files(folder)
    started = time.monotonic()
    if image:
        lines = spark.read.text(paths)
        parsed = lines.select(
            F.from_json("value", schema).alias("line"), F.col("value").alias("_image")
        )
        parsed = parsed.select("line.*", "_image")
    else:
        parsed = spark.read.schema(schema).json(paths)
    item = schema["Item"].dataType
    assert isinstance(item, StructType)
    columns = []
    for attribute in item.fields:
        value = attribute.dataType
        one = isinstance(value, StructType) and len(value.fields) == 1
        inner = f".`{value.fields[0].name}`" if one else ""  # type: ignore[union-attr]
        path = f"Item.`{attribute.name}`" + inner
        columns.append(F.col(path).alias(attribute.name))
    rows = parsed.where("Item is not null").select(*columns, *(["_image"] if image else []))
    spark.sql("create namespace if not exists lake.bench")
    writer = rows.writeTo("lake.bench.staging_floor").using("iceberg")
    for key, value in TABLE_PROPERTIES.items():
        writer = writer.tableProperty(key, value)
    writer.createOrReplace()
    staged = time.monotonic()
    typed = ", ".join(f"`{name}`" for name in rows.columns if name != "_image")
    spark.sql(
        "create or replace table lake.bench.final_floor using iceberg tblproperties "
        "('format-version'='2', 'write.parquet.compression-codec'='zstd') "
        f"as select {typed} from lake.bench.staging_floor"
    )
    print(f"design floor parts: {staged - started:.1f} {time.monotonic() - staged:.1f}", flush=True)


def infer_schema(folder: Path, out: Path) -> None:
    """The export's own typed schema, inferred by Spark from every line (not timed)."""
    from ingestion.spark.spark_config import build_spark

    spark = build_spark("bench infer")
    out.write_text(spark.read.json(lakehouse.export_data_files(folder)).schema.json())


def _descendants(root: int) -> list[int]:
    """Processes below ``root`` (from /proc's parent links)."""
    parents: dict[int, int] = {}
    for status in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = status.read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        parents[int(status.parent.name)] = int(fields[1])
    found, frontier = [], [root]
    while frontier:
        children = [pid for pid, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


def _peak_java_rss_mb(pids: list[int]) -> float:
    """The largest peak resident set (VmHWM) of the Java processes among ``pids``, in MB."""
    peak = 0.0
    for pid in pids:
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() != "java":
                continue
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        line = next((x for x in status.splitlines() if x.startswith("VmHWM:")), None)
        if line:
            peak = max(peak, int(line.split()[1]) / 1024)
    return peak


def timed(args: list[str], env: dict[str, str], log: Path) -> tuple[float, float]:
    """Run ``args``; its wall clock and the peak resident set of its driver JVM (MB), sampled
    every half second from /proc (the heap inside it is capped by LAKEHOUSE_DRIVER_MEMORY)."""
    began = time.monotonic()
    peak = 0.0
    with log.open("a") as sink:
        sink.write(f"\n$ {' '.join(args)}\n")
        sink.flush()
        process = subprocess.Popen(args, env=env, stdout=sink, stderr=subprocess.STDOUT)
        while process.poll() is None:
            # the process itself too: spark-submit execs its JVM in the same process
            peak = max(peak, _peak_java_rss_mb([process.pid, *_descendants(process.pid)]))
            time.sleep(0.5)
    seconds = time.monotonic() - began
    if process.returncode != 0:
        raise SystemExit(
            f"export_to_final: `{' '.join(args)}` exited {process.returncode}; see {log}"
        )
    return round(seconds, 1), round(peak)


def final_rows(env: dict[str, str], table: str) -> int:
    code = (
        "from ingestion.spark.spark_config import build_spark;"
        f"print(build_spark('bench rows').table('lake.lakehouse.{table}').count())"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    return int(out.stdout.strip().splitlines()[-1])


def parquet_bytes(env: dict[str, str], table: str) -> dict[str, int]:
    """The data files' bytes of the staging change log and the final table (Iceberg's ``files``
    metadata table: the live files of the current snapshot)."""
    code = (
        "from ingestion.spark.spark_config import build_spark;"
        "s = build_spark('bench bytes');"
        f"print(*(s.sql(f'select coalesce(sum(file_size_in_bytes), 0) from "
        f"lake.{{n}}.{table}.files')"
        ".first()[0] for n in ('staging', 'lakehouse')))"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    staging, final = map(int, out.stdout.strip().splitlines()[-1].split())
    return {"staging": staging, "final": final}


def write_export(scratch: Path, table: str, items: int) -> Path:
    """One full export of ``items`` items of ``table`` (``flat`` or a sample table)."""
    from ingestion.samples import sample_exports

    if table == "flat":
        return write_flat(scratch / "exports", items)
    return sample_exports.write_samples(scratch / "exports", items, seed=1, tables=[table])[table]


def step_environment(project: Path) -> dict[str, str]:
    """Every step's environment: a 1 GB driver heap, the project copy, this checkout's code."""
    return dict(
        os.environ,
        SPARK_LOCAL_IP="127.0.0.1",
        LAKEHOUSE_DRIVER_MEMORY="1g",
        LAKEHOUSE_PROJECT_DIR=str(project),
        PYTHONPATH=str(ROOT),
    )


def run(scratch: Path, table: str, items: int, log: Path) -> dict:
    project = project_copy(scratch)
    started = time.monotonic()
    folder = write_export(scratch, table, items)
    generated_s = time.monotonic() - started
    raw_mb = sum(len(gzip.open(p).read()) for p in (folder / "data").glob("*.json.gz")) / 2**20
    base = step_environment(project)
    cli = [sys.executable, "-m", "ingestion.cli"]
    schema_file = project / "schemas" / f"{table}.json"
    shutil.rmtree(project / "schemas", ignore_errors=True)
    (project / "schemas").mkdir()
    typed = scratch / "typed_schema.json"
    env = dict(base, LAKEHOUSE_HOME=str(scratch / "home-a"))
    subprocess.run(
        [sys.executable, str(HERE), "--infer", str(folder), str(typed)], env=env, check=True
    )
    steps: dict[str, tuple[float, float]] = {
        "floor": timed([sys.executable, str(HERE), "--floor", str(folder), str(typed)], env, log),
        "design_floor": timed(
            [sys.executable, str(HERE), "--design-floor", str(folder), str(typed), "image"],
            env,
            log,
        ),
        "design_floor_no_image": timed(
            [sys.executable, str(HERE), "--design-floor", str(folder), str(typed), "none"], env, log
        ),
        "detect": timed([*cli, "detect-schema", "--table", table, str(folder)], env, log),
    }
    assert schema_file.exists(), f"detect-schema wrote no {schema_file}"
    schema_file.unlink()
    env = dict(base, LAKEHOUSE_HOME=str(scratch / "home-b"))
    steps["ingest"] = timed([*cli, "ingest", "--table", table, str(folder)], env, log)
    steps["merge"] = timed([*cli, "merge", "--table", table], env, log)
    assert final_rows(env, table) == items
    schema_file.unlink(missing_ok=True)  # types are kept with the staging table, not in a file
    env = dict(base, LAKEHOUSE_HOME=str(scratch / "home-c"))
    steps["sync"] = timed([*cli, "sync", "--table", table, str(folder)], env, log)
    assert final_rows(env, table) == items
    stored = parquet_bytes(env, table)
    figures = {step: seconds for step, (seconds, _) in steps.items()}
    floor = figures["floor"]
    return {
        "table": table,
        "items": items,
        "raw_mb": round(raw_mb),
        "generated_seconds": round(generated_s, 1),
        "seconds": figures,
        "ratio_to_floor": {k: round(v / floor, 2) for k, v in figures.items() if k != "floor"},
        "peak_driver_rss_mb": {step: rss for step, (_, rss) in steps.items()},
        "parquet_bytes_per_item": {k: round(v / items, 1) for k, v in stored.items()},
    }


def design_floor_rounds(scratch: Path, table: str, items: int, rounds: int, log: Path) -> dict:
    """(a), (f) and (g) only, interleaved ``rounds`` times on one export (``--rounds``): the
    design's floor against the floor, each a process, as in ``run``."""
    project = project_copy(scratch)
    folder = write_export(scratch, table, items)
    env = dict(step_environment(project), LAKEHOUSE_HOME=str(scratch / "home"))
    typed = scratch / "typed_schema.json"
    subprocess.run(
        [sys.executable, str(HERE), "--infer", str(folder), str(typed)], env=env, check=True
    )
    done = []
    for _ in range(rounds):
        step = {
            "floor": timed(
                [sys.executable, str(HERE), "--floor", str(folder), str(typed)], env, log
            )[0]
        }
        for name, image in (("design_floor", "image"), ("design_floor_no_image", "none")):
            step[name] = timed(
                [sys.executable, str(HERE), "--design-floor", str(folder), str(typed), image],
                env,
                log,
            )[0]
        done.append(step)
        print(f"export_to_final --rounds: {table} {items}: {step}", flush=True)
    parts = [
        line.split(": ")[1]
        for line in log.read_text().splitlines()
        if line.startswith("design floor parts")
    ]
    return {"table": table, "items": items, "rounds": done, "parts_s": parts}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 5_000_000])
    parser.add_argument("--tables", nargs="+", default=["orders", "flat"])
    parser.add_argument("--floor", nargs=2, type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--infer", nargs=2, type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--design-floor", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument(
        "--rounds",
        type=int,
        help="only the floor and the design's floors, this many interleaved rounds per table and "
        "size; writes bench/results/design_floor.json",
    )
    parser.add_argument(
        "--add",
        action="store_true",
        help="keep the (table, size) runs of the last results file that this run does not "
        "measure (measured by another run of the same code: both commands are recorded)",
    )
    args = parser.parse_args(argv)
    if args.floor:
        floor_process(*args.floor)
        return 0
    if args.infer:
        infer_schema(*args.infer)
        return 0
    if args.design_floor:
        folder, schema_file, image = args.design_floor
        design_floor_process(Path(folder), Path(schema_file), image == "image")
        return 0
    if args.rounds:
        measured = []
        for table in args.tables:
            for items in args.sizes:
                scratch = Path(tempfile.mkdtemp(prefix=f"lakehouse-bench-df-{table}-{items}-"))
                try:
                    log = scratch.parent / f"{scratch.name}.log"
                    measured.append(design_floor_rounds(scratch, table, items, args.rounds, log))
                finally:
                    os.environ.pop("LAKEHOUSE_PROJECT_DIR", None)
                    shutil.rmtree(scratch, ignore_errors=True)
        results_file.write(
            "design_floor",
            {"target_ratio_to_floor": TARGETS["sync"], "driver_memory": "1g", "runs": measured},
            f".venv/bin/python bench/export_to_final.py --sizes {' '.join(map(str, args.sizes))} "
            f"--tables {' '.join(args.tables)} --rounds {args.rounds}",
        )
        return 0
    runs = []
    for table in args.tables:
        for items in args.sizes:
            scratch = Path(tempfile.mkdtemp(prefix=f"lakehouse-bench-e2f-{table}-{items}-"))
            log = scratch.parent / f"{scratch.name}.log"
            try:
                runs.append(
                    {**run(scratch, table, items, log), "measured": results_file.measured()}
                )
            finally:
                os.environ.pop("LAKEHOUSE_PROJECT_DIR", None)  # the copy goes with the scratch
                shutil.rmtree(scratch, ignore_errors=True)
            print(f"export_to_final: {json.dumps(runs[-1])} (log {log})", flush=True)
    command = (
        f".venv/bin/python bench/export_to_final.py --sizes {' '.join(map(str, args.sizes))} "
        f"--tables {' '.join(args.tables)}"
    )
    if args.add:
        last = json.loads((results_file.folder() / "export_to_final.json").read_text())
        measured = {(r["table"], r["items"]) for r in runs}
        kept = [r for r in last["runs"] if (r["table"], r["items"]) not in measured]
        order = {t: k for k, t in enumerate(["orders", "flat"])}
        runs = sorted(kept + runs, key=lambda r: (order.get(r["table"], 9), r["items"]))
        command = f"{last['command']}; then {command} --add"
    results_file.write(
        "export_to_final",
        {"targets_ratio_to_floor": TARGETS, "driver_memory": "1g", "runs": runs},
        command,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
