"""Every Spark SQL expression the project builds over a nested value grows linearly with the size
of the value's type (or, for detection's shape, with its number of paths), at any depth: lists of
maps nested 1 to 10 deep, measured as text (no Spark). Before, `verify`'s fingerprint unrolled
eight elements per list level (2.6 MB of SQL at three list levels, its JVM out of memory) and the
generic parse type doubled per level; detection's misfit flag wrote its parent's expression into
each path, and a filter on it wrote the parse of the item into each path again."""

from __future__ import annotations

import json

import pytest

from ingestion.maintenance import fingerprints
from ingestion.samples import deep_items
from ingestion.schema import item_json, item_statistics, shapes, type_rules, typed_columns
from ingestion.spark.out_of_memory import type_size

DEPTHS = (1, 2, 3, 4, 6, 8, 10)


def measured(depth: int) -> dict[str, tuple[int, int]]:
    """Per builder: (SQL characters, the size it must be linear in) for a table of one
    attribute, a list of two maps nested ``depth`` deep."""
    rows = [{"id": {"S": f"i{i}"}, "deep": deep_items.nested(depth, 2, "1.5", i)} for i in range(3)]
    stats = item_statistics.of_texts([json.dumps({"Item": r}) for r in rows], True, 2000)
    assert stats is not None
    schema = type_rules.resolve("deep", stats, {"id": "S"}, None)
    nodes = sum(type_size(a.type) for a in schema.attributes)
    lookups = fingerprints._Lookups()
    export = fingerprints._map("Item", schema.attributes, lookups, 0)
    export_size = len(export) + sum(len(e) for level in lookups.levels for _, e in level)
    final = fingerprints._final_map(
        {a.name: a.column for a in schema.attributes}, schema.attributes
    )
    decode = "".join(typed_columns.typed("v", a.type) for a in schema.attributes)
    top = shapes.from_items(rows)
    return {
        "verify: the export's fingerprint": (export_size, nodes),
        "verify: the final row's fingerprint": (len(final), nodes),
        "verify: the export's parse type": (
            len(fingerprints.parse_type([a.type for a in schema.attributes])),
            nodes,
        ),
        "rebuild: an item encoded back from its row": (len(item_json.item_json(schema)), nodes),
        "the decode in Spark SQL (the JVM decoder's reference)": (len(decode), nodes),
        "detection: the misfit flag": (len(shapes._Plan(top).misfit()), shapes.size(top)),
    }


@pytest.mark.parametrize("builder", list(measured(1)))
def test_each_expression_over_a_nested_value_is_linear_in_its_type(builder: str) -> None:
    chars, size = measured(1)[builder]
    per_unit = chars / size
    for depth in DEPTHS[1:]:
        deeper, deeper_size = measured(depth)[builder]
        assert deeper <= 1.3 * per_unit * deeper_size, (
            builder,
            depth,
            deeper,
            deeper_size,
            per_unit,
        )
