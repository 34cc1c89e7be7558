"""The decoder of decision 0013 (``java/dynamodb_lakehouse/decode``, ``ingestion.schema.
item_decoder``) gives the rows and the messages of the decode in Spark SQL it replaces
(``typed_rows.typed_rows_sql``): every typed column, ``_drift`` and ``_rest``, row for row, and
the same failure for the same bad item. The cases: an item of every type, values at their edges,
the layout tests' odd values, a wide table, names differing only in case, a single-table design
under both rules, types of the first items, every failure a user can cause, and every row of the
samples. Where the two were meant to differ (malformed DynamoDB JSON), the decoder's answer is
pinned on its own."""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from canonical_case import ITEM, SCHEMA
from pyspark.sql import functions as F
from test_item_json import EDGES, TYPED
from test_layouts import ODD
from test_layouts import _schema as layout_schema
from test_types import handmade_items

from ingestion.dynamodb import decode
from ingestion.dynamodb.entities import parse_rule
from ingestion.samples import single_table
from ingestion.samples.items import SAMPLE_TABLES, items_of
from ingestion.schema import detect, type_rules, typed_rows
from ingestion.schema.types import Attribute, ColumnType, Schema, StructField, parse_type
from ingestion.staging import append

pytestmark = pytest.mark.slow


def _lines(spark, items: list[dict[str, Any]], keys_only: bool = False):
    wrap = "Keys" if keys_only else "Item"
    lines = spark.createDataFrame([(json.dumps({wrap: i}),) for i in items], "value string")
    return lines.coalesce(1)  # one task: of two failing lines, the same one fails the batch


def _staged(spark, schema: Schema, items: list[dict[str, Any]], keys_only: bool = False) -> Any:
    """The items staged as a full export's lines: sorted rows, or the failure's message."""
    return _staged_lines(spark, schema, _lines(spark, items, keys_only))


def _staged_lines(spark, schema: Schema, lines: Any) -> Any:
    operation, version = decode.change_columns(True, 1, False)
    rows = append.staging_rows(
        lines,
        (operation, version, F.lit(None).cast("string")),
        schema,
        "source",
        "batch",
        datetime(2026, 1, 1, tzinfo=UTC),
    ).drop("_image")
    try:
        return sorted((r.asDict(recursive=True) for r in rows.collect()), key=repr)
    except Exception as exc:  # noqa: BLE001 - the message is what is compared
        return "failed: " + append.spark_reason(exc)


def _both(spark, monkeypatch, schema: Schema, items: list[dict[str, Any]], keys_only: bool = False):
    decoded = _staged(spark, schema, items, keys_only)
    with monkeypatch.context() as patch:
        patch.setattr(typed_rows, "typed_rows", typed_rows.typed_rows_sql)
        reference = _staged(spark, schema, items, keys_only)
    return decoded, reference


def _same(spark, monkeypatch, schema: Schema, items: list[dict[str, Any]], keys_only: bool = False):
    decoded, reference = _both(spark, monkeypatch, schema, items, keys_only)
    if isinstance(decoded, list) and isinstance(reference, list) and len(decoded) == len(reference):
        for mine, theirs in zip(decoded, reference, strict=True):  # the first difference, named
            differ = {k: (mine[k], theirs.get(k)) for k in mine if mine[k] != theirs.get(k)}
            assert not differ, differ
    assert decoded == reference
    return decoded


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_every_type_and_the_edges_of_values(spark, monkeypatch) -> None:
    rows = _same(spark, monkeypatch, TYPED, [ITEM])
    assert rows[0]["_rest"] is not None and rows[0]["_drift"] is None
    rows = _same(spark, monkeypatch, SCHEMA, [ITEM])  # no set descriptor known: sets kept whole
    edges = []
    for i, (rate, big, low) in enumerate(
        [
            ("0.00000000015", "12345678901234567890123456789012345678", "-9223372036854775808"),
            ("0.0000005", "-1E+37", "0"),
            ("-0.00000000001", "0", "9223372036854775807"),
            ("1E-130", "1.5E+3", "9223372036854775808"),  # too small, exponent, beyond bigint
            ("12.345678901234", "123456789012345678901234567890123456789", "1.0"),
        ]
    ):
        edges.append(
            {
                "id": {"N": ["42", "-0", "1.50E+2", "007", "1E-130"][i]},
                "rate": {"N": rate},
                "big": {"N": big},
                "low": {"N": low},
                "blob": {"B": _b64(bytes(range(256)) * 2)},
                "blobs": {"BS": [_b64(b"\xff"), _b64(b"\x00\x01"), _b64(b"x")]},
                "name": {
                    "S": ["", 'say "hi"\n\\ \u0001 {"S":"x"}', "Zoë 🚀 日本", "\u2028", "a"][i]
                },
                "meta": {
                    "M": {
                        "Key": {"S": "U"},
                        "key": {"N": "5"} if i == 1 else {"S": "l"},
                        "a b": {"BOOL": i % 2 == 0},
                        "empty": {"M": {}} if i != 2 else {"M": {"x": {"NULL": True}}},
                    }
                },
                "list": {
                    "L": [{"S": "𝔸"}, {"S": "z"}, {"N": "1"}, {"SS": ["é", "𝔸", "z"]}][: i + 1]
                },
            }
        )
    edges.append({"id": {"N": "7"}, "list": {"SS": ["𝔸", "z", "é", "\ufb01"]}, "blobs": {"L": []}})
    edges.append({"id": {"N": "8"}, "name": {"NS": ["10", "9", "-1.5"]}, "low": {"S": "5"}})
    edges.append({"id": {"N": "9"}, "name": {"M": {"N": {"S": "map key N 𝔸"}, "l": {"L": []}}}})
    edges.append(
        {"id": {"N": "10"}, "name": {"L": [{"B": _b64(b"\x00")}, {"NULL": True}, {"BOOL": False}]}}
    )
    rows = _same(spark, monkeypatch, EDGES, edges)
    assert sum(1 for r in rows if r["_rest"]) >= 5 and sum(1 for r in rows if r["_drift"]) >= 2


def test_odd_values_of_the_layout_tests(spark, monkeypatch) -> None:
    rows = _same(spark, monkeypatch, layout_schema(), ODD)
    assert {r["id"] for r in rows if r["_drift"]} >= {"c", "d", "g", "m"}


def test_handmade_items_with_detected_types_and_with_the_first_items_types(
    spark, monkeypatch
) -> None:
    items = handmade_items()
    images = spark.createDataFrame([(json.dumps(i),) for i in items], "_image string")
    schema = type_rules.resolve("t", detect.statistics(images), {"id": "S"})
    assert len(_same(spark, monkeypatch, schema, items)) == len(items)
    # Types of the first items, proven on every item: all fit, or the batch fails the same way.
    first = type_rules.resolve("t", detect.statistics(images.limit(3)), {"id": "S"})
    sampled = replace(first, sampled=3)
    decoded = _same(spark, monkeypatch, sampled, items)
    assert isinstance(decoded, str) and "values the first items' types do not describe" in decoded
    fitting = _same(spark, monkeypatch, replace(schema, sampled=12), items)
    assert len(fitting) == len(items)


def test_a_wide_table_and_names_that_differ_only_in_case(spark, monkeypatch) -> None:
    attributes = [Attribute("id", "id", ColumnType("string"), key=True)]
    attributes += [Attribute(f"a{i:03d}", f"a{i:03d}", parse_type("bigint")) for i in range(150)]
    attributes += [
        Attribute("Name", "name_upper", parse_type("string")),
        Attribute("name", "name_lower", parse_type("string")),
        Attribute(
            "m",
            "m",
            ColumnType(
                "struct",
                fields=(
                    StructField("K", "k_upper", parse_type("bigint")),
                    StructField("k", "k_lower", parse_type("array<string>")),
                ),
            ),
        ),
    ]
    schema = Schema("wide", tuple(attributes))
    items = [
        {"id": {"S": f"w{i}"}, **{f"a{j:03d}": {"N": str(i * j)} for j in range(0, 150, 1 + i)}}
        | {
            "Name": {"S": "U"},
            "name": {"S": "l"},
            "m": {"M": {"K": {"N": "1"}, "k": {"L": [{"S": "x"}]}}},
        }
        for i in range(4)
    ]
    items[1]["a007"] = {"S": "seven"}  # drift
    items[2]["m"] = {"M": {"K": {"N": "1.5"}}}  # a field that does not fit
    items[3]["name"] = {"M": {"x": {"N": "1"}}}  # a map in a string column
    rows = _same(spark, monkeypatch, schema, items)
    assert [r["_drift"] for r in sorted(rows, key=lambda r: r["id"])] == [
        None,
        ["a007"],
        ["m"],
        None,
    ]


def _entity_schema(spark, by: str) -> Schema:
    block = single_table.KEY_RULE if by == "key" else single_table.ATTRIBUTE_RULE
    rule = parse_rule("app", block, {"pk": "S", "sk": "S"})
    assert rule is not None
    items = single_table.items(10, seed=1)
    keys = {"pk": "S", "sk": "S"}
    sections = []
    for value, final in rule.values:
        own = [i for i in items if _entity_value(i, rule) == value]
        images = spark.createDataFrame([(json.dumps(i),) for i in own], "_image string")
        detected = type_rules.resolve(final, detect.statistics(images), keys)
        sections.append(detected if value != "ADDRESS" else replace(detected, sampled=2))
    top = type_rules.resolve(
        "app", detect.statistics(spark.createDataFrame([], "_image string")), keys
    )
    return replace(top, entities=tuple(sections), rule=rule)


def _entity_value(item: dict[str, Any], rule) -> str | None:
    if rule.by == "key":
        return item["sk"]["S"].split("#")[0]
    return item.get(rule.attribute, {}).get("S")


@pytest.mark.parametrize("by", ["key", "attribute"])
def test_a_single_table_design(spark, monkeypatch, by: str) -> None:
    schema = _entity_schema(spark, by)
    items = single_table.items(10, seed=1)
    items.append({"pk": {"S": "USER#99"}, "sk": {"S": "PROFILE"}, "type": {"S": "profile"}})
    items.append(
        {
            "pk": {"S": "USER#98"},
            "sk": {"S": "USER#98"},
            "type": {"S": "user"},
            "total": {"S": "many"},
        }
    )
    items.append(
        {
            "pk": {"S": "USER#97"},
            "sk": {"S": "ORDER#1"},
            "type": {"S": "order"},
            "note": {"NULL": True},
        }
    )
    rows = _same(spark, monkeypatch, schema, items)
    assert isinstance(rows, str) or {r["_entity"] for r in rows} >= {"app__user", "app__unmatched"}
    ok = items[:-1]  # without the attribute no section has
    rows = _same(spark, monkeypatch, schema, ok)
    assert not isinstance(rows, str), rows
    deletes = [{"pk": i["pk"], "sk": i["sk"]} for i in items[:6]]
    _same(spark, monkeypatch, schema, deletes, keys_only=True)


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ({"id": {"S": "a"}, "x": {"Q": "1"}}, "unknown type descriptor"),
        (
            {"id": {"S": "a"}, "brand_new": {"S": "1"}},
            "attributes not in the schema yet: brand_new",
        ),
        ({"title": {"S": "no key"}}, "key attribute 'id' is missing"),
        ({"id": {"NULL": True}}, "key attribute 'id' is missing"),
        ({"id": {"N": "1"}}, "key attribute 'id' is not a value that fits string"),
    ],
)
def test_every_failure_says_the_same(spark, monkeypatch, item, message) -> None:
    schema = Schema(
        "t",
        (
            Attribute("id", "id", ColumnType("string"), key=True),
            Attribute("title", "title", parse_type("string")),
        ),
    )
    decoded = _same(spark, monkeypatch, schema, [{"id": {"S": "fine"}}, item])
    assert isinstance(decoded, str) and message in decoded


@pytest.mark.parametrize("name", ["books", "orders"])
def test_every_row_of_the_samples(spark, monkeypatch, name: str) -> None:
    items = list(items_of(SAMPLE_TABLES[name], 0, 400, seed=7))
    images = spark.createDataFrame([(json.dumps(i),) for i in items], "_image string")
    key = {"books": {"id": "S"}, "orders": {"customer_id": "S", "order_id": "S"}}[name]
    schema = type_rules.resolve(name, detect.statistics(images), key)
    rows = _same(spark, monkeypatch, schema, items)
    assert len(rows) == len(items)


def test_malformed_values_are_drift_kept_whole(spark) -> None:
    """Where the decode in Spark SQL lost the whole item's parse (a descriptor of the wrong JSON
    kind, two descriptors), the decoder types the rest and keeps the value in the remainder."""
    schema = Schema(
        "t",
        (
            Attribute("id", "id", ColumnType("string"), key=True),
            Attribute("flag", "flag", parse_type("boolean")),
            Attribute("n", "n", parse_type("bigint")),
            Attribute("bytes", "bytes", parse_type("binary")),
            Attribute("line\u2028separated", "line_separated", parse_type("bigint")),
        ),
    )
    items = [
        {"id": {"S": "a"}, "flag": {"BOOL": "yes"}, "n": {"N": "1"}, "bytes": {"B": "not base64!"}},
        {"id": {"S": "b"}, "flag": {"BOOL": True}, "n": {"N": "1", "S": "1"}},
        {"id": {"S": "c"}, "flag": None, "n": {"NULL": False}},
    ]
    rows = {r["id"]: r for r in _staged(spark, schema, items)}
    assert rows["a"]["flag"] is None and rows["a"]["n"] == 1
    assert rows["a"]["_drift"] == ["flag", "bytes"]
    assert json.loads(rows["a"]["_rest"]) == {
        "flag": {"BOOL": "yes"},
        "bytes": {"B": "not base64!"},
    }
    separated = {"id": {"S": "e"}, "line\u2028separated": {"S": "not a number"}}
    (row,) = _staged(spark, schema, [separated])
    assert json.loads(row["_rest"]) == {"line\u2028separated": {"S": "not a number"}}
    assert rows["b"]["_drift"] == ["n"] and json.loads(rows["b"]["_rest"]) == {
        "n": {"N": "1", "S": "1"}
    }
    assert rows["c"]["flag"] is None and rows["c"]["_drift"] == ["n"]  # JSON null: no value
    assert json.loads(rows["c"]["_rest"]) == {"n": {"NULL": False}}
    # A number no column of DynamoDB's could hold: no fit, decided before its digits are built.
    (huge,) = _staged(spark, schema, [{"id": {"S": "h"}, "n": {"N": "6.0790316E+25569151"}}])
    assert huge["n"] is None and huge["_drift"] == ["n"]
    for line, message in (
        (
            '{"Item": {"id": {"S": "d"}, "n": {"N": "1"}, "n": {"N": "2"}}}',
            'holds attribute "n" twice',
        ),
        ('{"Item": "{not json"}', "table t: an item is not JSON"),
    ):
        lines = spark.createDataFrame([(line,)], "value string")
        operation, version = decode.change_columns(True, 1, False)
        staged = append.staging_rows(
            lines,
            (operation, version, F.lit(None).cast("string")),
            schema,
            "s",
            "b",
            datetime(2026, 1, 1, tzinfo=UTC),
        )
        with pytest.raises(Exception, match=message):
            staged.collect()


_ONE = {"id": {"S": "a"}, "n": {"N": "1"}}
_TWO = {"id": {"S": "b"}, "n": {"N": "2"}}


@pytest.mark.parametrize(
    "line",
    [
        json.dumps({"Item": _ONE}),
        json.dumps(
            {"Metadata": {"WriteTimestampMicros": {"N": "1"}}, "NewImage": _ONE, "OldImage": _TWO}
        ),
        json.dumps({"OldImage": _TWO, "Keys": {"id": {"S": "b"}}}),
        json.dumps({"Item": None, "Keys": {"id": {"S": "c"}}}),  # a null image is no image
        json.dumps({"Keys": {"id": {"S": "c"}}, "eventName": "REMOVE", "dynamodb": [1, {"x": 2}]}),
        json.dumps({"Item": json.dumps(_ONE)}),  # an image as a JSON string: that string's item
        '{"Item": {"id": {"S": "a"}}, "Item": {"id": {"S": "z"}, "n": {"N": "9"}}}',  # the last
        '{"Item": {"id": {"S": "a"}, "id": {"S": "a"}}, "Item": {"id": {"S": "z"}}}',
        '{"Item": {"id": {"S": "a"}}, "NewImage": {"id": {"S": "n"}}, "Item": null}',
        # An image the chosen one outranks is not decoded: its own fault does not count.
        '{"NewImage": {"id": {"S": "a"}}, "OldImage": {"id": {"S": "a"}, "id": {"S": "b"}}}',
        '{"OldImage": {"id": {"S": "a"}, "id": {"S": "b"}}, "NewImage": {"id": {"S": "a"}}}',
        json.dumps({"Item": _ONE}) + " trailing",
        json.dumps({"Item": 5}),
        json.dumps({"Item": [_ONE]}),
        json.dumps({"Item": _ONE, "Metadata": "text"}),  # a field of a type the envelope lacks
        json.dumps({"Metadata": {}}),  # no image
        json.dumps([{"Item": _ONE}]),
        '{"Item": {"id": {"S": "a"}',  # cut short
        "not json",
        "",
    ],
)
def test_the_line_s_image_as_spark_sql_takes_it(spark, monkeypatch, line: str) -> None:
    """The decoder takes the image out of the line (one parse of it) as ``decode.with_image``
    does in Spark SQL: the first of Item, NewImage, OldImage and Keys that is not null; a line
    without one fails with the same message. (An image given as a string that is not JSON: the
    pinned difference of ``test_malformed_values_are_drift_kept_whole``.)"""
    schema = Schema(
        "t",
        (
            Attribute("id", "id", ColumnType("string"), key=True),
            Attribute("n", "n", parse_type("bigint")),
        ),
    )
    lines = spark.createDataFrame([(line,)], "value string")
    decoded = _staged_lines(spark, schema, lines)
    with monkeypatch.context() as patch:
        patch.setattr(typed_rows, "typed_rows", typed_rows.typed_rows_sql)
        reference = _staged_lines(spark, schema, lines)
    assert decoded == reference
