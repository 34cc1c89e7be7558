"""DynamoDB JSON in one canonical form, a final table's row encoded back to it, and the two
compared: what ``verify`` (ingestion.maintenance.verify) proves a table with.

Shares nothing with the decode (ingestion.dynamodb.values, ingestion.schema.typed_columns): plain
Python over the values Spark hands a Python function, so a bug in the decode cannot hide in the
comparison. Canonical: map keys in any order (dicts), set elements sorted, numbers by value
(``1.50`` and ``1.5`` are one number, as in DynamoDB), binary as its bytes. ``NULL`` and absent
are one: the final table holds null for both (docs/tables-and-types.md), inside a list as well.

What a column cannot say, the comparison does not ask of it:
- an ``array`` column holds a list or a set alike (a set sorted by the column's element type:
  numbers in an ``array<string>`` as text), so a set equals a list of its elements in any order;
- a ``string`` column takes any value as text (a number its exact text, a map as plain JSON...),
  so a value that is not ``S`` is compared with the column's text by its meaning: a number by
  value, a map, a list or a set as the JSON value the text parses to.
"""

from __future__ import annotations

import base64
import json
from decimal import Decimal, InvalidOperation
from typing import Any

from ingestion.schema.types import ColumnType, Schema

Value = dict[str, Any]  # one DynamoDB JSON value: {"S": "..."}, {"M": {...}}, ...
SETS = ("SS", "NS", "BS")


def number(text: str) -> Decimal:
    """A DynamoDB number's value (exact, whatever its digits: Decimal keeps all of them)."""
    try:
        value = Decimal(text)
    except (InvalidOperation, TypeError) as exc:
        raise ValueError(f"not a number: {text!r}") from exc
    if not value.is_finite():
        raise ValueError(f"not a number: {text!r}")
    return value


def number_text(value: Decimal) -> str:
    """A number's text with no exponent and no leading or trailing zero, exact at any number of
    digits (``Decimal.normalize`` would round to its context's 28)."""
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits)).lstrip("0")
    if exponent >= 0:
        whole, fraction = (text + "0" * exponent) if text else "", ""
    else:
        padded = text.rjust(-exponent, "0")
        whole, fraction = padded[:exponent].lstrip("0"), padded[exponent:].rstrip("0")
    if not whole and not fraction:
        return "0"
    return ("-" if sign else "") + (whole or "0") + (f".{fraction}" if fraction else "")


def _bytes(text: str) -> bytes:
    return base64.b64decode(text, validate=True)


def canonical(value: Value | None) -> Any:
    """``value`` in canonical form: ``None`` for absent or ``NULL``; else a one-key dict whose
    numbers are Decimals, binary bytes, sets sorted lists, maps dicts without absent entries."""
    if value is None or value.get("NULL") is True:
        return None
    ((kind, inner),) = value.items()
    if kind == "S" or kind == "BOOL":
        return {kind: inner}
    if kind == "N":
        return {"N": number(inner)}
    if kind == "B":
        return {"B": _bytes(inner)}
    if kind == "SS":
        return {"SS": sorted(inner)}
    if kind == "NS":
        return {"NS": sorted(number(n) for n in inner)}
    if kind == "BS":
        return {"BS": sorted(_bytes(b) for b in inner)}
    if kind == "M":
        return {"M": canonical_item(inner)}
    if kind == "L":
        return {"L": [canonical(v) for v in inner]}
    raise ValueError(f"unknown type descriptor {kind!r}")


def canonical_item(item: dict[str, Value]) -> dict[str, Any]:
    """An item (or a map's content) in canonical form: absent and ``NULL`` entries left out."""
    entries = ((name, canonical(v)) for name, v in item.items())
    return {name: v for name, v in entries if v is not None}


# --- a final table's row, encoded back ------------------------------------------------------


def encode(value: Any, column: ColumnType) -> Any:
    """A column's value (as Spark hands it to Python) in canonical form, by its column type
    alone. A ``string`` column's value stays ``{"TEXT": ...}``: it may be any type as text."""
    if value is None:
        return None
    kind = column.kind
    if kind == "string":
        return {"TEXT": value}
    if kind == "number":  # a numeric key: its canonical text
        return {"N": number(value)}
    if kind == "boolean":
        return {"BOOL": bool(value)}
    if kind == "binary":
        return {"B": bytes(value)}
    if kind in ("bigint", "decimal"):
        return {"N": Decimal(value)}
    if kind == "struct":
        fields = ((f.name, encode(value[f.column], f.type)) for f in column.fields)
        return {"M": {name: v for name, v in fields if v is not None}}
    if kind == "array":
        assert column.element is not None
        return {"L": [encode(v, column.element) for v in value]}
    raise ValueError(f"unknown column type {column.sql()}")


def encode_row(row: dict[str, Any], schema: Schema) -> dict[str, Any]:
    """A final table's row (column -> value) as a canonical item of the schema's attributes."""
    entries = ((a.name, encode(row.get(a.column), a.type)) for a in schema.attributes)
    return {name: v for name, v in entries if v is not None}


# --- comparison ---------------------------------------------------------------------------


class _Set(tuple):
    """A set's elements in plain JSON: equal to a JSON array of them in any order (the decode
    keeps a nested set's order as the export had it, and sorts a top-level one)."""


def _plain(value: Any) -> Any:
    """A canonical value as the plain JSON value a ``string`` column renders it as."""
    if value is None:
        return None
    ((kind, inner),) = value.items()
    if kind == "M":
        return {k: _plain(v) for k, v in inner.items()}
    if kind == "L":
        return [_plain(v) for v in inner]
    if kind == "B":
        return base64.b64encode(inner).decode()
    if kind == "BS":
        return _Set(base64.b64encode(b).decode() for b in inner)
    if kind in ("SS", "NS"):
        return _Set(inner)
    return inner  # S, N (a Decimal), BOOL


def _same_elements(expected: list[Any], held: list[Any], same: Any) -> bool:
    """Each expected element matched by one held element (``same``), in any order."""
    left = list(held)
    for element in expected:
        match = next((i for i, h in enumerate(left) if same(element, h)), None)
        if match is None:
            return False
        left.pop(match)
    return not left


def _plain_equal(a: Any, b: Any) -> bool:
    """Two plain JSON values equal: numbers by value, lists in order, maps by keys."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | Decimal) and isinstance(b, int | Decimal):
        return Decimal(a) == Decimal(b)
    if isinstance(a, dict) and isinstance(b, dict):
        a = {k: v for k, v in a.items() if v is not None}
        b = {k: v for k, v in b.items() if v is not None}
        return a.keys() == b.keys() and all(_plain_equal(a[k], b[k]) for k in a)
    if isinstance(a, _Set) and isinstance(b, list):
        return _same_elements(list(a), b, _plain_equal)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_plain_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _text_equal(expected: Any, text: str) -> bool:
    """A DynamoDB value against the text a ``string`` column holds for it."""
    ((kind, inner),) = expected.items()
    if kind == "S":
        return bool(inner == text)
    if kind == "N":
        try:
            return number(text) == inner
        except ValueError:
            return False
    if kind == "BOOL":
        return text == ("true" if inner else "false")
    if kind == "B":
        return text == base64.b64encode(inner).decode()
    try:
        parsed = json.loads(text, parse_float=Decimal, parse_int=Decimal)
    except ValueError:
        return False
    return _plain_equal(_plain(expected), parsed)


def equal(expected: Any, held: Any) -> bool:
    """A canonical DynamoDB value (from the export) against a canonical encoded one (from the
    final table): equal as far as the column can hold it (the module's docstring)."""
    if expected is None or held is None:
        return expected is None and held is None
    ((kind, inner),) = expected.items()
    ((held_kind, held_inner),) = held.items()
    if held_kind == "TEXT":
        return _text_equal(expected, held_inner)
    if kind in SETS and held_kind == "L":  # sorted by the column's element type: any order
        return _same_elements([{kind[0]: v} for v in inner], held_inner, equal)
    if kind == "M" and held_kind == "M":
        return different_attributes(inner, held_inner) == []
    if kind == "L" and held_kind == "L":
        return len(inner) == len(held_inner) and all(
            equal(a, b) for a, b in zip(inner, held_inner, strict=True)
        )
    return bool(kind == held_kind and inner == held_inner)


def different_attributes(expected: dict[str, Any], held: dict[str, Any]) -> list[str]:
    """The names of the attributes (or map keys) whose values are not equal, sorted."""
    names = sorted(set(expected) | set(held))
    return [n for n in names if not equal(expected.get(n), held.get(n))]


def key_text(item: dict[str, Any], keys: list[str]) -> str:
    """An item's key as text, the same for both sides of a comparison: the key attributes'
    canonical values (a number by its value, binary as base64) as JSON."""

    def one(value: Any) -> Any:
        if value is None:
            return None
        ((kind, inner),) = value.items()
        if kind == "TEXT":
            kind = "S"
        if kind == "N":
            inner = number_text(inner)
        if kind == "B":
            inner = base64.b64encode(inner).decode()
        return {kind: inner}

    return json.dumps([one(item.get(k)) for k in keys], sort_keys=True)
