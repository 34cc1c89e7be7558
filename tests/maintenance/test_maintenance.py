"""`maintain`: compaction, ledger carried forward, expiry of old snapshots, time travel to kept
ones, and a reader that never fails while it runs. Real Spark, Iceberg, dbt; DuckDB as the
independent reader."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import local_s3
import pytest
import readers
from support import final_ids

from ingestion.aws import glue
from ingestion.catalog import ledger, merge_log
from ingestion.dynamodb.tables import get_table
from ingestion.maintenance import compaction
from ingestion.merge import dbt_process, runner
from ingestion.samples import expected_state, sample_exports
from ingestion.samples import stream as sample_stream
from ingestion.sources.change_file_writer import write_batch
from ingestion.staging import exports, streams

pytestmark = [pytest.mark.slow, pytest.mark.integration]

ITEMS, SEED = 40, 8


def build(spark, tmp_path: Path) -> tuple[Path, dict]:
    """books: a full export, then one stream merge per Lambda batch (small files, deletes)."""
    books = get_table("books")
    export = sample_exports.write_samples(tmp_path / "exports", ITEMS, SEED, ["books"])["books"]
    exports.ingest_export(spark, books, str(export))
    runner.run_merge(spark, [books], test=False)
    batches = sample_stream.books_stream_records(ITEMS, SEED, changes=60)
    for batch in batches:
        write_batch(batch, str(tmp_path / "replay"))
    expected = expected_state.expected_items([export, tmp_path / "replay" / "books"], ["id"])
    for batch in batches:
        write_batch(batch, str(tmp_path / "streams"))
        streams.ingest_stream(spark, books, str(tmp_path / "streams"), settle_seconds=0)
        runner.run_merge(spark, [books], test=False)
    return export, expected


def snapshots(spark, name: str) -> list[int]:
    spark.sql(f"refresh table {name}")
    return [
        r[0]
        for r in spark.table(f"{name}.snapshots")
        .orderBy("committed_at")
        .select("snapshot_id")
        .collect()
    ]


def change_id(row) -> tuple:
    return (row["id"], row["_batch_id"], row["_version"], row["_sequence"], row["_operation"])


def needed(staged: list) -> list:
    """What the change log must keep: each key's latest change (the order of
    macros/one_full_export.sql) and every row of the newest full export."""

    def order(r: Any) -> tuple:
        return (
            r["_version"],
            r["_sequence"] or "",
            r["_ingested_at"],
            r["_batch_id"],
            r["_operation"] in ("delete", "ttl_delete"),
        )

    latest: dict = {}
    for row in staged:
        if row["id"] not in latest or order(row) > order(latest[row["id"]]):
            latest[row["id"]] = row
    full = max((r for r in staged if r["_operation"] == "snapshot"), key=lambda r: r["_version"])
    return [r for r in staged if r is latest[r["id"]] or r["_batch_id"] == full["_batch_id"]]


def test_maintain_compacts_expires_and_keeps_the_ledger(
    spark, clean_lakehouse, lakehouse_home: Path, tmp_path: Path
) -> None:
    export, expected = build(spark, tmp_path)
    books = get_table("books")
    ids = sorted(json.loads(k)[0]["S"] for k in expected)
    assert final_ids(spark) == ids
    final_before = snapshots(spark, "lake.lakehouse.books")
    staging_before = snapshots(spark, "lake.staging.books")
    sources_before = {e.source for e in ledger.entries(spark, "books")}
    assert compaction.health(spark, "books").endswith("last maintenance: never")

    # Default retention: everything is younger than 24 hours, nothing expires. Meanwhile a
    # DuckDB reader loops over the table: no read may fail.
    with readers.reading(lakehouse_home, "books", len(ids)) as loop:
        young = compaction.maintain(spark, books)
        compaction.maintain(spark, books)
    assert loop.failures == [], loop.failures[:3]
    assert loop.reads > 10
    print(f"{loop.reads} DuckDB reads during maintenance, none failed")
    # One data file, and no delete file: all of them were absorbed and dropped.
    assert young.compaction.data_files[1] == 1
    assert young.compaction.delete_files[0] > 0 and young.compaction.delete_files[1] == 0
    assert all(e.snapshots[1] >= e.snapshots[0] for e in young.expired)
    assert set(final_before) <= set(snapshots(spark, "lake.lakehouse.books"))

    assert young.pruned == 0  # every change is younger than the retention
    health = compaction.health(spark, "books")
    assert re.fullmatch(
        r"1 data files \(average 0\.0 MB\), 0 delete files, \d+ snapshots, "
        r"metadata [1-9]\d* KB, last maintenance: 20\d\d-.*",
        health,
    ), health
    staged = spark.table("lake.staging.books").collect()

    # Two days later: all but the last 2 snapshots are older than the retention.
    later = datetime.now(UTC).replace(tzinfo=None) + timedelta(days=2)
    old = compaction.maintain(spark, books, keep_snapshots=2, now=later)
    kept_final = snapshots(spark, "lake.lakehouse.books")
    assert len(kept_final) == 2 and len(snapshots(spark, "lake.staging.books")) == 2
    assert {e.table: e.snapshots[1] for e in old.expired} == {
        "staging.books": 2,
        "staging.dynamodb_lakehouse_merges": 2,
        "lakehouse.books": 2,
    }
    # The change log kept each key's latest change and the full export, nothing else.
    kept = {change_id(r) for r in needed(staged)}
    assert old.pruned == len(staged) - len(kept) > 0
    assert {change_id(r) for r in spark.table("lake.staging.books").collect()} == kept
    assert len(staging_before) > 2

    # The ledger survived: the export is still known, the merged stream batches are gone from
    # it, and nothing is left to merge.
    entries = ledger.entries(spark, "books")
    assert {e.source for e in entries if e.kind != ledger.STREAM} == {
        s for s in sources_before if "#" not in s
    }
    assert merge_log.new_batches(spark, "books") == []
    again = exports.ingest_export(spark, books, str(export))
    assert again.skipped
    # Time travel: a kept snapshot reads, an expired one is gone.
    rows = spark.sql(f"select count(*) from lake.lakehouse.books version as of {kept_final[0]}")
    assert rows.first()[0] > 0
    with pytest.raises(Exception, match="Cannot find snapshot|snapshot"):
        spark.sql(
            f"select count(*) from lake.lakehouse.books version as of {final_before[0]}"
        ).collect()
    # Same rows for Spark and for DuckDB after all of it, value by value.
    assert final_ids(spark) == ids
    columns = "id, title, author, price, pages, in_stock, _operation, _version, _sequence, _rest"
    by_spark = sorted(
        tuple(r) for r in spark.sql(f"select {columns} from lake.lakehouse.books").collect()
    )
    by_duckdb = sorted(readers.read_rows(readers.connect(), lakehouse_home, "books", columns))
    assert by_duckdb == by_spark and len(by_spark) == len(ids)

    # A full rebuild from the pruned change log gives the same table.
    runner.run_merge(spark, [books], full_refresh=True, test=False)
    assert (
        sorted(tuple(r) for r in spark.sql(f"select {columns} from lake.lakehouse.books").collect())
        == by_spark
    )

    # A batch staged, then left unmerged while its commit expires, is still merged by a plain
    # `dbt run` (it finds the batch in the ledger carried forward).
    key = {"id": {"S": ids[0]}}
    new = {**key, "title": {"S": "kept in the ledger"}}
    change = sample_stream.stream_record("books", "MODIFY", key, None, new, 4_000_000_000, 10**30)
    write_batch([change], str(tmp_path / "streams"))
    streams.ingest_stream(spark, books, str(tmp_path / "streams"), settle_seconds=0)
    compaction.maintain(spark, books, keep_snapshots=1, now=later)
    assert len(snapshots(spark, "lake.staging.books")) == 1
    dbt_process.dbt_invoke(["run", "--select", "books"])
    title = spark.sql(f"select title from lake.lakehouse.books where id = '{ids[0]}'").first()
    assert title[0] == "kept in the ledger"

    # Registered in Glue (moto on 127.0.0.1) at the current metadata file.
    location = glue.current_metadata_location(spark, "lakehouse", "books")
    assert location.endswith(readers.metadata_location(lakehouse_home, "lakehouse", "books"))
    with local_s3.server() as endpoint:
        boto3.client("glue", endpoint_url=endpoint, region_name="eu-west-1").create_database(
            DatabaseInput={"Name": "lakehouse"}
        )
        done = glue.register(
            glue.glue_catalog(endpoint, "eu-west-1"), "lakehouse", "books", location
        )
        assert done.created


def test_a_stream_batch_stays_in_the_ledger_while_its_files_are_there(
    spark, clean_lakehouse, tmp_path: Path
) -> None:
    """maintain keeps a merged stream batch in the ledger after the retention while its files
    are still there (a failed delete, a kill before cleanup): dropped, the next ingest would
    stage them again. An entry goes only once its files are gone."""
    books = get_table("books")
    export = sample_exports.write_samples(tmp_path / "exports", ITEMS, SEED, ["books"])["books"]
    exports.ingest_export(spark, books, str(export))
    location = tmp_path / "streams"
    (batch, *_) = sample_stream.books_stream_records(ITEMS, SEED, changes=10)
    (written,), _ = write_batch(batch, str(location))
    kept_copy = Path(written.uri).read_bytes()
    staged = streams.ingest_stream(spark, books, str(location), settle_seconds=0)
    runner.run_merge(spark, [books], test=False)
    Path(written.uri).write_bytes(kept_copy)  # as if its delete had failed

    later = datetime.now(UTC).replace(tzinfo=None) + timedelta(days=2)
    compaction.maintain(spark, books, keep_snapshots=1, now=later)
    assert staged.batch_id in {e.batch_id for e in ledger.entries(spark, "books")}
    again = streams.ingest_stream(spark, books, str(location), settle_seconds=0)
    assert (again.files, again.cleaned) == (0, 1)  # deleted unstaged, not staged twice
    assert not Path(written.uri).exists()

    compaction.maintain(spark, books, keep_snapshots=1, now=later)
    assert staged.batch_id not in {e.batch_id for e in ledger.entries(spark, "books")}


@pytest.fixture
def los_angeles(monkeypatch: pytest.MonkeyPatch):
    """The process's local time zone west of UTC (PySpark renders Spark timestamps in it)."""
    import time

    monkeypatch.setenv("TZ", "America/Los_Angeles")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_retention_is_measured_in_utc_whatever_the_local_time_zone(
    spark, clean_lakehouse, tmp_path: Path, los_angeles
) -> None:
    """The cutoff was a naive UTC time that Spark read as local time, and `committed_at` came
    back in local time: 8 hours west of UTC, changes merged a minute ago counted as older than
    a 2-hour retention, and were pruned and their ledger entries dropped."""
    build(spark, tmp_path)
    books = get_table("books")
    entries = ledger.entries(spark, "books")
    report = compaction.maintain(spark, books, retention=timedelta(hours=2))
    assert report.pruned == 0  # every change is a minute old
    assert [e.source for e in ledger.entries(spark, "books")] == [e.source for e in entries]
    committed = datetime.fromisoformat(entries[-1].committed_at)
    assert abs(committed - datetime.now(UTC)) < timedelta(minutes=10)  # UTC, not local time


def test_a_watch_compacts_on_its_ticks_and_runs_the_rest_when_due(
    spark, clean_lakehouse, tmp_path: Path, monkeypatch
) -> None:
    """``watch``'s maintenance (``expiry_every``): compaction on every maintain tick; the change
    log's retention, the ledger checkpoint and expiry only once the last maintenance (or, never
    maintained, the staging table's first commit) is ``expiry_every`` old. And the rows a merge
    reports after a compaction, derived from the merge before it, equal the table's."""
    from ingestion.catalog import table_metadata
    from ingestion.merge import merge_counts

    build(spark, tmp_path)
    books = get_table("books")
    hour = timedelta(hours=1)

    def checkpoints() -> list[datetime]:
        metadata = table_metadata.read(spark, "lake.staging.books", fresh=True)
        return [s.committed_at for s in metadata.snapshots if ledger.MAINTAINED in s.summary]

    first = min(s.committed_at for s in table_metadata.read(spark, "lake.staging.books").snapshots)
    assert compaction.expiry_due(spark, "books", hour) == first + hour
    compacted = compaction.maintain(spark, books, expiry_every=hour)
    assert compacted.expiry_due == first + hour
    assert compacted.compaction.data_files[0] > 1 and compacted.compaction.data_files[1] == 1
    assert compacted.expired == () and checkpoints() == []
    assert "retention and expiry next due" in compacted.lines()[0]

    # After a compaction, a merge's rows come from the merge before it (a watch's next tick).
    gone = {"id": {"S": final_ids(spark)[0]}}
    changes = [
        sample_stream.stream_record(
            "books",
            "INSERT",
            {"id": {"S": f"book-new-{i}"}},
            None,
            {"id": {"S": f"book-new-{i}"}, "title": {"S": "n"}},
            4_000_000_000,
            10**30 + i,
        )
        for i in range(2)
    ] + [
        sample_stream.stream_record("books", "REMOVE", gone, gone, None, 4_000_000_001, 10**30 + 2)
    ]
    write_batch(changes, str(tmp_path / "streams"))
    streams.ingest_stream(spark, books, str(tmp_path / "streams"), settle_seconds=0)
    rows_before = spark.table("lake.lakehouse.books").count()
    counted: list[int] = []  # the snapshots merge_counts counted rather than derived
    real_count = merge_counts._counted
    monkeypatch.setattr(
        merge_counts, "_counted", lambda s, t, snap: counted.append(snap) or real_count(s, t, snap)
    )
    [counts], _ = runner.run_merge(spark, [books], test=False)
    assert (counts.inserted, counts.deleted) == (2, 1) and counted == []  # derived
    after = merge_counts.current_snapshot(spark, "books")
    assert merge_counts._rows["books"] == (after, counts.rows)
    assert counts.rows == spark.table("lake.lakehouse.books").count() == rows_before + 1

    # Another writer's commit between a merge's start and its own commit: counted, not derived.
    ids = final_ids(spark)
    for key in ids[:2]:
        spark.sql(f"delete from lake.lakehouse.books where id = '{key}'")
    newest = table_metadata.read(spark, "lake.lakehouse.books").newest
    two, one = newest.snapshot_id, newest.parent_id
    final = table_metadata.read(spark, "lake.lakehouse.books")
    # One commit since the rows were known: derived (here as if it added none), not counted.
    assert merge_counts._rows_after(spark, final, "books", after, one, 0) == counts.rows
    assert counted == [] and merge_counts._rows["books"] == (one, counts.rows)
    # Two commits since (the second not the merge's): counted.
    merge_counts._rows["books"] = (after, counts.rows)
    assert merge_counts._rows_after(spark, final, "books", after, two, 0) == counts.rows - 2
    assert counted == [two]

    due = first + hour + timedelta(minutes=1)
    full = compaction.maintain(spark, books, expiry_every=hour, now=due)
    assert full.expiry_due is None and len(full.expired) == 3
    [checkpoint] = checkpoints()
    assert compaction.expiry_due(spark, "books", hour) == checkpoint + hour
    again = compaction.maintain(spark, books, expiry_every=hour)
    assert again.expiry_due == checkpoint + hour and again.expired == ()
    # A tenth of the period early counts as due (a watch's cadence close to the period).
    nearly = compaction.maintain(
        spark, books, expiry_every=hour, now=checkpoint + timedelta(minutes=55)
    )
    assert nearly.expiry_due is None and len(nearly.expired) == 3
