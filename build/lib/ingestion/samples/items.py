"""The sample tables' items, in DynamoDB JSON: ``books`` and ``orders``, with every type."""

from __future__ import annotations

import base64
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

ACCOUNT = "123456789012"


REGION = "eu-west-1"


BUCKET = "example-lakehouse-exports"


ITEMS_PER_FILE = 25_000


BASE_TIME = datetime(2026, 1, 14, 10, 18, 50, 622000, tzinfo=UTC)


GENRES = ["fiction", "history", "science", "poetry", "travel", "children", "crime", "art"]


FIRST = ["Ada", "Alan", "Grace", "Edsger", "Barbara", "Donald", "Frances", "Ken", "Margaret"]


LAST = ["Lovelace", "Turing", "Hopper", "Dijkstra", "Liskov", "Knuth", "Allen", "Thompson"]


WORDS = [
    "river",
    "glass",
    "north",
    "silent",
    "paper",
    "garden",
    "winter",
    "iron",
    "harbor",
    "lantern",
    "orchard",
    "signal",
    "copper",
    "meadow",
    "ember",
    "atlas",
]


CITIES = [("Lisbon", "PT"), ("Berlin", "DE"), ("Dublin", "IE"), ("Lyon", "FR"), ("Oslo", "NO")]


STATUSES = ["PLACED", "PAID", "SHIPPED", "DELIVERED", "RETURNED"]


def s(v: str) -> dict[str, Any]:
    return {"S": v}


def n(v: int | str) -> dict[str, Any]:
    return {"N": str(v)}


def money(rng: random.Random, low: int, high: int) -> str:
    return f"{rng.randint(low, high)}.{rng.randint(0, 99):02d}"


def book_item(i: int, rng: random.Random) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": s(f"book-{i:08d}"),
        "title": s(" ".join(rng.choice(WORDS).title() for _ in range(rng.randint(1, 4)))),
        "author": s(f"{rng.choice(FIRST)} {rng.choice(LAST)}"),
        "price": n(money(rng, 3, 80)),
        "pages": n(rng.randint(40, 1200)),
        "in_stock": {"BOOL": rng.random() < 0.8},
        "tags": {"SS": sorted(rng.sample(GENRES, rng.randint(1, 3)))},
        "ratings": {"NS": sorted({str(rng.randint(1, 5)) for _ in range(rng.randint(1, 4))})},
        "details": {
            "M": {
                "publisher": s(f"{rng.choice(LAST)} Press"),
                "year": n(rng.randint(1900, 2026)),
                "language": s(rng.choice(["en", "fr", "de", "pt"])),
            }
        },
        "editions": {
            "L": [
                {"M": {"format": s(fmt), "price": n(money(rng, 3, 80))}}
                for fmt in rng.sample(["hardcover", "paperback", "ebook"], rng.randint(1, 3))
            ]
        },
        "cover_thumbnail": {"B": base64.b64encode(rng.randbytes(12)).decode()},
    }
    if rng.random() < 0.3:
        item["subtitle"] = s("A " + rng.choice(WORDS) + " story")
    if rng.random() < 0.1:
        item["discontinued_at"] = {"NULL": True}
    return item


def order_item(i: int, rng: random.Random) -> dict[str, Any]:
    placed = BASE_TIME - timedelta(days=rng.randint(0, 365), seconds=rng.randint(0, 86_399))
    lines = [
        {
            "M": {
                "sku": s(f"sku-{rng.randint(1, 5000):05d}"),
                "qty": n(rng.randint(1, 5)),
                "unit_price": n(money(rng, 1, 200)),
            }
        }
        for _ in range(rng.randint(1, 4))
    ]
    city, country = rng.choice(CITIES)
    item: dict[str, Any] = {
        "customer_id": s(f"customer-{i // 4:07d}"),
        "order_id": s(f"order-{i:09d}"),
        "placed_at": s(placed.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"),
        "status": s(rng.choice(STATUSES)),
        "total": n(money(rng, 5, 900)),
        "quantity": n(rng.randint(1, 20)),
        "lines": {"L": lines},
        "shipping": {
            "M": {"city": s(city), "country": s(country), "express": {"BOOL": rng.random() < 0.2}}
        },
        "gift": {"BOOL": rng.random() < 0.1},
    }
    if rng.random() < 0.25:
        item["coupon"] = s(f"SAVE{rng.randint(5, 30)}")
    if rng.random() < 0.05:
        item["notes"] = {"NULL": True}
    return item


@dataclass(frozen=True)
class SampleTable:
    name: str
    make_item: Callable[[int, random.Random], dict[str, Any]]
    default_items: int


SAMPLE_TABLES = {
    "books": SampleTable("books", book_item, 500),
    "orders": SampleTable("orders", order_item, 2000),
}


def items_of(table: SampleTable, start: int, stop: int, seed: int) -> Iterator[dict[str, Any]]:
    item_rng = random.Random(f"{seed}-{table.name}-{start}")
    return (table.make_item(i, item_rng) for i in range(start, stop))
