"""Sample DynamoDB exports in the exact layout AWS writes, for the two tables of the mission.

``books`` (partition key ``id``) and ``orders`` (``customer_id`` + ``order_id``). Items carry
strings, integers, decimals, booleans, NULLs, binary, nested maps, lists, string and number sets,
and attributes present in only some items. Deterministic for a seed; streams items to gzip so
millions of items need little memory.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ingestion.manifest import md5_base64

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


def _token(rng: random.Random, length: int) -> str:
    alphabet = "abcdefghijklmnopqrstuvwxyz234567"
    return "".join(rng.choice(alphabet) for _ in range(length))


def export_id(moment: datetime, rng: random.Random) -> str:
    """Like ``01768385930622-efd1a093``: the export's millisecond timestamp, then 8 hex digits."""
    return f"{int(moment.timestamp() * 1000):014d}-{rng.getrandbits(32):08x}"


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _write_gzip_lines(path: Path, lines: Iterator[str]) -> tuple[int, int]:
    """Write lines as a deterministic gzip (mtime 0); return (count, uncompressed bytes)."""
    count = size = 0
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as out:
        for line in lines:
            data = (line + "\n").encode()
            out.write(data)
            count += 1
            size += len(data)
    path.write_bytes(buffer.getvalue())
    return count, size


def write_full_export(out: Path, table: SampleTable, items: int, seed: int) -> Path:
    """Write one full export of ``items`` items under ``out/<table>/AWSDynamoDB/<id>/``."""
    rng = random.Random(f"{seed}-{table.name}-export")
    moment = BASE_TIME + timedelta(seconds=seed % 86_400)
    # One empty partition first (as real exports may list one), then partitions of items.
    bounds = [(0, 0)] + [
        (start, min(start + ITEMS_PER_FILE, items)) for start in range(0, items, ITEMS_PER_FILE)
    ]
    partitions = [_lines(_items(table, start, stop, seed)) for start, stop in bounds]
    return write_export(out, table.name, partitions, moment, rng)


def _lines(items: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    return ({"Item": item} for item in items)


def _items(table: SampleTable, start: int, stop: int, seed: int) -> Iterator[dict[str, Any]]:
    item_rng = random.Random(f"{seed}-{table.name}-{start}")
    return (table.make_item(i, item_rng) for i in range(start, stop))


def write_items_export(
    out: Path, table: str, items: list[dict[str, Any]], moment: datetime = BASE_TIME, seed: int = 0
) -> Path:
    """A full export of the given items (DynamoDB JSON, as ``{"id": {"S": "1"}}``) in AWS's layout."""
    rng = random.Random(f"{seed}-{table}-items")
    return write_export(out, table, [iter(()), _lines(iter(items))], moment, rng)


def write_export(
    out: Path,
    table_name: str,
    partitions: list[Iterator[dict[str, Any]]],
    moment: datetime,
    rng: random.Random,
    window: tuple[datetime, datetime, str] | None = None,
) -> Path:
    """Write an export, one data file per partition of lines, with its manifests and checksums.
    ``window`` (from, to, view) makes it an incremental export: its data files go to the
    ``AWSDynamoDB/data/`` folder shared by every incremental export under the prefix."""
    ident = export_id(moment, rng)
    prefix = f"exports/{table_name}"
    folder = out / table_name / "AWSDynamoDB" / ident
    data = folder / "data" if window is None else out / table_name / "AWSDynamoDB" / "data"
    data_key = (
        f"{prefix}/AWSDynamoDB/{ident}/data" if window is None else f"{prefix}/AWSDynamoDB/data"
    )
    folder.mkdir(parents=True, exist_ok=True)
    data.mkdir(parents=True, exist_ok=True)
    (folder / "_started").write_bytes(b"")
    files: list[dict[str, Any]] = []
    billed = total = 0
    for partition in partitions:
        name = _token(rng, 26) + ".json.gz"
        lines = (json.dumps(line, separators=(",", ":")) for line in partition)
        count, size = _write_gzip_lines(data / name, lines)
        billed += size
        total += count
        files.append(
            {
                "itemCount": count,
                "md5Checksum": md5_base64(data / name),
                "etag": hashlib.md5((data / name).read_bytes()).hexdigest() + "-1",  # noqa: S324
                "dataFileS3Key": f"{data_key}/{name}",
            }
        )
    table_arn = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{table_name}"
    summary = {
        "version": "2020-06-30",
        "exportArn": f"{table_arn}/export/{ident}",
        "startTime": _iso(moment),
        "endTime": _iso(moment + timedelta(minutes=6)),
        "tableArn": table_arn,
        "tableId": f"{rng.getrandbits(128):032x}",
        "exportTime": _iso(moment),
        "s3Bucket": BUCKET,
        "s3Prefix": prefix,
        "s3SseAlgorithm": "AES256",
        "s3SseKmsKeyId": None,
        "manifestFilesS3Key": f"{prefix}/AWSDynamoDB/{ident}/manifest-files.json",
        "billedSizeBytes": billed,
        "itemCount": total,
        "outputFormat": "DYNAMODB_JSON",
    }
    if window is not None:
        start, end, view = window
        del summary["exportTime"]
        summary.update(
            version="2023-08-01",
            exportFromTime=_iso(start),
            exportToTime=_iso(end),
            exportType="INCREMENTAL_EXPORT",
            outputView=view,
        )
    manifest_files = "".join(json.dumps(f, separators=(",", ":")) + "\n" for f in files)
    (folder / "manifest-files.json").write_text(manifest_files)
    (folder / "manifest-summary.json").write_text(json.dumps(summary, separators=(",", ":")))
    for stem in ("manifest-files", "manifest-summary"):
        (folder / f"{stem}.md5").write_text(md5_base64(folder / f"{stem}.json"))
    return folder


def write_samples(
    out: Path, items: int | None, seed: int, tables: list[str] | None = None
) -> dict[str, Path]:
    """Full exports for each sample table; returns table -> export folder."""
    chosen = tables or list(SAMPLE_TABLES)
    result = {}
    for name in chosen:
        table = SAMPLE_TABLES[name]
        result[name] = write_full_export(out, table, items or table.default_items, seed)
    return result


def _order_key(item: dict[str, Any]) -> dict[str, Any]:
    return {"customer_id": item["customer_id"], "order_id": item["order_id"]}


def _full_export_time(seed: int) -> datetime:
    return BASE_TIME + timedelta(seconds=seed % 86_400)


def _change_line(
    rng: random.Random,
    start: datetime,
    view: str,
    keys: dict[str, Any],
    old: dict | None,
    new: dict | None,
) -> dict[str, Any]:
    """One line of an incremental export, written at a random moment of its hour."""
    micros = int((start + timedelta(seconds=rng.uniform(0, 3599))).timestamp() * 1e6)
    line: dict[str, Any] = {"Metadata": {"WriteTimestampMicros": {"N": str(micros)}}, "Keys": keys}
    if old is not None and view == "NEW_AND_OLD_IMAGES":
        line["OldImage"] = old
    if new is not None:
        line["NewImage"] = new
    return line


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
        for item in _items(table, start, stop, seed)
    }
    rng = random.Random(f"{seed}-orders-changes")
    folders, deleted, next_id = [], [], items
    size = max(3, items // 50)
    for k in range(increments):
        start = _full_export_time(seed) + timedelta(hours=k)
        end = start + timedelta(hours=1)
        view = "NEW_IMAGE" if k == increments - 1 else "NEW_AND_OLD_IMAGES"
        lines: list[dict[str, Any]] = []

        def written(
            keys: dict[str, Any],
            old: dict | None,
            new: dict | None,
            into: list = lines,
            start: datetime = start,
            view: str = view,
        ) -> None:
            into.append(_change_line(rng, start, view, keys, old, new))

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
        for _ in range(size):  # inserts
            item = order_item(next_id, rng)
            next_id += 1
            written(_order_key(item), None, item)
            state[json.dumps(_order_key(item), sort_keys=True)] = item
        if k >= 1 and deleted:  # an order deleted earlier, created again
            again = dict(deleted[0], status=s("PLACED"))
            written(_order_key(again), None, again)
            state[json.dumps(_order_key(again), sort_keys=True)] = again
            deleted.pop(0)
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


def live_items(
    folders: list[Path], keys: list[str], ttl_keep: bool = False
) -> dict[str, dict[str, Any]]:
    """The items a sequence of exports (and stream change-file folders, ``<location>/<table>``)
    leaves, applied in plain Python (for the demo's check): a full export is the whole table; the
    changes of an incremental export or a stream folder apply in (version, sequence) order."""
    from ingestion.manifest import FULL, read_export

    state: dict[str, tuple[tuple[int, str], dict[str, Any] | None]] = {}
    for folder in folders:
        if not (folder / "manifest-summary.json").exists():
            from ingestion.sample_stream import stream_changes

            changes = stream_changes(folder, keys, ttl_keep)
        else:
            export = read_export(folder, verify=False)
            if export.export_type == FULL:
                state = {}
            changes = []
            for data_file in export.files:
                for text in gzip.decompress(data_file.path.read_bytes()).decode().splitlines():
                    line = json.loads(text)
                    if "Item" in line:
                        version, image, identity = export.version_micros, line["Item"], line["Item"]
                    else:
                        version = int(line["Metadata"]["WriteTimestampMicros"]["N"])
                        image, identity = line.get("NewImage"), line["Keys"]
                    key = json.dumps([identity[k] for k in keys])
                    changes.append(((version, ""), key, image))
        for version, key, image in sorted(changes, key=lambda c: c[0]):
            if key not in state or state[key][0] <= version:
                state[key] = (version, image)
    return {k: image for k, (_, image) in state.items() if image is not None}
