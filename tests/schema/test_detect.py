"""Detection in one pass (the sample's shape, ingestion.schema.shapes) gives exactly the
statistics of the generic path over every item: on the samples, the hand-made export of the type
tests, and items the sample's shape does not describe (handed to the generic path)."""

from __future__ import annotations

import json
import random

import pytest
from pyspark.sql import functions as F
from test_types import handmade_items

from ingestion.dynamodb.values import parse_item
from ingestion.samples import items as sample_items
from ingestion.schema import detect, shapes

pytestmark = pytest.mark.slow

S = sample_items.s
N = sample_items.n


def _images(spark, items: list[dict | str]):
    texts = [(t if isinstance(t, str) else json.dumps(t),) for t in items]
    return spark.createDataFrame(texts, "_image string").repartition(3)


def _lines(spark, items: list[dict]):
    """Lines of an incremental export: new images, and a delete's old image."""
    lines = [{"NewImage": i} if n % 2 else {"Keys": dict(list(i.items())[:1]), "OldImage": i} for n, i in enumerate(items)]  # fmt: skip
    return spark.createDataFrame([(json.dumps(x),) for x in lines], "value string").repartition(3)


def _same(spark, items: list[dict | str]) -> None:
    """The same statistics either way, from images and (items only) from export lines."""
    images = _images(spark, items)
    reference = detect.generic_statistics(images.select(F.expr(parse_item("_image")).alias("_attrs")))  # fmt: skip
    one_pass = detect.statistics(images)
    assert one_pass.items == reference.items == len(items)
    assert one_pass.by_path == reference.by_path
    assert set(one_pass.wide) == set(reference.wide)
    dicts = [i for i in items if isinstance(i, dict)]
    from_lines = detect.statistics(_lines(spark, dicts))
    reference = detect.generic_statistics(detect._attributes(_lines(spark, dicts)))
    assert (from_lines.items, from_lines.by_path) == (len(dicts), reference.by_path)


def _misfits(spark, items: list[dict], sample: int) -> int:
    images = _images(spark, items)
    shape = shapes.from_items(items[:sample])
    frame, plan = shapes.flagged(images, shape)
    return shapes.statistics(frame, plan)[1]


def test_the_samples_and_the_handmade_export_in_one_pass(spark) -> None:
    rng = random.Random(3)
    books = [sample_items.book_item(i, rng) for i in range(300)]
    orders = [sample_items.order_item(i, rng) for i in range(300)]
    for items in (books, orders, handmade_items()):
        _same(spark, items)
    # Their shape is learnt from the first items and covers the rest: one pass, no generic one.
    assert _misfits(spark, orders, sample=100) == 0


def test_items_the_sample_did_not_see_are_counted_by_the_generic_path(
    spark, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(detect, "SAMPLE_ITEMS", 2)
    first = {"id": S("a"), "n": N("1"), "m": {"M": {"k": S("x")}}, "l": {"L": []}, "e": {"M": {}}}
    later = [
        {"id": S("b"), "new": S("attribute first seen later")},
        {"id": S("c"), "n": N("12345678901234567890.5")},  # other digits: no misfit
        {"id": S("d"), "n": N("1E+3"), "m": {"M": {"k": S("x"), "other": N("2")}}},
        {"id": S("e"), "n": S("now text")},
        {"id": S("f"), "l": {"L": [{"M": {"q": N("3.25")}}, {"NS": ["1", "2.5"]}]}},
        {"id": S("g"), "e": {"M": {"now": {"BOOL": True}}}},
        {"id": S("h"), "m": {"M": {"k": {"X": "unknown descriptor"}}}},
        {"id": S("i"), "m": {"S": "two descriptors", "N": "1"}},
        {"id": S("j"), "m": {"M": "not a map"}},
        {"id": S("k"), "n": {"BOOL": "not a boolean"}},
        {"id": S("l"), "l": {"L": [{"L": [{"L": [{"M": {"deep": {"NS": ["7", "8.125"]}}}]}]}]}},
        {"id": S("m"), "d": {"M": {f"key{i}": S("v") for i in range(detect.MAX_PATHS + 5)}}},
        {"id": S("n"), "n": N("-0.000")},
        '{"id": {"S": "o"}, "n": {"N": "2"}',  # not JSON
    ]
    _same(spark, [first, first] + later)
    assert _misfits(spark, [first, first] + later, sample=2) == len(later) - 2  # c and n fit
    # A shape from items with every kind of value, and items that fit it exactly.
    _same(spark, handmade_items() * 3)


def test_detect_schema_writes_the_same_file_either_way(spark, samples, monkeypatch) -> None:
    from ingestion.dynamodb.tables import get_table
    from ingestion.schema import schema_file
    from ingestion.sources import manifest

    export = manifest.read_export(samples["orders"])
    table = get_table("orders")
    one_pass = json.dumps(schema_file.to_json(detect.detect_export(spark, export, table)))
    monkeypatch.setattr(detect, "MAX_SHAPE_PATHS", 0)  # the generic path alone
    assert json.dumps(schema_file.to_json(detect.detect_export(spark, export, table))) == one_pass
