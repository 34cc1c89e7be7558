"""A table's metadata read through the session's catalog (no Spark job) says what Spark's own
metadata tables say: the same snapshots, times, summaries and properties."""

from __future__ import annotations

import subprocess
import sys

import pytest
from support import ROOT

from ingestion.catalog import table_metadata
from ingestion.config import clock

NAME = "lake.staging.metadata_probe"


def test_no_table_and_no_namespace_read_as_none(spark, clean_lakehouse) -> None:
    assert table_metadata.read(spark, "lake.staging.no_such_table") is None
    assert table_metadata.read(spark, "lake.no_such_namespace.t") is None
    assert table_metadata.read(spark, "lake.staging.no_such_table", fresh=True) is None


def test_snapshots_and_properties_match_the_metadata_tables(spark, clean_lakehouse) -> None:
    spark.sql(f"create table {NAME} (id bigint) using iceberg tblproperties ('probe.kept' = 'one')")
    empty = table_metadata.read(spark, NAME)
    assert empty is not None and empty.snapshots == [] and empty.newest is None
    for i, batch in enumerate(["b-1", "b-2", "b-3"]):
        spark.range(i, i + 2).writeTo(NAME).option("snapshot-property.probe.batch", batch).append()
    spark.sql(f"delete from {NAME} where id = 0")

    metadata = table_metadata.read(spark, NAME)
    assert metadata is not None
    expected = spark.table(f"{NAME}.snapshots").orderBy("committed_at").collect()
    got = sorted(metadata.snapshots, key=lambda s: s.committed_at)
    assert [s.snapshot_id for s in got] == [r["snapshot_id"] for r in expected]
    assert [s.parent_id for s in got] == [r["parent_id"] for r in expected]
    assert [s.committed_at for s in got] == [clock.from_spark(r["committed_at"]) for r in expected]
    assert [s.summary.get("probe.batch") for s in got] == ["b-1", "b-2", "b-3", None]
    assert [s.operation for s in got] == [r["operation"] for r in expected]
    assert all(
        s.summary == dict(r["summary"]) | {"operation": r["operation"]}
        for s, r in zip(got, expected, strict=True)
    )
    assert metadata.newest == metadata.current == got[-1]
    assert metadata.properties["probe.kept"] == "one"
    assert metadata.columns == {"id": "long"}


def test_a_commit_of_this_session_is_read_back_without_the_catalog(spark, clean_lakehouse) -> None:
    """``committed`` takes what this session's own commit left from the session's catalog cache:
    with the catalog's pointer to the table moved to a file that does not exist, it still reads
    the commit, where a look-up in the catalog (``fresh``) fails on the missing file."""
    import sqlite3

    spark.sql(f"create table {NAME} (id bigint) using iceberg")
    spark.range(3).writeTo(NAME).option("snapshot-property.probe.batch", "b-1").append()
    catalog = table_metadata.catalog_file()
    pointer = "update iceberg_tables set metadata_location = ? where table_name = 'metadata_probe'"
    kept = table_metadata.metadata_location("staging", "metadata_probe")
    assert kept is not None
    with sqlite3.connect(catalog) as db:
        db.execute(pointer, (kept + ".gone",))
    try:
        table_metadata.READS.clear()
        seen = table_metadata.committed(spark, NAME)
        assert seen is not None and seen.current is not None
        assert seen.current.summary["probe.batch"] == "b-1"
        assert seen.location == kept  # the file the commit wrote, not the pointer's
        assert table_metadata.READS == {("commit", NAME): 1}
        with pytest.raises(Exception, match=r"metadata_probe|gone|NotFound"):  # noqa: PT011
            table_metadata.read(spark, NAME, fresh=True)
    finally:
        with sqlite3.connect(catalog) as db:
            db.execute(pointer, (kept,))
        table_metadata.forget(spark, NAME)


def test_fresh_sees_what_another_process_committed_since(spark, clean_lakehouse) -> None:
    """Another process (its own catalog cache) sets a property on one table, drops and creates
    again a second, and drops a third: the cached read still shows this session's view, the
    fresh read the catalog's."""
    kept, again, gone = NAME, NAME + "_again", NAME + "_gone"
    for name in (kept, again, gone):
        spark.sql(f"create table {name} (id bigint) using iceberg")
        assert "probe.kept" not in table_metadata.read(spark, name).properties
    script = (
        "from ingestion.spark.spark_config import build_spark\n"
        "spark = build_spark('other process')\n"
        f"spark.sql(\"alter table {kept} set tblproperties ('probe.kept' = 'two')\")\n"
        f"spark.sql('drop table {again}')\n"
        f"spark.sql(\"create table {again} (id bigint) using iceberg tblproperties ('probe.kept' = "
        f"'new')\")\n"
        f"spark.sql('drop table {gone}')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]

    assert "probe.kept" not in table_metadata.read(spark, kept).properties
    assert table_metadata.read(spark, kept, fresh=True).properties["probe.kept"] == "two"
    assert table_metadata.read(spark, again, fresh=True).properties["probe.kept"] == "new"
    assert table_metadata.read(spark, gone, fresh=True) is None
    assert table_metadata.read(spark, gone, fresh=True) is None  # and again: the cache forgot it
    assert table_metadata.read(spark, gone) is None
    assert not spark.catalog.tableExists(gone)
