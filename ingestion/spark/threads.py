"""Spark work of one session on several Python threads at once (a watch's tables, their counts).

PySpark runs each Python thread on a JVM thread of its own, and the JVM resolves catalogs and
settings through the thread's *active* session: a thread that never set one gets the JVM's
default session, which in a process that built more than one session (the benchmarks, a test
run) is not the session handed over, and `lake` is then no catalog (``spark_catalog requires a
single-part namespace``). Each task here first makes the session it works with its thread's
active one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import TypeVar

from pyspark.sql import SparkSession

T = TypeVar("T")
R = TypeVar("R")

# Enough to overlap the small jobs of a few tables (planning, metadata reads, commits) on the
# two cores a driver usually has; more only queues.
MOST_AT_ONCE = 4


def each(
    spark: SparkSession, work: Callable[[T], R], items: Sequence[T], most: int = MOST_AT_ONCE
) -> list[R]:
    """``work(item)`` for every item, up to ``most`` at once, the results in the items' order;
    the first exception raised is raised here. One item runs on this thread."""
    if len(items) <= 1:
        return [work(item) for item in items]

    def on_this_session(item: T) -> R:
        _make_active(spark)
        return work(item)

    with ThreadPoolExecutor(max_workers=min(len(items), most)) as pool:
        return list(pool.map(on_this_session, items))


@contextmanager
def meanwhile(spark: SparkSession, work: Callable[[], R]) -> Iterator[Future[R]]:
    """``work()`` on a thread of its own while the block runs (a merge's counts while its tests
    run): the block gets its future, and the block's end, however it ends, waits for the work.
    An exception of the work is raised by the future's ``result``, an exception of the block as
    it is."""

    def on_this_session() -> R:
        _make_active(spark)
        return work()

    with ThreadPoolExecutor(max_workers=1) as pool:
        yield pool.submit(on_this_session)


def _make_active(spark: SparkSession) -> None:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
