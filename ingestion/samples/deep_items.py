"""Items of the shapes real DynamoDB tables have and demos lack, for the deep-items tests and
``bench/deep_items.py``: lists of maps nested 1 to N deep, a long list of maps, a wide map, sets
inside a list, and a change that widens the decimal at the deepest level of each.

Each item is DynamoDB JSON (``{"id": {"S": "i0"}, ...}``); ``write-export`` writes them in AWS's
layout.
"""

from __future__ import annotations

import copy
from typing import Any

Item = dict[str, Any]


def nested(depth: int, width: int, price: str, seed: int) -> dict[str, Any]:
    """A list of ``width`` maps, each holding a list like it one level down, ``depth`` levels in
    all; each map a name, a price and a string set."""
    elements = []
    for j in range(width):
        fields: dict[str, Any] = {
            "name": {"S": f"n{seed}-{depth}-{j}"},
            "price": {"N": price},
            "tags": {"SS": [f"t{j}", "x"]},
        }
        if depth > 1:
            fields["child"] = nested(depth - 1, width, price, seed)
        elements.append({"M": fields})
    return {"L": elements}


def item(i: int, depths: range, width: int = 1, long: int = 500, wide: int = 200) -> Item:
    """Item ``i``: ``d<k>`` for each depth k (a list of maps nested k deep), ``long`` (a list of
    ``long`` maps), ``wide`` (a map of ``wide`` numbers) and ``sets`` (a list of sets)."""
    found: Item = {"id": {"S": f"i{i}"}}
    for k in depths:
        found[f"d{k}"] = nested(k, width, "1.5", i)
    found["long"] = {"L": [{"M": {"i": {"N": str(j)}, "p": {"N": "0.5"}}} for j in range(long)]}
    found["wide"] = {"M": {f"k{j:03d}": {"N": str(j)} for j in range(wide)}}
    found["sets"] = {"L": [{"SS": ["a", f"b{i}"]}, {"NS": ["1", str(i + 2)]}, {"BS": ["AAE="]}]}
    return found


def widen_deepest(value: dict[str, Any], price: str, levels: int | None = None) -> None:
    """Set the price of the first map at the deepest level of a ``nested`` list (or at level
    ``levels``, counted from 1 at the top)."""
    element = value["L"][0]["M"]
    if "child" in element and (levels is None or levels > 1):
        widen_deepest(element["child"], price, None if levels is None else levels - 1)
    else:
        element["price"] = {"N": price}


def widened(found: Item, depths: range) -> Item:
    """``found`` with a wider decimal at the deepest level of every shape: the drift a change
    of a real table brings (``1.5`` becomes ``1.123456``)."""
    changed = copy.deepcopy(found)
    for k in depths:
        widen_deepest(changed[f"d{k}"], "1.123456")
    changed["long"]["L"][-1]["M"]["p"] = {"N": "0.125"}
    changed["wide"]["M"]["k199" if "k199" in changed["wide"]["M"] else "k000"] = {"N": "7.25"}
    changed["sets"]["L"][1] = {"NS": ["1", "2.125"]}
    return changed


def size(value: Any) -> int:
    """The number of DynamoDB values in ``value`` (an item or an attribute's value)."""
    if isinstance(value, dict):
        return sum(size(v) for v in value.values()) + (1 if len(value) == 1 else 0)
    if isinstance(value, list):
        return sum(size(v) for v in value)
    return 0
