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
