"""Spark expressions over single values: number digits, text and JSON rendering, typed decoding."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import functions as F
from reference import DRIFT, expected, same

from ingestion.dynamodb import numbers, values
from ingestion.schema import typed_columns
from ingestion.schema.types import parse_type

pytestmark = pytest.mark.slow

NUMBERS = {
    "1200": (4, 0),
    "0.0012": (0, 4),
    "1.5E+3": (4, 0),
    "1e5": (6, 0),
    "1E-130": (0, 130),
    "12345678901234567890123456789012345678": (38, 0),
    "0.000000000000000001": (0, 18),
    "-9223372036854775808": (19, 0),
    "0": (0, 0),
    "-0.50": (0, 1),
    "3.5": (1, 1),
}


def test_number_digits_and_fits(spark) -> None:
    frame = spark.createDataFrame(
        [(n,) for n in [*NUMBERS, "9223372036854775808", "abc"]], "t string"
    )
    integer, fraction = numbers.number_digits("t")
    rows = frame.select(
        "t",
        F.expr(integer).alias("i"),
        F.expr(fraction).alias("f"),
        F.expr(numbers.fits_long("t")).alias("long"),
        F.expr(numbers.fits_decimal("t", 38, 2)).alias("d2"),
    ).collect()
    got = {r["t"]: r for r in rows}
    for number, digits in NUMBERS.items():
        assert (got[number]["i"], got[number]["f"]) == digits, number
    assert got["-9223372036854775808"]["long"] and not got["9223372036854775808"]["long"]
    assert got["9223372036854775808"]["d2"] and not got["0.0012"]["d2"]
    assert (got["abc"]["i"], got["abc"]["long"]) == (None, False)


TRICKY = [
    {"S": ""},
    {"S": 'say "hi" \\ back\nslash\ttab {"S":"not a wrapper"}'},
    {"S": "Zoë 🚀 日本"},
    {"N": "-1.5E+3"},
    {"N": "12345678901234567890123456789012345678"},
    {"BOOL": False},
    {"B": "AAEC/w=="},
    {"SS": ["b", "a", "[x]", '"q"']},
    {"NS": ["10", "9", "0.000000000000000001"]},
    {"BS": ["AQ==", "AA=="]},
    {"M": {}},
    {"L": []},
    # map keys that look like type descriptors, with values that look like wrappers
    {"M": {"N": {"S": "5"}, "S": {"S": "x"}, "NULL": {"BOOL": True}, "L": {"L": [{"S": "]}"}]}}},
    {"L": [{"N": "1"}, {"S": "q"}, {"NULL": True}, {"M": {"b": {"BOOL": True}, "e": {"M": {}}}}]},
    {"M": {"a": {"M": {"b": {"M": {"c": {"L": [{"L": [{"SS": ["z"]}]}]}}}}}}},
]


def _values_frame(spark, items: list[dict]):
    lines = [(json.dumps({"v": v}),) for v in items]
    return spark.createDataFrame(lines, "j string").select(
        F.expr(values.parse_item("j"))["v"].alias("v")
    )


def test_text_rendering_is_exact(spark) -> None:
    rows = _values_frame(spark, TRICKY).select(F.expr(values.text_sql("v")).alias("t")).collect()
    for value, row in zip(TRICKY, rows, strict=True):
        assert same(expected(value, parse_type("string")), row["t"]), (value, row["t"])


def test_json_of_a_list_parses_back_in_order(spark) -> None:
    value = {"L": [{"N": "3"}, {"N": "1"}, {"S": "2"}]}
    (row,) = _values_frame(spark, [value]).select(F.expr(values.text_sql("v")).alias("t")).collect()
    assert row["t"] == '[3,1,"2"]'


@pytest.mark.parametrize(
    ("column_type", "value"),
    [
        ("bigint", {"N": "9223372036854775807"}),
        ("bigint", {"N": "3.5"}),
        ("bigint", {"N": "9223372036854775808"}),
        ("bigint", {"S": "3"}),
        ("decimal(38,2)", {"N": "1.25"}),
        ("decimal(38,2)", {"N": "1.255"}),
        ("decimal(38,0)", {"N": "12345678901234567890123456789012345678"}),
        ("decimal(38,18)", {"N": "0.000000000000000001"}),
        ("boolean", {"BOOL": True}),
        ("boolean", {"S": "true"}),
        ("binary", {"B": "AAEC/w=="}),
        ("array<bigint>", {"NS": ["3", "1", "2"]}),
        ("array<bigint>", {"L": [{"N": "3"}, {"N": "1"}]}),
        ("array<bigint>", {"L": [{"N": "3"}, {"N": "1.5"}]}),
        ("array<string>", {"SS": ["b", "a"]}),
        ("array<binary>", {"BS": ["AQ==", "AA=="]}),
        ("string", {"NULL": True}),
        ("bigint", {"NULL": True}),
    ],
)
def test_typed_decoding_matches_the_rules(spark, column_type: str, value: dict) -> None:
    parsed = parse_type(column_type)
    (row,) = (
        _values_frame(spark, [value])
        .select("v", F.expr(typed_columns.typed("v", parsed)).alias("d"))
        .select(F.col("d").alias("v"), F.expr(typed_columns.fits("v", "d")).alias("ok"))
        .collect()
    )
    want = expected(value, parsed)
    if want is DRIFT:
        assert (row["v"], row["ok"]) == (None, False)
    else:
        assert row["ok"] is True and same(want, row["v"]), (row["v"], want)


def test_struct_decoding_flags_unknown_and_misfit_fields(spark) -> None:
    entry = {
        "type": "struct",
        "fields": {"Created-By": {"type": "string"}, "n": {"type": "bigint"}},
    }
    parsed = parse_type("struct", entry)
    cases = [
        {"M": {"Created-By": {"S": "me"}, "n": {"N": "2"}}},
        {"M": {"n": {"N": "2"}}},
        {"M": {"n": {"N": "2.5"}}},
        {"M": {"other": {"S": "x"}}},
        {"S": "not a map"},
    ]
    rows = (
        _values_frame(spark, cases)
        .select("v", F.expr(typed_columns.typed("v", parsed)).alias("d"))
        .select(F.col("d").alias("v"), F.expr(typed_columns.fits("v", "d")).alias("ok"))
        .collect()
    )
    assert rows[0]["ok"] and rows[0]["v"].asDict() == {"created_by": "me", "n": 2}
    assert rows[1]["ok"] and rows[1]["v"].asDict() == {"created_by": None, "n": 2}
    assert [r["ok"] for r in rows[2:]] == [False, False, False]
    for value, row in zip(cases, rows, strict=True):
        want = expected(value, parsed)
        assert (want is DRIFT) == (not row["ok"])


def test_canonical_number_is_one_text_per_value(spark) -> None:
    from decimal import Decimal, localcontext

    texts = [
        "2.5",
        "2.50",
        "25E-1",
        "1",
        "1.0",
        "1E+3",
        "-0.0012",
        "12e-3",
        "0",
        "-0",
        "0.000",
        "1e125",
        "1E-130",
        ".5",
        "5.",
        "-1.5e2",
        "98765432109876543210.0123456789",
    ]
    refused = ["1" * 39, "abc", "", "1e126", "1e-131", "-", "1e"]
    frame = spark.createDataFrame([(t,) for t in texts + refused], "t string")
    got = dict(frame.select("t", F.expr(numbers.canonical_number("t"))).collect())
    with localcontext() as exact:
        exact.prec = 60
        for text in texts:
            want = format(Decimal(text).normalize(), "f") if Decimal(text) else "0"
            assert got[text] == want, text
    assert [got[t] for t in refused] == [None] * len(refused)
