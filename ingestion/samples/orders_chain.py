"""A chain of incremental exports of ``orders`` after its full export (as AWS writes them)."""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ingestion.config import clock
from ingestion.samples.items import (
    ITEMS_PER_FILE,
    SAMPLE_TABLES,
    STATUSES,
    items_of,
    n,
    order_item,
    s,
)
from ingestion.samples.sample_exports import full_export_time, write_export


def _order_key(item: dict[str, Any]) -> dict[str, Any]:
    return {"customer_id": item["customer_id"], "order_id": item["order_id"]}


def _change_line(
    rng: random.Random,
    start: datetime,
    view: str,
    keys: dict[str, Any],
    old: dict | None,
    new: dict | None,
) -> dict[str, Any]:
    """One line of an incremental export, written at a random moment of its hour."""
    micros = clock.epoch_micros(start + timedelta(seconds=rng.uniform(0, 3599)))
    line: dict[str, Any] = {"Metadata": {"WriteTimestampMicros": {"N": str(micros)}}, "Keys": keys}
    if old is not None and view == "NEW_AND_OLD_IMAGES":
        line["OldImage"] = old
    if new is not None:
        line["NewImage"] = new
    return line


def _window_changes(
    rng: random.Random,
    state: dict[str, dict[str, Any]],
    deleted: list[dict[str, Any]],
    next_id: int,
    size: int,
    k: int,
    window: tuple[datetime, str],
) -> list[dict[str, Any]]:
    """One window's change lines: ``size`` updates, deletes and inserts, and from the second
    window on an order deleted earlier created again. ``state`` and ``deleted`` follow along."""
    start, view = window
    lines: list[dict[str, Any]] = []

    def written(keys: dict[str, Any], old: dict | None, new: dict | None) -> None:
        lines.append(_change_line(rng, start, view, keys, old, new))

    touched = rng.sample(sorted(state), min(len(state), 2 * size))
    for key in touched[:size]:  # updates
        old = state[key]
        new = dict(old, status=s(rng.choice(STATUSES)), quantity=n(rng.randint(1, 20)))
        if "coupon" in new and rng.random() < 0.7:
            del new["coupon"]  # an update that removes an attribute
        written(_order_key(old), old, new)
        state[key] = new
    for key in touched[size:]:  # deletes
        old = state.pop(key)
        written(_order_key(old), old, None)
        deleted.append(old)
    for i in range(size):  # inserts
        item = order_item(next_id + i, rng)
        written(_order_key(item), None, item)
        state[json.dumps(_order_key(item), sort_keys=True)] = item
    if k >= 1 and deleted:  # an order deleted earlier, created again
        again = dict(deleted[0], status=s("PLACED"))
        written(_order_key(again), None, again)
        state[json.dumps(_order_key(again), sort_keys=True)] = again
        deleted.pop(0)
    return lines


def write_orders_chain(out: Path, items: int, seed: int, increments: int = 3) -> list[Path]:
    """Incremental exports of ``orders`` chaining from the full export ``write_samples`` writes
    for the same ``items`` and ``seed``: one-hour windows from its ``exportTime``. They hold
    inserts, updates (some remove the ``coupon`` attribute), deletes, an order deleted and then
    re-created, and the last export is a ``NEW_IMAGE`` one (upserts, deletes as keys alone)."""
    table = SAMPLE_TABLES["orders"]
    bounds = [
        (start, min(start + ITEMS_PER_FILE, items)) for start in range(0, items, ITEMS_PER_FILE)
    ]
    state = {
        json.dumps(_order_key(item), sort_keys=True): item
        for start, stop in bounds
        for item in items_of(table, start, stop, seed)
    }
    rng = random.Random(f"{seed}-orders-changes")
    folders: list[Path] = []
    deleted: list[dict[str, Any]] = []
    next_id = items
    size = max(3, items // 50)
    for k in range(increments):
        start = full_export_time(seed) + timedelta(hours=k)
        end = start + timedelta(hours=1)
        view = "NEW_IMAGE" if k == increments - 1 else "NEW_AND_OLD_IMAGES"
        lines = _window_changes(rng, state, deleted, next_id, size, k, (start, view))
        next_id += size
        rng.shuffle(lines)
        middle = len(lines) // 2
        folders.append(
            write_export(
                out,
                table.name,
                [iter(()), iter(lines[:middle]), iter(lines[middle:])],
                end + timedelta(minutes=5),
                rng,
                window=(start, end, view),
            )
        )
    return folders
