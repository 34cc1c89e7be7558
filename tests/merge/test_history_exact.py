"""The history exactly right (issue "History exactly right under drift, odd attribute names and lost
deletes"), through the CLI, each case checked with `verify --as-of` too:

- a drift adoption that turns attributes into text re-derives every older version from its item
  (the change log's decode), never casts it: `1.5` stays `1.5`, a map is its JSON in `_rest`,
  binary is not raw bytes;
- attributes named `valid_from` and `valid_to` are columns like any other (the history's own are
  `_valid_from` and `_valid_to`);
- a full export lacking an item whose delete was lost, staged after the item was created again,
  closes the row valid at the export's instant: one by one or all at once, the same rows."""

from __future__ import annotations

import base64
import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from conftest import reset_lakehouse
from test_history import HISTORY, add_shelf, at, ingest, instant, modify, queried_as_of

from ingestion.catalog import merge_log
from ingestion.cli import main
from ingestion.merge.dbt_process import DbtError, dbt_invoke
from ingestion.samples import sample_exports
from ingestion.sources import manifest

pytestmark = [pytest.mark.slow, pytest.mark.integration]

FINAL = "lake.lakehouse.shelf"
STAGING = "lake.staging.shelf"


def streamed(minutes: int) -> datetime:
    """A stream change's version: the last microsecond of its second (the stream gives seconds)."""
    return datetime(1970, 1, 1) + timedelta(microseconds=at(minutes) * 1_000_000 + 999_999)


def merged_at_once(spark, arrivals: list[tuple[str, Path, list[dict] | None]]) -> None:
    """The same sources in a fresh lakehouse, all staged, then one merge."""
    reset_lakehouse(spark)
    for kind, where, records in arrivals:
        ingest(kind, where, records, "ingest")
    assert main(["merge", "--table", "shelf"]) == 0


def verified_as_of(capsys: pytest.CaptureFixture[str], export: Path) -> None:
    """``verify --as-of`` of the history against ``export``: EQUAL."""
    capsys.readouterr()
    main(["verify", "--table", "shelf", str(export), "--as-of"])
    said = capsys.readouterr().out
    assert "EQUAL" in said and "NOT EQUAL" not in said, said[-3000:]


def as_json(spark, table: str, where: str, columns: list[str]) -> list[str]:
    spark.sql(f"refresh table {table}")
    listed = ", ".join(f"`{c}`" for c in columns)
    rows = spark.table(table).where(where).selectExpr(f"to_json(struct({listed}))").collect()
    return sorted(r[0] for r in rows)


def drifted(tmp_path: Path) -> tuple[Path, Path]:
    """``shelf`` with its history, merged from a full export of numbers, a map and binary; and
    an incremental export in which k2's hold text (adoption turns them into string columns)."""
    add_shelf()

    def item(key: str, n: str, a: str, raw: bytes) -> dict:
        return {
            "id": {"S": key},
            "title": {"S": key},
            "n": {"N": n},
            "m": {"M": {"a": {"N": a}, "b": {"S": "y"}}},
            "bin": {"B": base64.b64encode(raw).decode()},
        }

    k1, k2 = item("k1", "1.5", "2", b"\xff\x00raw"), item("k2", "7", "3", b"\x80plain")
    f0 = sample_exports.write_items_export(tmp_path / "f0", "shelf", [k1, k2], instant(0), seed=1)
    assert main(["sync", "--table", "shelf", str(f0)]) == 0
    k2b = {
        "id": k2["id"],
        "title": {"S": "k2 b"},
        "n": {"S": "seven"},
        "m": {"S": "em"},
        "bin": {"S": "bee"},
    }
    line = {
        "Metadata": {"WriteTimestampMicros": {"N": str(at(10) * 1_000_000)}},
        "Keys": {"id": k2["id"]},
        "OldImage": k2,
        "NewImage": k2b,
    }
    inc = sample_exports.write_incremental_export(
        tmp_path / "inc", "shelf", [line], (instant(0), instant(20)), seed=2
    )
    return f0, inc


def test_a_retype_re_derives_every_version_from_its_item_never_casts(
    spark, clean_lakehouse, project_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f0, inc = drifted(tmp_path)
    capsys.readouterr()
    assert main(["ingest", "--table", "shelf", str(inc)]) == 0  # adopts the drift
    assert "drift adopted" in capsys.readouterr().out
    # A plain `dbt run` refuses the history of older types in one line, and merges nothing into it.
    before = spark.sql(f"select count(*) from {HISTORY}.snapshots").collect()[0][0]
    with pytest.raises(DbtError):
        dbt_invoke(["run", "--select", "shelf__history"])
    said = "".join(capsys.readouterr())
    assert (
        "have older types than its change log" in said
        and "ddb-lakehouse merge --table shelf" in said
    )
    assert spark.sql(f"select count(*) from {HISTORY}.snapshots").collect()[0][0] == before
    assert main(["merge", "--table", "shelf"]) == 0
    types = {f.name: f.dataType.simpleString() for f in spark.table(HISTORY).schema.fields}
    assert types["n"] == types["m"] == types["bin"] == "string", types

    # Every version of the history is the change log's row of that version, column by column
    # (its typed columns, `_rest` and `_drift`): the same decode, not a cast.
    compared = [
        c
        for c in spark.table(STAGING).columns
        if c not in ("_ingested_at", "_batch_id", "_source", "_source_file")
    ]
    assert as_json(spark, HISTORY, "true", compared) == as_json(spark, STAGING, "true", compared)
    # A cast gave 1.50, {2.0, y} and raw bytes, and left `_rest` empty.
    older = spark.table(HISTORY).where("id = 'k1'").collect()[0]
    raw = base64.b64encode(b"\xff\x00raw").decode()
    assert (older["n"], older["m"], older["bin"]) == ("1.5", '{"a":2,"b":"y"}', raw), older
    assert json.loads(older["_rest"]) == {
        "n": {"N": "1.5"},
        "m": {"M": {"a": {"N": "2"}, "b": {"S": "y"}}},
        "bin": {"B": raw},
    }
    # The current rows are the final table's; the history as of f0 is f0.
    final_columns = [c for c in spark.table(FINAL).columns if c != "_inserted_batch_id"]
    assert as_json(spark, HISTORY, "_valid_to is null", final_columns) == as_json(
        spark, FINAL, "true", final_columns
    )
    verified_as_of(capsys, f0)


def test_a_retype_whose_old_types_expired_stops_the_merge_in_one_line(
    spark, clean_lakehouse, project_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The types the history was written with are in the rebuild's commit; once that commit has
    expired, the history can only be cast: the merge stops, naming the way out, and writes
    nothing."""
    _, inc = drifted(tmp_path)
    assert main(["ingest", "--table", "shelf", str(inc)]) == 0  # adopts the drift
    later = [
        modify(
            {"id": {"S": "k1"}, "title": {"S": "k1"}},
            {"id": {"S": "k1"}, "title": {"S": "k1 b"}},
            30,
            1,
        )
    ]
    ingest("stream", tmp_path / "streams", later, "ingest")
    spark.sql(
        "call lake.system.expire_snapshots(table => 'staging.shelf', "
        "older_than => timestamp '2100-01-01 00:00:00', retain_last => 1)"
    )
    snapshots = {
        t: spark.sql(f"select count(*) from {t}.snapshots").collect()[0][0]
        for t in (HISTORY, FINAL)
    }
    capsys.readouterr()
    assert main(["merge", "--table", "shelf"]) == 2
    said = capsys.readouterr().err
    assert (
        "no longer known" in said
        and "nothing was merged" in said
        and len(said.strip().splitlines()) == 1
    )
    assert {
        t: spark.sql(f"select count(*) from {t}.snapshots").collect()[0][0]
        for t in (HISTORY, FINAL)
    } == snapshots
    types = {f.name: f.dataType.simpleString() for f in spark.table(HISTORY).schema.fields}
    assert types["n"] != "string"


def test_attributes_named_valid_from_and_valid_to_are_columns_like_any_other(
    spark, clean_lakehouse, project_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    add_shelf()

    def item(key: str, title: str, until: str) -> dict:
        return {
            "id": {"S": key},
            "title": {"S": title},
            "valid_from": {"S": "2020-01-01"},
            "valid_to": {"S": until},
        }

    f0 = sample_exports.write_items_export(
        tmp_path / "f0",
        "shelf",
        [item("k1", "one", "2030"), item("k2", "two", "2031")],
        instant(0),
        seed=1,
    )
    assert main(["sync", "--table", "shelf", str(f0)]) == 0
    line = {
        "Metadata": {"WriteTimestampMicros": {"N": str(at(10) * 1_000_000)}},
        "Keys": {"id": {"S": "k1"}},
        "OldImage": item("k1", "one", "2030"),
        "NewImage": item("k1", "one b", "2040"),
    }
    inc = sample_exports.write_incremental_export(
        tmp_path / "inc", "shelf", [line], (instant(0), instant(20)), seed=2
    )
    assert main(["sync", "--table", "shelf", str(inc)]) == 0
    # Every batch merged into the history too: nothing pending, as `status` says.
    assert merge_log.new_batches(spark, "shelf", history=True) == []
    capsys.readouterr()
    assert main(["status", "--table", "shelf"]) == 0
    assert "staged rows not merged yet: 0 (0 batch(es))" in capsys.readouterr().out
    spark.sql(f"refresh table {HISTORY}")
    rows = spark.table(HISTORY).where("id = 'k1'").orderBy("_valid_from").collect()
    assert [(r["title"], r["valid_to"]) for r in rows] == [("one", "2030"), ("one b", "2040")]
    version = datetime(1970, 1, 1) + timedelta(
        microseconds=manifest.read_export(inc).version_micros
    )
    assert rows[0]["_valid_to"] == rows[1]["_valid_from"] == version
    # query --as-of keeps both attributes.
    moment = instant(5).isoformat() + "Z"
    for engine in ("spark", "duckdb"):
        capsys.readouterr()
        sql = "select id, valid_from, valid_to from lakehouse.shelf order by id"
        assert main(["query", "--as-of", moment, "--engine", engine, "--format", "json", sql]) == 0
        found = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.strip()]
        assert found == [
            {"id": "k1", "valid_from": "2020-01-01", "valid_to": "2030"},
            {"id": "k2", "valid_from": "2020-01-01", "valid_to": "2031"},
        ], engine
    verified_as_of(capsys, f0)


def test_a_full_export_closes_the_row_valid_at_its_instant_whatever_came_after(
    spark, clean_lakehouse, project_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`g` changed at minute 40, its delete at 42 was lost, it was created again at 47; the full
    export taken at 45 lacks it and is staged after the re-create."""
    add_shelf()

    def book(key: str, title: str) -> dict:
        return {"id": {"S": key}, "title": {"S": title}}

    def sources(folder: Path) -> list[tuple[str, Path, list[dict] | None]]:
        f, g = book("f", "eff"), book("g", "gee")
        f0 = sample_exports.write_items_export(folder / "f0", "shelf", [f, g], instant(0), seed=1)
        streams = folder / "streams"
        changed = [modify(g, book("g", "gee 2"), 40, 1)]
        again = [modify(None, book("g", "gee again"), 47, 3, "INSERT")]  # the delete at 42: lost
        f1 = sample_exports.write_items_export(folder / "f1", "shelf", [f], instant(45), seed=2)
        return [
            ("export", f0, None),
            ("stream", streams, changed),
            ("stream", streams, again),
            ("export", f1, None),
        ]

    def history() -> list[tuple]:
        spark.sql(f"refresh table {HISTORY}")
        rows = spark.table(HISTORY).select("id", "title", "_operation", "_valid_from", "_valid_to")
        return sorted((tuple(r) for r in rows.collect()), key=lambda r: (r[0], r[3]))

    arrivals = sources(tmp_path / "one")
    for kind, where, records in arrivals:  # each merged on its own
        ingest(kind, where, records, "sync")
    assert sorted(queried_as_of(capsys, 46, "spark")) == ["f"]
    assert sorted(queried_as_of(capsys, 44, "spark")) == ["f", "g"]
    assert queried_as_of(capsys, 48, "duckdb") == {"f": "eff", "g": "gee again"}

    g = [r for r in history() if r[0] == "g"]
    assert [(r[1], r[2], r[3], r[4]) for r in g] == [
        ("gee", "snapshot", instant(0), streamed(40)),
        ("gee 2", "update", streamed(40), instant(45)),
        (None, "delete", instant(45), streamed(47)),  # the close, where the export lacks it
        ("gee again", "insert", streamed(47), None),
    ]
    verified_as_of(capsys, arrivals[-1][1])
    one_by_one = history()

    merged_at_once(spark, sources(tmp_path / "all"))
    assert history() == one_by_one


def test_a_late_change_before_a_restating_full_export_ends_at_that_export(
    spark, clean_lakehouse, project_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`k` as in f0 (minute 0) is restated unchanged by f1 (minute 45), which adds no row; a change
    of minute 30 arrives after f1: the history shows it from 30 to 45, and f1's values again from
    45, as the final table holds them. One by one or all at once, the same rows."""
    add_shelf()
    k, k2 = {"id": {"S": "k"}, "title": {"S": "one"}}, {"id": {"S": "k"}, "title": {"S": "two"}}

    def sources(folder: Path) -> list[tuple[str, Path, list[dict] | None]]:
        f0 = sample_exports.write_items_export(folder / "f0", "shelf", [k], instant(0), seed=1)
        f1 = sample_exports.write_items_export(folder / "f1", "shelf", [k], instant(45), seed=2)
        late = [modify(k, k2, 30, 1)]
        return [("export", f0, None), ("export", f1, None), ("stream", folder / "streams", late)]

    def history() -> list[tuple]:
        spark.sql(f"refresh table {HISTORY}")
        rows = spark.table(HISTORY).select("title", "_operation", "_valid_from", "_valid_to")
        return sorted((tuple(r) for r in rows.collect()), key=lambda r: r[2])

    arrivals = sources(tmp_path / "one")
    for kind, where, records in arrivals:
        ingest(kind, where, records, "sync")
    late = streamed(30)
    assert history() == [
        ("one", "snapshot", instant(0), late),
        ("two", "update", late, instant(45)),
        ("one", "snapshot", instant(45), None),  # f1's line: a version again
    ]
    assert queried_as_of(capsys, 40, "spark") == {"k": "two"}
    assert queried_as_of(capsys, 50, "spark") == {"k": "one"}
    spark.sql(f"refresh table {FINAL}")
    assert [r["title"] for r in spark.table(FINAL).collect()] == ["one"]
    verified_as_of(capsys, arrivals[1][1])
    one_by_one = history()

    merged_at_once(spark, sources(tmp_path / "all"))
    assert history() == one_by_one


def test_a_late_change_is_closed_at_the_first_full_export_that_lacks_it(
    spark, clean_lakehouse, project_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`k` was created at minute 15 and deleted at 17 (the delete lost); full exports at 20 and 30
    both lack it; its creation arrives after both. Its history ends at 20, the first export that
    lacks it, whether merged one by one or all at once."""
    add_shelf()
    f, k = {"id": {"S": "f"}, "title": {"S": "eff"}}, {"id": {"S": "k"}, "title": {"S": "kay"}}

    def sources(folder: Path) -> list[tuple[str, Path, list[dict] | None]]:
        exports = [
            sample_exports.write_items_export(folder / f"e{m}", "shelf", [f], instant(m), seed=m)
            for m in (0, 20, 30)
        ]
        late = [modify(None, k, 15, 1, "INSERT")]
        return [*(("export", e, None) for e in exports), ("stream", folder / "streams", late)]

    def history() -> list[tuple]:
        spark.sql(f"refresh table {HISTORY}")
        rows = (
            spark.table(HISTORY).where("id = 'k'").select("_operation", "_valid_from", "_valid_to")
        )
        return sorted((tuple(r) for r in rows.collect()), key=lambda r: r[1])

    arrivals = sources(tmp_path / "one")
    for kind, where, records in arrivals:
        ingest(kind, where, records, "sync")
    assert history() == [("insert", streamed(15), instant(20)), ("delete", instant(20), None)]
    assert sorted(queried_as_of(capsys, 16, "spark")) == ["f", "k"]
    assert sorted(queried_as_of(capsys, 25, "spark")) == ["f"]
    verified_as_of(capsys, arrivals[1][1])
    one_by_one = history()

    merged_at_once(spark, sources(tmp_path / "all"))
    assert history() == one_by_one
