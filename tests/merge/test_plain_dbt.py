"""A plain `dbt run` keeps the merge log as `ddb-lakehouse merge` does (macros/merge_log.sql): it
records what each model merged, so `status` agrees with the final table and a run with nothing
new merges nothing; and `dbt run && dbt test` builds the same table as `ddb-lakehouse merge`,
fails the same test on the same damage and refuses what the merge refuses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ingestion.catalog import merge_log
from ingestion.cli import main
from ingestion.config import names, settings
from ingestion.dynamodb.tables import get_table
from ingestion.maintenance import status
from ingestion.merge import dbt_process, merge_counts, runner
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


@pytest.fixture
def tables_t_and_u(spark, clean_lakehouse, project_copy: Path):
    """Tables ``t`` and ``u``, alike, in a copy of the project."""
    for name in ("t", "u"):
        onboarding.add_table(name, "id:S", None)
    yield
    for name in ("t", "u"):
        schema_file.schema_path(name).unlink(missing_ok=True)
        for table in (names.staging_table(name), f"lake.lakehouse.{name}"):
            spark.sql(f"drop table if exists {table}")


def _rows(spark, table: str) -> list[tuple]:
    """The final table's rows, by what a change decides: not which batch brought it, nor its
    ``_source`` (each table's own export and stream files, named for the table)."""
    spark.sql(f"refresh table lake.lakehouse.{table}")
    columns = "id, title, _operation, _version, _sequence, _rest, _drift"
    return sorted(
        tuple(r) for r in spark.sql(f"select {columns} from lake.lakehouse.{table}").collect()
    )


def _plain(command: str, table: str) -> Any:
    """What a user of plain dbt runs (`dbt run`, `dbt test`), as dbt's own runner: no value
    from ddb-lakehouse (the macros find the batches and test whole tables themselves), no
    manifest kept by it, dbt's own parse; its result."""
    from dbt.cli.main import dbtRunner

    project = str(settings.project_dir())
    where = ["--project-dir", project, "--profiles-dir", project, "--quiet"]
    return dbtRunner().invoke([command, "--select", table, *where])


def _plain_build(table: str) -> None:
    for command in ("run", "test"):
        done = _plain(command, table)
        assert done.success, (command, done.exception)


def test_merge_and_a_plain_dbt_run_and_test_build_the_same_table(
    spark, tables_t_and_u, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue "A merge at the cost of its changes", item 5: the same inputs merged by
    `ddb-lakehouse merge` (into ``t``) and by `dbt run && dbt test` (into ``u``), batch by batch:
    the same rows after every batch, every batch recorded by both, the same test failing on the
    same damage, and the same refusal of a final table the strategy cannot merge into."""
    items = [item(k, k.upper()) for k in "abcde"]
    steps = [
        [("MODIFY", "a", "A2", 0), ("REMOVE", "b", None, 1), ("INSERT", "f", "F", 2)],
        # Late: a change of b older than its delete, in time and in sequence (never brings b
        # back), c twice (the later wins), and a delete of e with its re-insert at the same
        # second (the insert is later in sequence).
        [
            ("MODIFY", "b", "B-late", -130, 1005),
            ("MODIFY", "c", "C2", 3),
            ("MODIFY", "c", "C3", 4),
            ("REMOVE", "e", None, 5),
            ("INSERT", "e", "E2", 5),
        ],
    ]
    for name in ("t", "u"):
        full = sample_exports.write_items_export(tmp_path / "full" / name, name, items)
        assert main(["ingest", "--table", name, str(full)]) == 0
    assert main(["merge", "--table", "t"]) == 0
    _plain_build("u")
    assert _rows(spark, "t") == _rows(spark, "u")
    for n, changes in enumerate(steps):
        for name in ("t", "u"):
            records = [
                sample_stream.stream_record(
                    name,
                    event,
                    {"id": {"S": key}},
                    item(key, "old"),
                    item(key, title) if title else None,
                    LATER + n * 100 + at,
                    sequence[0] if sequence else 1000 * (n + 1) + 10 * i,
                )
                for i, (event, key, title, at, *sequence) in enumerate(changes)
            ]
            streams = tmp_path / "streams" / name
            assert write_batch(records, str(streams))[1] is None
            assert main(["ingest", "--table", name, "--stream", str(streams), "--settle", "0"]) == 0
        assert main(["merge", "--table", "t"]) == 0
        _plain_build("u")
        rows = _rows(spark, "t")
        assert rows == _rows(spark, "u"), n
        assert (
            status.table_status(spark, "t").pending == status.table_status(spark, "u").pending == []
        )
    titles = {r[0]: r[1] for r in rows}
    assert titles == {"a": "A2", "c": "C3", "d": "D", "e": "E2", "f": "F"}

    # The same damage fails the same test, naming what it found, on both paths.
    for name in ("t", "u"):
        spark.sql(f"delete from lake.lakehouse.{name} where id = 'd'")
    with pytest.raises(dbt_process.DbtError, match="t: rows missing 1"):
        runner.run_merge(spark, [get_table("t")], whole_tables=True)
    tested = _plain("test", "u")
    assert not tested.success and dbt_process.failed_checks(tested) == ["u: rows missing 1"]

    # The same refusal: a final table without the column every full build creates.
    for name in ("t", "u"):
        spark.sql(f"alter table lake.lakehouse.{name} drop column _inserted_batch_id")
        record = sample_stream.stream_record(
            name, "MODIFY", {"id": {"S": "a"}}, item("a", "A2"), item("a", "A3"), LATER + 900, 99
        )
        streams = tmp_path / "streams" / name
        assert write_batch([record], str(streams))[1] is None
        assert main(["ingest", "--table", name, "--stream", str(streams), "--settle", "0"]) == 0
    capsys.readouterr()
    with pytest.raises(dbt_process.DbtError, match="`dbt run --select stg_dynamodb__t.*` failed"):
        runner.run_merge(spark, [get_table("t")])
    said = capsys.readouterr().out  # dbt's own line on the model's failure
    ran = _plain("run", "u")
    assert not ran.success
    said_plain = " ".join(str(r.message) for r in ran.result.results if r.message)
    for name, text in (("t", said), ("u", said_plain)):
        assert f"lakehouse.{name} has no _inserted_batch_id column" in text, text[-2000:]
        assert f"rebuild --table {name}" in text
        assert merge_log.new_batches(spark, name), name  # the batch still to merge
