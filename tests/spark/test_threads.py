"""Spark work on several threads of one session (ingestion.spark.threads)."""

from __future__ import annotations

import pytest

from ingestion.spark import threads

pytestmark = [pytest.mark.integration]


def test_each_task_works_with_the_session_it_was_given(spark) -> None:
    """A thread's JVM side resolves catalogs through its active session: without one it falls
    back to the JVM's default session, which need not be this one (a tick of 10 tables failed
    with `spark_catalog requires a single-part namespace` in a process that had built two)."""
    jvm = spark.sparkContext._jvm

    def active(_: int) -> bool:
        found = jvm.org.apache.spark.sql.SparkSession.getActiveSession()
        return bool(found.isDefined() and found.get().equals(spark._jsparkSession))

    assert threads.each(spark, active, list(range(6))) == [True] * 6
    # And the work itself, in the items' order, up to four at once.
    tables = threads.each(spark, lambda n: spark.sql(f"select {n} as n").first()[0], [3, 1, 2])
    assert tables == [3, 1, 2]


def test_the_first_failure_is_raised(spark) -> None:
    def work(n: int) -> int:
        if n == 2:
            raise ValueError("table 2 failed")
        return n

    with pytest.raises(ValueError, match="table 2 failed"):
        threads.each(spark, work, [1, 2, 3])


def test_work_meanwhile_runs_on_the_session_and_is_waited_for(spark) -> None:
    """``meanwhile``: the work runs beside the block, with the session active on its thread, and
    the block's end waits for it, also when the block fails (a merge's counts beside its tests:
    the tests' rows are dropped only after the counts read them)."""
    import threading
    import time

    jvm = spark.sparkContext._jvm
    release, done = threading.Event(), []

    def work() -> bool:
        release.wait(30)
        time.sleep(0.3)  # still running when the block ends: only a wait sees it done
        found = jvm.org.apache.spark.sql.SparkSession.getActiveSession()
        done.append(True)
        return bool(found.isDefined() and found.get().equals(spark._jsparkSession))

    with threads.meanwhile(spark, work) as running:
        assert not running.done()  # beside the block, not before it
        release.set()
    assert done == [True] and running.result() is True

    release.clear()
    done.clear()
    with pytest.raises(ValueError, match="the tests failed"):
        with threads.meanwhile(spark, work) as running:
            release.set()
            raise ValueError("the tests failed")
    assert done == [True]  # waited for, though the block failed

    def failing() -> None:
        raise RuntimeError("the counts failed")

    with threads.meanwhile(spark, failing) as running:
        pass
    with pytest.raises(RuntimeError, match="the counts failed"):
        running.result()
