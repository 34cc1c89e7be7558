"""Deep items: how each step's time grows with the nesting of a table's items, next to a floor that
reads the same exports in the same run.

Two tables, each one attribute `deep`, a list of WIDTH maps nested DEPTH levels (each map a name, a
price and a string set, and the list one level down): depth 2 and depth 8 (the item 2^6 times larger
at width 2). Through the CLI in one process (warm Spark), each table: `write-export` of ITEMS items,
`add-table --history`, `sync` of the full export (first load), `sync` of an incremental export whose
changes widen a decimal at the deepest typed level of every item (the third: deeper is JSON text;
drift adoption and the full refresh it needs), `verify` (equal), `rebuild`, `verify --as-of` of the
history. Floor: Spark reads the full export's lines and parses each item in DynamoDB JSON's generic
form (`from_json` to a map of text), then counts them.

The figure that matters is each step's time ratio depth 8 / depth 2 against the item's size ratio:
at most linear growth means the step's ratio is no larger than the size's.

Usage: .venv/bin/python bench/deep_items.py [--items 200] [--width 2]
Writes bench/results/deep_items.json and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import project
import results_file  # bench/ is on sys.path when a benchmark runs as a script

T0 = datetime(2026, 12, 1, tzinfo=UTC)
# The deepest level of maps that stays typed (types.MAX_TYPED_DEPTH: a list and a map a level);
# deeper, the value is JSON text, where a wider number is no drift.
TYPED_LEVELS = 3
STEPS = ("first load", "drift adoption", "verify", "rebuild", "verify --as-of")


def _cli(*args: str) -> tuple[float, str]:
    from ingestion.cli import main

    out = io.StringIO()
    started = time.monotonic()
    with contextlib.redirect_stdout(out):
        code = main(list(args))
    seconds = time.monotonic() - started
    assert code == 0, (args, out.getvalue()[-2000:])
    return seconds, out.getvalue()


def _jsonl(path: Path, lines: list) -> str:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return str(path)


def _run(scratch: Path, depth: int, items: int, width: int, spark) -> dict:
    from pyspark.sql import functions as F

    from ingestion.samples import deep_items

    name = f"Deep{depth}"
    table = name.lower()
    rows = [
        {"id": {"S": f"i{i}"}, "deep": deep_items.nested(depth, width, "1.5", i)}
        for i in range(items)
    ]
    wider = []
    for row in rows:
        changed = json.loads(json.dumps(row))
        deep_items.widen_deepest(changed["deep"], "1.123456", TYPED_LEVELS)
        wider.append(changed)
    out = scratch / f"exports-{depth}"

    def export(*args: str) -> str:
        _, said = _cli(
            "write-export", "--table", name, "--partition-key", "id:S", "--out", str(out), *args
        )
        return next(
            line.split(": ", 1)[1]
            for line in said.splitlines()
            if line.startswith("export written: ")
        )

    full = export("--items", _jsonl(scratch / f"items-{depth}.jsonl", rows), "--at", T0.isoformat())
    changes = [
        {"Keys": {"id": o["id"]}, "OldImage": o, "NewImage": c}
        for o, c in zip(rows, wider, strict=True)
    ]
    window = ["--from", T0.isoformat(), "--to", (T0 + timedelta(hours=1)).isoformat()]
    incremental = export("--changes", _jsonl(scratch / f"changes-{depth}.jsonl", changes), *window)
    now = export(
        "--items",
        _jsonl(scratch / f"now-{depth}.jsonl", wider),
        "--at",
        (T0 + timedelta(hours=2)).isoformat(),
    )

    data = [str(p) for p in Path(full).glob("data/*.json.gz")]
    floor = spark.read.text(data).select(
        F.from_json("value", "Item map<string, string>").alias("l")
    )
    floor.count()  # warm-up: listing, JIT
    started = time.monotonic()
    assert floor.where(F.col("l.Item").isNotNull()).count() == items
    floor_seconds = time.monotonic() - started

    _cli("add-table", name, "--partition-key", "id:S", "--history")
    seconds = {}
    seconds["first load"], _ = _cli("sync", "--table", table, full)
    seconds["drift adoption"], said = _cli("sync", "--table", table, incremental)
    assert "drift adopted" in said, said
    seconds["verify"], said = _cli("verify", "--table", table, now)
    assert "EQUAL" in said, said
    seconds["rebuild"], _ = _cli("rebuild", "--table", table)
    seconds["verify --as-of"], said = _cli("verify", "--table", table, full, "--as-of")
    assert "EQUAL" in said, said
    return {
        "depth": depth,
        "item_values": deep_items.size(rows[0]),
        "floor_seconds": round(floor_seconds, 2),
        "seconds": {k: round(v, 2) for k, v in seconds.items()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=200)
    parser.add_argument("--width", type=int, default=2)
    args = parser.parse_args(argv)

    scratch = Path(tempfile.mkdtemp(prefix="lakehouse-bench-"))
    os.environ["LAKEHOUSE_HOME"] = str(scratch / "home")
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    project.copy(scratch / "project")

    from ingestion.spark.spark_config import build_spark

    spark = build_spark("bench deep items")
    _cli("init")
    runs = [_run(scratch, depth, args.items, args.width, spark) for depth in (2, 8)]
    small, large = runs
    size_ratio = large["item_values"] / small["item_values"]
    growth = {s: round(large["seconds"][s] / small["seconds"][s], 2) for s in STEPS}
    figures = {
        "items": args.items,
        "width": args.width,
        "runs": runs,
        "item_size_ratio": round(size_ratio, 1),
        "floor_ratio": round(large["floor_seconds"] / small["floor_seconds"], 2),
        "step_ratios": growth,
        "at_most_linear": all(r <= size_ratio for r in growth.values()),
    }
    results_file.write(
        "deep_items",
        figures,
        f".venv/bin/python bench/deep_items.py --items {args.items} --width {args.width}",
    )
    print(f"\n| step | depth 2 s | depth 8 s | ratio (item size ratio {size_ratio:.0f}x) |")
    print("|---|---|---|---|")
    print(
        f"| floor (read + parse) | {small['floor_seconds']} | {large['floor_seconds']} | "
        f"{figures['floor_ratio']}x |"
    )
    for step in STEPS:
        print(f"| {step} | {small['seconds'][step]} | {large['seconds'][step]} | {growth[step]}x |")
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
