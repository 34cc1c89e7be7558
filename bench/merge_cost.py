"""A small merge, warm, against the same merge at a baseline commit and a plain MERGE, in one
interleaved run (issue "A merge at the cost of its changes": at most 0.5x the baseline's).

Two worker processes, each with its own warm Spark session, project copy and lakehouse: one runs
this checkout's code, the other the code of ``--baseline`` (a git worktree of that commit, made
and removed here). Each holds a ``books`` table of ``--rows`` items (a full export synced), and
per round writes a stream change file of ``--changes`` updates of existing items, stages it (not
timed) and times ``ddb-lakehouse merge --table books`` in its process (the CLI's entry point,
``ingestion.cli.main``; dbt run and dbt test). Each also times the floor: one ``MERGE INTO`` of as
many updated rows into a copy of its final table (merge-on-read, as the final table is), in the
same session. The rounds alternate the workers, after ``--warmup`` rounds not counted; medians.

The workers read the project through its entry points: the CLI, and the sample writers of
``ingestion.samples`` for the inputs (a full export in AWS's layout, stream change files as the
project's Lambda function writes them).

Usage: .venv/bin/python bench/merge_cost.py [--baseline b9aa2b9] [--rows 2000] [--changes 20]
       [--rounds 8] [--warmup 2]
Writes bench/results/merge_cost.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BASELINE = "b9aa2b9"  # the last commit before the one-query test (issue 76)
TARGET = 0.5
TOP_LEFT_OUT = {".venv", ".git", "bench", "tests"}  # top level only: macros/tests is the project's
CACHES = {"target", "logs", "__pycache__"}


def _copy_project(code: Path, destination: Path) -> None:
    def left_out(folder: str, names: list[str]) -> set[str]:
        top = TOP_LEFT_OUT if Path(folder) == code else set()
        return {n for n in names if n in top or n in CACHES or n.startswith(".lakehouse")}

    shutil.copytree(code, destination, ignore=left_out)


def worker(code: Path, scratch: Path, rows: int, changes: int) -> None:
    """Serve ``merge`` and ``floor`` requests on stdin, one JSON line of seconds each."""
    sys.path.insert(0, str(code))
    os.environ["LAKEHOUSE_PROJECT_DIR"] = str(scratch / "project")
    os.environ["LAKEHOUSE_HOME"] = str(scratch / "home")
    os.environ["LAKEHOUSE_SCHEMA_DIR"] = str(scratch / "project" / "schemas")
    os.environ["LAKEHOUSE_TARGET"] = "local"
    _copy_project(code, scratch / "project")
    import ingestion
    from ingestion.cli import main
    from ingestion.samples import sample_exports
    from ingestion.samples import stream as sample_stream
    from ingestion.samples.items import BASE_TIME
    from ingestion.sources.change_file_writer import write_batch

    assert Path(ingestion.__file__).is_relative_to(code), ingestion.__file__
    quiet = open(os.devnull, "w")  # noqa: SIM115 (the CLI's tables, for every round)
    out = sys.stdout
    sys.stdout = quiet
    full = sample_exports.write_samples(scratch / "exports", rows, 7, ["books"])["books"]
    assert main(["init"]) == 0
    assert main(["sync", "--table", "books", str(full)]) == 0
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    assert spark is not None
    spark.sql(
        "create table lake.lakehouse.books_floor using iceberg tblproperties ("
        "'format-version'='2', 'write.merge.mode'='merge-on-read', "
        "'write.update.mode'='merge-on-read', 'write.delete.mode'='merge-on-read') "
        "as select * from lake.lakehouse.books"
    )
    ids = [r[0] for r in spark.sql("select id from lake.lakehouse.books").collect()]
    rng = random.Random(5)
    stream = scratch / "streams"
    moment = int(BASE_TIME.timestamp()) + 3600
    print(json.dumps({"ready": ingestion.__file__}), file=out, flush=True)
    for request in sys.stdin:
        moment += 60
        picked = rng.sample(ids, changes)
        if request.strip() == "merge":
            records = [
                sample_stream.stream_record(
                    "books",
                    "MODIFY",
                    {"id": {"S": key}},
                    {"id": {"S": key}, "title": {"S": "old"}},
                    {"id": {"S": key}, "title": {"S": f"t{moment}"}},
                    moment,
                    n + 1,
                )
                for n, key in enumerate(picked)
            ]
            assert write_batch(records, str(stream))[1] is None
            assert (
                main(["ingest", "--table", "books", "--stream", str(stream), "--settle", "0"]) == 0
            )
            started = time.monotonic()
            assert main(["merge", "--table", "books"]) == 0
        elif request.strip() == "floor":
            keys = ", ".join(f"'{k}'" for k in picked)
            spark.sql(
                f"select * from lake.lakehouse.books_floor where id in ({keys})"
            ).createOrReplaceTempView("floor_changes")
            spark.sql("cache table floor_changes")  # read before the clock, as staging is
            started = time.monotonic()
            spark.sql(
                "merge into lake.lakehouse.books_floor as t using floor_changes as c "
                "on t.id = c.id when matched then update set * when not matched then insert *"
            )
            seconds = time.monotonic() - started
            spark.sql("uncache table floor_changes")
            print(json.dumps({"seconds": seconds}), file=out, flush=True)
            continue
        else:
            return
        print(json.dumps({"seconds": time.monotonic() - started}), file=out, flush=True)


class Worker:
    def __init__(self, label: str, code: Path, scratch: Path, args: argparse.Namespace) -> None:
        command = [sys.executable, __file__, "--worker", str(code), str(scratch / label)]
        command += ["--rows", str(args.rows), "--changes", str(args.changes)]
        env = {**os.environ, "PYTHONPATH": str(code), "SPARK_LOCAL_IP": "127.0.0.1"}
        env.pop("LAKEHOUSE_NO_LIGHT", None)
        self.label = label
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=code
        )
        self.ready = self._answer()

    def _answer(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"{self.label}: the worker stopped (its error above)")
        return dict(json.loads(line))

    def ask(self, request: str) -> float:
        assert self.process.stdin is not None
        self.process.stdin.write(request + "\n")
        self.process.stdin.flush()
        return float(self._answer()["seconds"])

    def stop(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline", default=BASELINE)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--worker", nargs=2, metavar=("CODE", "SCRATCH"))
    args = parser.parse_args(argv)
    if args.worker:
        worker(Path(args.worker[0]), Path(args.worker[1]), args.rows, args.changes)
        return 0

    import results_file  # bench/ is on sys.path when a benchmark runs as a script

    scratch = Path(tempfile.mkdtemp(prefix="lakehouse-bench-"))
    baseline = scratch / "baseline-code"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(baseline), args.baseline],
        check=True,
        capture_output=True,
    )
    workers = []
    try:
        workers = [Worker("baseline", baseline, scratch, args), Worker("now", ROOT, scratch, args)]
        times: dict[str, list[float]] = {
            f"{w.label} {k}": [] for w in workers for k in ("merge", "floor")
        }
        for round_ in range(args.warmup + args.rounds):
            for kind in ("merge", "floor"):
                for w in workers if round_ % 2 == 0 else workers[::-1]:
                    seconds = w.ask(kind)
                    if round_ >= args.warmup:
                        times[f"{w.label} {kind}"].append(seconds)
            print(f"round {round_ + 1}: done", file=sys.stderr, flush=True)
    finally:
        for w in workers:
            w.stop()
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(baseline)])
        shutil.rmtree(scratch, ignore_errors=True)
    median = {k: round(statistics.median(v), 3) for k, v in times.items()}
    ratio = median["now merge"] / median["baseline merge"]
    figures = {
        "rows": args.rows,
        "changes": args.changes,
        "rounds": args.rounds,
        "baseline": args.baseline,
        "median_seconds": median,
        "seconds": {k: [round(x, 3) for x in v] for k, v in times.items()},
        "now_over_baseline": round(ratio, 3),
        "baseline_over_its_floor": round(median["baseline merge"] / median["baseline floor"], 2),
        "now_over_its_floor": round(median["now merge"] / median["now floor"], 2),
        "target": TARGET,
        "met": ratio <= TARGET,
    }
    command = " ".join(["bench/merge_cost.py", *(argv if argv is not None else sys.argv[1:])])
    results_file.write("merge_cost", figures, command)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
