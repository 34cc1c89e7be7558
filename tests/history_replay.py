"""The history's oracle for the tests of `history: true` (tests/merge/test_history*.py): a plain
replay of every staged change of a table of `id`, `title` and `pages`, and the history's items at
an instant read from its rows."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal


def values(image: dict) -> dict:
    """An item's values as the history's columns hold them (a number exactly, as a decimal)."""
    return {"title": image["title"]["S"], "pages": Decimal(image["pages"]["N"])}


def replayed(changes: list[tuple], micros: int) -> dict[str, dict]:
    """The items at an instant, by replaying every staged change up to it in (version, sequence)
    order; a change is (version, sequence, key, image or None), and a full export's is (version,
    "", "export", its items by key): they replace the state (its re-baseline)."""
    state: dict[str, dict] = {}
    for version, _, key, image in sorted(changes, key=lambda c: (c[0], str(c[1]))):
        if version > micros:
            break
        if key == "export":
            state = {k: values(v) for k, v in image.items()}
        elif image is None:
            state.pop(key, None)
        else:
            state[key] = values(image)
    return state


def history_rows(spark, history: str) -> list[dict]:
    spark.sql(f"refresh table {history}")
    return [r.asDict() for r in spark.table(history).collect()]


def valid_at(rows: list[dict], micros: int) -> dict[str, dict]:
    """The history's items at an instant: its rows valid then (half-open), less deletes and TTL
    expiries; an item valid twice at once is a defect."""
    t = datetime(1970, 1, 1) + timedelta(microseconds=micros)
    found: dict[str, dict] = {}
    for r in rows:
        if r["_valid_from"] <= t and (r["_valid_to"] is None or r["_valid_to"] > t):
            assert r["id"] not in found, ("valid twice", r["id"], micros)
            found[r["id"]] = r
    return {
        k: {"title": r["title"], "pages": Decimal(str(r["pages"]))}
        for k, r in found.items()
        if r["_operation"] not in ("delete", "ttl_delete")
    }
