"""Nested attributes decoded from a typed parse of the image (ingestion.schema.typed_columns) give
the same staging rows as the text path, values that do not fit included; where a string column sits
on a route, maps and lists there stay text."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from pyspark.sql import functions as F
from test_types import handmade_items

from ingestion.dynamodb import decode
from ingestion.samples import items as sample_items
from ingestion.schema import detect, type_rules, typed_columns
from ingestion.schema.typed_columns import TEXT, Layout, layout, typed_attributes_ddl
from ingestion.schema.types import Attribute, Schema, parse_type
from ingestion.staging import append

pytestmark = pytest.mark.slow

S, N = sample_items.s, sample_items.n


def _struct(**fields: str | dict) -> dict:
    return {
        "type": "struct",
        "fields": {k: v if isinstance(v, dict) else {"type": v} for k, v in fields.items()},
    }


LINES = {
    "type": "array",
    "element": _struct(qty="bigint", sku="string", unit_price="decimal(38,2)"),
}
PURE = _struct(a="bigint", b=_struct(c="bigint"), l={"type": "array<bigint>"})
SHIP = _struct(city="string", n="bigint", inner=_struct(deep={"type": "array<decimal(38,1)>"}))


def _schema() -> Schema:
    def attribute(name: str, entry: dict, key: bool = False) -> Attribute:
        return Attribute(name, name, parse_type(entry["type"], entry, name), key=key)

    return Schema(
        "t",
        (
            attribute("id", {"type": "string"}, key=True),
            attribute("lines", LINES),
            attribute("pure", PURE),
            attribute("ship", SHIP),
            attribute("nums", {"type": "array<bigint>"}),
            attribute("note", {"type": "string"}),
        ),
    )


def test_a_string_column_on_a_route_keeps_its_maps_and_lists_as_text() -> None:
    schema = {a.name: a.type for a in _schema().attributes}
    lines = layout([schema["lines"]])
    assert lines.lists is not None and lines.lists.maps is not None  # array of typed maps
    assert lines.lists.maps == TEXT  # sku is a string: the element map's values stay text
    pure = layout([schema["pure"]])
    assert pure.maps is not None and pure.maps.maps is not None and pure.maps.lists is not None
    # city is a string next to inner: ship's map arrives typed, its values' maps as text
    assert layout([schema["ship"]]) == Layout(maps=TEXT)
    assert layout([schema["note"]]) == TEXT
    ddl = typed_attributes_ddl([(a.name, a.type) for a in _schema().attributes if not a.key])
    assert ddl is not None and all(f"`{n}`" in ddl for n in ("lines", "pure", "ship", "nums"))
    assert "`note`" not in ddl


ODD = [
    {"id": S("a"), "lines": {"L": [{"M": {"qty": N(2), "sku": S("x"), "unit_price": N("1.50")}}]}},
    {"id": S("b"), "lines": {"L": [{"S": "not a map"}]}},
    {"id": S("c"), "lines": {"L": [{"M": {"qty": N(1), "extra": S("unknown key")}}]}},
    {"id": S("d"), "lines": {"L": [{"M": "garbage"}]}},
    {"id": S("e"), "lines": {"SS": ["a"]}, "pure": {"M": {"a": N(1), "b": {"M": {"c": N(2)}}}}},
    {"id": S("f"), "pure": {"M": {"a": N("1.5"), "l": {"NS": ["3", "1"]}}}},
    {"id": S("g"), "pure": {"M": {"b": {"M": {"c": N(1), "d": N(2)}}, "l": {"L": [N(4), N(5)]}}}},
    {"id": S("h"), "pure": {"L": []}, "ship": {"M": {"city": {"M": {"k": N(1)}}, "n": N(3)}}},
    {"id": S("i"), "ship": {"M": {"inner": {"M": {"deep": {"L": [N("1.5"), N("2.5")]}}}}}},
    {"id": S("j"), "nums": {"L": [N(1), {"M": {}}]}, "note": {"M": {"x": {"L": [N(1)]}}}},
    {"id": S("k"), "pure": {"M": {"a": {"X": "unknown descriptor"}}}, "lines": {"NULL": True}},
    {"id": S("l"), "pure": {"M": {"a": N(1), "l": {"L": [{"L": [N(1)]}]}}}},
    {"id": S("m"), "pure": {"M": {"a": N(1), "zz": S("a key pure lacks")}}},
]


def _rows(spark, items: list[dict], schema: Schema) -> list[dict]:
    lines = spark.createDataFrame([(json.dumps({"Item": i}),) for i in items], "value string")
    operation, version = decode.change_columns(True, 1, False)
    rows = append.staging_rows(
        lines,
        (operation, version, F.lit(None).cast("string")),
        schema,
        "s",
        "b",
        datetime(2026, 1, 1),
    )
    return sorted((r.asDict(recursive=True) for r in rows.drop("_source_file").collect()), key=str)


def _both(spark, monkeypatch: pytest.MonkeyPatch, items: list[dict], schema: Schema):
    typed = _rows(spark, items, schema)
    with monkeypatch.context() as patch:
        patch.setattr(typed_columns, "typed_attributes_ddl", lambda columns: None)  # text only
        text = _rows(spark, items, schema)
    return typed, text


def test_typed_parse_gives_the_rows_of_the_text_path(spark, monkeypatch) -> None:
    typed, text = _both(spark, monkeypatch, ODD, _schema())
    assert typed == text
    by_id = {r["id"]: r for r in typed}
    assert by_id["a"]["lines"] == [{"qty": 2, "sku": "x", "unit_price": pytest.approx(1.5)}]
    assert by_id["g"]["pure"] is None and by_id["g"]["_drift"] == ["pure"]  # key d unknown
    assert by_id["m"]["pure"] is None and by_id["m"]["_drift"] == ["pure"]
    assert by_id["c"]["_drift"] == ["lines"] and by_id["d"]["_drift"] == ["lines"]
    assert by_id["e"]["lines"] == ["a"] or by_id["e"]["_drift"] == ["lines"]
    # a string field takes a map as JSON text; a list is not a struct
    assert by_id["h"]["ship"] == {"city": '{"k":1}', "n": 3, "inner": None}
    assert by_id["h"]["_drift"] == ["pure"]
    assert by_id["i"]["ship"]["inner"]["deep"] == [pytest.approx(1.5), pytest.approx(2.5)]


def test_typed_parse_on_the_handmade_export(spark, monkeypatch) -> None:
    items = handmade_items()
    images = spark.createDataFrame([(json.dumps(i),) for i in items], "_image string")
    schema = type_rules.resolve("t", detect.statistics(images), {"id": "S"})
    typed, text = _both(spark, monkeypatch, items, schema)
    assert typed == text and len(typed) == len(items)
