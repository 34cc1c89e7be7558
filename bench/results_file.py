"""What every benchmark records with its figures: the machine, the Spark settings, the command,
and the code it measured (``measured``: the commit checked out and the date)."""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def measured() -> dict[str, str]:
    """The commit the benchmark ran on (``+`` when the work tree had changes) and today's date;
    ``bench/report.py`` says a figure is stale when a later commit changed the code it measures."""
    root = RESULTS.parent.parent

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        commit = git("rev-parse", "--short", "HEAD")
        changed = git("status", "--porcelain", "--untracked-files=no", "--", "ingestion", "macros")
    except (OSError, subprocess.SubprocessError):
        commit, changed = "unknown", ""
    return {"commit": commit + ("+" if changed else ""), "date": datetime.date.today().isoformat()}


def folder() -> Path:
    """Where results go: bench/results/, or LAKEHOUSE_BENCH_RESULTS for a trial run at a small
    size (checking a benchmark works) that must not write over a figure, e.g.
    ``LAKEHOUSE_BENCH_RESULTS=/tmp/trial .venv/bin/python bench/buckets.py --items 20000``."""
    return Path(os.environ.get("LAKEHOUSE_BENCH_RESULTS") or RESULTS)


def write(name: str, figures: dict[str, Any], command: str) -> dict[str, Any]:
    """Add machine, Spark settings and command to ``figures``; write results/<name>.json; print."""
    from ingestion.spark.spark_config import spark_conf

    conf = spark_conf()
    document = {
        "benchmark": name,
        **figures,
        "machine": {
            "cores": os.cpu_count(),
            "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30),
            "python": platform.python_version(),
        },
        "spark": {
            k: conf[k]
            for k in ("spark.master", "spark.driver.memory", "spark.sql.shuffle.partitions")
        },
        "command": command,
        "measured": measured(),
    }
    out = folder()
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(document, indent=2) + "\n")
    print(json.dumps(document, indent=2))
    return document
