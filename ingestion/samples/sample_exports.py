"""Sample DynamoDB exports in the exact layout AWS writes, for the two tables of the mission.

``books`` (partition key ``id``) and ``orders`` (``customer_id`` + ``order_id``). Items carry
strings, integers, decimals, booleans, NULLs, binary, nested maps, lists, string and number sets,
and attributes present in only some items. Deterministic for a seed; streams items to gzip so
millions of items need little memory.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import random
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ingestion.samples.items import (
    ACCOUNT,
    BASE_TIME,
    BUCKET,
    ITEMS_PER_FILE,
    REGION,
    SAMPLE_TABLES,
    SampleTable,
    items_of,
)
from ingestion.sources.manifest import md5_base64


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
    partitions = [_lines(items_of(table, start, stop, seed)) for start, stop in bounds]
    return write_export(out, table.name, partitions, moment, rng)


def _lines(items: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    return ({"Item": item} for item in items)


def write_items_export(
    out: Path, table: str, items: list[dict[str, Any]], moment: datetime = BASE_TIME, seed: int = 0
) -> Path:
    """A full export of the given items (DynamoDB JSON, as ``{"id": {"S": "1"}}``) in AWS's
    layout."""
    rng = random.Random(f"{seed}-{table}-items")
    return write_export(out, table, [iter(()), _lines(iter(items))], moment, rng)


def write_incremental_export(
    out: Path,
    table: str,
    lines: list[dict[str, Any]],
    window: tuple[datetime, datetime],
    view: str = "NEW_AND_OLD_IMAGES",
    seed: int = 0,
) -> Path:
    """An incremental export of the given lines (``Metadata``/``Keys``/``NewImage``/``OldImage``)
    over ``window`` (from, to), written five minutes after its end, in AWS's layout."""
    rng = random.Random(f"{seed}-{table}-incremental")
    start, end = window
    return write_export(
        out, table, [iter(lines)], end + timedelta(minutes=5), rng, window=(start, end, view)
    )


def _write_data_files(
    data: Path, data_key: str, partitions: list[Iterator[dict[str, Any]]], rng: random.Random
) -> tuple[list[dict[str, Any]], int, int]:
    """One gzip'd data file per partition; their manifest-files entries, bytes and items."""
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
    return files, billed, total


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
    files, billed, total = _write_data_files(data, data_key, partitions, rng)
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


def full_export_time(seed: int) -> datetime:
    return BASE_TIME + timedelta(seconds=seed % 86_400)
