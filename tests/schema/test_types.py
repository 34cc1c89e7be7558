"""Lossless types end to end, on an export written by hand (not by the sample generator):
detect-schema -> ingest -> dbt merge -> final table, every value compared with the rules
(tests/reference.py states them again in plain Python). Also: new attributes become columns,
values that don't fit are kept and reported, `rebuild` adopts the new type, name collisions fail.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from items_back import final_items, strict_item
from reference import DRIFT, expected, same

from ingestion.catalog import table_types
from ingestion.cli import main
from ingestion.dynamodb.tables import get_table
from ingestion.maintenance import rebuild
from ingestion.merge import dbt_process, runner
from ingestion.samples import items as sample_items
from ingestion.samples import sample_exports
from ingestion.samples.items import BASE_TIME
from ingestion.schema import schema_file, types
from ingestion.schema.types import parse_type
from ingestion.staging import append, drift, exports

pytestmark = pytest.mark.slow

S = sample_items.s
N = sample_items.n


def handmade_items() -> list[dict]:
    """All ten type descriptors, conflicts, awkward names, 38-digit numbers, tricky strings."""
    items = []
    for i in range(12):
        item = {
            "id": S(f"item-{i:02d}"),
            "Title": S(["", "Zoë 🚀 日本", 'say "hi"\n\\ {"S":"x"}', "plain"][i % 4]),
            "first-name": S(f"name {i}"),
            "x.y": N(i * 7),
            "a b": {"BOOL": i % 2 == 0},
            "order": N(f"{i}.{i % 10}5"),
            "Big": N("12345678901234567890123456789012345678" if i == 3 else str(i)),
            "tiny": N("0.000000000000000001" if i == 4 else "1.5"),
            "huge": N("12345678901234567890123456789012345678" if i == 5 else "0.5"),
            "longs": N(str(2**63 - 1) if i == 6 else str(-(2**63))),
            "blob": {"B": ["AAEC/w==", "", "aGVsbG8="][i % 3]},
            "nothing": {"NULL": True},
            "price": N("9.99") if i % 3 else S("free"),
            "mixed": [
                {"BOOL": True},
                {"B": "AQ=="},
                {"M": {"k": S("v")}},
                {"L": [N("1"), S("2")]},
                {"SS": ["b", "a"]},
                {"NS": ["2", "10"]},
            ][i % 6],
            "tags": {"SS": ["z", "a", f"t{i}"]},
            "scores": {"NS": ["1.25", "10", f"{i + 100}"]},
            "bins": {"BS": ["AQ==", "AA=="]},
            "meta": {
                "M": {
                    "Created-By": S("someone"),
                    "count": N(i),
                    "inner": {"M": {"deep list": {"L": [N("1.5"), N(i)]}}},
                }
            },
            "list_same": {"L": [S("a"), S(f"b{i}")]},
            "list_mixed": {"L": [S("a"), N(i)]},
            "list_maps": {"L": [{"M": {"sku": S(f"s{i}"), "qty": N(i)}}]},
            "empty_list": {"L": []},
            "123abc": S("starts with a digit"),
            "sel;ect": S("semicolon"),
        }
        if i % 4 == 0:
            del item["first-name"]  # absent in some items
            item["order"] = {"NULL": True}
        items.append(item)
    return items


EXPECTED_TYPES = {
    "id": "string",
    "Title": "string",
    "first-name": "string",
    "x.y": "bigint",
    "a b": "boolean",
    "order": "decimal(38,2)",
    "Big": "decimal(38,0)",
    "tiny": "decimal(38,18)",
    "huge": "string",
    "longs": "bigint",
    "blob": "binary",
    "nothing": "string",
    "price": "string",
    "mixed": "string",
    "tags": "array<string>",
    "scores": "array<decimal(38,2)>",
    "bins": "array<binary>",
    "meta": (
        "struct<`count`:bigint,`created_by`:string,"
        "`inner`:struct<`deep_list`:array<decimal(38,1)>>>"
    ),
    "list_same": "array<string>",
    "list_mixed": "string",
    "list_maps": "array<struct<`qty`:bigint,`sku`:string>>",
    "empty_list": "string",
    "123abc": "string",
    "sel;ect": "string",
}
EXPECTED_COLUMNS = {
    "x.y": "x_y",
    "a b": "a_b",
    "first-name": "first_name",
    "123abc": "_123abc",
    "sel;ect": "sel_ect",
    "Title": "title",
}


@pytest.fixture
def no_books_schema(clean_lakehouse) -> object:
    """Detection starts from nothing; the committed books schema is put back afterwards."""
    path = schema_file.schema_path("books")
    saved = path.read_bytes()
    path.unlink()
    yield
    path.write_bytes(saved)


def _final_rows(spark) -> dict[str, dict]:
    """Id -> the row, with ``_item``: the item its columns and remainder give back."""
    return {r["id"]: {**r.asDict(), "_item": item} for item, r in final_items(spark, "books")}


def test_detect_schema_command_on_a_handmade_export(
    spark, no_books_schema, tmp_path: Path, capsys
) -> None:
    export = sample_exports.write_items_export(tmp_path, "books", handmade_items())
    out = tmp_path / "types.json"
    assert main(["detect-schema", str(export), "--table", "books", "-o", str(out)]) == 0
    document = json.loads(out.read_text())
    assert document["items"] == 12
    types = {name: parse_type(e["type"], e).sql() for name, e in document["attributes"].items()}
    assert types == EXPECTED_TYPES
    for name, column in EXPECTED_COLUMNS.items():
        assert document["attributes"][name]["column"] == column
    price = document["attributes"]["price"]
    assert price["dynamodb_types"] == {"N": 8, "S": 4} and "conflicting types N, S" in price["note"]
    assert document["attributes"]["order"]["nullable"] is True
    assert document["attributes"]["order"]["dynamodb_types"] == {"N": 9, "NULL": 3}
    assert document["attributes"]["tiny"]["max_fraction_digits"] == 18
    reported = capsys.readouterr()
    assert "conflict: table books: attribute 'mixed'" in reported.err
    assert not schema_file.schema_path("books").exists()  # -o: the table's own file is untouched


def test_every_value_reaches_the_final_table_under_the_rules(
    spark, no_books_schema, tmp_path: Path
) -> None:
    items = handmade_items()
    export = sample_exports.write_items_export(tmp_path, "books", items)
    table = get_table("books")
    result = exports.ingest_export(spark, table, str(export))  # detects: no schema file yet
    assert result.rows == 12 and not result.drift
    assert not schema_file.schema_path("books").exists()  # types live with the staging table
    runner.run_merge(spark, [table])

    detected = table_types.stored_schema(spark, table)
    assert detected is not None
    rows = _final_rows(spark)
    assert len(rows) == 12
    compared = 0
    for item in items:
        row = rows[item["id"]["S"]]
        assert row["_drift"] is None
        assert strict_item(row["_item"]) == strict_item(item)
        for attribute in detected.attributes:
            want = expected(item.get(attribute.name), attribute.type)
            assert want is not DRIFT
            assert same(want, row[attribute.column]), (attribute.name, want, row[attribute.column])
            compared += 1
    assert compared == 12 * len(EXPECTED_TYPES)


def _later_export(tmp_path: Path, items: list[dict], hours: int) -> Path:
    return sample_exports.write_items_export(
        tmp_path, "books", items, moment=BASE_TIME + timedelta(hours=hours), seed=hours
    )


def test_new_attribute_becomes_a_column_and_misfits_are_kept_then_adopted(
    spark, no_books_schema, tmp_path: Path, capsys
) -> None:
    table = get_table("books")
    first = [
        {"id": S("a"), "pages": N(100), "title": S("A")},
        {"id": S("b"), "pages": N(200), "title": S("B")},
    ]
    before = exports.ingest_export(spark, table, str(_later_export(tmp_path, first, 0)))
    runner.run_merge(spark, [table], test=False)

    # A later full export (the whole table): a new attribute, and a value that does not fit bigint.
    second = [
        {"id": S("a"), "pages": N(100), "title": S("A")},
        {"id": S("b"), "pages": N("3.5"), "title": S("B2"), "Added-Later": {"M": {"k": N(1)}}},
        {"id": S("c"), "pages": N(300), "title": S("C")},
    ]
    result = exports.ingest_export(spark, table, str(_later_export(tmp_path, second, 1)))
    assert result.rows == 3
    assert any("added_later" in change for change in result.schema_changes)
    assert [(d.attribute, d.rows, json.loads(d.example)) for d in result.drift] == [
        ("pages", 1, {"N": "3.5"})
    ]
    staged = spark.table("lake.staging.books").where("id = 'b' and title = 'B2'").first()
    assert staged["pages"] is None and staged["_drift"] == ["pages"]
    assert staged["added_later"].asDict() == {"k": 1}
    assert json.loads(staged["_rest"]) == {"pages": {"N": "3.5"}}  # the value is kept, whole

    # A merge of the batch before its drift is adopted is refused by the model itself, whoever
    # runs it (before, it wrote `pages` null for b): the final table keeps the first export's rows.
    with pytest.raises(dbt_process.DbtError):
        runner.run_merge(spark, [table], test=False)
    assert "holds values that do not fit their columns (pages)" in "".join(capsys.readouterr())
    rows = _final_rows(spark)
    assert set(rows) == {"a", "b"} and rows["b"]["title"] == "B" and rows["b"]["pages"] == 200

    assert main(["drift", "--table", "books"]) == 0
    assert "pages" in capsys.readouterr().out

    rebuilt = rebuild.rebuild_staging(spark, table)
    assert "pages: bigint -> decimal(38,1)" in rebuilt.changed
    assert append.applied_sources(spark, "books") == {before.source, result.source}
    runner.run_merge(spark, [table], full_refresh=True)
    rows = _final_rows(spark)
    assert {k: (str(r["pages"]), r["_drift"]) for k, r in rows.items()} == {
        "a": ("100.0", None),
        "b": ("3.5", None),
        "c": ("300.0", None),
    }
    assert rows["a"]["added_later"] is None and rows["b"]["added_later"].asDict() == {"k": 1}
    assert drift.drift_report(spark, "books") == []


def test_colliding_attribute_names_fail_until_mapped(
    spark, no_books_schema, tmp_path: Path
) -> None:
    items = [{"id": S("1"), "Title": S("upper"), "title": S("lower")}]
    export = sample_exports.write_items_export(tmp_path, "books", items)
    table = get_table("books")
    with pytest.raises(types.SchemaError) as failure:
        exports.ingest_export(spark, table, str(export))
    assert "'Title' and 'title' both map to column 'title'" in str(failure.value)
    assert not spark.catalog.tableExists("lake.staging.books")  # nothing staged

    schema_file.schema_path("books").write_text(
        json.dumps({"attributes": {"Title": {"column": "title_upper"}}})
    )
    exports.ingest_export(spark, table, str(export))
    row = spark.table("lake.staging.books").first()
    assert (row["title_upper"], row["title"]) == ("upper", "lower")
    stored = table_types.stored_schema(spark, table)
    assert stored is not None and stored.get("Title").column == "title_upper"
    assert json.loads(schema_file.schema_path("books").read_text()) == {
        "attributes": {"Title": {"column": "title_upper"}}
    }  # the person's file is never rewritten


def test_simple_schema_file_is_used_without_detection(
    spark, no_books_schema, tmp_path: Path
) -> None:
    schema_file.schema_path("books").write_text(json.dumps({"id": "S", "pages": "N", "title": "S"}))
    items = [{"id": S("1"), "pages": N("12.5"), "title": S("t")}]
    exports.ingest_export(
        spark, get_table("books"), str(sample_exports.write_items_export(tmp_path, "books", items))
    )
    row = spark.table("lake.staging.books").first()
    assert str(row["pages"]) == "12.500000000"  # decimal(38,9), the simple form's N
    assert schema_file.schema_path("books").read_text().startswith('{"id"')  # not rewritten


def test_missing_key_still_stops_the_batch(spark, no_books_schema, tmp_path: Path) -> None:
    items = [{"id": S("1")}, {"ident": S("2")}]
    export = sample_exports.write_items_export(tmp_path, "books", items)
    schema_file.schema_path("books").write_text(json.dumps({"id": "S", "ident": "S"}))
    with pytest.raises(append.StagingError, match="key attribute 'id' is missing"):
        exports.ingest_export(spark, get_table("books"), str(export))
    assert append.applied_sources(spark, "books") == set()
