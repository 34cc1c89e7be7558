"""Sample stream change files for ``books``: DynamoDB Streams records as Lambda receives them,
written through the Lambda function's own writer (ingestion.sources.change_file_writer)."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path
from typing import Any

from ingestion.dynamodb.change_order import stream_version
from ingestion.samples.items import ACCOUNT, REGION, SAMPLE_TABLES, book_item, items_of, money, n, s
from ingestion.samples.sample_exports import full_export_time

STREAM_ARN = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{{table}}/stream/2026-01-01T00:00:00.000"
TTL_IDENTITY = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}


def stream_record(
    table: str,
    event: str,
    keys: dict[str, Any],
    old: dict | None,
    new: dict | None,
    seconds: int | float,
    sequence: int,
    ttl: bool = False,
) -> dict[str, Any]:
    """One DynamoDB Streams record as Lambda receives it (NEW_AND_OLD_IMAGES)."""
    change: dict[str, Any] = {
        "ApproximateCreationDateTime": seconds,
        "Keys": keys,
        "SequenceNumber": f"{sequence:021d}",
        "SizeBytes": 100,
        "StreamViewType": "NEW_AND_OLD_IMAGES",
    }
    if new is not None:
        change["NewImage"] = new
    if old is not None:
        change["OldImage"] = old
    record: dict[str, Any] = {
        "eventID": f"{sequence:x}",
        "eventName": event,
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": REGION,
        "dynamodb": change,
        "eventSourceARN": STREAM_ARN.format(table=table),
    }
    if ttl:
        record["userIdentity"] = dict(TTL_IDENTITY)
    return record


def books_stream_records(items: int, seed: int, changes: int = 120) -> list[list[dict[str, Any]]]:
    """Lambda batches of stream records for ``books``, after the full export ``write_samples``
    writes for the same ``items`` and ``seed``: updates, inserts, user deletes, a TTL expiry,
    two changes to one item within one second (the later SequenceNumber in the EARLIER batch),
    and a batch delivered twice, re-split (at-least-once delivery)."""
    table = SAMPLE_TABLES["books"]
    state = {item["id"]["S"]: item for item in items_of(table, 0, items, seed)}
    rng = random.Random(f"{seed}-books-stream")
    second = int(full_export_time(seed).timestamp()) + 60
    sequence = 10**20 + rng.randint(0, 10**6)
    records: list[dict[str, Any]] = []

    def emit(event: str, key: str, old: dict | None, new: dict | None, ttl: bool = False) -> None:
        nonlocal sequence, second
        sequence += rng.randint(1, 50)
        second += rng.randint(0, 2)
        keys = {"id": {"S": key}}
        records.append(stream_record("books", event, keys, old, new, second, sequence, ttl))

    next_id = items
    for _ in range(changes):
        roll = rng.random()
        if roll < 0.6 and state:
            key = rng.choice(sorted(state))
            new = dict(
                state[key], price=n(money(rng, 3, 80)), in_stock={"BOOL": rng.random() < 0.5}
            )
            emit("MODIFY", key, state[key], new)
            state[key] = new
        elif roll < 0.85:
            item = book_item(next_id, rng)
            next_id += 1
            emit("INSERT", item["id"]["S"], None, item)
            state[item["id"]["S"]] = item
        elif state:
            key = rng.choice(sorted(state))
            emit("REMOVE", key, state.pop(key), None, ttl=rng.random() < 0.3)
    # A TTL expiry, whatever the draw above.
    key = sorted(state)[0]
    emit("REMOVE", key, state.pop(key), None, ttl=True)
    batches = [records[i : i + 25] for i in range(0, len(records), 25)]
    # Two changes to one item in one second: the later (higher SequenceNumber) goes first.
    key = sorted(state)[-1]
    first = dict(state[key], title=s("Same Second, Earlier"))
    later = dict(first, title=s("Same Second, Later"))
    second += 5
    sequence += 10
    early_record = stream_record(
        "books", "MODIFY", {"id": {"S": key}}, state[key], first, second, sequence
    )
    late_record = stream_record(
        "books", "MODIFY", {"id": {"S": key}}, first, later, second, sequence + 7
    )
    batches.insert(0, [late_record])
    batches.append([early_record])
    # At-least-once: the second batch delivered again, split differently.
    if len(batches) > 2:
        batches.append(batches[2][: len(batches[2]) // 2])
    return batches


def write_books_stream(out: Path, items: int, seed: int) -> Path:
    """Stream change files for ``books`` written through the Lambda module's writer into
    ``out/streams/books/``; returns the stream location (``out/streams``)."""
    from ingestion.sources.change_file_writer import write_batch

    location = out / "streams"
    for batch in books_stream_records(items, seed):
        written, failed = write_batch(batch, str(location))
        if failed is not None:
            raise RuntimeError(f"sample stream batch failed at {failed}")
    return location


def stream_changes(folder: Path, keys: list[str], ttl_keep: bool) -> list[tuple]:
    """Each change of a stream folder: ((version, sequence), key, image, kept), where kept marks
    a TTL expiry whose last image stays (``ttl_keep``)."""
    changes = []
    for path in sorted(folder.glob("*.json.gz")):
        for text in gzip.decompress(path.read_bytes()).decode().splitlines():
            line = json.loads(text)
            version = stream_version(line["ApproximateCreationDateTime"])
            removed = line["eventName"] == "REMOVE"
            ttl = (line.get("userIdentity") or {}).get("principalId") == TTL_IDENTITY["principalId"]
            image = (
                (line.get("OldImage") if ttl and ttl_keep else None)
                if removed
                else line["NewImage"]
            )
            key = json.dumps([line["Keys"][k] for k in keys])
            kept = removed and ttl and ttl_keep
            changes.append(((version, line["SequenceNumber"].zfill(40)), key, image, kept))
    return changes
