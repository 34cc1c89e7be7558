"""Spark's and Iceberg's failures told apart by their Java exception (class, causes, error class),
as the catalog reads, the lease, staging and the stream's damaged-line check do: each case made
for real in this session's JVM, and each beside a failure it must not be taken for."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from ingestion.spark import java_errors

NAME = "lake.staging.java_errors_probe"


def _failure(action) -> Exception:
    with pytest.raises(Exception) as failed:  # noqa: PT011 (any Spark failure: classified below)
        action()
    return failed.value


def test_a_missing_table_or_namespace_and_nothing_else(spark, clean_lakehouse) -> None:
    table = _failure(lambda: spark.sql("select * from lake.staging.no_such_table").collect())
    namespace = _failure(lambda: spark.sql("select * from lake.no_such_namespace.t").collect())
    assert java_errors.missing(table) and java_errors.missing(namespace)
    spark.sql(f"create table {NAME} (id bigint) using iceberg")
    column = _failure(lambda: spark.sql(f"select no_such_column from {NAME}").collect())
    assert not java_errors.missing(column)  # an analysis error, of another kind
    assert not java_errors.missing(ValueError("TABLE_OR_VIEW_NOT_FOUND"))  # not from the JVM
    assert list(java_errors.chain(ValueError("x"))) == []


def test_a_table_that_exists_already(spark, clean_lakehouse) -> None:
    frame = spark.range(2)
    frame.writeTo(NAME).using("iceberg").create()
    twice = _failure(lambda: frame.writeTo(NAME).using("iceberg").create())
    assert java_errors.already_exists(twice)
    assert not java_errors.missing(twice)


def test_the_message_a_raise_error_raised_through_a_write(spark, clean_lakehouse) -> None:
    """Through a write, the message arrives three causes deep (the job's abort, the task's
    write, the expression's RuntimeException); a failure of another kind raised nothing."""
    marker = "dynamodb-lakehouse: probe"
    spark.sql(f"create table {NAME} (id bigint) using iceberg")
    raising = spark.range(3).select(
        F.when(F.col("id") < 2, F.col("id")).otherwise(F.raise_error(F.lit(marker))).alias("id")
    )
    failed = _failure(lambda: raising.writeTo(NAME).append())
    assert java_errors.raised(failed) == marker
    # A step that words the failure raises its own error from it (staging's StagingError): the
    # Java exception is found behind it.
    try:
        raise RuntimeError("nothing staged") from failed
    except RuntimeError as worded:
        assert java_errors.raised(worded) == marker
    other = _failure(lambda: spark.sql("select assert_true(false, 'other')").collect())
    assert java_errors.raised(other) == "other"  # assert_true raises as raise_error does
    column = _failure(lambda: spark.sql(f"select no_such_column from {NAME}").collect())
    assert java_errors.raised(column) is None


def test_a_commit_over_a_stale_base_is_a_commit_failure(spark, clean_lakehouse) -> None:
    """The lease's retry: a properties commit over metadata another commit replaced fails with
    Iceberg's CommitFailedException, which nothing else here is taken for."""
    spark.sql(f"create table {NAME} (id bigint) using iceberg")
    jvm = spark.sparkContext._jvm
    operations = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
        spark._jsparkSession, NAME
    ).operations()
    base = operations.current()

    def commit(value: str) -> None:
        properties = jvm.java.util.HashMap()
        properties.put("probe", value)
        operations.commit(base, base.replaceProperties(properties))

    commit("first")
    stale = _failure(lambda: commit("second"))
    assert java_errors.caused_by(stale, java_errors.COMMIT_FAILED)
    assert not java_errors.caused_by(stale, java_errors.NO_SUCH_TABLE)
    missing = _failure(lambda: spark.sql("select * from lake.staging.no_such_table").collect())
    assert not java_errors.caused_by(missing, java_errors.COMMIT_FAILED)
