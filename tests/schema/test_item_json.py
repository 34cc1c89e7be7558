"""The one encoder of decision 0012 (ingestion.schema.item_json): a staged row's typed columns
and its remainder give back the item exactly, NULL and absent apart, sets as sets, numbers by
value; the remainder holds only the attributes the columns cannot say. Checked against an
independent strict canonical form (plain Python, verify's number rules), on the case of every
type and on every row the samples stage."""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from canonical_case import ITEM, SCHEMA, struct
from items_back import items_of, strict, strict_item
from pyspark.sql import functions as F
from single_table_reference import add_app
from verifying import export_items

from ingestion.dynamodb.tables import get_table
from ingestion.samples import single_table
from ingestion.schema.canonical import number, number_text
from ingestion.schema.item_json import with_item_json
from ingestion.schema.typed_columns import TYPED_ATTRIBUTES
from ingestion.schema.types import Attribute, ColumnType, Schema, StructField, parse_type
from ingestion.staging.append import staging_rows
from ingestion.staging.exports import ingest_export

# The case's sets as detection records them (one set descriptor seen): their columns stand for it.
SETS = {"tags": "SS", "sizes": "NS"}
TYPED = replace(
    SCHEMA,
    attributes=tuple(
        replace(a, info={"dynamodb_types": {SETS[a.name]: 1}}) if a.name in SETS else a
        for a in SCHEMA.attributes
    ),
)


def _encoded(
    spark, schema: Schema, items: list[dict[str, Any]]
) -> list[tuple[dict, dict | None, dict]]:
    """Each item staged as a full export's line is (``append.staging_rows``, the decode that
    finds the remainder), then given back through the encoder: (item, remainder, given back)."""
    lines = spark.createDataFrame([(json.dumps({"Item": item}),) for item in items], "value string")
    columns = (F.lit("snapshot"), F.lit(1).cast("bigint"), F.lit(None).cast("string"))
    staged = staging_rows(
        lines, columns, schema, "source", "batch", datetime(2026, 1, 1, tzinfo=UTC)
    )
    out = with_item_json(staged, schema).select("_image", "_rest", "_item")
    return [
        (json.loads(r["_image"]), r["_rest"] and json.loads(r["_rest"]), json.loads(r["_item"]))
        for r in out.collect()
    ]


@pytest.mark.slow
def test_every_type_comes_back_and_the_rest_holds_only_what_the_columns_cannot_say(spark) -> None:
    ((image, rest, encoded),) = _encoded(spark, TYPED, [ITEM])
    assert strict_item(encoded) == strict_item(ITEM)
    assert rest is not None
    # NULL (top level, in a map, in a list), a map and a number in `string` columns: kept whole.
    assert sorted(rest) == ["extra", "lines", "mixed", "note", "shipping"]
    assert rest["note"] == {"NULL": True} and rest["mixed"] == {"N": "007.10"}


@pytest.mark.slow
def test_a_drifted_value_nested_misfits_and_a_set_in_a_list_column_are_kept(spark) -> None:
    """(An attribute with no column fails a plain table's batch, ``NEW_ATTRIBUTES``: only an
    unmatched item of a single-table design has one, tested below.)"""
    item = {
        "id": {"S": "o-2"},
        "qty": {"N": "1.5"},  # does not fit bigint: staged null, listed in _drift
        "tags": {"L": [{"S": "a"}]},  # a list where the column stands for SS
        "sizes": {"NS": ["1E+2", "0.50"]},  # exponent and trailing zero: one number each
        "photo": {"B": base64.b64encode(b"").decode()},  # empty binary
        "gift": {"BOOL": False},
        "total": {"N": "-0.000"},
        "note": {"S": ""},  # an empty string
        "shipping": {"M": {"city": {"N": "5"}}},  # a number in a nested `string` field
        "lines": {"L": [{"M": {"sku": {"SS": ["x"]}}}]},  # a set in a list's `string` field
    }
    ((_, rest, encoded),) = _encoded(spark, TYPED, [item])
    assert strict_item(encoded) == strict_item(item)
    assert rest is not None and sorted(rest) == ["lines", "qty", "shipping", "tags"]


@pytest.mark.slow
def test_a_wide_table_finds_its_remainder_on_the_text_path(spark) -> None:
    """Over ``TYPED_ATTRIBUTES`` attributes nested values are decoded from their text: the
    remainder must be the same there."""
    wide = Schema(
        "wide",
        (
            Attribute("id", "id", ColumnType("string"), key=True),
            *(
                Attribute(f"a{i:03}", f"a{i:03}", parse_type("string"))
                for i in range(TYPED_ATTRIBUTES)
            ),
            Attribute("meta", "meta", struct(city="string", n="bigint")),
            Attribute("xs", "xs", parse_type("array<string>")),
        ),
    )
    exact = {
        "id": {"S": "w-1"},
        "a000": {"S": "x"},
        "meta": {"M": {"city": {"S": "Oslo"}, "n": {"N": "4"}}},
        "xs": {"L": [{"S": "a"}, {"S": "b"}]},
    }
    inexact = {
        "id": {"S": "w-2"},
        "a000": {"N": "1"},  # not an S
        "a001": {"S": "y"},
        "meta": {"M": {"city": {"S": "Oslo"}, "n": {"NULL": True}}},  # NULL in a map
        "xs": {"L": [{"S": "a"}, {"SS": ["b"]}]},  # a set in a list of strings
    }
    (one, two) = _encoded(spark, wide, [exact, inexact])
    assert one[1] is None and strict_item(one[2]) == strict_item(exact)
    assert sorted(two[1]) == ["a000", "meta", "xs"] and strict_item(two[2]) == strict_item(inexact)


EDGES = Schema(
    "edges",
    (
        Attribute("id", "id", ColumnType("number"), key=True),
        Attribute("rate", "rate", parse_type("decimal(38,11)")),
        Attribute("big", "big", parse_type("decimal(38,0)")),
        Attribute("low", "low", parse_type("bigint")),
        Attribute("blob", "blob", parse_type("binary")),
        Attribute(
            "blobs", "blobs", parse_type("array<binary>"), info={"dynamodb_types": {"BS": 1}}
        ),
        Attribute("name", "we`ird name", parse_type("string")),
        Attribute(
            "meta",
            "meta",
            ColumnType(
                "struct",
                fields=(
                    StructField("Key", "key_upper", parse_type("string")),
                    StructField("key", "key_lower", parse_type("string")),
                    StructField("a b", "a_b", parse_type("boolean")),
                    StructField(
                        "empty",
                        "empty",
                        ColumnType("struct", fields=(StructField("x", "x", parse_type("string")),)),
                    ),
                ),
            ),
        ),
        Attribute("list", "list", ColumnType("array", element=parse_type("string"))),
    ),
)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("rate", "big", "low"),
    [
        ("0.00000000015", "12345678901234567890123456789012345678", "-9223372036854775808"),
        ("0.0000005", "-1E+37", "0"),
        ("-0.00000000001", "0", "9223372036854775807"),
    ],
)
def test_numbers_binary_names_and_maps_at_their_edges_come_back(
    spark, rate: str, big: str, low: str
) -> None:
    """Small decimals (Spark writes them in scientific form), 38 digits, 64-bit bounds, binary
    longer than one base64 line, a backtick in a column name, map keys renamed and differing only
    in case, an empty map, an empty list and an empty string."""
    blob = bytes(range(256)) * 2
    item = {
        "id": {"N": "42"},
        "rate": {"N": rate},
        "big": {"N": big},
        "low": {"N": low},
        "blob": {"B": base64.b64encode(blob).decode()},
        "blobs": {"BS": [base64.b64encode(blob[:90]).decode(), base64.b64encode(b"x").decode()]},
        "name": {"S": ""},
        "meta": {
            "M": {"Key": {"S": "U"}, "key": {"S": "l"}, "a b": {"BOOL": True}, "empty": {"M": {}}}
        },
        "list": {"L": []},
    }
    ((_, rest, encoded),) = _encoded(spark, EDGES, [item])
    assert rest is None  # every value here is one its column says exactly
    assert strict_item(encoded) == strict_item(item)
    assert encoded["rate"]["N"] == number_text(number(rate))  # canonical text, no exponent
    assert "\n" not in json.dumps(encoded["blob"]) and "\r" not in json.dumps(encoded["blob"])


def _keyed(items: list[dict[str, Any]], keys: list[str]) -> dict[str, dict[str, Any]]:
    return {json.dumps([item[k] for k in keys]): strict_item(item) for item in items}


def _staged_back(spark, name: str, export) -> list[tuple[dict, Any]]:
    """The export staged into the change log's new form, each row given back (columns and
    remainder through the encoder) beside the row: equal to the export's items, key by key."""
    table = get_table(name)
    ingest_export(spark, table, str(export))
    staged = spark.table(f"lake.staging.{name}")
    assert "_rest" in staged.columns and "_image" not in staged.columns
    back = items_of(staged, spark, name)
    keys = [k.name for k in table.keys]
    assert _keyed([item for item, _ in back], keys) == _keyed(export_items(export), keys)
    assert len(back) == len(export_items(export))
    return back


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize("name", ["books", "orders"])
def test_every_row_the_samples_stage_comes_back_exactly(
    spark, clean_lakehouse, samples, name: str
) -> None:
    back = _staged_back(spark, name, samples[name])
    # The remainder is the exception: what the samples hold that the columns cannot say (NULLs
    # and the like), never the whole item.
    for item, row in back:
        rest = row["_rest"] and json.loads(row["_rest"])
        assert rest is None or set(rest) < set(item), rest


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize("by", ["key", "attribute"])
def test_a_single_table_design_comes_back_exactly_entity_by_entity(
    spark, clean_lakehouse, project_copy, tmp_path, by: str
) -> None:
    """Each entity's columns sit in its struct; an unmatched item's attributes have no column,
    so its remainder holds them all (keys aside)."""
    add_app(by)
    back = _staged_back(spark, "app", single_table.write_single_table(tmp_path, 5, seed=3))
    unmatched = [(item, row) for item, row in back if row["_entity"] == "app__unmatched"]
    assert unmatched and len(unmatched) < len(back)
    for item, row in unmatched:
        assert set(json.loads(row["_rest"])) == set(item) - {"pk", "sk"}
    typed = [row for item, row in back if row["_entity"] != "app__unmatched"]
    assert sum(row["_rest"] is None for row in typed) > len(typed) // 2


def test_the_strict_form_tells_null_from_absent_and_sets_from_lists() -> None:
    """The proof's own form must not hide what the encoder could lose."""
    assert strict_item({"a": {"NULL": True}}) != strict_item({})
    assert strict({"SS": ["a"]}) != strict({"L": [{"S": "a"}]})
    assert strict({"N": "1.50"}) == strict({"N": "15E-1"})
    assert strict({"SS": ["b", "a"]}) == strict({"SS": ["a", "b"]})
    assert strict({"L": [{"S": "b"}, {"S": "a"}]}) != strict({"L": [{"S": "a"}, {"S": "b"}]})


def test_an_attribute_without_info_stands_for_a_list() -> None:
    from ingestion.schema.item_json import set_descriptor

    (tags,) = [a for a in SCHEMA.attributes if a.name == "tags"]
    assert set_descriptor(tags) is None
    assert set_descriptor(replace(tags, info={"dynamodb_types": {"SS": 3, "NULL": 1}})) == "SS"
    assert set_descriptor(replace(tags, info={"dynamodb_types": {"SS": 3, "L": 1}})) is None
    assert isinstance(tags, Attribute)
