"""`history: true` (docs/history.md): `lakehouse.<table>__history` holds every version the lakehouse
staged, as of any instant. Through the CLI: a full export, stream changes (a key deleted and
created again, two changes of one second ordered by sequence), an incremental export applied
after newer stream changes, a second full export that restates two items unchanged and lacks
one; each batch merged on its own, then all at once in a fresh lakehouse. The expected states are
written out by hand below, instant by instant."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from conftest import reset_lakehouse
from support import book

from ingestion.cli import main
from ingestion.config.settings import project_dir
from ingestion.merge.merge_log import MERGE_LOG
from ingestion.merge.runner import dbt_invoke
from ingestion.samples import sample_exports
from ingestion.samples import stream as sample_stream
from ingestion.samples.items import BASE_TIME
from ingestion.sources.change_file_writer import write_batch

pytestmark = [pytest.mark.slow, pytest.mark.integration]

HISTORY = "lake.lakehouse.shelf__history"


def at(minutes: int) -> int:
    return int((BASE_TIME + timedelta(minutes=minutes)).timestamp())


def instant(minutes: float) -> datetime:
    return (BASE_TIME + timedelta(minutes=minutes)).replace(tzinfo=None)


def as_of(spark, minutes: float) -> dict[str, str]:
    """The live items of the history at an instant: id -> title."""
    spark.sql(f"refresh table {HISTORY}")
    t = instant(minutes).isoformat(sep=" ")
    rows = spark.sql(
        f"select id, title from {HISTORY} where valid_from <= timestamp'{t}' "
        f"and (valid_to is null or valid_to > timestamp'{t}') "
        "and _operation not in ('delete', 'ttl_delete')"
    ).collect()
    return {r["id"]: r["title"] for r in rows}


def versions(spark) -> list[tuple]:
    spark.sql(f"refresh table {HISTORY}")
    rows = spark.table(HISTORY).select("id", "title", "_operation", "valid_from", "valid_to")
    return sorted(
        (tuple(r) for r in rows.collect()),
        key=lambda r: (r[0], r[3], r[4] is None, r[4] or r[3], r[1] or ""),
    )


def final(spark) -> dict[str, str]:
    spark.sql("refresh table lake.lakehouse.shelf")
    return {r["id"]: r["title"] for r in spark.table("lake.lakehouse.shelf").collect()}


def add_shelf() -> None:
    """A table ``shelf`` (``books``' items) registered with its history, as a user does."""
    assert main(["add-table", "shelf", "--partition-key", "id:S", "--history"]) == 0
    assert "      history: true\n" in (project_dir() / "dbt_project.yml").read_text()
    model = project_dir() / "models/marts/shelf__history.sql"
    assert model.exists()
    # As for a key set by hand after add-table: the first merging command writes the model.
    model.unlink()
    (project_dir() / "models/marts/shelf__history.yml").unlink()


def modify(old: dict, new: dict, minutes: int, sequence: int, event: str = "MODIFY") -> dict:
    return sample_stream.stream_record("shelf", event, {"id": new["id"]}, old, new, at(minutes), sequence)  # fmt: skip


def sources(tmp_path: Path) -> list[tuple[str, Path, list[dict] | None]]:
    """In arrival order: (kind, where, stream records to write there first)."""
    k1, k2, k3 = book("k1", "one"), book("k2", "two"), book("k3", "three")
    k1b, k2b = book("k1", "one again"), book("k2", "two b")
    k3b, k3c = book("k3", "three b"), book("k3", "three c")
    k2d, k2i = book("k2", "two d"), book("k2", "two inc")
    f0 = sample_exports.write_items_export(
        tmp_path / "f0", "shelf", [k1, k2, k3], instant(0), seed=1
    )
    s1 = [
        modify(k2, k2b, 10, 1),
        sample_stream.stream_record("shelf", "REMOVE", {"id": k1["id"]}, k1, None, at(11), 2),
        modify(None, k1b, 12, 3, "INSERT"),
        modify(k3, k3b, 13, 4),
        modify(k3b, k3c, 13, 5),  # the same second: the sequence orders them
    ]
    s2 = [modify(k2b, k2d, 40, 6)]
    line = {
        "Metadata": {"WriteTimestampMicros": {"N": str(at(20) * 1_000_000)}},
        "Keys": {"id": k2["id"]},
        "OldImage": k2b,
        "NewImage": k2i,
    }
    window = (instant(0), instant(30))
    inc = sample_exports.write_incremental_export(tmp_path / "inc", "shelf", [line], window, seed=2)
    # k1 and k2 restated unchanged, k4 new, k3 missing: closed at the export's instant
    f1 = sample_exports.write_items_export(tmp_path / "f1", "shelf", [k1b, k2d, book("k4", "four")], instant(60), seed=3)  # fmt: skip
    s3 = [modify(None, book("k3", "three again"), 70, 7, "INSERT")]
    # a change older than f1, of an item f1 does not hold, staged after it: the final table's
    # baseline rule removes it at once; the history has it until f1's instant
    s4 = [modify(None, book("k9", "nine"), 50, 8, "INSERT")]
    streams = tmp_path / "streams"
    return [
        ("export", f0, None),
        ("stream", streams, s1),
        ("stream", streams, s2),
        ("export", inc, None),  # after s2's newer change of k2
        ("export", f1, None),
        ("stream", streams, s3),
        ("stream", streams, s4),
    ]


def ingest(kind: str, where: Path, records: list[dict] | None, command: str) -> None:
    if records:
        written, failed = write_batch(records, str(where))
        assert failed is None and written
    args = [command, "--table", "shelf"]
    args += ["--stream", str(where), "--settle", "0"] if kind == "stream" else [str(where)]
    assert main(args) == 0


# The history's live items after each source, at the instants that matter (minutes).
EXPECTED = [
    {0: {"k1": "one", "k2": "two", "k3": "three"}},
    {
        10.5: {"k1": "one", "k2": "two b", "k3": "three"},
        11.5: {"k2": "two b", "k3": "three"},
        14: {"k1": "one again", "k2": "two b", "k3": "three c"},
    },
    {41: {"k1": "one again", "k2": "two d", "k3": "three c"}},
    {
        35: {"k1": "one again", "k2": "two inc", "k3": "three c"},
        29: {"k1": "one again", "k2": "two b", "k3": "three c"},
    },
    {
        60: {"k1": "one again", "k2": "two d", "k4": "four"},
        59: {"k1": "one again", "k2": "two d", "k3": "three c"},
    },
    {71: {"k1": "one again", "k2": "two d", "k3": "three again", "k4": "four"}},
    {
        55: {"k1": "one again", "k2": "two d", "k3": "three c", "k9": "nine"},
        60: {"k1": "one again", "k2": "two d", "k4": "four"},
    },
]


def queried_as_of(
    capsys: pytest.CaptureFixture[str], minutes: float, engine: str
) -> dict[str, str]:
    """``query --as-of`` of the final table, through the CLI: id -> title."""
    moment = (BASE_TIME + timedelta(minutes=minutes)).isoformat()
    capsys.readouterr()
    sql = "select id, title from lakehouse.shelf"
    args = ["query", "--as-of", moment, "--engine", engine, "--format", "json", sql]
    assert main(args) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    return {r["id"]: r["title"] for r in rows}


def test_the_history_holds_every_version_as_of_any_instant_whatever_the_batches(
    spark, clean_lakehouse, project_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    add_shelf()
    arrivals = sources(tmp_path / "one")
    for (kind, where, records), expected in zip(arrivals, EXPECTED, strict=True):
        ingest(kind, where, records, "sync")
        for minutes, items in expected.items():
            assert as_of(spark, minutes) == items, (where.name, minutes)
    # Every instant still holds after the later sources (the late export moved only its own).
    for expected in EXPECTED:
        for minutes, items in expected.items():
            late = {"k9": "nine"} if 50 < minutes < 60 else {}  # s4, staged after the fact
            assert as_of(spark, minutes) == {**items, **late}, minutes
    # query --as-of reads the final table as of an instant, on both engines; a table without a
    # history and an instant that is none are refused.
    for engine in ("spark", "duckdb"):
        assert queried_as_of(capsys, 35, engine) == EXPECTED[3][35], engine
        assert queried_as_of(capsys, 60, engine) == EXPECTED[4][60], engine
    assert main(["query", "--as-of", "2026-01-01", "select * from lakehouse.books"]) == 2
    assert "lakehouse.books has no history" in capsys.readouterr().err
    assert main(["query", "--as-of", "yesterday", "select 1"]) == 2
    assert "is no instant" in capsys.readouterr().err
    # A user's dbt model reads the table as of an instant with the macro dynamodb_as_of.
    model = project_dir() / "models/marts/shelf_at_35.sql"
    moment = instant(35).isoformat(sep=" ")
    model.write_text(
        "{{ config(materialized='table') }}\n"
        f"select id, title from {{{{ dynamodb_as_of('shelf', '{moment}') }}}} as shelf\n"
    )
    dbt_invoke(["run", "--select", "shelf_at_35"])
    rows_at_35 = spark.table("lake.lakehouse.shelf_at_35").collect()
    assert {r["id"]: r["title"] for r in rows_at_35} == EXPECTED[3][35]
    model.unlink()
    spark.sql("drop table lake.lakehouse.shelf_at_35")
    # The current versions are the final table's rows.
    assert as_of(spark, 10_000) == final(spark)
    rows = versions(spark)
    titles = [(r[0], r[1], r[2]) for r in rows]
    # f1 restated k1 and k2 unchanged: no row; k3 closed at f1's instant, then created again.
    assert [t for t in titles if t[0] == "k2"] == [
        ("k2", "two", "snapshot"), ("k2", "two b", "update"), ("k2", "two inc", "update"), ("k2", "two d", "update"),
    ]  # fmt: skip
    k3 = [r for r in rows if r[0] == "k3"]
    (close,) = [r for r in k3 if r[2] == "delete"]
    (again,) = [r for r in k3 if r[1] == "three again"]
    assert close[1] is None and close[3] == instant(60) and close[4] == again[3]
    same_second = [r for r in k3 if r[1] == "three b"]
    assert same_second and same_second[0][3] == same_second[0][4]  # valid for no time at all
    assert [r[2] for r in rows if r[0] == "k9"] == ["insert", "delete"]  # closed at f1's instant
    assert len(rows) == 15

    # Replayed: every batch merged again (the merge log forgotten, as after a failed test)
    # adds nothing and moves nothing.
    spark.sql(f"delete from {MERGE_LOG} where table_name = 'shelf'")
    assert main(["merge", "--table", "shelf"]) == 0
    assert versions(spark) == rows

    # All at once in a fresh lakehouse: the same history.
    reset_lakehouse(spark)
    for kind, where, records in sources(tmp_path / "all"):
        ingest(kind, where, records, "ingest")
    assert main(["merge", "--table", "shelf"]) == 0
    assert versions(spark) == rows

    # A drift adoption rebuilds the final table; the history keeps its rows and takes the
    # widened type (`pages`: bigint, then given 1.5).
    drift = tmp_path / "drift"
    k2d, k2e, k2f = book("k2", "two d"), {**book("k2", "two e"), "pages": {"N": "1"}}, {**book("k2", "two f"), "pages": {"N": "1.5"}}  # fmt: skip
    ingest("stream", drift, [modify(k2d, k2e, 80, 8)], "sync")
    ingest("stream", drift, [modify(k2e, k2f, 81, 9)], "sync")
    spark.sql(f"refresh table {HISTORY}")
    assert dict(spark.table(HISTORY).dtypes)["pages"] == "decimal(38,1)"
    assert len(versions(spark)) == len(rows) + 2
    assert as_of(spark, 60) == EXPECTED[4][60]
    assert as_of(spark, 10_000) == final(spark)
    pages = spark.sql(f"select pages from {HISTORY} where title = 'two f'").first()
    assert str(pages["pages"]) == "1.5"

    # maintain compacts the history too: its delete files (each merge's moved valid_to) go,
    # its versions stay.
    before = versions(spark)
    assert spark.table(f"{HISTORY}.delete_files").count() > 0
    assert main(["maintain", "--table", "shelf"]) == 0
    spark.sql(f"refresh table {HISTORY}")
    assert spark.table(f"{HISTORY}.delete_files").count() == 0
    assert versions(spark) == before

    # remove-table drops the history with the rest.
    assert main(["remove-table", "shelf", "--yes"]) == 0
    assert not spark.catalog.tableExists(HISTORY)
