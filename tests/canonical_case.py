"""One item of every DynamoDB type and the row a final table holds for it: the case both
comparisons of ``verify`` are tested on (tests/schema/test_canonical.py, in Python;
tests/maintenance/test_fingerprints.py, in the JVM)."""

from __future__ import annotations

import base64
from decimal import Decimal

from ingestion.schema.types import Attribute, ColumnType, Schema, StructField, parse_type

ITEM = {
    "id": {"S": "o-1"},
    "total": {"N": "12.345"},
    "qty": {"N": "3"},
    "gift": {"BOOL": True},
    "photo": {"B": base64.b64encode(b"\x00\xff").decode()},
    "tags": {"SS": ["b", "a"]},
    "sizes": {"NS": ["10", "2.50"]},
    "note": {"NULL": True},
    "shipping": {"M": {"city": {"S": "Oslo"}, "floor": {"N": "4"}, "code": {"NULL": True}}},
    "lines": {"L": [{"M": {"sku": {"S": "x"}, "price": {"N": "1.50"}}}, {"NULL": True}]},
    "extra": {"M": {"k": {"L": [{"N": "1"}, {"S": "a"}]}}},
    "mixed": {"N": "007.10"},
}


def struct(**fields: str) -> ColumnType:
    return ColumnType(
        "struct", fields=tuple(StructField(n, n, parse_type(t)) for n, t in fields.items())
    )


SCHEMA = Schema(
    "orders",
    (
        Attribute("id", "id", ColumnType("string"), key=True),
        Attribute("total", "total", parse_type("decimal(38,3)")),
        Attribute("qty", "qty", parse_type("bigint")),
        Attribute("gift", "gift", parse_type("boolean")),
        Attribute("photo", "photo", parse_type("binary")),
        Attribute("tags", "tags", parse_type("array<string>")),
        Attribute("sizes", "sizes", parse_type("array<decimal(38,2)>")),
        Attribute("note", "note", parse_type("string")),
        Attribute("shipping", "shipping", struct(city="string", floor="bigint", code="string")),
        Attribute(
            "lines",
            "lines",
            ColumnType("array", element=struct(sku="string", price="decimal(38,2)")),
        ),
        Attribute("extra", "extra", parse_type("string")),
        Attribute("mixed", "mixed", parse_type("string")),
    ),
)

# The row the final table holds for ITEM (as Spark hands it to Python: asDict(recursive=True)).
ROW = {
    "id": "o-1",
    "total": Decimal("12.345"),
    "qty": 3,
    "gift": True,
    "photo": bytearray(b"\x00\xff"),
    "tags": ["a", "b"],
    "sizes": [Decimal("2.50"), Decimal("10.00")],
    "note": None,
    "shipping": {"city": "Oslo", "floor": 4, "code": None},
    "lines": [{"sku": "x", "price": Decimal("1.50")}, None],
    "extra": '{"k": [1, "a"]}',
    "mixed": "007.10",
}


# A row that differs from ROW, each in one attribute: what both comparisons must tell apart.
ROW_DIFFERENCES = [
    ("total", Decimal("12.3"), "a number that lost digits"),
    ("qty", 4, "another number"),
    ("qty", None, "a value lost"),
    ("gift", False, "another boolean"),
    ("photo", bytearray(b"\x00"), "other bytes"),
    ("tags", ["a"], "a set element lost"),
    ("sizes", [Decimal("2.5")], "a number set element lost"),
    ("note", "x", "a value where DynamoDB holds NULL"),
    ("shipping", {"city": "Bergen", "floor": 4, "code": None}, "a map value changed"),
    ("shipping", {"city": "Oslo", "floor": None, "code": None}, "a map key lost"),
    ("lines", [{"sku": "x", "price": Decimal("1.5")}], "a list element lost"),
    ("lines", [None, {"sku": "x", "price": Decimal("1.5")}], "list order changed"),
]
# ... and in the `string` columns holding other types as text (the Python comparison's alone).
TEXT_DIFFERENCES = [
    ("extra", '{"k": [1, "b"]}', "JSON text of another value"),
    ("extra", '{"k": [1, "a"], "z": 1}', "JSON text with a key too many"),
    ("mixed", "7.11", "a number's text of another value"),
    ("mixed", "not a number", "text that is no number"),
]
