"""Progress of long Spark work for a person watching: tasks done of all, time so far, an estimate.

A step that lasts longer than ``every`` seconds (``LAKEHOUSE_PROGRESS_SECONDS``, default 15; 0
turns it off) prints one line per interval, read from Spark's status tracker: the running
stages' tasks done and in all (a task reads about one file split, so for an ingest they follow
the files), and an estimate of the time left in those stages from their own pace. A short step
prints nothing. The lines go to stderr, so that a command's own output stays clean.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_EVERY = 15.0


def _stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def interval() -> float:
    return float(os.environ.get("LAKEHOUSE_PROGRESS_SECONDS", DEFAULT_EVERY))


def line(what: str, elapsed: float, stages: list[tuple[int, int, float]]) -> str:
    """One progress line; ``stages`` holds (tasks done, tasks in all, seconds running) of each
    running stage."""
    text = f"{what}: {elapsed:.0f}s so far"
    done = sum(d for d, _, _ in stages)
    total = sum(t for _, t, _ in stages)
    if total:
        text += f", {done}/{total} tasks of the running stage{'s' if len(stages) > 1 else ''}"
        left = [(t - d) * running / d for d, t, running in stages if d]
        if left:
            text += f", about {max(left):.0f}s left in {'them' if len(stages) > 1 else 'it'}"
    return text


@contextmanager
def progress(
    spark: SparkSession,
    what: str,
    report: Callable[[str], Any] = _stderr,
    every: float | None = None,
) -> Iterator[None]:
    """Report ``what``'s progress every ``every`` seconds while the block runs."""
    every = interval() if every is None else every
    if every <= 0:
        yield
        return
    tracker = spark.sparkContext.statusTracker()
    first_seen: dict[int, float] = {}
    stop = threading.Event()
    started = time.monotonic()

    def watch() -> None:
        while not stop.wait(every):
            now = time.monotonic()
            stages = []
            for stage_id in tracker.getActiveStageIds():
                info = tracker.getStageInfo(stage_id)
                if info is None:
                    continue
                first_seen.setdefault(stage_id, now)
                stages.append((info.numCompletedTasks, info.numTasks, now - first_seen[stage_id]))
            report(line(what, now - started, stages))

    thread = threading.Thread(target=watch, name=f"progress {what}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)
