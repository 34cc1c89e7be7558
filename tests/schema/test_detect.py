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
from ingestion.schema import detect, item_statistics, shapes

pytestmark = pytest.mark.slow

S = sample_items.s
N = sample_items.n


def _images(spark, items: list[dict | str]):
    texts = [(t if isinstance(t, str) else json.dumps(t),) for t in items]
    return spark.createDataFrame(texts, "_image string").repartition(3)


def _lines(spark, items: list[dict]):
    """Lines of an incremental export: new images, and a delete's old image."""
    lines = [
        {"NewImage": i} if n % 2 else {"Keys": dict(list(i.items())[:1]), "OldImage": i}
        for n, i in enumerate(items)
    ]
    return spark.createDataFrame([(json.dumps(x),) for x in lines], "value string").repartition(3)


def _same(spark, items: list[dict | str]) -> None:
    """The same statistics either way, from images and (items only) from export lines."""
    images = _images(spark, items)
    reference = detect.generic_statistics(
        images.select(F.expr(parse_item("_image")).alias("_attrs"))
    )
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


def _counted_in_the_driver(spark, items: list[dict]) -> None:
    """The driver's count (item_statistics) equals the generic path's, from items and lines."""
    images = _images(spark, items)
    reference = detect.generic_statistics(
        images.select(F.expr(parse_item("_image")).alias("_attrs"))
    )
    counted = item_statistics.of_texts([json.dumps(i) for i in items], False, detect.MAX_PATHS)
    assert counted is not None
    assert (counted.items, counted.by_path, counted.wide) == (
        len(items),
        reference.by_path,
        reference.wide,
    )
    lines = [row["value"] for row in _lines(spark, items).collect()]
    from_lines = detect.generic_statistics(detect._attributes(_lines(spark, items)))
    assert item_statistics.of_texts(lines, True, detect.MAX_PATHS).by_path == from_lines.by_path


def test_the_first_items_counted_in_the_driver_as_spark_counts_them(spark) -> None:
    from test_layouts import ODD

    rng = random.Random(5)
    plain = [
        {"id": S("a"), "n": N("-0.000"), "big": N("12345678901234567890123456789012345678")},
        {"id": S("b"), "n": N("9223372036854775807"), "big": N("-9223372036854775809")},
        {"id": S("c"), "n": N("0009223372036854775807.00"), "s": {"NS": ["1", "2.50", "-7"]}},
        {
            "id": S("d"),
            "e": {"NS": []},
            "l": {"L": [{"L": [{"M": {"deep": {"NS": ["7", "8.125"]}}}]}]},
        },
        {"id": S("e"), "d": {"M": {f"key{i}": S("v") for i in range(detect.MAX_PATHS + 5)}}},
        {
            "id": S("f"),
            "d": S("wide, then text"),
            "k": {"M": {"Key": S("U"), "key": N("5"), "": {"NULL": True}}},
        },
        {
            "id": S("g"),
            "b": {"B": "AAE="},
            "bs": {"BS": ["/w=="]},
            "t": {"BOOL": False},
            "ss": {"SS": []},
        },
    ]
    # The layout tests' odd values, less those DynamoDB never writes (the test below).
    odd = [i for i in ODD if item_statistics.of_texts([json.dumps(i)], False, detect.MAX_PATHS)]
    assert 5 <= len(odd) < len(ODD)
    for items in (
        [sample_items.book_item(i, rng) for i in range(200)],
        [sample_items.order_item(i, rng) for i in range(200)],
        handmade_items(),
        plain,
        odd,
    ):
        _counted_in_the_driver(spark, items)


@pytest.mark.parametrize(
    "item",
    [
        json.dumps({"id": S("a"), "n": N("1E+3")}),  # an exponent form: Spark's rules
        json.dumps({"id": S("a"), "m": {"S": "two descriptors", "N": "1"}}),
        json.dumps({"id": S("a"), "n": {"BOOL": "not a boolean"}}),
        json.dumps({"id": S("a"), "n": {"NULL": False}}),
        json.dumps({"id": S("a"), "n": None}),
        '{"id": {"S": "a"}, "id": {"S": "b"}}',  # a name twice
    ],
)
def test_what_the_driver_does_not_count_spark_does(spark, monkeypatch, item: str) -> None:
    """A first item unlike what DynamoDB writes is counted (or reported) by Spark;
    DynamoDB's own items never reach Spark for it."""
    line = '{"Item": ' + item + "}"
    assert item_statistics.of_texts([item], False, detect.MAX_PATHS) is None
    assert item_statistics.of_texts([line], True, detect.MAX_PATHS) is None
    calls: list[int] = []
    counted = detect.statistics
    monkeypatch.setattr(detect, "statistics", lambda frame: calls.append(1) or counted(frame))
    usual = json.dumps({"id": S("a"), "n": N("1")})
    assert detect._first_statistics(_images(spark, [usual, usual])).items == 2
    assert calls == []
    assert detect._first_statistics(_images(spark, [usual, item])).items == 2
    assert calls == [1]


def test_what_dynamodb_cannot_write_is_not_counted_in_the_driver() -> None:
    """Half of a character (JSON can escape it, UTF-8 cannot hold it) and nesting beyond
    DynamoDB's 32 levels."""
    item = '{"id": {"S": "a"}, "k": {"M": {"\\ud800": {"S": "half a character"}}}}'
    assert item_statistics.of_texts([item], False, detect.MAX_PATHS) is None
    assert item_statistics.of_texts([item.replace("800", "83d\\ude00")], False, 5) is not None
    for levels, counted in ((33, True), (34, False)):
        deep = json.dumps({"id": S("a"), "deep": json.loads('{"L": [' * levels + "]}" * levels)})
        assert (item_statistics.of_texts([deep], False, detect.MAX_PATHS) is not None) is counted


@pytest.mark.parametrize("line", ['{"id": {"S": "o"}, "n": {"N": "2"}', '{"Keys": null}', "[1]"])
def test_a_first_line_that_is_not_an_item_is_reported_by_spark(spark, line: str) -> None:
    frame = spark.createDataFrame([(line,)], "value string")
    assert item_statistics.of_texts([line], True, detect.MAX_PATHS) is None
    with pytest.raises(Exception, match="a line is not a DynamoDB JSON item"):
        detect._first_statistics(frame)


def test_the_misfits_are_read_with_a_plan_the_size_of_the_shapes(spark) -> None:
    """The generic path reads the items the shape missed through a filter on the misfit flag.
    Spark pushes that filter below the projection of the path columns, writing each column as its
    expression; the flag read the path columns, so the item's parse was written out once per path
    (for 24 paths of a staging table's items, 8.8 MB of plan). It follows the shape's tree, the
    item bound once: the filtered plan parses the item once."""
    from ingestion.samples import deep_items

    items = [
        {"id": S(f"i{i}"), **deep_items.item(i, range(1, 5), long=3, wide=5)} for i in range(3)
    ]
    images = spark.createDataFrame([(json.dumps(item),) for item in items], "_image string")
    top = shapes.from_items(items)
    flagged, _ = shapes.flagged(images, top)
    filtered = flagged.where(shapes.MISFIT).select("_image")
    pushed = filtered._jdf.queryExecution().optimizedPlan().toString()
    assert shapes.size(top) > 50
    assert pushed.count("from_json(") == 1, pushed.count("from_json(")  # the item parsed once
    assert filtered.count() == 0  # the items the shape was learnt from all fit it
