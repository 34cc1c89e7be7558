"""Detection statistics of a few items held by the driver, in plain Python: the first items whose
types a first load proves on every item as it stages them (``detect.first_items_schema``).

The same statistics as the generic path of ``detect`` (``detect.generic_statistics``) over the
same items: a path per value (a list element's step is None), its DynamoDB type, the count of
values, the most integer and fractional digits of its numbers and whether every one fits
``bigint``; an attribute with more than ``detect.MAX_PATHS`` distinct paths is wide and only its
top level is kept. A test holds the two equal on every sample and on odd values.

Why not Spark: for the thousand first items, planning and compiling the detection pass cost
seconds, computing it takes milliseconds (docs/performance.md, "The line parsed once, the first
items' types in the driver").

Only DynamoDB JSON as DynamoDB writes it is counted here: one descriptor per value, of the JSON
kind it takes, plain numbers (``-?digits[.digits]``), no duplicate names, no nesting beyond
DynamoDB's 32 levels. Anything else (an exponent form, a line that is not an item) returns None
and the caller counts with Spark, which reports what is wrong with it as it always has.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

from ingestion.config.errors import LakehouseError
from ingestion.dynamodb.decode import IMAGES
from ingestion.dynamodb.numbers import LONG_MAX, LONG_MIN
from ingestion.dynamodb.values import MAX_DEPTH
from ingestion.schema.type_rules import NodeStats, Path_, Stats

_PLAIN = re.compile(r"-?([0-9]+)(?:[.]([0-9]+))?")
_LONG = re.compile(r"-?[0-9]{1,18}")
_STRINGS = ("S", "N", "B")
_SETS = ("SS", "NS", "BS")
_SURROGATE = re.compile("[\ud800-\udfff]")  # a lone one: JSON escapes no pair stands for


class _Unusual(LakehouseError):
    """A value this module leaves to Spark. It never reaches a user (``of_texts`` returns None on
    it); it joins the family only because every exception class of the project does."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        raise _Unusual("a name twice")
    return found


def _digits(number: str) -> tuple[int, int, bool]:
    """(integer digits, fractional digits, fits bigint) of a plain number: the rules of
    ``numbers.number_digits`` and ``numbers.fits_long`` for the form DynamoDB writes."""
    match = _PLAIN.fullmatch(number)
    if match is None:
        raise _Unusual("not a plain number")
    whole, fraction = match.group(1), match.group(2) or ""
    fractional = len(fraction.rstrip("0"))
    if _LONG.fullmatch(number):
        fits = True
    else:
        value = Decimal(number)
        fits = fractional == 0 and len(whole.lstrip("0")) <= 38 and LONG_MIN <= value <= LONG_MAX
    return len(whole.lstrip("0")), fractional, fits


class _Counter:
    def __init__(self) -> None:
        self.by_path: dict[Path_, dict[str, NodeStats]] = {}

    def value(self, path: Path_, value: Any) -> None:
        if len(path) > MAX_DEPTH + 1 or not isinstance(value, dict) or len(value) != 1:
            raise _Unusual("not one descriptor")
        ((kind, content),) = value.items()
        numbers: list[str] = []
        if kind in _STRINGS and isinstance(content, str):
            if kind == "N":
                numbers.append(content)
        elif kind == "BOOL" and isinstance(content, bool) or kind == "NULL" and content is True:
            pass
        elif (
            kind in _SETS and isinstance(content, list) and all(isinstance(e, str) for e in content)
        ):
            if kind == "NS":
                numbers.extend(content)
        elif kind == "M" and isinstance(content, dict):
            for key, child in content.items():
                self.value((*path, _name(key)), child)
        elif kind == "L" and isinstance(content, list):
            for child in content:
                self.value((*path, None), child)
        else:
            raise _Unusual("a descriptor of the wrong kind")
        self._count(path, kind, numbers)

    def _count(self, path: Path_, kind: str, numbers: list[str]) -> None:
        node = self.by_path.setdefault(path, {}).get(kind)
        if node is None:
            node = self.by_path[path][kind] = NodeStats(0)
        node.count += 1
        for number in numbers:
            integer, fraction, fits = _digits(number)
            node.integer_digits = max(integer, node.integer_digits or 0)
            node.fraction_digits = max(fraction, node.fraction_digits or 0)
            node.fits_long = fits if node.fits_long is None else node.fits_long and fits


def _name(name: str) -> str:
    if _SURROGATE.search(name):
        raise _Unusual("a name with half a character")
    return name


def _item(text: Any, lines: bool) -> dict[str, Any]:
    if not isinstance(text, str):
        raise _Unusual("no text")
    parsed = json.loads(text, object_pairs_hook=_no_duplicates)
    if lines:
        if not isinstance(parsed, dict):
            raise _Unusual("not an envelope")
        parsed = next((parsed[k] for k in IMAGES if parsed.get(k) is not None), None)
    if not isinstance(parsed, dict):
        raise _Unusual("not an item")
    return parsed


def of_texts(texts: list[Any], lines: bool, max_paths: int) -> Stats | None:
    """The statistics of the items in ``texts``: lines of exports or change files (``lines``:
    the image is the first of ``Item``, ``NewImage``, ``OldImage`` and ``Keys``) or items; None
    when one of them is not DynamoDB JSON as DynamoDB writes it."""
    counter = _Counter()
    try:
        for text in texts:
            for name, value in _item(text, lines).items():
                counter.value((_name(name),), value)
    except (_Unusual, ValueError, RecursionError):
        return None
    paths: dict[str, int] = {}
    for path in counter.by_path:
        paths[str(path[0])] = paths.get(str(path[0]), 0) + 1
    wide = {name: count for name, count in paths.items() if count > max_paths}
    kept = {p: t for p, t in counter.by_path.items() if len(p) == 1 or str(p[0]) not in wide}
    return Stats(len(texts), kept, wide)
