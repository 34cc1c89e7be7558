"""A single-table design through the CLI (decision 0009): one DynamoDB table ``app`` of users,
orders and addresses, split into one typed final table per entity, by the sort key's prefix and
by a ``type`` attribute. A full export, then an incremental (updates, a delete of each entity, an
item changing entity, a delete that carries only ``Keys``), then stream changes; after each, every
entity table holds exactly the items of its entity, read by DuckDB (an independent reader), with
only its own columns and types, and the typed values checked against the reference rules."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
import readers
import yaml
from single_table_reference import (
    USERS,
    add_app,
    assert_entity_tables,
    change,
    incremental,
    key,
    s,
)

from ingestion.catalog import table_types
from ingestion.cli import main
from ingestion.dynamodb import tables
from ingestion.samples import sample_exports, single_table
from ingestion.samples import stream as sample_stream
from ingestion.samples.items import BASE_TIME
from ingestion.schema import schema_file
from ingestion.sources.change_file_writer import write_batch

pytestmark = [pytest.mark.slow, pytest.mark.integration]


@pytest.mark.parametrize("by", ["key", "attribute"])
def test_a_single_table_design_splits_into_exact_entity_tables(
    spark,
    clean_lakehouse,
    project_copy: Path,
    lakehouse_home: Path,
    tmp_path: Path,
    capsys,
    by: str,
) -> None:
    add_app(by)
    items = single_table.items(USERS, seed=3)
    state = {key(i): i for i in items}
    full = sample_exports.write_items_export(tmp_path, "app", items)
    assert main(["sync", "--table", "app", str(full)]) == 0
    out = capsys.readouterr().out
    sessions = sum(1 for i in items if i["sk"]["S"].startswith("SESSION#"))
    assert sessions == 3
    assert (
        f"app: {sessions} change(s) of no listed entity value (entities: values) went to "
        f"lakehouse.app__unmatched" in out
    )
    assert_entity_tables(spark, lakehouse_home, state, by)
    kept = table_types.stored_schema(spark, tables.get_table("app"))
    assert kept is not None
    assert kept.entity("app__user").get("total").type.sql() == "bigint"
    assert kept.entity("app__order").get("total").type.sql() == "decimal(38,2)"

    # An incremental: an update of each entity, a delete of each, an item changing entity
    # (attribute rule: an order that becomes an address), new items.
    view = "NEW_AND_OLD_IMAGES" if by == "key" else "NEW_IMAGE"
    user1, order2, address3 = (
        state[("USER#1", "USER#1")],
        state[("USER#1", "ORDER#00002")],
        state[("USER#3", "ADDRESS#0")],
    )
    lines = [
        change(user1, {**user1, "name": s("Renamed"), "vip": {"BOOL": True}}, view),
        change(order2, {**order2, "total": {"N": "12.345"}}, view),  # widens orders only
        change(address3, {**address3, "zip": s("00042")}, view),
    ]
    for gone in [("USER#4", "USER#4"), ("USER#5", "ORDER#00010"), ("USER#6", "ADDRESS#0")]:
        lines.append(change(state.pop(gone), None, view))  # Keys only under NEW_IMAGE
    new_user = single_table.user(90, random.Random(1))
    lines.append(change(None, new_user, view))
    updated = {key(line.get("NewImage") or line["Keys"]): line.get("NewImage") for line in lines}
    if by == "attribute":
        moved = state[("USER#7", "ORDER#00014")]
        became = {"pk": moved["pk"], "sk": moved["sk"], "type": s("address"), "city": s("Oslo")}
        lines.append(change(moved, became, view))
        updated[key(moved)] = became
    state.update({k: v for k, v in updated.items() if v is not None})
    assert main(["sync", "--table", "app", str(incremental(tmp_path, lines, view))]) == 0
    assert_entity_tables(spark, lakehouse_home, state, by)
    kept = table_types.stored_schema(spark, tables.get_table("app"))
    assert kept is not None
    assert kept.entity("app__order").get("total").type.sql() == "decimal(38,3)"
    assert kept.entity("app__user").get("total").type.sql() == "bigint"
    assert kept.entity("app__user").get("vip") is not None  # a new attribute, users' only
    assert kept.entity("app__order").get("vip") is None

    # Stream changes: a modify of each entity and a remove.
    location = tmp_path / "streams"
    later = int(BASE_TIME.timestamp()) + 3600
    records = []
    for sequence, k in enumerate(
        [("USER#8", "USER#8"), ("USER#8", "ORDER#00016"), ("USER#8", "ADDRESS#0")], 1
    ):
        old = state[k]
        new = (
            {**old, "status": s("STREAMED")}
            if "ORDER" in k[1]
            else {**old, "city" if "ADDRESS" in k[1] else "name": s("streamed")}
        )
        records.append(
            sample_stream.stream_record(
                "app", "MODIFY", {"pk": old["pk"], "sk": old["sk"]}, old, new, later, sequence
            )
        )
        state[k] = new
    gone = state.pop(("USER#9", "ORDER#00018"))
    records.append(
        sample_stream.stream_record(
            "app", "REMOVE", {"pk": gone["pk"], "sk": gone["sk"]}, gone, None, later, 9
        )
    )
    written, failed = write_batch(records, str(location))
    assert failed is None and written
    capsys.readouterr()
    if by == "key":
        assert main(["sync", "--table", "app", "--stream", str(location), "--settle", "0"]) == 0
    else:  # a watch's tick: its merge, tests and counts per entity table, summed per table
        watch = ["watch", "--table", "app", "--stream", str(location), "--interval", "0"]
        assert main([*watch, "--ticks", "1", "--settle", "0", "--test-every", "1"]) == 0
        assert "tick 1: 1 files, 4 changes, +0 ~3 -1" in capsys.readouterr().out
    assert_entity_tables(spark, lakehouse_home, state, by)
    assert not schema_file.schema_path("app").exists()  # types live with the staging table


def set_rule(project: Path, rule: dict[str, Any] | None) -> None:
    """The entry of ``app`` in ``dbt_project.yml`` with ``rule`` (None: without one), as a
    person edits it."""
    path = project / "dbt_project.yml"
    text = path.read_text()
    head, _, _ = text.partition("    app:\n")
    entry: dict[str, Any] = {"partition_key": "pk:S", "sort_key": "sk:S"}
    if rule is not None:
        entry["entities"] = rule
    block = yaml.safe_dump({"app": entry}, sort_keys=False)
    path.write_text(head + "".join(f"    {line}\n" for line in block.splitlines()))


def test_a_rule_set_or_changed_on_a_table_with_data_is_refused_until_it_is_reset(
    spark,
    clean_lakehouse,
    project_copy: Path,
    lakehouse_home: Path,
    tmp_path: Path,
    capsys,
    monkeypatch,
) -> None:
    monkeypatch.setenv("LAKEHOUSE_SCHEMA_DIR", str(tmp_path / "schemas"))  # this test's own
    assert main(["add-table", "app", "--partition-key", "pk:S", "--sort-key", "sk:S"]) == 0
    items = single_table.items(4, seed=5)
    state = {key(i): i for i in items}
    full = sample_exports.write_items_export(tmp_path, "app", items)
    assert main(["sync", "--table", "app", str(full)]) == 0
    staged = spark.table("lake.staging.app").count()

    set_rule(project_copy, single_table.KEY_RULE)
    capsys.readouterr()
    lines = [
        change(
            state[("USER#1", "USER#1")],
            {**state[("USER#1", "USER#1")], "name": s("x")},
            "NEW_AND_OLD_IMAGES",
        )
    ]
    assert (
        main(["sync", "--table", "app", str(incremental(tmp_path, lines, "NEW_AND_OLD_IMAGES"))])
        == 2
    )
    refused = capsys.readouterr().err
    assert "an entity rule is set, but its change log holds data staged without one" in refused
    assert "ddb-lakehouse remove-table app --reset --yes" in refused
    spark.sql("refresh table lake.staging.app")
    assert spark.table("lake.staging.app").count() == staged  # nothing staged
    assert main(["merge", "--table", "app"]) == 2  # nor merged under the new rule

    assert spark.catalog.tableExists("lake.lakehouse.app")
    assert main(["remove-table", "app", "--reset", "--yes"]) == 0
    assert not spark.catalog.tableExists("lake.lakehouse.app")  # the unsplit table went too
    # A person's declarations, one section per entity: a column name, a type.
    declared = {
        "app__user": {"name": {"column": "full_name"}},
        "app__order": {"total": {"type": "decimal(12,2)"}},
    }
    schema_file.schema_path("app").parent.mkdir(parents=True, exist_ok=True)
    schema_file.schema_path("app").write_text(
        json.dumps(
            {"table": "app", "entities": {k: {"attributes": v} for k, v in declared.items()}}
        )
    )
    assert main(["sync", "--table", "app", str(full)]) == 0  # its models written by the merge
    assert (
        "app: deleted models/marts/app.sql (its entity tables' models replace it)"
        in capsys.readouterr().out
    )
    assert not (project_copy / "models" / "marts" / "app.sql").exists()
    assert (project_copy / "models" / "marts" / "app__user.sql").exists()
    assert_entity_tables(spark, lakehouse_home, state, "key")
    kept = table_types.stored_schema(spark, tables.get_table("app"))
    assert kept is not None
    assert kept.entity("app__user").get("name").column == "full_name"
    assert kept.entity("app__order").get("total").type.sql() == "decimal(12,2)"
    assert kept.entity("app__order").get("name") is None

    changed = {
        **single_table.KEY_RULE,
        "values": {**single_table.KEY_RULE["values"], "SESSION": None},
    }
    set_rule(project_copy, changed)
    capsys.readouterr()
    assert (
        main(["sync", "--table", "app", str(incremental(tmp_path, lines, "NEW_AND_OLD_IMAGES"))])
        == 2
    )
    assert "but its change log was staged under" in capsys.readouterr().err
    assert main(["remove-table", "app", "--reset", "--yes"]) == 0
    assert main(["sync", "--table", "app", str(full)]) == 0
    sessions = readers.read_rows(readers.connect(), lakehouse_home, "app__session", "pk, sk, ttl")
    assert sorted(sessions) == [("USER#0", "SESSION#0", 0)]
    assert readers.read_rows(readers.connect(), lakehouse_home, "app__unmatched", "pk") == []


def test_sample_writes_a_single_table_design_and_detect_schema_counts_its_entities(
    spark, project_copy: Path, tmp_path: Path, capsys
) -> None:
    assert main(["sample", "--table", "app", "--items", "10", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "--entity-key sk --entity USER --entity ORDER --entity ADDRESS" in out
    assert not (tmp_path / "books").exists()  # only what was asked for
    (folder,) = (tmp_path / "app" / "AWSDynamoDB").glob("0*")
    detected = tmp_path / "app.json"
    assert main(["detect-schema", str(folder), "--entity-key", "sk", "-o", str(detected)]) == 0
    shown = capsys.readouterr().out
    counts = dict(re.findall(r"^\| (\w+)\s+\| (\d+)\s+\| -", shown, flags=re.M))
    assert counts == {"ORDER": "20", "USER": "10", "ADDRESS": "10", "SESSION": "2"}
    # With a configured rule: each value's final table, and each entity's types apart.
    add_app("key")
    assert main(["detect-schema", str(folder), "--table", "app", "-o", str(detected)]) == 0
    shown = capsys.readouterr().out
    assert re.search(r"^\| SESSION\s+\| 2\s+\| app__unmatched \(not listed\)", shown, flags=re.M)
    written = json.loads(detected.read_text())
    assert written["entities"]["app__user"]["attributes"]["total"]["type"] == "bigint"
    assert written["entities"]["app__order"]["attributes"]["total"]["type"] == "decimal(38,2)"
