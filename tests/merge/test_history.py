"""`history: true` (docs/history.md): `lakehouse.<table>__history` holds every version the lakehouse
staged, as of any instant. Through the CLI: a full export, stream changes (a key deleted and
created again, two changes of one second ordered by sequence), an incremental export applied
after newer stream changes, a second full export that restates two items unchanged and lacks
one; each batch merged on its own, then all at once in a fresh lakehouse. The expected states are
written out by hand below, instant by instant."""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from conftest import reset_lakehouse
from history_replay import history_rows, replayed, valid_at
from single_table_reference import KEY_VALUES, TYPE_VALUES, USERS, change, incremental, s
from single_table_reference import key as app_key
from support import book

from ingestion.catalog.merge_log import MERGE_LOG
from ingestion.cli import main
from ingestion.config.settings import project_dir
from ingestion.merge.dbt_process import dbt_invoke
from ingestion.samples import sample_exports, single_table
from ingestion.samples import stream as sample_stream
from ingestion.samples.items import BASE_TIME
from ingestion.sources import manifest
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
        f"select id, title from {HISTORY} where _valid_from <= timestamp'{t}' "
        f"and (_valid_to is null or _valid_to > timestamp'{t}') "
        "and _operation not in ('delete', 'ttl_delete')"
    ).collect()
    return {r["id"]: r["title"] for r in rows}


def versions(spark) -> list[tuple]:
    spark.sql(f"refresh table {HISTORY}")
    rows = spark.table(HISTORY).select("id", "title", "_operation", "_valid_from", "_valid_to")
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
    return sample_stream.stream_record(
        "shelf", event, {"id": new["id"]}, old, new, at(minutes), sequence
    )


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
    f1 = sample_exports.write_items_export(
        tmp_path / "f1", "shelf", [k1b, k2d, book("k4", "four")], instant(60), seed=3
    )
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
    # verify --as-of compares the history at each full export's instant with that export, item
    # by item: equal, though the final table moved on. A history that differs is found.
    for export in (arrivals[0][1], arrivals[4][1]):
        assert main(["verify", "--table", "shelf", "--as-of", str(export)]) == 0
        assert (
            "shelf__history as of the export's instant, against the full export"
            in capsys.readouterr().out
        )
    spark.sql(f"update {HISTORY} set title = 'tampered' where id = 'k2' and title = 'two'")
    assert (
        main(["verify", "--table", "shelf", "--as-of", "--format", "json", str(arrivals[0][1])])
        == 1
    )
    report = json.loads(capsys.readouterr().out)
    assert report["counts"]["different"] == 1 and report["history_as_of"], report
    spark.sql(f"update {HISTORY} set title = 'two' where id = 'k2' and title = 'tampered'")
    assert main(["verify", "--table", "books", "--as-of", str(arrivals[0][1])]) == 2
    assert "keeps none: set `history: true`" in capsys.readouterr().err
    assert main(["verify", "--table", "shelf", "--as-of", "--repair", str(arrivals[0][1])]) == 2
    assert "without --repair and --metrics" in capsys.readouterr().err
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
        ("k2", "two", "snapshot"),
        ("k2", "two b", "update"),
        ("k2", "two inc", "update"),
        ("k2", "two d", "update"),
    ]
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
    k2d, k2e, k2f = (
        book("k2", "two d"),
        {**book("k2", "two e"), "pages": {"N": "1"}},
        {**book("k2", "two f"), "pages": {"N": "1.5"}},
    )
    ingest("stream", drift, [modify(k2d, k2e, 80, 8)], "sync")
    ingest("stream", drift, [modify(k2e, k2f, 81, 9)], "sync")
    spark.sql(f"refresh table {HISTORY}")
    assert dict(spark.table(HISTORY).dtypes)["pages"] == "decimal(38,1)"
    assert len(versions(spark)) == len(rows) + 2
    assert as_of(spark, 60) == EXPECTED[4][60]
    assert as_of(spark, 10_000) == final(spark)
    pages = spark.sql(f"select pages from {HISTORY} where title = 'two f'").first()
    assert str(pages["pages"]) == "1.5"

    # maintain compacts the history too: its delete files (each merge's moved _valid_to) go,
    # its versions stay.
    before = versions(spark)
    assert spark.table(f"{HISTORY}.delete_files").count() > 0
    assert main(["maintain", "--table", "shelf"]) == 0
    spark.sql(f"refresh table {HISTORY}")
    assert spark.table(f"{HISTORY}.delete_files").count() == 0
    assert versions(spark) == before

    # rebuild builds the final table again from the change log; the history keeps its rows.
    assert main(["rebuild", "--table", "shelf"]) == 0
    assert versions(spark) == before

    # A full export that holds no item (the table emptied) closes every live item at its
    # instant, as it empties the final table: known by the ledger, it stages no row.
    empty = sample_exports.write_items_export(tmp_path / "empty", "shelf", [], instant(200), seed=9)
    assert main(["sync", "--table", "shelf", str(empty)]) == 0
    assert final(spark) == {} and as_of(spark, 10_000) == {}
    assert as_of(spark, 199) == as_of(spark, 100) != {}
    closed = [r for r in versions(spark) if r[3] == instant(200)]
    assert closed and all(r[2] == "delete" for r in closed)

    # remove-table drops the history with the rest.
    assert main(["remove-table", "shelf", "--yes"]) == 0
    assert not spark.catalog.tableExists(HISTORY)


# --- The acceptance chain (issue 54): one full and three incremental exports and four stream
# batches, the expected states computed by replaying every change in plain Python.

CHAIN = "lake.lakehouse.shelf__history"


def item(key: str, title: str, pages: int) -> dict:
    return {"id": {"S": key}, "title": {"S": title}, "pages": {"N": str(pages)}}


def streamed(minutes: int) -> int:
    """A stream change's version: the last microsecond of its second (the stream gives seconds)."""
    return at(minutes) * 1_000_000 + 999_999


def exported(minutes: int) -> int:
    """An instant, in microseconds."""
    return at(minutes) * 1_000_000


def chain_sources(tmp_path: Path) -> list[tuple[str, Path, list[dict] | None, list[tuple]]]:
    """In arrival order: (kind, where, stream records, the changes it stages as
    (version, sequence, id, item or None; or "export", its items))."""
    streams = tmp_path / "streams"
    k = {
        "k1": item("k1", "one", 100),
        "k2": item("k2", "two", 200),
        "k3": item("k3", "three", 300),
        "k4": item("k4", "four", 400),
    }
    f0 = sample_exports.write_items_export(
        tmp_path / "f0", "shelf", list(k.values()), instant(0), seed=11
    )
    k1b, k2b, k3b, k3c = (
        item("k1", "one again", 101),
        item("k2", "two b", 201),
        item("k3", "three b", 301),
        item("k3", "three c", 302),
    )
    s1 = [
        modify(k["k2"], k2b, 5, 11),
        sample_stream.stream_record(
            "shelf", "REMOVE", {"id": k["k1"]["id"]}, k["k1"], None, at(6), 12
        ),
        modify(None, k1b, 7, 13, "INSERT"),  # deleted and created again
        modify(k["k3"], k3b, 8, 14),
        modify(k3b, k3c, 8, 15),  # the same second: the sequence orders them
    ]
    k2d = item("k2", "two d", 203)
    s2 = [modify(k2b, k2d, 25, 16)]

    def line(minutes: int, key: str, old: dict | None, new: dict | None) -> dict:
        found = {"Metadata": {"WriteTimestampMicros": {"N": str(at(minutes) * 1_000_000)}}}
        found["Keys"] = {"id": {"S": key}}
        return found | ({"OldImage": old} if old else {}) | ({"NewImage": new} if new else {})

    def incremental(name: str, lines: list[dict], start: int, end: int, seed: int) -> Path:
        window = (instant(start), instant(end))
        return sample_exports.write_incremental_export(
            tmp_path / name, "shelf", lines, window, seed=seed
        )

    k2i, k5 = item("k2", "two inc", 202), item("k5", "five", 500)
    # applied after s2's newer change of k2 (minute 25): placed between its neighbours
    i1 = incremental("i1", [line(15, "k2", k2b, k2i), line(12, "k5", None, k5)], 0, 20, 12)
    k3d = item("k3", "three d", 303)
    i2 = incremental("i2", [line(30, "k3", k3c, k3d), line(35, "k5", k5, None)], 20, 40, 13)
    ttl = sample_stream.stream_record(
        "shelf", "REMOVE", {"id": k["k4"]["id"]}, k["k4"], None, at(45), 17, ttl=True
    )
    k1c, k6 = item("k1", "one b", 102), item("k6", "six", 600)
    i3 = incremental("i3", [line(50, "k1", k1b, k1c), line(55, "k6", None, k6)], 40, 60, 14)
    k5b = item("k5", "five again", 501)
    s4 = [modify(None, k5b, 65, 18, "INSERT")]
    # An incremental export's line is at the end of its window (ingestion.dynamodb.decode).
    s, e = (
        streamed,
        {n: manifest.read_export(x).version_micros for n, x in ((1, i1), (2, i2), (3, i3))},
    )
    return [
        ("export", f0, None, [(manifest.read_export(f0).version_micros, "", "export", k)]),
        (
            "stream",
            streams,
            s1,
            [
                (s(5), 11, "k2", k2b),
                (s(6), 12, "k1", None),
                (s(7), 13, "k1", k1b),
                (s(8), 14, "k3", k3b),
                (s(8), 15, "k3", k3c),
            ],
        ),
        ("stream", streams, s2, [(s(25), 16, "k2", k2d)]),
        ("export", i1, None, [(e[1], "", "k2", k2i), (e[1], "", "k5", k5)]),
        ("export", i2, None, [(e[2], "", "k3", k3d), (e[2], "", "k5", None)]),
        ("stream", streams, [ttl], [(s(45), 17, "k4", None)]),  # a TTL expiry
        ("export", i3, None, [(e[3], "", "k1", k1c), (e[3], "", "k6", k6)]),
        ("stream", streams, s4, [(s(65), 18, "k5", k5b)]),
    ]


def check_chain(spark, changes: list[tuple]) -> list[dict]:
    """At every change's version (an export's instant among them), a microsecond before it and a
    second after it, the history's items are the replay's, value by value; its current rows are
    the final table's."""
    rows = history_rows(spark, CHAIN)
    for version in sorted({c[0] for c in changes}):
        for micros in (version - 1, version, version + 1_000_000):
            assert valid_at(rows, micros) == replayed(changes, micros), micros
    spark.sql("refresh table lake.lakehouse.shelf")
    current = {
        r["id"]: {"title": r["title"], "pages": int(r["pages"])}
        for r in spark.table("lake.lakehouse.shelf").collect()
    }
    assert valid_at(rows, exported(100_000)) == current
    return rows


def test_the_history_equals_a_replay_of_every_change_in_the_chain(
    spark, clean_lakehouse, project_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    add_shelf()
    arrivals = chain_sources(tmp_path / "one")
    changes: list[tuple] = []
    for kind, where, records, staged in arrivals:
        ingest(kind, where, records, "sync")  # each batch merged on its own
        changes += staged
        check_chain(spark, changes)
    rows = check_chain(spark, changes)
    assert len(rows) == 4 + 5 + 1 + 2 + 2 + 1 + 2 + 1  # one row per staged change
    key = ("id", "_version", "_sequence", "_valid_to")
    one_by_one = sorted(tuple(str(r[c]) for c in key) for r in rows)
    # The history as of the chain's full export is that export, item by item (verify --as-of).
    capsys.readouterr()
    main(["verify", "--table", "shelf", str(arrivals[0][1]), "--as-of"])
    said = capsys.readouterr().out
    assert "EQUAL" in said and "NOT EQUAL" not in said, said[-2000:]
    # Replaying every export changes nothing: delivered again (the ledger stages nothing), and
    # every batch merged again with the merge log forgotten (as after a failed test).
    for kind, where, _, _ in arrivals:
        if kind == "export":
            assert main(["sync", "--table", "shelf", str(where)]) == 0
    spark.sql(f"delete from {MERGE_LOG} where table_name = 'shelf'")
    assert main(["merge", "--table", "shelf"]) == 0
    assert sorted(tuple(str(r[c]) for c in key) for r in history_rows(spark, CHAIN)) == one_by_one
    # All at once in a fresh lakehouse: the same rows.
    reset_lakehouse(spark)
    for kind, where, records, _ in chain_sources(tmp_path / "all"):
        ingest(kind, where, records, "ingest")
    assert main(["merge", "--table", "shelf"]) == 0
    again = check_chain(spark, changes)
    assert sorted(tuple(str(r[c]) for c in key) for r in again) == one_by_one


# --- A single-table design: one history per entity table.

ENTITY_TABLES = ["app__user", "app__order", "app__address", "app__unmatched"]


def entity_history_matches(spark, final: str) -> int:
    """The entity table's history against it: its current rows are the entity table's, value by
    value, and no key's first row is a delete (another entity's change, which reaches every
    entity table as a delete under an attribute rule, adds no row where the key never was).
    Its rows."""
    history = f"lake.lakehouse.{final}__history"
    spark.sql(f"refresh table {history}")
    spark.sql(f"refresh table lake.lakehouse.{final}")
    rows = spark.table(f"lake.lakehouse.{final}")
    columns = [c for c in rows.columns if c != "_inserted_batch_id"]
    as_json = f"to_json(struct({', '.join(f'`{c}`' for c in columns)}))"
    held = sorted(r[0] for r in rows.selectExpr(as_json).collect())
    current = spark.table(history).where(
        "_valid_to is null and _operation not in ('delete', 'ttl_delete')"
    )
    assert sorted(r[0] for r in current.selectExpr(as_json).collect()) == held, final
    first = spark.sql(
        f"select _operation from (select _operation, row_number() over (partition by pk, sk "
        f"order by _valid_from, coalesce(_sequence, '')) as n from {history}) where n = 1"
    )
    assert first.where("_operation in ('delete', 'ttl_delete')").count() == 0, final
    return spark.table(history).count()


@pytest.mark.parametrize("by", ["key", "attribute"])
def test_a_single_table_design_keeps_a_history_per_entity_table(
    spark, clean_lakehouse, project_copy: Path, tmp_path: Path, by: str
) -> None:
    args = ["add-table", "app", "--partition-key", "pk:S", "--sort-key", "sk:S", "--history"]
    values = KEY_VALUES if by == "key" else TYPE_VALUES
    args += ["--entity-key", "sk"] if by == "key" else ["--entity-attribute", "type"]
    for value in values:
        args += ["--entity", value]
    assert main(args) == 0
    for final in ENTITY_TABLES:
        assert (project_dir() / f"models/marts/{final}__history.sql").exists(), final
    items = single_table.items(USERS, seed=3)
    state = {app_key(i): i for i in items}
    full = sample_exports.write_items_export(tmp_path, "app", items)
    assert main(["sync", "--table", "app", str(full)]) == 0
    first = {final: entity_history_matches(spark, final) for final in ENTITY_TABLES}
    assert sum(first.values()) == len(items)  # one row per item, in its entity's history

    # An incremental: an update, a delete of each entity, a new user, and (attribute rule) an
    # order that becomes an address: a delete in the orders' history, a row in the addresses'.
    view = "NEW_AND_OLD_IMAGES" if by == "key" else "NEW_IMAGE"
    user1 = state[("USER#1", "USER#1")]
    lines = [change(user1, {**user1, "name": s("Renamed")}, view)]
    for gone in [("USER#4", "USER#4"), ("USER#5", "ORDER#00010"), ("USER#6", "ADDRESS#0")]:
        lines.append(change(state.pop(gone), None, view))
    lines.append(change(None, single_table.user(90, random.Random(1)), view))
    moved = state[("USER#7", "ORDER#00014")]
    if by == "attribute":
        became = {"pk": moved["pk"], "sk": moved["sk"], "type": s("address"), "city": s("Oslo")}
        lines.append(change(moved, became, view))
    assert main(["sync", "--table", "app", str(incremental(tmp_path, lines, view))]) == 0
    after = {final: entity_history_matches(spark, final) for final in ENTITY_TABLES}
    # one row per change, in the history of the entity it belongs to (a move: one in each)
    assert sum(after.values()) - sum(first.values()) == len(lines) + (by == "attribute")
    if by == "attribute":
        key_of = f"pk = '{moved['pk']['S']}' and sk = '{moved['sk']['S']}'"
        order_rows = spark.sql(
            f"select _operation, _valid_to from lake.lakehouse.app__order__history where {key_of} "
            f"order by _valid_from"
        )
        assert [r["_operation"] for r in order_rows.collect()] == ["snapshot", "delete"]
        address = spark.sql(f"select city from lake.lakehouse.app__address__history where {key_of}")
        assert [r["city"] for r in address.collect()] == ["Oslo"]

    # A stream batch: a modify and a remove (under an attribute rule, a delete in every entity
    # table; a row only in the one that held the item).
    later = int(BASE_TIME.timestamp()) + 3600
    old = state[("USER#8", "USER#8")]
    gone = state.pop(("USER#9", "ORDER#00018"))
    records = [
        sample_stream.stream_record(
            "app",
            "MODIFY",
            {"pk": old["pk"], "sk": old["sk"]},
            old,
            {**old, "name": s("streamed")},
            later,
            1,
        ),
        sample_stream.stream_record(
            "app", "REMOVE", {"pk": gone["pk"], "sk": gone["sk"]}, gone, None, later, 2
        ),
    ]
    written, failed = write_batch(records, str(tmp_path / "streams"))
    assert failed is None and written
    assert (
        main(["sync", "--table", "app", "--stream", str(tmp_path / "streams"), "--settle", "0"])
        == 0
    )
    streamed = {final: entity_history_matches(spark, final) for final in ENTITY_TABLES}
    assert sum(streamed.values()) - sum(after.values()) == 2
