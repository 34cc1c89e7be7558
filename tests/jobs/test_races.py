"""Races argued from the code, run for real: a second process commits into a table's staging
change log at the worst moment of `rebuild` and of `maintain`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from support import ROOT, book, final_ids

from ingestion.catalog import ledger
from ingestion.dynamodb.tables import get_table
from ingestion.maintenance import rebuild
from ingestion.merge import runner
from ingestion.samples import sample_exports
from ingestion.samples import stream as sample_stream
from ingestion.sources.change_file_writer import write_batch
from ingestion.staging import exports

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def stream_ingest_in_another_process(location: Path) -> None:
    command = [sys.executable, "-m", "ingestion.cli", "ingest", "--table", "books"]
    command += ["--stream", str(location), "--settle", "0"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def test_a_stream_commit_during_rebuild_is_not_lost(spark, clean_lakehouse, tmp_path: Path) -> None:
    """`rebuild` replaces staging; a stream ingest committing between its read and its commit
    (watch on another machine) was replaced away, its change files already deleted."""
    books = get_table("books")
    full = sample_exports.write_items_export(tmp_path / "f", "books", [book("a", "A")])
    exports.ingest_export(spark, books, str(full))
    runner.run_merge(spark, [books], test=False)
    location = tmp_path / "streams"
    record = sample_stream.stream_record(
        "books", "INSERT", {"id": {"S": "race"}}, None, book("race", "R"), 1768400000, 1
    )
    assert write_batch([record], str(location))[1] is None

    rebuilt = rebuild.rebuild_staging(
        spark, books, before_commit=lambda: stream_ingest_in_another_process(location)
    )
    assert not list((location / "books").iterdir())  # the other process deleted its files
    assert len(rebuilt.restaged) == 1
    spark.sql("refresh table lake.staging.books")
    ids = {r["_batch_id"] for r in spark.table("lake.staging.books").select("_batch_id").collect()}
    assert set(rebuilt.restaged) <= ids
    assert sum(e.kind == ledger.STREAM for e in ledger.entries(spark, "books")) == 1
    runner.run_merge(spark, [books], full_refresh=True)
    assert set(final_ids(spark)) == {"a", "race"}


def test_rebuild_refuses_while_watch_holds_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ingestion.cli import main
    from ingestion.jobs.table_lock import hold

    held = hold(Path(os.environ["LAKEHOUSE_HOME"]), "books", "watch")
    try:
        assert main(["rebuild", "--table", "books"]) == 2
        err = capsys.readouterr().err
        assert "another watch of table books is running on this machine" in err
        assert "rebuild replaces the staging table" in err
    finally:
        held.close()


def test_a_batch_committed_while_maintain_carries_the_ledger_is_never_expired_unmerged(
    spark, clean_lakehouse, tmp_path: Path
) -> None:
    """`maintain` read the ledger, then committed its checkpoint: a batch committed in between
    was in no checkpoint, and with a small --keep-snapshots its commit expired with its entry:
    staged, never merged."""
    from ingestion.catalog import merge_log
    from ingestion.config import names
    from ingestion.maintenance import expiry

    books = get_table("books")
    full = sample_exports.write_items_export(tmp_path / "f", "books", [book("a", "A")])
    exports.ingest_export(spark, books, str(full))
    runner.run_merge(spark, [books], test=False)
    location = tmp_path / "streams"
    record = sample_stream.stream_record(
        "books", "INSERT", {"id": {"S": "race"}}, None, book("race", "R"), 1768400000, 1
    )
    assert write_batch([record], str(location))[1] is None

    expire_before = expiry.checkpoint_ledger(
        spark,
        "books",
        merged=set(),
        cutoff=datetime.now() + timedelta(days=1),
        before_commit=lambda: stream_ingest_in_another_process(location),
    )
    expiry.expire(spark, names.STAGING, "books", expire_before, 1, datetime(2000, 1, 1))
    assert any(e.kind == ledger.STREAM for e in ledger.entries(spark, "books"))
    assert len(merge_log.new_batches(spark, "books")) == 1
    runner.run_merge(spark, [books])
    assert set(final_ids(spark)) == {"a", "race"}


def test_a_duplicate_batch_left_by_a_killed_loser_is_removed_by_maintain(
    spark, clean_lakehouse, tmp_path: Path
) -> None:
    """Two processes staged one export at once; the loser, killed before it deleted its copy,
    left a second batch of the same source that no ledger entry names and that every plain
    `dbt run` merged again. `maintain` removes it."""
    from ingestion.maintenance import compaction
    from ingestion.sources import manifest
    from ingestion.staging import append, staging_table

    books = get_table("books")
    items = [book("a", "A"), book("b", "B")]
    full = sample_exports.write_items_export(tmp_path / "f", "books", items)
    first = exports.ingest_export(spark, books, str(full))
    export = manifest.read_export(str(full))
    schema = exports.table_schema(spark, books, export)[0]
    now = datetime.now()
    loser = append.new_batch_id(now)
    rows, _ = staging_table.prepared(
        spark, books, append.read_export(spark, export, schema, loser, now), schema
    )
    properties = ledger.snapshot_properties(ledger.entry_for(export, loser))
    # The loser's commit, without its own delete (it was killed right after committing).
    rows.writeTo("lake.staging.books").options(
        **{f"snapshot-property.{k}": v for k, v in properties.items()}
    ).append()
    assert append.duplicate_batches(spark, "books") == [loser]
    compaction.maintain(spark, books)
    assert append.duplicate_batches(spark, "books") == []
    batches = spark.table("lake.staging.books").select("_batch_id").distinct().collect()
    assert [r["_batch_id"] for r in batches] == [ledger.entries(spark, "books")[0].batch_id]
    assert spark.table("lake.staging.books").count() == first.rows == 2
