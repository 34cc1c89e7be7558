"""Orderings AWS really produces, end to end on small tables: a table fed by its stream and by
incremental exports together, and chains of exports with gaps, fillings and overlaps.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from items_back import final_items
from single_table_reference import add_app, assert_entity_tables, change, key
from support import book

from ingestion.config import clock
from ingestion.dynamodb.tables import get_table
from ingestion.merge import runner
from ingestion.project import onboarding
from ingestion.samples import sample_exports, single_table
from ingestion.samples import stream as sample_stream
from ingestion.samples.items import BASE_TIME
from ingestion.sources.change_file_writer import write_batch
from ingestion.staging import exports, streams

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def update_line(key: str, old: str, new: str, written: int) -> dict[str, Any]:
    return {
        "Metadata": {"WriteTimestampMicros": {"N": str(written)}},
        "Keys": {"id": {"S": key}},
        "OldImage": book(key, old),
        "NewImage": book(key, new),
    }


def stream_modify(location: Path, key: str, old: str, new: str, second: int, seq: int) -> None:
    record = sample_stream.stream_record(
        "books", "MODIFY", {"id": {"S": key}}, book(key, old), book(key, new), second, seq
    )
    written, failed = write_batch([record], str(location))
    assert failed is None and written


def stage_in_order(spark, table, full: Path, inc: Path, location: Path, stream_first: bool) -> None:
    """The full export, then the stream's files and the incremental export in either order."""
    exports.ingest_export(spark, table, str(full))
    if stream_first:
        streams.ingest_stream(spark, table, str(location), settle_seconds=0)
        exports.ingest_export(spark, table, str(inc))
    else:
        exports.ingest_export(spark, table, str(inc))
        streams.ingest_stream(spark, table, str(location), settle_seconds=0)


def titles(spark) -> dict[str, str]:
    images = [item for item, _ in final_items(spark, "books")]
    return {i["id"]["S"]: i["title"]["S"] for i in images}


@pytest.mark.parametrize("stream_first", [True, False], ids=["stream-first", "export-first"])
def test_a_stream_change_and_an_incremental_export_of_the_same_second_order_by_the_window(
    spark, clean_lakehouse, tmp_path: Path, stream_first: bool
) -> None:
    """The stream has `a` -> "stream" at second S (written at S.1); its next write, S.5 ->
    "export", reached only the incremental export that fills the stream's gap. The stream's
    version (the end of second S) must not beat the export's WriteTimestampMicros (S.5), or the
    final table says "stream". An incremental line is the item's state at the window's end, so
    the export wins; a stream change made after the window (`b`) still beats it."""
    books = get_table("books")
    start, end = BASE_TIME, BASE_TIME + timedelta(hours=1)
    full = sample_exports.write_items_export(
        tmp_path / "f", "books", [book("a", "A"), book("b", "B")]
    )
    second = int((start + timedelta(minutes=10)).timestamp())
    inc = sample_exports.write_incremental_export(
        tmp_path / "i",
        "books",
        [
            update_line("a", "stream", "export", second * 1_000_000 + 500_000),
            update_line("b", "B", "export", clock.epoch_micros(start) + 5_000_000),
        ],
        (start, end),
    )
    location = tmp_path / "streams"
    stream_modify(location, "a", "A", "stream", second, 1)
    stream_modify(location, "b", "export", "after the window", int(end.timestamp()) + 1, 2)

    stage_in_order(spark, books, full, inc, location, stream_first)
    runner.run_merge(spark, [books])
    assert titles(spark) == {"a": "export", "b": "after the window"}
    runner.run_merge(spark, [books], full_refresh=True, test=False)
    assert titles(spark) == {"a": "export", "b": "after the window"}


def test_a_numeric_key_holds_every_number_dynamodb_accepts(
    spark, clean_lakehouse, project_copy: Path, tmp_path: Path
) -> None:
    """Ids 1 and 2 in the first export made the key column bigint; a later valid key 2.5 then
    failed its whole batch, and --max-rejects could not set it aside. A numeric key is its
    canonical exact text; a line whose key is no DynamoDB number is a reject like any other."""
    onboarding.add_table("counters", "id:N", None)
    counters = get_table("counters")

    def item(key: str) -> dict[str, Any]:
        return {"id": {"N": key}, "n": {"N": "1"}}

    full = sample_exports.write_items_export(tmp_path / "f", "counters", [item("1"), item("2")])
    exports.ingest_export(spark, counters, str(full))
    location = tmp_path / "streams"
    records = [
        sample_stream.stream_record("counters", "INSERT", {"id": {"N": k}}, None, item(k), s, s)
        for s, k in ((1768400000, "2.5"), (1768400001, "1E+2"), (1768400002, "2.50"))
    ]
    damaged = sample_stream.stream_record(
        "counters", "INSERT", {"id": {"N": "1E+200"}}, None, item("1E+200"), 1768400003, 4
    )
    written, failed = write_batch([*records, damaged], str(location))
    assert failed is None and written
    result = streams.ingest_stream(spark, counters, str(location), settle_seconds=0, max_rejects=1)
    assert result.rejected == 1
    reasons = spark.table("lake.staging.counters_rejects").select("reason").collect()
    assert [r["reason"] for r in reasons] == ["Keys' 'id' is not a value its string column holds"]
    runner.run_merge(spark, [counters])
    rows = spark.table("lake.lakehouse.counters").select("id").collect()
    assert sorted(r["id"] for r in rows) == ["1", "100", "2", "2.5"]  # 2.50 is the key 2.5


@pytest.mark.parametrize("stream_first", [True, False], ids=["stream-first", "export-first"])
@pytest.mark.parametrize("by", ["key", "attribute"])
def test_the_same_orderings_hold_for_entity_tables(
    spark,
    clean_lakehouse,
    project_copy: Path,
    lakehouse_home: Path,
    tmp_path: Path,
    stream_first: bool,
    by: str,
) -> None:
    """The ordering above on a single-table design: order `a` changed by the stream at second S
    and by the incremental export's window (the export wins); user `b` changed after the window
    by the stream (the stream wins); under the attribute rule, order `c` moved to addresses by
    the export while an older stream change (inside the window) still calls it an order: it
    stays moved, whichever was staged first."""
    add_app(by)
    app = get_table("app")
    start, end = BASE_TIME, BASE_TIME + timedelta(hours=1)
    items = single_table.items(3, seed=2)
    state = {key(i): i for i in items}
    a, b, c = ("USER#0", "ORDER#00000"), ("USER#1", "USER#1"), ("USER#2", "ORDER#00004")
    full = sample_exports.write_items_export(tmp_path / "f", "app", items)
    second = int((start + timedelta(minutes=10)).timestamp())
    by_export = {**state[a], "status": {"S": "export"}}
    lines = [change(state[a], by_export, "NEW_AND_OLD_IMAGES", 3)]
    moved = {
        "pk": state[c]["pk"],
        "sk": state[c]["sk"],
        "type": {"S": "address"},
        "city": {"S": "Oslo"},
    }
    if by == "attribute":
        lines.append(change(state[c], moved, "NEW_AND_OLD_IMAGES", 3))
    for line in lines:  # written at S.5, inside the window
        line["Metadata"]["WriteTimestampMicros"]["N"] = str(second * 1_000_000 + 500_000)
    inc = sample_exports.write_incremental_export(tmp_path / "i", "app", lines, (start, end))
    location = tmp_path / "streams"
    by_stream = {**state[a], "status": {"S": "stream"}}
    after = {**state[b], "name": {"S": "after the window"}}
    records = [
        sample_stream.stream_record(
            "app",
            "MODIFY",
            {"pk": state[a]["pk"], "sk": state[a]["sk"]},
            state[a],
            by_stream,
            second,
            1,
        ),
        sample_stream.stream_record(
            "app",
            "MODIFY",
            {"pk": state[b]["pk"], "sk": state[b]["sk"]},
            state[b],
            after,
            int(end.timestamp()) + 1,
            2,
        ),
    ]
    if by == "attribute":  # an older change of `c` as an order, inside the window
        older = {**state[c], "status": {"S": "older"}}
        records.append(
            sample_stream.stream_record(
                "app",
                "MODIFY",
                {"pk": state[c]["pk"], "sk": state[c]["sk"]},
                state[c],
                older,
                second - 60,
                3,
            )
        )
        state[c] = moved
    written, failed = write_batch(records, str(location))
    assert failed is None and written

    stage_in_order(spark, app, full, inc, location, stream_first)
    runner.run_merge(spark, [app])
    state[a], state[b] = by_export, after
    assert_entity_tables(spark, lakehouse_home, state, by)
    runner.run_merge(spark, [app], full_refresh=True, test=False)
    assert_entity_tables(spark, lakehouse_home, state, by)
