"""Small commands without a JVM (``ingestion/without_spark``): after a merge with deletes and before
``maintain``, the status without Spark, drift and query give Spark's figures; ``status`` and a
``sync`` or ``merge`` with nothing new run in a process that cannot start Java."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import ROOT

from ingestion.catalog import ledger, merge_log, table_metadata
from ingestion.cli import main
from ingestion.dynamodb.tables import get_table
from ingestion.jobs import inspection, stage
from ingestion.maintenance import status
from ingestion.samples import sample_exports
from ingestion.samples import stream as sample_stream
from ingestion.samples.items import BASE_TIME
from ingestion.sources.change_file_writer import write_batch
from ingestion.staging import drift

pytestmark = [pytest.mark.slow, pytest.mark.integration]

LATER = int(BASE_TIME.timestamp()) + 600


def book(key: str, pages: str = "1") -> dict:
    return {"id": {"S": key}, "title": {"S": key.upper()}, "pages": {"N": pages}}


@pytest.fixture
def books_with_deletes(spark, clean_lakehouse, tmp_path: Path) -> Path:
    """books: a full export of 5 items, then a stream batch (two files a minute apart) that
    deletes two, updates one and inserts one; merged, not maintained."""
    full = sample_exports.write_items_export(tmp_path / "full", "books", [book(k) for k in "abcde"])
    assert main(["sync", "--table", "books", str(full)]) == 0
    location = tmp_path / "streams"

    def record(event: str, key: str, new: dict | None, at: int, n: int) -> dict:
        return sample_stream.stream_record(
            "books", event, {"id": {"S": key}}, book(key), new, at, n
        )

    first = [record("REMOVE", "a", None, LATER, 1), record("REMOVE", "b", None, LATER + 1, 2)]
    second = [
        record("MODIFY", "c", book("c", "7"), LATER + 60, 3),
        record("INSERT", "f", book("f"), LATER + 61, 4),
    ]
    for batch in (first, second):
        assert write_batch(batch, str(location))[1] is None
    assert main(["sync", "--table", "books", "--stream", str(location), "--settle", "0"]) == 0
    return location


def test_figures_without_spark_equal_sparks_after_a_merge_with_deletes(
    spark, books_with_deletes: Path, capsys
) -> None:
    assert table_metadata.files() is not None
    heavy = status.table_status(spark, "books")
    light = status.status_without_spark("books")
    assert light.final_rows == heavy.final_rows == 4  # position deletes honoured
    assert (light.pending, light.unmerged_rows) == (heavy.pending, heavy.unmerged_rows) == ([], 0)
    assert light.entries == heavy.entries
    assert ledger.entries(table_metadata.FileReader(), "books") == ledger.entries(spark, "books")
    assert (
        merge_log.new_batches_without_spark("books") == merge_log.new_batches(spark, "books") == []
    )
    assert drift.drift_report_without_spark("books") == drift.drift_report(spark, "books")
    result = inspection.query("select count(*) as n from lakehouse.books", None, "duckdb")
    assert list(result.rows) == [(4,)]

    # Staged, not merged yet: the pending batch and its rows, counted alike.
    record = sample_stream.stream_record(
        "books", "INSERT", {"id": {"S": "g"}}, None, book("g"), LATER + 120, 5
    )
    assert write_batch([record], str(books_with_deletes))[1] is None
    assert (
        main(["ingest", "--table", "books", "--stream", str(books_with_deletes), "--settle", "0"])
        == 0
    )
    spark.sql("refresh table lake.staging.books")
    heavy, light = status.table_status(spark, "books"), status.status_without_spark("books")
    assert len(light.pending) == 1 and light.unmerged_rows == 1
    assert (light.pending, light.unmerged_rows, light.entries) == (
        heavy.pending,
        heavy.unmerged_rows,
        heavy.entries,
    )
    assert main(["merge", "--table", "books"]) == 0

    capsys.readouterr()
    assert main(["status", "--table", "books"]) == 0
    out = capsys.readouterr().out
    stream = next(line for line in out.splitlines() if "STREAM" in line and "10:28:50" in line)
    # The batch's time range: its earliest change to its latest, not the earliest alone.
    assert "2026-01-14T10:28:50+00:00" in stream and "2026-01-14T10:29:51+00:00" in stream


def no_java() -> dict[str, str]:
    """An environment in which a JVM cannot start: no java on PATH, a JAVA_HOME that is none."""
    python_dir = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": python_dir, "JAVA_HOME": "/nonexistent"}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ingestion.cli", *args],
        cwd=ROOT,
        env=no_java(),
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_small_commands_need_no_jvm(spark, books_with_deletes: Path) -> None:
    assert shutil.which("java", path=no_java()["PATH"]) is None
    done = cli("status", "--table", "books")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "final rows: 4" in done.stdout
    done = cli("sync", "--table", "books", "--stream", str(books_with_deletes), "--settle", "0")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "nothing new to merge" in done.stdout
    done = cli("merge", "--table", "books")
    assert done.returncode == 0 and "nothing new to merge" in done.stdout, done.stderr[-2000:]
    done = cli("drift", "--table", "books")
    assert done.returncode == 0, done.stderr[-2000:]
    done = cli("query", "--engine", "duckdb", "select id from lakehouse.books order by id")
    assert done.returncode == 0 and "| f " in done.stdout.replace("|  f", "| f"), done.stdout
    done = cli("query", "--engine", "duckdb", "select * from lakehouse.nope")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr

    # Something new (a settled change file): the check without Spark hands over to Spark.
    record = sample_stream.stream_record(
        "books", "INSERT", {"id": {"S": "g"}}, None, book("g"), LATER + 120, 5
    )
    assert write_batch([record], str(books_with_deletes))[1] is None
    source = stage.StreamSource(str(books_with_deletes), 0.0, 1000, 0)
    assert stage.nothing_to_stage(get_table("books"), source) is None


def test_metadata_is_read_from_s3() -> None:
    """A warehouse on S3: the path without Spark reads the metadata file with the project's S3
    client (moto's server on 127.0.0.1, a test double for AWS only)."""
    import boto3
    import local_s3

    from ingestion.catalog import table_metadata

    with local_s3.server() as endpoint:
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        s3.create_bucket(Bucket="lake")
        s3.put_object(
            Bucket="lake", Key="w/t/metadata/1.metadata.json", Body=b'{"format-version": 2}'
        )
        with pytest.MonkeyPatch.context() as env:
            env.setenv("AWS_ENDPOINT_URL_S3", endpoint)
            assert table_metadata.size_of("s3://lake/w/t/metadata/1.metadata.json") == 21
