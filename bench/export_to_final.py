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
(e) ``ddb-lakehouse sync`` of the same export into a fresh lakehouse, no schema file.

Targets (issue: export to queryable table faster than AWS's own sample), as ratios to (a) of the
same run: detect <= 1.0x, ingest <= 2.0x, sync <= 2.0x. The final table is checked to hold N rows.

Usage: .venv/bin/python bench/export_to_final.py [--sizes 1000000 5000000] [--tables orders flat]
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
    from ingestion.samples import exports as sample_exports

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
    from ingestion.lake import onboarding

    onboarding.add_table("flat", "id:S", None)
    return copy


def floor_process(folder: Path, schema_file: Path) -> None:
    """(a), run in its own process: the typed read of every value, nothing written."""
    from pyspark.sql.types import StructType

    from ingestion.lake.spark_config import build_spark
    from ingestion.sources import manifest

    spark = build_spark("bench floor")
    schema = StructType.fromJson(json.loads(schema_file.read_text()))
    paths = [str(f.path) for f in manifest.read_export(folder, verify=False).files]
    frame = spark.read.schema(schema).json(paths).where("Item is not null").select("Item.*")
    frame.write.format("noop").mode("overwrite").save()


def infer_schema(folder: Path, out: Path) -> None:
    """The export's own typed schema, inferred by Spark from every line (not timed)."""
    from ingestion.lake.spark_config import build_spark
    from ingestion.sources import manifest

    spark = build_spark("bench infer")
    paths = [str(f.path) for f in manifest.read_export(folder, verify=False).files]
    out.write_text(spark.read.json(paths).schema.json())


def timed(args: list[str], env: dict[str, str], log: Path) -> float:
    began = time.monotonic()
    with log.open("a") as sink:
        sink.write(f"\n$ {' '.join(args)}\n")
        sink.flush()
        result = subprocess.run(args, env=env, stdout=sink, stderr=subprocess.STDOUT)
    seconds = time.monotonic() - began
    if result.returncode != 0:
        raise SystemExit(f"export_to_final: `{' '.join(args)}` exited {result.returncode}; see {log}")  # fmt: skip
    return round(seconds, 1)


def final_rows(env: dict[str, str], table: str) -> int:
    code = (
        "from ingestion.lake.spark_config import build_spark;"
        f"print(build_spark('bench rows').table('lake.lakehouse.{table}').count())"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    return int(out.stdout.strip().splitlines()[-1])


def run(scratch: Path, table: str, items: int, log: Path) -> dict:
    from ingestion.samples import exports as sample_exports

    project = project_copy(scratch)
    started = time.monotonic()
    if table == "flat":
        folder = write_flat(scratch / "exports", items)
    else:
        folder = sample_exports.write_samples(scratch / "exports", items, seed=1, tables=[table])[table]  # fmt: skip
    generated_s = time.monotonic() - started
    raw_mb = sum(
        len(gzip.open(p).read()) for p in (folder / "data").glob("*.json.gz")
    ) / 2**20  # fmt: skip
    base = dict(
        os.environ,
        SPARK_LOCAL_IP="127.0.0.1",
        LAKEHOUSE_DRIVER_MEMORY="1g",
        LAKEHOUSE_PROJECT_DIR=str(project),
        PYTHONPATH=str(ROOT),
    )
    cli = [sys.executable, "-m", "ingestion.cli"]
    schema_file = project / "schemas" / f"{table}.json"
    shutil.rmtree(project / "schemas", ignore_errors=True)
    (project / "schemas").mkdir()
    typed = scratch / "typed_schema.json"
    env = dict(base, LAKEHOUSE_HOME=str(scratch / "home-a"))
    subprocess.run([sys.executable, str(HERE), "--infer", str(folder), str(typed)], env=env, check=True)  # fmt: skip
    figures = {
        "floor": timed([sys.executable, str(HERE), "--floor", str(folder), str(typed)], env, log),
        "detect": timed([*cli, "detect-schema", "--table", table, str(folder)], env, log),
    }
    assert schema_file.exists(), f"detect-schema wrote no {schema_file}"
    schema_file.unlink()
    env = dict(base, LAKEHOUSE_HOME=str(scratch / "home-b"))
    figures["ingest"] = timed([*cli, "ingest", "--table", table, str(folder)], env, log)
    figures["merge"] = timed([*cli, "merge", "--table", table], env, log)
    assert final_rows(env, table) == items
    schema_file.unlink()  # ingest detected and wrote it
    env = dict(base, LAKEHOUSE_HOME=str(scratch / "home-c"))
    figures["sync"] = timed([*cli, "sync", "--table", table, str(folder)], env, log)
    assert final_rows(env, table) == items
    floor = figures["floor"]
    return {
        "table": table,
        "items": items,
        "raw_mb": round(raw_mb),
        "generated_seconds": round(generated_s, 1),
        "seconds": figures,
        "ratio_to_floor": {k: round(v / floor, 2) for k, v in figures.items() if k != "floor"},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 5_000_000])
    parser.add_argument("--tables", nargs="+", default=["orders", "flat"])
    parser.add_argument("--floor", nargs=2, type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--infer", nargs=2, type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.floor:
        floor_process(*args.floor)
        return 0
    if args.infer:
        infer_schema(*args.infer)
        return 0
    runs = []
    for table in args.tables:
        for items in args.sizes:
            scratch = Path(tempfile.mkdtemp(prefix=f"lakehouse-bench-e2f-{table}-{items}-"))
            log = scratch.parent / f"{scratch.name}.log"
            try:
                runs.append(run(scratch, table, items, log))
            finally:
                os.environ.pop("LAKEHOUSE_PROJECT_DIR", None)  # the copy goes with the scratch
                shutil.rmtree(scratch, ignore_errors=True)
            print(f"export_to_final: {json.dumps(runs[-1])} (log {log})", flush=True)
    results_file.write(
        "export_to_final",
        {"targets_ratio_to_floor": TARGETS, "driver_memory": "1g", "runs": runs},
        f".venv/bin/python bench/export_to_final.py --sizes {' '.join(map(str, args.sizes))} "
        f"--tables {' '.join(args.tables)}",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
