"""The command line, and several processes sharing one embedded lakehouse at once."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import ROOT

from ingestion import cli
from ingestion.dynamodb.tables import get_table
from ingestion.merge import runner
from ingestion.staging.exports import ingest_export

BIN = Path(sys.executable).parent


def run(args: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def test_unknown_table_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["ingest", "--table", "nope", "/nowhere"]) == 2
    assert "unknown table 'nope'" in capsys.readouterr().err


def test_ingest_needs_exports_or_a_stream_not_both(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["ingest", "--table", "books"]) == 2
    assert "give export folders, or --stream" in capsys.readouterr().err
    assert cli.main(["ingest", "--table", "books", "/x", "--stream", "/y"]) == 2
    assert "not both" in capsys.readouterr().err


def test_watch_check_every_is_hours_or_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    from datetime import timedelta

    from ingestion.cli import app

    def parsed(*given: str):
        return app.parser().parse_args(["watch", "--table", "books", "--stream", "/s", *given])

    assert parsed().check_every == timedelta(hours=24)
    assert parsed("--check-every", "1.5").check_every == timedelta(hours=1.5)
    assert parsed("--check-every", "0").check_every is None  # never
    for bad, said in (("-1", "a negative period"), ("daily", "not a number of hours")):
        with pytest.raises(SystemExit) as stopped:
            parsed("--check-every", bad)
        assert stopped.value.code == 2 and said in capsys.readouterr().err


def test_a_stream_location_is_a_folder_or_s3(capsys: pytest.CaptureFixture[str]) -> None:
    from ingestion.sources import stream_files

    with pytest.raises(stream_files.StreamError, match="local folder or s3://"):
        stream_files.store_for("gs://bucket/prefix", "books")


def test_a_second_watch_of_a_table_stops_with_a_clear_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ingestion.jobs.table_lock import hold

    monkeypatch.setenv("LAKEHOUSE_HOME", str(tmp_path))
    held = hold(tmp_path, "books", "watch")  # the first watch (this process holds the lock)
    # The second is refused before Spark starts; another table is not affected.
    assert cli.main(["watch", "--table", "books", "--stream", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "another watch of table books is running on this machine" in err
    assert f"pid {os.getpid()}" in err
    hold(tmp_path, "orders", "watch").close()
    held.close()  # the first one ends (the kernel also frees it on kill -9)
    hold(tmp_path, "books", "watch").close()


@pytest.mark.slow
def test_missing_export_is_a_clear_error(
    spark, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert cli.main(["ingest", "--table", "books", str(tmp_path / "AWSDynamoDB" / "x")]) == 2
    assert "does not exist: give an export folder" in capsys.readouterr().err


@pytest.mark.slow
def test_bad_sql_is_a_clear_error(spark, capsys: pytest.CaptureFixture[str]) -> None:
    """A typo in a table name or in the SQL: one line (``QueryError``), not Spark's message with
    its query plan."""
    assert cli.main(["query", "select * from lakehouse.no_such_table"]) == 2
    err = capsys.readouterr().err
    assert "no_such_table" in err and err.startswith("error: ")
    assert err.count("\n") == 1 and "UnresolvedRelation" not in err, err  # no query plan
    assert cli.main(["query", "selec 1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "selec" in err, err


@pytest.mark.slow
@pytest.mark.integration
def test_processes_share_the_lakehouse(spark, clean_lakehouse, samples) -> None:
    """This process keeps its Spark session (and catalog connection) open while others commit,
    query and read: the SQLite catalog must not lock them out (SQLITE_BUSY)."""
    ingest_export(spark, get_table("books"), str(samples["books"]))
    runner.run_merge(spark, [get_table("books")], test=False)

    # Another JVM commits through spark-submit, as the README shows.
    submitted = run(
        [
            str(BIN / "spark-submit"),
            "--master",
            "local[2]",
            "ingestion/main.py",
            "ingest",
            "--table",
            "orders",
            str(samples["orders"]),
        ]
    )
    assert submitted.returncode == 0, submitted.stderr[-3000:]
    assert "| orders | " in submitted.stdout and "| 60 " in submitted.stdout
    assert spark.table("lake.staging.orders").count() == 60  # visible here at once

    # A third process queries while this one is still open.
    queried = run(
        [
            str(BIN / "ddb-lakehouse"),
            "query",
            "select count(*) as n from lakehouse.books",
            "--format",
            "json",
        ]
    )
    assert queried.returncode == 0, queried.stderr[-3000:]
    assert json.loads(queried.stdout.strip().splitlines()[-1]) == {"n": 60}

    # And a reader without Spark, through the same catalog file.
    from pyiceberg.catalog.sql import SqlCatalog

    home = Path(os.environ["LAKEHOUSE_HOME"])
    catalog = SqlCatalog(
        "lake", uri=f"sqlite:///{home}/catalog.db", warehouse=f"file://{home}/warehouse"
    )
    assert catalog.load_table("lakehouse.books").scan().to_arrow().num_rows == 60
    spark.sql(
        "insert into lake.staging.orders select * from lake.staging.orders limit 1"
    )  # still can write


@pytest.mark.slow
@pytest.mark.integration
def test_merge_of_every_table_skips_a_table_with_nothing_staged(
    spark, clean_lakehouse, samples, capsys: pytest.CaptureFixture[str]
) -> None:
    """`merge` ran dbt for every configured table: a table never staged (no staging table)
    failed the whole merge, as on the first run of a deploy that had synced only orders."""
    ingest_export(spark, get_table("orders"), str(samples["orders"]))
    assert cli.main(["merge"]) == 0
    assert "books: nothing staged yet, skipped" in capsys.readouterr().out
    assert spark.table("lake.lakehouse.orders").count() == 60
    assert not spark.catalog.tableExists("lake.lakehouse.books")


NESTED = (
    "select named_struct('test', cast('abc' as binary)) as m, "
    "array(named_struct('a', 1), named_struct('a', 2)) as l, "
    "map('k', named_struct('b', cast(2.50 as decimal(10, 2)))) as mp, "
    "named_struct('inner', named_struct('ok', true)) as deep"
)


@pytest.mark.slow
def test_query_prints_structs_with_their_field_names_in_every_format(
    spark, capsys: pytest.CaptureFixture[str]
) -> None:
    """A struct is a Spark Row, which is a tuple: json and csv printed it as a list and dropped
    its field names (an M attribute {"test": <B>} came out as ["616263"])."""
    expected = {
        "m": {"test": "616263"},
        "l": [{"a": 1}, {"a": 2}],
        "mp": {"k": {"b": "2.50"}},
        "deep": {"inner": {"ok": True}},
    }
    capsys.readouterr()
    assert cli.main(["query", NESTED, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out.strip()) == expected
    assert cli.main(["query", NESTED, "--format", "csv"]) == 0
    header, row = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert dict(zip(header, map(json.loads, row), strict=True)) == expected
    assert cli.main(["query", NESTED, "--format", "table"]) == 0
    assert '{"test": "616263"}' in capsys.readouterr().out
