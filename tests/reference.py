"""An independent, plain-Python statement of the type rules, to check Spark's decoding against.

``expected(value, column_type)`` is what a column must hold for one DynamoDB JSON value, and
``same(expected, actual)`` compares it with what Spark returned (Rows, bytearrays, JSON text).
"""

from __future__ import annotations

import base64
import json
from decimal import Decimal
from typing import Any

from ingestion.schema.types import ColumnType

DRIFT = object()  # the value does not fit its column: null there, listed in _drift


class JsonText(str):
    """Expected JSON text: compared as parsed JSON (sets compared as sets)."""

    def __new__(cls, plain: Any) -> JsonText:
        obj = str.__new__(cls, json.dumps(plain, default=str))
        obj.plain = plain
        return obj


class SetList(list):
    """A DynamoDB set in plain JSON: element order does not matter."""


def plain(value: dict[str, Any]) -> Any:
    """Plain JSON of a DynamoDB value (numbers as Decimal, sets as SetList)."""
    ((kind, inner),) = value.items()
    if kind in ("S", "B"):
        return inner
    if kind == "N":
        return Decimal(inner)
    if kind in ("BOOL",):
        return inner
    if kind == "NULL":
        return None
    if kind in ("SS", "BS"):
        return SetList(inner)
    if kind == "NS":
        return SetList(Decimal(x) for x in inner)
    if kind == "M":
        return {k: plain(v) for k, v in inner.items()}
    return [plain(v) for v in inner]


def text(value: dict[str, Any]) -> Any:
    ((kind, inner),) = value.items()
    if kind in ("S", "N", "B"):
        return inner
    if kind == "BOOL":
        return "true" if inner else "false"
    return JsonText(plain(value))


def _digits(number: str) -> tuple[int, int]:
    sign, digits, exponent = Decimal(number).normalize().as_tuple()
    if digits == (0,):
        return 0, 0
    assert isinstance(exponent, int)
    return max(len(digits) + exponent, 0), max(-exponent, 0)


def expected(value: dict[str, Any] | None, column_type: ColumnType) -> Any:
    if value is None or "NULL" in value:
        return None
    kind = column_type.kind
    if kind == "string":
        return text(value)
    if kind == "boolean":
        return value["BOOL"] if "BOOL" in value else DRIFT
    if kind == "binary":
        return base64.b64decode(value["B"]) if "B" in value else DRIFT
    if kind in ("bigint", "decimal"):
        if "N" not in value:
            return DRIFT
        integer, fraction = _digits(value["N"])
        number = Decimal(value["N"])
        if kind == "bigint":
            return int(number) if fraction == 0 and -(2**63) <= number < 2**63 else DRIFT
        fits = (
            integer <= column_type.precision - column_type.scale and fraction <= column_type.scale
        )
        return number if fits else DRIFT
    if kind == "struct":
        if "M" not in value:
            return DRIFT
        known = {f.name for f in column_type.fields}
        if set(value["M"]) - known:
            return DRIFT
        out = {f.column: expected(value["M"].get(f.name), f.type) for f in column_type.fields}
        return DRIFT if any(v is DRIFT for v in out.values()) else out
    assert kind == "array" and column_type.element is not None
    if "L" in value:
        elements = value["L"]
    elif any(s in value for s in ("SS", "NS", "BS")):
        ((set_kind, inner),) = value.items()
        elements = [{set_kind[0]: x} for x in inner]
    else:
        return DRIFT
    out = [expected(e, column_type.element) for e in elements]
    if any(v is DRIFT for v in out):
        return DRIFT
    return sorted(out) if "L" not in value else out


def _as_python(actual: Any) -> Any:
    if hasattr(actual, "asDict"):
        return {k: _as_python(v) for k, v in actual.asDict().items()}
    if isinstance(actual, list):
        return [_as_python(v) for v in actual]
    if isinstance(actual, bytearray):
        return bytes(actual)
    return actual


def _same_plain(want: Any, got: Any) -> bool:
    if isinstance(want, SetList):
        return isinstance(got, list) and sorted(map(str, want)) == sorted(map(str, got))
    if isinstance(want, list):
        return isinstance(got, list) and len(want) == len(got) and all(map(_same_plain, want, got))
    if isinstance(want, dict):
        return (
            isinstance(got, dict)
            and want.keys() == got.keys()
            and all(_same_plain(want[k], got[k]) for k in want)
        )
    if isinstance(want, Decimal):
        return isinstance(got, Decimal) and want == got and str(want) == str(got)
    return want == got and type(want) is type(got)


def same(want: Any, actual: Any) -> bool:
    if isinstance(want, JsonText):
        return isinstance(actual, str) and _same_plain(
            want.plain, json.loads(actual, parse_float=Decimal, parse_int=Decimal)
        )
    return _as_python(actual) == want
