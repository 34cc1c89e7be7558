"""Out of memory as one line (``ingestion.spark.out_of_memory``, issue "Deep items"): what ran out
is found through chained exceptions and dbt's messages, the line names the table, its largest
attribute with its deepest path, the driver's memory and what to do. No Spark: the messages are
the JVM's own words, as Spark and dbt pass them on."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ingestion.merge.dbt_process import out_of_memory_in
from ingestion.schema.types import Attribute, ColumnType, Schema, StructField
from ingestion.spark import out_of_memory

STRING = ColumnType("string")


def deep(levels: int) -> ColumnType:
    """A list of maps ``levels`` deep, a decimal at the bottom."""
    inner = ColumnType("decimal", precision=38, scale=9)
    for i in range(levels):
        inner = ColumnType(
            "array",
            element=ColumnType(
                "struct",
                fields=(
                    StructField(f"f{i}", f"f{i}", inner),
                    StructField("note", "note", STRING),
                ),
            ),
        )
    return inner


def schema() -> Schema:
    return Schema(
        "invoices",
        (
            Attribute("tenant_id", "tenant_id", STRING, key=True),
            Attribute("title", "title", STRING),
            Attribute("line_items", "line_items", deep(3)),
            Attribute("tags", "tags", ColumnType("array", element=STRING)),
        ),
        10,
    )


def test_what_ran_out_is_found_through_chained_exceptions() -> None:
    try:
        try:
            raise RuntimeError("py4j: java.lang.OutOfMemoryError: Java heap space")
        except RuntimeError as inner:
            raise ValueError("the job failed") from inner
    except ValueError as outer:
        assert out_of_memory.cause(outer) == "ran out of the driver's memory"
    assert out_of_memory.cause(RuntimeError("java.lang.StackOverflowError")) == (
        "built a plan deeper than the JVM's stack"
    )
    assert out_of_memory.cause(RuntimeError("TABLE_OR_VIEW_NOT_FOUND")) is None
    # A job cancelled by the context's stop that an error in a task's thread set off (a slow
    # shutdown answers before the JVM is gone): seen as exit 1 with a traceback before.
    stopped = RuntimeError(
        "An error occurred while calling o71.collectToPython.\n: org.apache.spark."
        "SparkException: Job 0 cancelled because SparkContext was shut down"
    )
    assert (
        out_of_memory.cause(stopped) == "stopped its JVM (most often: out of the driver's memory)"
    )


def test_the_line_names_the_largest_attribute_and_its_deepest_path() -> None:
    largest = out_of_memory.largest_attribute(schema())
    assert largest is not None and largest.startswith("'line_items' (")
    assert "deepest path line_items[].f2[].f1[].f0)" in largest
    line = out_of_memory.message(
        "invoices", "drift adoption", "ran out of the driver's memory", schema()
    )
    assert line.startswith(
        "invoices: drift adoption ran out of the driver's memory (driver memory "
    )
    assert "'line_items'" in line and "schemas/invoices.json" in line
    assert "Nothing was half-applied" in line and "\n" not in line
    # No nested attribute: no attribute named, the other advice.
    flat = Schema("t", (Attribute("id", "id", STRING, key=True), Attribute("a", "a", STRING)), 1)
    assert out_of_memory.largest_attribute(flat) is None
    assert "fewer tables" in out_of_memory.message("t", "ingest", "ran out", flat)


def test_a_dbt_model_that_ran_out_of_memory_is_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LAKEHOUSE_DRIVER_MEMORY", "1g")  # no JVM in this test: the CLI's setting
    failed = [
        (
            "books",
            "Runtime Error\n  An error occurred while calling o12.sql.\n: "
            "java.lang.OutOfMemoryError: Java heap space",
        )
    ]
    found = out_of_memory_in("dbt run", failed)
    assert isinstance(found, out_of_memory.OutOfMemory) and found.exit_status == 2
    text = str(found)
    assert text.startswith("books: dbt run ran out of the driver's memory (driver memory 1g)")
    assert "\n" not in text and "Traceback" not in text
    assert out_of_memory_in("dbt run", [("books", "AMBIGUOUS_REFERENCE: `x`")]) is None


def test_the_jvm_python_started_is_stopped_before_the_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A JVM dying of an out-of-memory error wrote its shutdown's warnings after the CLI's one
    line (test_first_hour's case failed so in the suite): the CLI stops the JVM it started
    first. A stand-in process for the JVM (no Spark in this test); a JVM that runs Python
    (spark-submit: no process of Python's) is left alone."""
    import subprocess

    import pyspark

    jvm = subprocess.Popen(["sleep", "60"])
    try:
        monkeypatch.setattr(pyspark.SparkContext, "_gateway", SimpleNamespace(proc=jvm))
        out_of_memory.end_jvm()
        assert jvm.poll() is not None
        out_of_memory.end_jvm()  # gone already: nothing to do
        monkeypatch.setattr(pyspark.SparkContext, "_gateway", SimpleNamespace(proc=None))
        out_of_memory.end_jvm()
    finally:
        jvm.kill()
        jvm.wait()
