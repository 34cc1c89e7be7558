"""The comparison `verify` rests on (ingestion.schema.canonical): DynamoDB JSON canonical, a final
row encoded back by its column types, and the two compared. Plain Python: no Spark."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from canonical_case import ITEM, ROW, ROW_DIFFERENCES, SCHEMA, TEXT_DIFFERENCES

from ingestion.schema import canonical
from ingestion.schema.types import Attribute, ColumnType, Schema, parse_type


def compare(item: dict, row: dict) -> list[str]:
    return canonical.different_attributes(
        canonical.canonical_item(item), canonical.encode_row(row, SCHEMA)
    )


def test_a_row_equals_the_item_it_was_decoded_from() -> None:
    assert compare(ITEM, ROW) == []


@pytest.mark.parametrize(("attribute", "value", "why"), [*ROW_DIFFERENCES, *TEXT_DIFFERENCES])
def test_each_difference_is_named(attribute: str, value: object, why: str) -> None:
    assert compare(ITEM, {**ROW, attribute: value}) == [attribute], why


def test_what_a_column_cannot_say_is_not_asked() -> None:
    # A number by its value (DynamoDB's own equality), a set as its sorted list, NULL as absent.
    row = {**ROW, "total": Decimal("12.3450"), "mixed": "7.1", "note": None}
    assert compare(ITEM, row) == []
    assert compare({**ITEM, "note": None}, ROW) == []  # absent and NULL alike
    assert compare(ITEM, {**ROW, "extra": '{"k":[1.0,"a"]}'}) == []  # 1 and 1.0: one number


def test_an_attribute_the_table_lacks_is_a_difference() -> None:
    assert compare({**ITEM, "new": {"S": "v"}}, ROW) == ["new"]
    assert compare({k: v for k, v in ITEM.items() if k != "qty"}, ROW) == ["qty"]


def test_keys_are_one_text_on_both_sides() -> None:
    keys = ["id", "n"]
    schema = Schema(
        "t",
        (
            Attribute("id", "id", ColumnType("string"), key=True),
            Attribute("n", "n", ColumnType("number"), key=True),
        ),
    )
    exported = canonical.canonical_item({"id": {"S": "a"}, "n": {"N": "1.50E+2"}})
    held = canonical.encode_row({"id": "a", "n": "150"}, schema)
    assert canonical.key_text(exported, keys) == canonical.key_text(held, keys)
    assert json.loads(canonical.key_text(held, keys)) == [{"S": "a"}, {"N": "150"}]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", "0"),
        ("-0.000", "0"),
        ("1.50", "1.5"),
        ("1E+3", "1000"),
        ("-0.00012", "-0.00012"),
        ("12345678901234567890123456789012345678", "12345678901234567890123456789012345678"),
        ("1.2345678901234567890123456789012345678", "1.2345678901234567890123456789012345678"),
    ],
)
def test_a_number_has_one_exact_text(text: str, expected: str) -> None:
    assert canonical.number_text(canonical.number(text)) == expected


def test_a_damaged_value_is_refused() -> None:
    with pytest.raises(ValueError, match="not a number"):
        canonical.canonical({"N": "1x"})
    with pytest.raises(ValueError, match="unknown type descriptor"):
        canonical.canonical({"Q": "1"})


def test_a_set_equals_its_elements_in_the_order_the_column_holds_them() -> None:
    """A number set in an ``array<string>`` column is sorted as text ("10" before "9"), and a set
    inside a map kept as JSON text keeps the export's order: both equal the set."""
    schema = Schema(
        "t",
        (
            Attribute("id", "id", ColumnType("string"), key=True),
            Attribute("ns", "ns", parse_type("array<string>")),
            Attribute("doc", "doc", parse_type("string")),
        ),
    )
    item = {
        "id": {"S": "a"},
        "ns": {"NS": ["9", "10", "-1", "-2"]},
        "doc": {"M": {"tags": {"SS": ["z", "a"]}, "sizes": {"NS": ["10", "9"]}}},
    }
    row = {"id": "a", "ns": ["-1", "-2", "10", "9"], "doc": '{"tags":["z","a"],"sizes":[10,9]}'}
    expected = canonical.canonical_item(item)
    assert canonical.different_attributes(expected, canonical.encode_row(row, schema)) == []
    wrong = {**row, "ns": ["-1", "10", "9"], "doc": '{"tags":["z"],"sizes":[10,9]}'}
    found = canonical.different_attributes(expected, canonical.encode_row(wrong, schema))
    assert found == ["doc", "ns"]
