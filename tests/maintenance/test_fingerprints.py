"""The fingerprints `verify`'s first pass proves items equal with
(ingestion.maintenance.fingerprints), on real Spark: an export line and the final row decoded from
it fingerprint alike; every difference the Python comparison names (tests/schema/test_canonical.py)
fingerprints apart, so the first pass never calls a differing item equal; and what the fingerprint
cannot decide (a `string` column holding another type) is left to the second pass."""

from __future__ import annotations

import base64
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from canonical_case import ITEM, ROW, ROW_DIFFERENCES, SCHEMA

from ingestion.maintenance import fingerprints, first_pass
from ingestion.schema.types import Attribute, ColumnType, Schema, StructField, parse_type

# ``extra`` and ``mixed`` are `string` columns holding a map and a number: the second pass's.
FAST = Schema(SCHEMA.table, tuple(a for a in SCHEMA.attributes if a.name not in ("extra", "mixed")))
FAST_ITEM = {k: v for k, v in ITEM.items() if k not in ("extra", "mixed")}
FAST_ROW = {k: v for k, v in ROW.items() if k not in ("extra", "mixed")}


def fingerprinted(
    spark: Any, tmp_path: Path, item: dict, row: dict, schema: Schema = FAST
) -> tuple[tuple, tuple]:
    """(keys, fingerprint) of the export line of ``item`` and of the final row ``row``."""
    folder = tmp_path / f"export-{len(list(tmp_path.iterdir()))}"
    folder.mkdir()
    (folder / "items.json").write_text(json.dumps({"Item": item}, separators=(",", ":")) + "\n")
    items = fingerprints.read_export(spark, [str(folder / "items.json")], schema)
    exported = fingerprints.export_fingerprints(items, schema).collect()
    columns = ", ".join(f"`{a.column}` {a.type.sql()}" for a in schema.attributes)
    frame = spark.createDataFrame([tuple(row.get(a.column) for a in schema.attributes)], columns)
    held = fingerprints.final_fingerprints(frame, schema).collect()
    assert len(exported) == len(held) == 1
    return tuple(exported[0]), tuple(held[0])


def test_an_item_and_the_row_decoded_from_it_fingerprint_alike(spark, tmp_path: Path) -> None:
    exported, held = fingerprinted(spark, tmp_path, FAST_ITEM, FAST_ROW)
    assert exported == held
    # What a column cannot say is not asked: digits a decimal pads, NULL and absent, set order.
    item = {**FAST_ITEM, "total": {"N": "12.3450"}, "tags": {"SS": ["a", "b"]}}
    del item["note"]
    assert fingerprinted(spark, tmp_path, item, FAST_ROW) == (held, held)
    # A "{" inside a string is counted as such: not taken for a name the columns do not know.
    braced = {**FAST_ITEM, "shipping": {"M": {**ITEM["shipping"]["M"], "city": {"S": "{Oslo{"}}}}
    row = {**FAST_ROW, "shipping": {**ROW["shipping"], "city": "{Oslo{"}}
    exported, held = fingerprinted(spark, tmp_path, braced, row)
    assert exported == held


@pytest.mark.parametrize(("attribute", "value", "why"), ROW_DIFFERENCES)
def test_a_row_that_differs_fingerprints_apart(
    spark, tmp_path: Path, attribute: str, value: object, why: str
) -> None:
    exported, held = fingerprinted(spark, tmp_path, FAST_ITEM, {**FAST_ROW, attribute: value})
    assert exported[:1] == held[:1] and exported[-1] != held[-1], why


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"new": {"S": "v"}}, "an attribute the table lacks"),
        ({"new": {"NULL": True}}, "a name the table lacks, even NULL (the second pass decides)"),
        ({"qty": {"S": "3"}}, "a value of another type than its column's"),
        ({"total": {"S": "12.345"}}, "a number's text as a string"),
        (
            {"shipping": {"M": {**ITEM["shipping"]["M"], "zip": {"S": "0150"}}}},
            "a map key too many",
        ),
        ({"tags": {"L": [{"S": "b"}, {"S": "a"}]}}, "a list in another order than the set held"),
        ({"total": {"N": "1.2345E1"}}, "a number spelled with an exponent"),
    ],
)
def test_an_item_that_differs_fingerprints_apart(
    spark, tmp_path: Path, change: dict, why: str
) -> None:
    exported, held = fingerprinted(spark, tmp_path, {**FAST_ITEM, **change}, FAST_ROW)
    assert exported[-1] != held[-1], why


def test_a_value_of_another_type_never_fingerprints_as_absent(spark, tmp_path: Path) -> None:
    # The decode nulls a value that does not fit its column: that null must not pass for the
    # export's value being absent.
    exported, held = fingerprinted(
        spark, tmp_path, {**FAST_ITEM, "qty": {"S": "three"}}, {**FAST_ROW, "qty": None}
    )
    assert exported[-1] != held[-1]


def test_a_string_column_holding_another_type_is_left_to_the_second_pass(
    spark, tmp_path: Path
) -> None:
    exported, held = fingerprinted(spark, tmp_path, ITEM, ROW, SCHEMA)
    assert exported[:1] == held[:1] and exported[-1] != held[-1]


def test_keys_are_one_text_on_both_sides(spark, tmp_path: Path) -> None:
    schema = Schema(
        "t",
        (
            Attribute("id", "id", ColumnType("binary"), key=True),
            Attribute("n", "n", ColumnType("number"), key=True),
            Attribute("v", "v", parse_type("string")),
        ),
    )
    item = {"id": {"B": "AP8="}, "n": {"N": "150.50"}, "v": {"S": "x"}}
    exported, held = fingerprinted(
        spark, tmp_path, item, {"id": bytearray(b"\x00\xff"), "n": "150.5", "v": "x"}, schema
    )
    assert exported == held


def test_a_long_list_and_a_nested_one(spark, tmp_path: Path) -> None:
    grid = ColumnType("array", element=parse_type("array<bigint>"))
    point = ColumnType("struct", fields=(StructField("x", "x", parse_type("bigint")),))
    schema = Schema(
        "t",
        (
            Attribute("id", "id", ColumnType("string"), key=True),
            Attribute("points", "points", ColumnType("array", element=point)),
            Attribute("grid", "grid", grid),
        ),
    )
    many = fingerprints.UNROLLED + 3  # past the elements hashed one by one
    item = {
        "id": {"S": "a"},
        "points": {"L": [{"M": {"x": {"N": str(i)}}} for i in range(many)]},
        "grid": {"L": [{"L": [{"N": "1"}, {"N": "2"}]}, {"NS": ["3"]}]},
    }
    row = {"id": "a", "points": [{"x": i} for i in range(many)], "grid": [[1, 2], [3]]}
    exported, held = fingerprinted(spark, tmp_path, item, row, schema)
    assert exported == held
    moved = {**row, "points": [{"x": i} for i in reversed(range(many))]}
    assert fingerprinted(spark, tmp_path, item, moved, schema)[1] != held
    other = {**row, "grid": [[1, 2], [4]]}
    assert fingerprinted(spark, tmp_path, item, other, schema)[1] != held


def test_binary_long_values_and_sets_fingerprint_as_bytes(spark, tmp_path: Path) -> None:
    # Spark's base64() breaks text past 76 characters into lines: binary is hashed as bytes.
    schema = Schema(
        "t",
        (
            Attribute("id", "id", ColumnType("binary"), key=True),
            Attribute("blob", "blob", parse_type("binary")),
            Attribute("docs", "docs", parse_type("array<binary>")),
        ),
    )
    key, blob = bytes(range(100)), bytes(range(256)) * 2
    docs = [b"\x02", b"\x01\xff"]
    item = {
        "id": {"B": base64.b64encode(key).decode()},
        "blob": {"B": base64.b64encode(blob).decode()},
        "docs": {"BS": [base64.b64encode(d).decode() for d in docs]},
    }
    row = {
        "id": bytearray(key),
        "blob": bytearray(blob),
        "docs": [bytearray(d) for d in sorted(docs)],
    }
    exported, held = fingerprinted(spark, tmp_path, item, row, schema)
    assert exported == held
    changed = {**row, "blob": bytearray(blob[:-1] + b"\x00")}
    assert fingerprinted(spark, tmp_path, item, changed, schema)[1] != held
    lost = {**row, "docs": [bytearray(b"\x01\xff")]}
    assert fingerprinted(spark, tmp_path, item, lost, schema)[1] != held


def test_keys_typed_bigint_or_decimal_by_an_older_schema_file(spark, tmp_path: Path) -> None:
    schema = Schema(
        "t",
        (
            Attribute("n", "n", parse_type("bigint"), key=True),
            Attribute("d", "d", parse_type("decimal(10,2)"), key=True),
        ),
    )
    item = {"n": {"N": "42"}, "d": {"N": "1.50"}}
    exported, held = fingerprinted(spark, tmp_path, item, {"n": 42, "d": Decimal("1.50")}, schema)
    assert exported == held


def test_a_table_column_named_like_the_first_pass_columns_is_not_taken_for_them(
    spark, tmp_path: Path
) -> None:
    # `_keywords` and `_bucket` are legal column names (ingestion.dynamodb.naming): the first
    # pass's own columns carry a "$" no column name has.
    schema = Schema(
        "t",
        (
            Attribute("id", "id", ColumnType("string"), key=True),
            Attribute("_keywords", "_keywords", parse_type("string")),
            Attribute("_bucket", "_bucket", parse_type("string")),
        ),
    )
    item = {"id": {"S": "a"}, "_keywords": {"S": "k"}, "_bucket": {"S": "b"}}
    row = {"id": "a", "_keywords": "k", "_bucket": "b"}
    exported, held = fingerprinted(spark, tmp_path, item, row, schema)
    assert exported == held
    frame = spark.createDataFrame([("a", "k", "b")], "id string, _keywords string, _bucket string")
    bucketed = first_pass.bucketed(fingerprints.final_fingerprints(frame, schema))
    assert fingerprints.key_names(bucketed) == [fingerprints.key_column(0)]
    lines = fingerprints.read_export(
        spark, [str(next(tmp_path.glob("export-0")) / "items.json")], schema
    )
    exported_bucket = first_pass.bucketed(fingerprints.export_fingerprints(lines, schema))
    assert (
        exported_bucket.select(first_pass.BUCKET, first_pass.DIGEST).collect()
        == bucketed.select(first_pass.BUCKET, first_pass.DIGEST).collect()
    )
