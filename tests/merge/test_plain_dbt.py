"""A plain `dbt run` keeps the merge log as `ddb-lakehouse merge` does (macros/merge_log.sql): it
records what each model merged, so `status` agrees with the final table and a run with nothing
new merges nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ingestion.catalog import merge_log
from ingestion.cli import main
from ingestion.config import names
from ingestion.maintenance import status
from ingestion.merge import dbt_process, merge_counts
from ingestion.project import onboarding
from ingestion.samples import sample_exports
from ingestion.samples import stream as sample_stream
from ingestion.samples.items import BASE_TIME
from ingestion.schema import schema_file
from ingestion.sources.change_file_writer import write_batch

pytestmark = [pytest.mark.slow, pytest.mark.integration]

LATER = int(BASE_TIME.timestamp()) + 3600
HISTORY = names.history_table("t")


def item(key: str, title: str) -> dict[str, Any]:
    return {"id": {"S": key}, "title": {"S": title}}


@pytest.fixture
def table_t(spark, clean_lakehouse, project_copy: Path, tmp_path: Path):
    """Table ``t`` with its history, in a copy of the project; yields where its stream's files
    go."""
    onboarding.add_table("t", "id:S", None, history=True)
    yield tmp_path / "streams"
    schema_file.schema_path("t").unlink(missing_ok=True)
    for name in ("lake.staging.t", "lake.lakehouse.t", f"lake.lakehouse.{HISTORY}"):
        spark.sql(f"drop table if exists {name}")


def logged(spark) -> dict[str, set[str]]:
    spark.sql(f"refresh table {merge_log.MERGE_LOG}")
    found: dict[str, set[str]] = {}
    for row in spark.table(merge_log.MERGE_LOG).collect():
        found.setdefault(row["table_name"], set()).add(row["batch_id"])
    return found


def snapshots(spark) -> tuple[int | None, int | None]:
    return merge_counts.current_snapshot(spark, "t"), merge_counts.current_snapshot(spark, HISTORY)


def test_a_plain_dbt_run_records_what_it_merged(spark, table_t: Path, tmp_path: Path) -> None:
    full = sample_exports.write_items_export(
        tmp_path / "full", "t", [item("a", "A"), item("b", "B")]
    )
    assert main(["ingest", "--table", "t", str(full)]) == 0
    merge_log.ensure_merge_log(spark)
    (first,) = merge_log.new_batches(spark, "t", history=True)
    spark.sql(f"drop table if exists {merge_log.MERGE_LOG}")  # the hook creates it too

    dbt_process.dbt_invoke(["run", "--select", "t", HISTORY])  # the first build of both
    assert logged(spark) == {"t": {first}, HISTORY: {first}}
    assert status.table_status(spark, "t").pending == []
    # The hook's merge log is the one ddb-lakehouse creates: the same columns and properties.
    created = spark.table(merge_log.MERGE_LOG).schema.simpleString()
    properties = {
        r["key"]: r["value"]
        for r in spark.sql(f"show tblproperties {merge_log.MERGE_LOG}").collect()
    }
    spark.sql(f"drop table {merge_log.MERGE_LOG}")
    merge_log.ensure_merge_log(spark)
    assert spark.table(merge_log.MERGE_LOG).schema.simpleString() == created
    ensured = {
        r["key"]: r["value"]
        for r in spark.sql(f"show tblproperties {merge_log.MERGE_LOG}").collect()
    }
    assert {k: properties.get(k) for k in ensured if k != "current-snapshot-id"} == {
        k: v for k, v in ensured.items() if k != "current-snapshot-id"
    }
    merge_log.record_merged(spark, {"t": [first], HISTORY: [first]})

    # A stream batch: merged and recorded by the next plain run, for both models.
    record = sample_stream.stream_record(
        "t", "MODIFY", {"id": {"S": "a"}}, item("a", "A"), item("a", "A2"), LATER, 1
    )
    assert write_batch([record], str(table_t))[1] is None
    assert main(["ingest", "--table", "t", "--stream", str(table_t), "--settle", "0"]) == 0
    (second,) = merge_log.new_batches(spark, "t", history=True)
    assert status.table_status(spark, "t").pending == [second]
    dbt_process.dbt_invoke(["run", "--select", "t", HISTORY])
    assert logged(spark) == {"t": {first, second}, HISTORY: {first, second}}
    assert status.table_status(spark, "t").pending == []
    spark.sql("refresh table lake.lakehouse.t")
    assert spark.table("lake.lakehouse.t").where("id = 'a'").first()["title"] == "A2"

    # Nothing new: a plain run commits nothing to either table and records nothing.
    before = snapshots(spark)
    dbt_process.dbt_invoke(["run", "--select", "t", HISTORY])
    assert snapshots(spark) == before
    assert logged(spark) == {"t": {first, second}, HISTORY: {first, second}}
    # ddb-lakehouse agrees: nothing to merge.
    assert main(["merge", "--table", "t"]) == 0
    assert snapshots(spark) == before


def test_a_history_that_lags_its_final_table_gets_the_batch_at_the_next_merge(
    spark, table_t: Path, tmp_path: Path
) -> None:
    """A plain run that built the final table but not the history (its selection, or a failure)
    leaves the batch new to the history: the next `merge` applies it there."""
    full = sample_exports.write_items_export(tmp_path / "full", "t", [item("a", "A")])
    assert main(["sync", "--table", "t", str(full)]) == 0
    record = sample_stream.stream_record(
        "t", "MODIFY", {"id": {"S": "a"}}, item("a", "A"), item("a", "A2"), LATER, 1
    )
    assert write_batch([record], str(table_t))[1] is None
    assert main(["ingest", "--table", "t", "--stream", str(table_t), "--settle", "0"]) == 0
    (batch,) = merge_log.new_batches(spark, "t")

    dbt_process.dbt_invoke(["run", "--select", "t"])  # the final table only
    assert merge_log.new_batches(spark, "t") == []
    assert merge_log.new_batches(spark, "t", history=True) == [batch]
    # `status` counts it pending until the history holds it too (docs/history.md).
    assert status.table_status(spark, "t").pending == [batch]

    assert main(["merge", "--table", "t"]) == 0
    assert merge_log.new_batches(spark, "t", history=True) == []
    spark.sql(f"refresh table lake.lakehouse.{HISTORY}")
    titles = [
        r["title"]
        for r in spark.table(f"lake.lakehouse.{HISTORY}").orderBy("_valid_from").collect()
    ]
    assert titles == ["A", "A2"]
