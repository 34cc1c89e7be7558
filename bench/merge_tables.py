"""Ten tables in one `merge` against one table's `merge`, warm, in one interleaved run (issue "A
merge at the cost of its changes": ten tables with 20 changes each at most 2.0x one table).

One process with a warm Spark session, its own project copy and lakehouse. It registers ten
tables ``tab0`` .. ``tab9`` (``ddb-lakehouse add-table``), each synced from a full export of
``--rows`` items. A round of kind ``one`` stages a stream change file of ``--changes`` updates
of ``tab0`` (not timed) and times ``ddb-lakehouse merge --table tab0``; a round of kind ``ten``
stages as many changes in each of the ten tables and times one ``ddb-lakehouse merge`` naming
all ten (one `dbt run` and one `dbt test` for them all). The kinds alternate, after
``--warmup`` rounds of each not counted; medians. One table's merge is the floor of the ratio.

The run reads the project through its entry points: the CLI, and ``ingestion.samples`` for the
inputs (full exports in AWS's layout, stream change files as the project's Lambda writes them).

Usage: .venv/bin/python bench/merge_tables.py [--tables 10] [--rows 2000] [--changes 20]
       [--rounds 6] [--warmup 1]
Writes bench/results/merge_tables.json.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from merge_cost import ROOT, _copy_project

TARGET = 2.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tables", type=int, default=10)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--warmup", type=int, default=1)
    args = parser.parse_args(argv)

    scratch = Path(tempfile.mkdtemp(prefix="lakehouse-bench-"))
    os.environ["LAKEHOUSE_PROJECT_DIR"] = str(scratch / "project")
    os.environ["LAKEHOUSE_HOME"] = str(scratch / "home")
    os.environ["LAKEHOUSE_SCHEMA_DIR"] = str(scratch / "project" / "schemas")
    os.environ["LAKEHOUSE_TARGET"] = "local"
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    _copy_project(ROOT, scratch / "project")
    import results_file  # bench/ is on sys.path when a benchmark runs as a script

    from ingestion.cli import main as cli
    from ingestion.samples import sample_exports
    from ingestion.samples import stream as sample_stream
    from ingestion.samples.items import BASE_TIME
    from ingestion.sources.change_file_writer import write_batch

    tables = [f"tab{n}" for n in range(args.tables)]
    out = sys.stdout
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (the CLI's tables, for every round)
    times: dict[str, list[float]] = {"one": [], "ten": []}
    try:
        assert cli(["init"]) == 0
        for name in tables:
            assert cli(["add-table", name, "--partition-key", "id:S"]) == 0
            items = [
                {"id": {"S": f"{n:05d}"}, "title": {"S": f"T{n}"}, "n": {"N": str(n)}}
                for n in range(args.rows)
            ]
            full = sample_exports.write_items_export(scratch / "exports" / name, name, items)
            assert cli(["sync", "--table", name, str(full)]) == 0
        rng = random.Random(5)
        moment = int(BASE_TIME.timestamp()) + 3600

        def stage(name: str) -> None:
            keys = rng.sample(range(args.rows), args.changes)
            records = [
                sample_stream.stream_record(
                    name,
                    "MODIFY",
                    {"id": {"S": f"{key:05d}"}},
                    {"id": {"S": f"{key:05d}"}, "title": {"S": "old"}},
                    {"id": {"S": f"{key:05d}"}, "title": {"S": f"t{moment}"}, "n": {"N": "1"}},
                    moment,
                    n + 1,
                )
                for n, key in enumerate(keys)
            ]
            folder = scratch / "streams" / name
            assert write_batch(records, str(folder))[1] is None
            assert cli(["ingest", "--table", name, "--stream", str(folder), "--settle", "0"]) == 0

        for round_ in range(args.warmup + args.rounds):
            for kind in ("one", "ten") if round_ % 2 == 0 else ("ten", "one"):
                moment += 60
                named = tables[:1] if kind == "one" else tables
                for name in named:
                    stage(name)
                started = time.monotonic()
                assert cli(["merge", *[f"--table={name}" for name in named]]) == 0
                if round_ >= args.warmup:
                    times[kind].append(time.monotonic() - started)
            print(f"round {round_ + 1}: done", file=sys.stderr, flush=True)
    finally:
        sys.stdout = out
    median = {k: round(statistics.median(v), 3) for k, v in times.items()}
    ratio = median["ten"] / median["one"]
    figures = {
        "tables": args.tables,
        "rows": args.rows,
        "changes": args.changes,
        "rounds": args.rounds,
        "median_seconds": median,
        "seconds": {k: [round(x, 3) for x in v] for k, v in times.items()},
        "ten_over_one": round(ratio, 3),
        "target": TARGET,
        "met": ratio <= TARGET,
    }
    command = " ".join(["bench/merge_tables.py", *(argv if argv is not None else sys.argv[1:])])
    results_file.write("merge_tables", figures, command)  # reads the project's Spark settings
    shutil.rmtree(scratch, ignore_errors=True)
    print(f"ten tables / one: {ratio:.2f}x (target {TARGET}x), medians {median}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
