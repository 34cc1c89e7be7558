"""The merge report of a re-baseline into a table that already has delete files (finding 3 of
the audit: 3 rows -> 2, one deleted, was reported `updated 2, deleted 3`, because a MERGE into a
data file with a delete file rewrites the old positions into its new one). Through the CLI: a
`sync` of the full export, then `watch` ticks that merge a re-baseline and the change after it."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from support import book, final_ids

from ingestion import cli
from ingestion.samples import sample_exports
from ingestion.samples import stream as sample_stream
from ingestion.samples.items import BASE_TIME
from ingestion.sources.change_file_writer import write_batch

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def export(tmp_path: Path, name: str, items: list[dict], minutes: int) -> Path:
    moment = BASE_TIME + timedelta(minutes=minutes)
    return sample_exports.write_items_export(tmp_path / name, "books", items, moment, seed=minutes)


def modify(location: Path, key: str, title: str, minutes: int, sequence: int) -> None:
    seconds = int((BASE_TIME + timedelta(minutes=minutes)).timestamp())
    new = book(key, title)
    record = sample_stream.stream_record(
        "books", "MODIFY", {"id": new["id"]}, None, new, seconds, sequence
    )
    written, failed = write_batch([record], str(location))
    assert failed is None and written


def counts_row(out: str) -> list[str]:
    """rows, inserted, updated, deleted of the merge report's books line."""
    (line,) = [line for line in out.splitlines() if line.startswith("| lakehouse.books")]
    return [cell.strip() for cell in line.split("|")[2:6]]


def test_a_rebaseline_over_delete_files_counts_each_row_once(
    spark, clean_lakehouse, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b, c = book("a", "A"), book("b", "B"), book("c", "C")
    assert cli.main(["sync", "--table", "books", str(export(tmp_path, "f0", [a, b, c], 0))]) == 0
    location = tmp_path / "streams"
    modify(location, "a", "A2", 10, 1)
    modify(location, "b", "B2", 11, 2)
    stream = ["--stream", str(location), "--settle", "0"]
    assert cli.main(["sync", "--table", "books", *stream]) == 0  # a delete file over f0's rows
    capsys.readouterr()

    # A full export without c: 3 rows -> 2, c deleted, a and b restated (updated).
    f1 = export(tmp_path, "f1", [book("a", "A2"), book("b", "B2")], 60)
    assert cli.main(["sync", "--table", "books", str(f1)]) == 0
    assert counts_row(capsys.readouterr().out) == ["2", "0", "2", "1"]
    assert final_ids(spark) == ["a", "b"]

    # A watch tick that merges a re-baseline (staged by `ingest`) with a stream change, then a
    # tick after it: each reports what it did.
    f2 = export(tmp_path, "f2", [book("a", "A2")], 120)
    assert cli.main(["ingest", "--table", "books", str(f2)]) == 0
    modify(location, "a", "A3", 130, 3)
    watch = ["watch", "--table", "books", *stream, "--interval", "0", "--ticks", "1"]
    capsys.readouterr()
    assert cli.main(watch) == 0
    assert "tick 1: 1 files, 1 changes, +0 ~1 -1," in capsys.readouterr().out
    modify(location, "a", "A4", 140, 4)
    assert cli.main(watch) == 0
    assert "tick 1: 1 files, 1 changes, +0 ~1 -0," in capsys.readouterr().out
    assert final_ids(spark) == ["a"]


def test_a_full_export_of_an_empty_table_deletes_every_older_row(
    spark, clean_lakehouse, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The re-baseline's version comes from the ledger (ingestion/merge/full_exports.py,
    full_export_versions), not from a scan of the change log's `snapshot` rows: an export of an
    empty table stages none, and a scan would find no re-baseline, leaving every row it no longer
    holds. A row newer than the export (a stream change after it) stays."""
    f0 = export(tmp_path, "f0", [book("a", "A"), book("b", "B")], 0)
    assert cli.main(["sync", "--table", "books", str(f0)]) == 0
    assert final_ids(spark) == ["a", "b"]
    location = tmp_path / "streams"
    modify(location, "b", "B2", 90, 1)  # after the empty export's time: kept
    assert cli.main(["ingest", "--table", "books", str(export(tmp_path, "f1", [], 60))]) == 0
    assert cli.main(["ingest", "--table", "books", "--stream", str(location), "--settle", "0"]) == 0
    capsys.readouterr()
    assert cli.main(["merge", "--table", "books"]) == 0
    assert counts_row(capsys.readouterr().out) == ["1", "0", "1", "1"]
    assert final_ids(spark) == ["b"]
