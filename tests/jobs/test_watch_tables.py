"""One `watch` for several stream tables: one process, one Spark session, one lease per table,
one merge a tick; through the CLI, with the final tables read back."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import final_ids

from ingestion import cli
from ingestion.catalog import merge_log
from ingestion.jobs import lease
from ingestion.samples import stream as sample_stream
from ingestion.sources.change_file_writer import write_batch

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def _write(location: Path, records: list[dict]) -> None:
    written, failed = write_batch(records, str(location))
    assert failed is None and written


def _book(key: str, seconds: int, sequence: int) -> dict:
    image = {"id": {"S": key}, "title": {"S": f"title {key}"}}
    return sample_stream.stream_record(
        "books", "INSERT", {"id": {"S": key}}, None, image, seconds, sequence
    )


def _order(customer: str, order: str, seconds: int, sequence: int) -> dict:
    keys = {"customer_id": {"S": customer}, "order_id": {"S": order}}
    image = {**keys, "status": {"S": "NEW"}}
    return sample_stream.stream_record("orders", "INSERT", keys, None, image, seconds, sequence)


def _order_keys(spark) -> list[tuple[str, str]]:
    spark.sql("refresh table lake.lakehouse.orders")
    rows = spark.table("lake.lakehouse.orders").select("customer_id", "order_id").collect()
    return sorted((r[0], r[1]) for r in rows)


def test_one_watch_merges_every_table_in_one_tick(
    spark, clean_lakehouse, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    location = tmp_path / "streams"
    _write(location, [_book("b1", 1769000000, 1), _book("b2", 1769000001, 2)])
    _write(location, [_order("c1", "o1", 1769000000, 3)])
    command = ["watch", "--table", "books", "--table", "orders", "--stream", str(location)]
    command += ["--interval", "0", "--ticks", "1", "--settle", "0", "--test-every", "1"]
    assert cli.main(command) == 0
    out = capsys.readouterr().out
    assert "watching " + str(location) + " for books, orders" in out
    assert "tick 1 books: 1 files, 2 changes, +2 ~0 -0" in out
    assert "tick 1 orders: 1 files, 1 changes, +1 ~0 -0" in out
    assert final_ids(spark) == ["b1", "b2"]
    assert _order_keys(spark) == [("c1", "o1")]
    assert merge_log.new_batches(spark, "books") == merge_log.new_batches(spark, "orders") == []
    # Both leases were released on the way out.
    seen: list[object] = []
    for table in ("books", "orders"):
        lease._swap(spark, table, lambda current: seen.append(current))
    assert seen == [None, None]

    # A second tick with files for one table only merges that one.
    _write(location, [_order("c1", "o2", 1769000010, 4)])
    assert cli.main(command) == 0
    out = capsys.readouterr().out
    assert "tick 1 books: 0 files, 0 changes, +0 ~0 -0" in out
    assert "tick 1 orders: 1 files, 1 changes, +1 ~0 -0" in out
    assert _order_keys(spark) == [("c1", "o1"), ("c1", "o2")]


def test_a_table_another_watch_holds_is_left_and_the_others_watched(
    spark,
    clean_lakehouse,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Short leases: a newcomer sees the holder renew within a second, not within 30 s.
    monkeypatch.setenv("LAKEHOUSE_LEASE_SECONDS", "4")
    location = tmp_path / "streams"
    _write(location, [_book("b9", 1769000000, 1)])
    other = lease.hold(spark, "orders", "watch", report=lambda _: None)  # another machine's
    try:
        command = ["watch", "--table", "books", "--table", "orders", "--stream", str(location)]
        command += ["--interval", "0", "--ticks", "1", "--settle", "0", "--if-free"]
        assert cli.main(command) == 0
        out = capsys.readouterr().out
        assert "orders: already watched, nothing to do" in out
        assert "watching " + str(location) + " for books:" in out
        assert final_ids(spark) == ["b9"]
        other.check()  # still its holder
        # Without --if-free, a held table is an error and nothing is watched.
        assert cli.main(command[:-1]) == 2
        assert "another watch of table orders holds its lease" in capsys.readouterr().err
    finally:
        other.release()


def test_one_failing_table_holds_no_other_back(
    spark, clean_lakehouse, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A damaged change file of `orders` (more damaged lines than --max-rejects allows) fails
    orders' step; books is staged and merged in the same tick; one table failing
    --max-failures ticks in a row stops the watch, naming it."""
    import gzip

    location = tmp_path / "streams"
    _write(location, [_book("b5", 1769000000, 1)])
    _write(location, [_order("c1", "o1", 1769000000, 2)])
    (damaged,) = (location / "orders").glob("*.json.gz")
    damaged.write_bytes(gzip.compress(b"this is no stream record\n"))
    command = ["watch", "--table", "books", "--table", "orders", "--stream", str(location)]
    command += ["--interval", "0", "--settle", "0", "--max-failures", "2"]
    assert cli.main([*command, "--ticks", "1"]) == 0
    out = capsys.readouterr().out
    assert "tick 1 books: 1 files, 1 changes, +1" in out
    assert "tick 1 orders: FAILED: " in out
    assert final_ids(spark) == ["b5"]
    assert cli.main([*command, "--ticks", "5"]) == 2
    captured = capsys.readouterr()
    assert "table orders: 2 ticks in a row failed; last error: " in captured.err
    assert captured.out.count("orders: FAILED") == 2


def test_tables_staged_at_once_keep_their_rejects_apart(
    spark, clean_lakehouse, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tick stages its tables on threads of one session: each table's damaged lines are set
    aside in its own rejects table (a shared temporary view would mix them). The loggers each
    staging job silences: tests/spark/test_spark_config.py."""
    import gzip

    location = tmp_path / "streams"
    _write(location, [_book("b7", 1769000000, 1)])
    _write(location, [_order("c7", "o7", 1769000000, 2)])
    for table in ("books", "orders"):
        (written,) = (location / table).glob("*.json.gz")
        lines = gzip.decompress(written.read_bytes()) + f"damaged line of {table}\n".encode()
        written.write_bytes(gzip.compress(lines))
    command = ["watch", "--table", "books", "--table", "orders", "--stream", str(location)]
    command += ["--interval", "0", "--ticks", "1", "--settle", "0", "--max-rejects", "5"]
    assert cli.main(command) == 0
    out = capsys.readouterr().out
    assert "tick 1 books: 1 files, 1 changes, +1" in out
    assert "tick 1 orders: 1 files, 1 changes, +1" in out
    for table in ("books", "orders"):
        rejects = spark.table(f"lake.staging.{table}_rejects").select("raw").collect()
        assert [r["raw"] for r in rejects] == [f"damaged line of {table}"]
    assert final_ids(spark) == ["b7"]
    assert _order_keys(spark) == [("c7", "o7")]
