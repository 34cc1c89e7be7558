"""A single-table design's reference: the sample table ``app`` (``ingestion.samples.single_table``)
registered with an entity rule, the changes its exports carry, and the entity tables checked
against the items they leave, computed in plain Python: each table read by DuckDB (an
independent reader) holds exactly its entity's items, with only its own columns, each typed
value as the reference rules decode it (``reference``)."""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path
from typing import Any

import readers
from items_back import final_items, strict_item
from reference import expected, same

from ingestion.catalog import table_types
from ingestion.cli import main
from ingestion.dynamodb import tables
from ingestion.samples import sample_exports, single_table
from ingestion.samples.items import BASE_TIME

USERS = 12
KEY_VALUES = {"USER": "app__user", "ORDER": "app__order", "ADDRESS": "app__address"}
TYPE_VALUES = {"user": "app__user", "order": "app__order", "address": "app__address"}


def key(item: dict[str, Any]) -> tuple[str, str]:
    return item["pk"]["S"], item["sk"]["S"]


def entity(item: dict[str, Any], by: str) -> str:
    if by == "key":
        value = item["sk"]["S"].split("#", 1)[0]  # a key with no '#' is its own value
        return KEY_VALUES.get(value, "app__unmatched")
    return TYPE_VALUES.get(item.get("type", {}).get("S", ""), "app__unmatched")


def s(value: str) -> dict[str, str]:
    return {"S": value}


def add_app(by: str) -> None:
    args = ["add-table", "app", "--partition-key", "pk:S", "--sort-key", "sk:S"]
    values = KEY_VALUES if by == "key" else TYPE_VALUES
    args += ["--entity-key", "sk"] if by == "key" else ["--entity-attribute", "type"]
    for value in values:
        args += ["--entity", value]
    assert main(args) == 0


def assert_entity_tables(spark, home: Path, state: dict, by: str) -> None:
    """Each entity table holds exactly its entity's items (DuckDB), with its own columns only,
    each typed value as the reference rules decode it (Spark)."""
    app = tables.get_table("app")
    kept = table_types.stored_schema(spark, app)
    assert kept is not None
    con = readers.connect()
    for final in [*TYPE_VALUES.values(), "app__unmatched"]:
        want = {k: item for k, item in state.items() if entity(item, by) == final}
        rows = readers.read_rows(con, home, final, "pk, sk")
        assert {(r[0], r[1]) for r in rows} == set(want), final
        back = {key(item): strict_item(item) for item, _ in final_items(spark, "app", final)}
        assert back == {k: strict_item(item) for k, item in want.items()}, final
        location = readers.metadata_location(home, "lakehouse", final)
        columns = [
            r[0]
            for r in con.execute(f"describe select * from iceberg_scan('{location}')").fetchall()
        ]
        section = kept.entity(final)
        attributes = [a for a in section.attributes if not a.key] if section else []
        own = {a for item in want.values() for a in item} - {"pk", "sk"}
        own = set() if final == "app__unmatched" else own  # its items' attributes in _rest only
        assert {a.name for a in attributes} >= own, final  # every attribute its items hold
        others = {a for k, item in state.items() if k not in want for a in item}
        assert not {a.name for a in attributes} & (others - own), final  # none only others hold
        typed = [c for c in columns if not c.startswith("_")]  # order: a rebuild may re-sort
        assert typed[:2] == ["pk", "sk"] and sorted(typed[2:]) == sorted(
            a.column for a in attributes
        )
        spark.sql(f"refresh table lake.lakehouse.{final}")
        for row in spark.table(f"lake.lakehouse.{final}").collect():
            item = want[(row["pk"], row["sk"])]
            for attribute in attributes:
                value = expected(item.get(attribute.name), attribute.type)
                assert same(value, row[attribute.column]), (final, attribute.name, value)


def incremental(tmp_path: Path, lines: list[dict], view: str, number: int = 1) -> Path:
    """The ``number``-th incremental export of ``app`` after its full export (ten-minute
    windows from the full export's time)."""
    start = BASE_TIME + timedelta(minutes=10 * (number - 1))
    window = (start, start + timedelta(minutes=10))
    return sample_exports.write_incremental_export(
        tmp_path / "incr", "app", lines, window, view, seed=number
    )


def change(old: dict | None, new: dict | None, view: str, number: int = 1) -> dict[str, Any]:
    """An incremental export's line (of the ``number``-th one): ``new`` written over ``old``
    (None: the item is deleted, or new); ``Keys`` only for a delete under ``NEW_IMAGE``."""
    micros = int((BASE_TIME + timedelta(minutes=10 * number - 5)).timestamp() * 1_000_000)
    image = new or old
    assert image is not None
    line: dict[str, Any] = {
        "Metadata": {"WriteTimestampMicros": {"N": str(micros)}},
        "Keys": {"pk": image["pk"], "sk": image["sk"]},
    }
    if new is not None:
        line["NewImage"] = new
    if old is not None and view == "NEW_AND_OLD_IMAGES":
        line["OldImage"] = old
    return line


def write_chain(out: Path, by: str) -> tuple[list[Path], dict[tuple[str, str], dict]]:
    """A full export of ``app`` and two incrementals (an update and a delete of each entity, a
    new user; under the attribute rule an order becoming an address), and the items they
    leave."""
    items = single_table.items(USERS, seed=8)
    state = {key(i): i for i in items}
    folders = [sample_exports.write_items_export(out, "app", items)]
    view = "NEW_AND_OLD_IMAGES" if by == "key" else "NEW_IMAGE"
    for number, u in ((1, 1), (2, 2)):
        keys = [
            (f"USER#{u}", f"USER#{u}"),
            (f"USER#{u}", f"ORDER#{2 * u:05d}"),
            (f"USER#{u}", "ADDRESS#0"),
        ]
        lines = [
            change(state[k], {**state[k], "note": s(f"update {number}")}, view, number)
            for k in keys
        ]
        if number == 2:  # a total with three decimals: drift, adopted by the orders' table only
            lines[1]["NewImage"]["total"] = {"N": "7.125"}
        gone = [
            (f"USER#{u + 4}", f"USER#{u + 4}"),
            (f"USER#{u + 4}", f"ORDER#{2 * u + 9:05d}"),
            (f"USER#{u + 4}", "ADDRESS#0"),
        ]
        lines += [change(state[k], None, view, number) for k in gone]
        new = single_table.user(100 + number, random.Random(number))
        lines.append(change(None, new, view, number))
        changed = {
            key(line.get("NewImage") or line["Keys"]): line.get("NewImage") for line in lines
        }
        if by == "attribute":
            moved = state[(f"USER#{u + 6}", f"ORDER#{2 * u + 12:05d}")]
            became = {"pk": moved["pk"], "sk": moved["sk"], "type": s("address"), "city": s("Oslo")}
            lines.append(change(moved, became, view, number))
            changed[key(moved)] = became
        for k, image in changed.items():
            if image is None:
                state.pop(k, None)
            else:
                state[k] = image
        folders.append(incremental(out, lines, view, number))
    return folders, state
