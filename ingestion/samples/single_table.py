"""A single-table design's sample (``sample --table app``): one DynamoDB table ``app`` holding
users, their orders and their addresses, told apart by the sort key's prefix (``USER#``,
``ORDER#``, ``ADDRESS#``) and by a ``type`` attribute, plus a few items of no listed entity.

Its entities' attributes are typed differently on purpose: ``total`` is a count (whole numbers)
in a user and an amount (two decimals) in an order; ``details`` is text in a user and a map in an
order; ``zip`` is text in an address. Unsplit, the table's columns would be the union of all,
with the widest type of each; split, each entity table has its own columns and types.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from ingestion.samples import sample_exports
from ingestion.samples.items import CITIES, FIRST, LAST, STATUSES, n, s

TABLE = "app"
# The entry ``add-table`` writes for it (README, docs/single-table-design.md).
KEY_RULE = {"key": "sk", "values": {"USER": None, "ORDER": None, "ADDRESS": None}}
ATTRIBUTE_RULE = {"attribute": "type", "values": {"user": None, "order": None, "address": None}}


def user(u: int, rng: random.Random) -> dict[str, Any]:
    name = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
    return {
        "pk": s(f"USER#{u}"),
        "sk": s(f"USER#{u}"),
        "type": s("user"),
        "name": s(name),
        "total": n(rng.randint(0, 40)),  # orders placed: a whole number
        "details": s(f"customer since {2010 + u % 15}"),
    }


def order(u: int, o: int, rng: random.Random) -> dict[str, Any]:
    return {
        "pk": s(f"USER#{u}"),
        "sk": s(f"ORDER#{o:05d}"),
        "type": s("order"),
        "total": n(f"{rng.randint(1, 900)}.{rng.randint(0, 99):02d}"),  # an amount
        "status": s(rng.choice(STATUSES)),
        "details": {"M": {"gift": {"BOOL": rng.random() < 0.2}, "lines": n(rng.randint(1, 5))}},
    }


def address(u: int, a: int, rng: random.Random) -> dict[str, Any]:
    city, country = rng.choice(CITIES)
    return {
        "pk": s(f"USER#{u}"),
        "sk": s(f"ADDRESS#{a}"),
        "type": s("address"),
        "city": s(city),
        "country": s(country),
        "zip": s(f"{rng.randint(1000, 99999):05d}"),
    }


def other(u: int) -> dict[str, Any]:
    """An item of no listed entity: a session marker (``SESSION#``, no ``type`` listed)."""
    return {"pk": s(f"USER#{u}"), "sk": s(f"SESSION#{u}"), "type": s("session"), "ttl": n(u)}


def items(users: int, seed: int) -> list[dict[str, Any]]:
    """Each user, two orders and an address per user, and a session of every fifth user."""
    rng = random.Random(f"{seed}-{TABLE}")
    found: list[dict[str, Any]] = []
    for u in range(users):
        found += [user(u, rng), order(u, 2 * u, rng), order(u, 2 * u + 1, rng), address(u, 0, rng)]
        found += [other(u)] if u % 5 == 0 else []
    return found


def write_single_table(out: Path, users: int, seed: int) -> Path:
    """A full export of ``app`` under ``out/app/AWSDynamoDB/<id>/``."""
    return sample_exports.write_items_export(out, TABLE, items(users, seed), seed=seed)
