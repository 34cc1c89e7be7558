"""One merge of one table reads the table's state once: its metadata, kept types, ledger and
merge log, through its handle (``ingestion.catalog.table``), and the table is passed on through
few calls (``table_trace``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from table_trace import traced

from ingestion.catalog import merge_log, table_metadata
from ingestion.cli import main
from ingestion.project import onboarding
from ingestion.samples import sample_exports
from ingestion.samples import stream as sample_stream
from ingestion.samples.items import BASE_TIME
from ingestion.schema import schema_file
from ingestion.sources.change_file_writer import write_batch

pytestmark = [pytest.mark.slow, pytest.mark.integration]

LATER = int(BASE_TIME.timestamp()) + 3600


def item(key: str, title: str) -> dict[str, Any]:
    return {"id": {"S": key}, "title": {"S": title}}


@pytest.fixture
def table_h(spark, clean_lakehouse, project_copy: Path, tmp_path: Path):
    """Table ``h`` (history on), synced from a full export; yields its stream's folder, which
    holds one staged batch not merged yet."""
    onboarding.add_table("h", "id:S", None, history=True)
    full = sample_exports.write_items_export(
        tmp_path / "full", "h", [item(str(n), f"T{n}") for n in range(20)]
    )
    assert main(["sync", "--table", "h", str(full)]) == 0
    streams = tmp_path / "streams"
    record = sample_stream.stream_record(
        "h", "MODIFY", {"id": {"S": "1"}}, item("1", "T1"), item("1", "T1b"), LATER, 1
    )
    assert write_batch([record], str(streams))[1] is None
    assert main(["ingest", "--table", "h", "--stream", str(streams), "--settle", "0"]) == 0
    yield streams
    schema_file.schema_path("h").unlink(missing_ok=True)
    for name in ("lake.staging.h", "lake.lakehouse.h", "lake.lakehouse.h__history"):
        spark.sql(f"drop table if exists {name}")


@pytest.mark.parametrize("without_jvm_first", [True, False], ids=["files-then-spark", "spark"])
def test_one_merge_reads_each_part_of_its_tables_state_once(
    spark, table_h: Path, monkeypatch: pytest.MonkeyPatch, without_jvm_first: bool
) -> None:
    """The change log's metadata, its kept types, its ledger and the merge log: once each. The
    final table's metadata: once before the merge and once after its own commit (the state the
    counts read); its history's once. Where the target lets `merge` look without a JVM first
    (the embedded catalog), that look reads the change log from its files, and the merge reads
    it again through Spark, fresh, where it decides (a rebuild may commit while Spark starts):
    two reads, each once."""
    if not without_jvm_first:
        monkeypatch.setenv("LAKEHOUSE_NO_LIGHT", "1")  # as on the emr target: Spark only
    table_metadata.READS.clear()
    with traced("h") as trace:
        assert main(["merge", "--table", "h"]) == 0
    reads = dict(table_metadata.READS)
    if os.environ.get("LAKEHOUSE_TRACE"):
        print(reads, trace.report(), sep="\n")
    twice = 2 if without_jvm_first else 1  # the look without a JVM, then the merge
    assert reads.pop(("metadata", "lake.staging.h")) == twice
    assert reads.pop(("ledger", "h")) == twice
    assert reads.pop(("types", "h")) == 1
    assert reads.pop(("merge log", "h")) == 1  # the final table's rows and its history's
    # The merge log's own metadata, which says whether its rows changed since the last read:
    # through Spark only (DuckDB reads the catalog's pointer to it).
    assert reads.pop(("metadata", "lake.staging.dynamodb_lakehouse_merges"), 0) <= 1
    assert reads.pop(("metadata", "lake.lakehouse.h__history")) == 1
    assert reads.pop(("metadata", "lake.lakehouse.h")) == 2
    assert reads == {}  # nothing else: no other table, no second read
    # The merge happened: the stream's change is in the final table.
    spark.sql("refresh table lake.lakehouse.h")
    assert spark.table("lake.lakehouse.h").where("id = '1'").first()["title"] == "T1b"
    # How far the table travels (tests/table_trace.py): measured, and held where it is now.
    assert len(trace.stops) <= STOPS, trace.report()
    assert max(trace.entries.values()) <= ENTRIES, trace.report()


def test_a_final_table_without_its_batch_column_is_refused_not_altered(
    spark, table_h: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every full build creates `_inserted_batch_id`; the merge never adds it behind the model's
    back: a final table without it is refused in one line naming the rebuild, nothing merged."""
    spark.sql("alter table lake.lakehouse.h drop column _inserted_batch_id")
    before = spark.sql("select count(*) from lake.lakehouse.h.snapshots").first()[0]
    capsys.readouterr()
    assert main(["merge", "--table", "h"]) == 2
    said = capsys.readouterr()
    text = said.out + said.err  # dbt's line (its own output) and the command's
    assert "has no _inserted_batch_id column" in text and "rebuild --table h" in text
    assert "_inserted_batch_id" not in spark.table("lake.lakehouse.h").columns
    spark.sql("refresh table lake.lakehouse.h")
    assert spark.sql("select count(*) from lake.lakehouse.h.snapshots").first()[0] == before
    assert len(merge_log.new_batches(spark, "h", history=True)) == 1  # still to merge


# One merge of one table with its history (table_trace), at most: its stops, and how often the
# busiest file is entered (files then Spark: 75 and table.py 7; Spark only: 64 and 6). Before the
# table handle: 151 stops, names.py entered 28 times.
STOPS = 75
ENTRIES = 7
