"""Exports of one's own items in AWS's exact layout (``ddb-lakehouse write-export``): how a table
of one's own is tried before an AWS account is involved, with the same writer the samples use
(``sample_exports``: data files, ``manifest-files.json``, ``manifest-summary.json`` and their MD5
checksums, as docs/exports-and-the-ledger.md describes them).

Input is JSON Lines, one DynamoDB JSON value per line, checked before anything is written:

- a full export: one item per line, ``{"id": {"S": "1"}, ...}`` (or AWS's own ``{"Item": {...}}``);
- an incremental export: one change per line as AWS writes it, ``{"Keys": {...}, "NewImage":
  {...}, "OldImage": {...}}`` (a delete has no ``NewImage``), with its time either in
  ``Metadata.WriteTimestampMicros`` or spread one millisecond apart from the window's start.

Decision: the key attributes are given (``--partition-key``), so a line without them is refused
here with its number, as DynamoDB would have refused the item, not later in a Spark job.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ingestion.config import clock
from ingestion.config.errors import LakehouseError
from ingestion.dynamodb.values import DESCRIPTORS
from ingestion.samples.sample_exports import write_incremental_export, write_items_export

IMAGES = ("NewImage", "OldImage")


class ItemsFileError(LakehouseError):
    """A JSON Lines file of items or changes that is not DynamoDB JSON as AWS writes it."""


def _check_value(value: Any, where: str) -> None:
    if not isinstance(value, dict) or len(value) != 1 or next(iter(value)) not in DESCRIPTORS:
        raise ItemsFileError(
            f"{where}: {json.dumps(value)[:80]} is not a DynamoDB JSON value (one of "
            f'{", ".join(DESCRIPTORS)} with its content, e.g. {{"S": "text"}})'
        )
    ((kind, content),) = value.items()
    if kind == "M":
        if not isinstance(content, dict):
            raise ItemsFileError(f"{where}: an M value holds an object")
        for name, inner in content.items():
            _check_value(inner, f"{where}.{name}")
    elif kind == "L":
        if not isinstance(content, list):
            raise ItemsFileError(f"{where}: an L value holds a list")
        for i, inner in enumerate(content):
            _check_value(inner, f"{where}[{i}]")


def parse_keys(*specs: str | None) -> dict[str, str | None]:
    """``ATTR`` or ``ATTR:TYPE`` (S, N or B) -> {attribute: type or None}."""
    keys: dict[str, str | None] = {}
    for spec in specs:
        if spec:
            name, _, kind = spec.partition(":")
            if kind and kind not in ("S", "N", "B"):
                raise ItemsFileError(f"key {spec!r}: a key's type is S, N or B")
            keys[name] = kind or None
    return keys


def _check_item(item: Any, keys: dict[str, str | None], where: str) -> dict[str, Any]:
    if not isinstance(item, dict) or not item:
        raise ItemsFileError(f"{where}: not an item (an object of attribute name -> value)")
    for name, value in item.items():
        _check_value(value, f"{where}: attribute {name!r}")
    missing = [k for k in keys if k not in item]
    if missing:
        raise ItemsFileError(f"{where}: no key attribute {', '.join(map(repr, missing))}")
    for name, kind in keys.items():
        found = next(iter(item[name]))
        if kind and found != kind:
            raise ItemsFileError(f"{where}: key attribute {name!r} is {found}, not {kind}")
    return item


def _lines(path: Path) -> list[tuple[int, Any]]:
    if not path.is_file():
        raise ItemsFileError(f"{path}: no such file")
    parsed = []
    for number, text in enumerate(path.read_text().splitlines(), start=1):
        if not text.strip():
            continue
        try:
            parsed.append((number, json.loads(text)))
        except json.JSONDecodeError as exc:
            raise ItemsFileError(f"{path} line {number}: not JSON ({exc.msg})") from None
    return parsed


def read_items(path: Path, keys: dict[str, str | None]) -> list[dict[str, Any]]:
    """The items of a JSON Lines file (one item a line, bare or as ``{"Item": ...}``)."""
    items = []
    for number, line in _lines(path):
        item = line.get("Item") if isinstance(line, dict) and set(line) == {"Item"} else line
        items.append(_check_item(item, keys, f"{path} line {number}"))
    return items


def read_changes(
    path: Path, keys: dict[str, str | None], window: tuple[datetime, datetime]
) -> list[dict[str, Any]]:
    """The change lines of a JSON Lines file, each with its ``Metadata`` (given, or one
    millisecond after the previous line's from ``start``)."""
    start, end = window
    changes = []
    for i, (number, line) in enumerate(_lines(path)):
        where = f"{path} line {number}"
        if not isinstance(line, dict) or "Keys" not in line:
            raise ItemsFileError(f"{where}: a change has Keys, and NewImage and/or OldImage")
        key_values = _check_item(line["Keys"], keys, f"{where} Keys")
        for image in IMAGES:
            if line.get(image) is not None:
                _check_item(line[image], keys, f"{where} {image}")
        unknown = set(line) - {"Keys", "Metadata", *IMAGES}
        if unknown:
            raise ItemsFileError(f"{where}: unknown member(s) {', '.join(sorted(unknown))}")
        micros = clock.epoch_micros(start + timedelta(milliseconds=i + 1))
        metadata = line.get("Metadata") or {"WriteTimestampMicros": {"N": str(micros)}}
        written = str((metadata.get("WriteTimestampMicros") or {}).get("N", ""))
        if not written.isdigit() or not clock.epoch_micros(start) <= int(
            written
        ) <= clock.epoch_micros(end):
            raise ItemsFileError(
                f"{where}: Metadata.WriteTimestampMicros {written or 'missing'} is not within the "
                f"window {start.isoformat()} to {end.isoformat()} (microseconds since the epoch)"
            )
        changes.append({**line, "Keys": key_values, "Metadata": metadata})
    return changes


def write_full(
    out: Path, table: str, items_file: Path, keys: dict[str, str | None], at: datetime
) -> Path:
    """A full export of ``table`` at ``at`` holding the items of ``items_file``: its folder."""
    return write_items_export(out, table, read_items(items_file, keys), at)


def write_incremental(
    out: Path,
    table: str,
    changes_file: Path,
    keys: dict[str, str | None],
    window: tuple[datetime, datetime],
) -> Path:
    """An incremental export of ``table`` over ``window`` holding the changes of
    ``changes_file``: its folder."""
    start, end = window
    if end <= start:
        raise ItemsFileError(
            f"the window ends ({end.isoformat()}) before it starts ({start.isoformat()})"
        )
    return write_incremental_export(out, table, read_changes(changes_file, keys, window), window)
