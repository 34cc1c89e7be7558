"""Long Spark work shows its progress: tasks done of all, time so far, an estimate."""

from __future__ import annotations

import time

import pytest

from ingestion.spark import progress


def test_a_line_says_tasks_done_time_so_far_and_an_estimate() -> None:
    assert progress.line("ingest orders", 3.2, []) == "ingest orders: 3s so far"
    assert progress.line("ingest orders", 20.0, [(4, 16, 10.0)]) == (
        "ingest orders: 20s so far, 4/16 tasks of the running stage, about 30s left in it"
    )
    both = progress.line("merge", 9.0, [(0, 8, 1.0), (2, 4, 6.0)])
    assert both == "merge: 9s so far, 2/12 tasks of the running stages, about 6s left in them"


@pytest.mark.slow
def test_a_long_job_reports_while_it_runs_and_a_short_one_does_not(spark) -> None:
    lines: list[str] = []
    with progress.progress(spark, "slow job", lines.append, every=0.3):
        spark.sparkContext.parallelize(range(8), 8).map(lambda x: (time.sleep(0.4), x)[1]).count()
    assert len(lines) >= 2 and all(line.startswith("slow job: ") for line in lines)
    assert any("tasks of the running stage" in line for line in lines), lines
    quiet: list[str] = []
    with progress.progress(spark, "quick", quiet.append, every=30):
        spark.range(10).count()
    assert quiet == []
    off: list[str] = []
    with progress.progress(spark, "off", off.append, every=0):
        spark.sparkContext.parallelize(range(4), 4).map(lambda x: (time.sleep(0.4), x)[1]).count()
    assert off == []
