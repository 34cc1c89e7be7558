"""Stream change files (written by ``ingestion.sources.change_file_writer``): listed, and deleted
once staged, in a local folder or under an ``s3://`` prefix (``<location>/<table>/*.json.gz``)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ingestion.config.errors import LakehouseError
from ingestion.sources.change_file_writer import SUFFIX
from ingestion.sources.locations import s3_client
from ingestion.sources.s3_uri import is_s3, parse_s3_uri


class StreamError(LakehouseError):
    """Stream change files could not be listed, read or removed."""


@dataclass(frozen=True)
class ChangeFile:
    name: str  # relative to the table's stream folder
    uri: str  # what Spark reads
    size: int
    modified: float  # epoch seconds


class LocalFolder:
    """Change files in a local folder: ``<root>/<table>/*.json.gz``."""

    def __init__(self, root: str, table: str) -> None:
        self.folder = Path(root) / table
        self.location = str(Path(root).resolve() / table)

    def listing(self) -> list[ChangeFile]:
        if not self.folder.is_dir():
            return []
        found = []
        for entry in os.scandir(self.folder):
            if entry.is_file() and entry.name.endswith(SUFFIX):
                stat = entry.stat()
                found.append(
                    ChangeFile(entry.name, os.path.abspath(entry.path), stat.st_size, stat.st_mtime)
                )
        return found

    def delete(self, names: list[str]) -> None:
        for name in names:
            (self.folder / name).unlink(missing_ok=True)


class S3Prefix:
    """Change files under ``s3://bucket/prefix/<table>/`` (listed and deleted with boto3)."""

    def __init__(self, uri: str, table: str, client: Any = None) -> None:
        bucket, prefix = parse_s3_uri(uri)  # a valid location, before anything is called
        self.bucket = bucket
        self.prefix = "/".join(p for p in (prefix, table) if p) + "/"
        self.location = f"s3://{bucket}/{self.prefix.rstrip('/')}"
        self.client = client or s3_client()

    def listing(self) -> list[ChangeFile]:
        found = []
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=self.prefix
        )
        for page in pages:
            for item in page.get("Contents", []):
                name = item["Key"][len(self.prefix) :]
                if name.endswith(SUFFIX) and "/" not in name:
                    found.append(
                        ChangeFile(
                            name,
                            f"s3://{self.bucket}/{item['Key']}",
                            int(item["Size"]),
                            item["LastModified"].timestamp(),
                        )
                    )
        return found

    def delete(self, names: list[str]) -> None:
        for start in range(0, len(names), 1000):
            chunk = names[start : start + 1000]
            answer = self.client.delete_objects(
                Bucket=self.bucket,
                Delete={"Objects": [{"Key": self.prefix + n} for n in chunk], "Quiet": True},
            )
            if answer.get("Errors"):
                first = answer["Errors"][0]
                raise StreamError(
                    f"could not delete {len(answer['Errors'])} staged change file(s) under "
                    f"{self.location}, e.g. {first.get('Key')}: {first.get('Message')} "
                    "(they are in the ledger: the next run deletes them without staging them)"
                )


ChangeFiles = LocalFolder | S3Prefix


def store_for(uri: str, table: str) -> ChangeFiles:
    if is_s3(uri):
        return S3Prefix(uri, table)
    if "://" in uri:
        raise StreamError(f"{uri!r}: a stream location is a local folder or s3://BUCKET/PREFIX")
    return LocalFolder(uri, table)


def file_end_time(name: str) -> str | None:
    """The latest change time a change file's name holds after its earliest (the writer's
    names since it records both), else its earliest."""
    try:
        latest = datetime.strptime(name[17:33], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:
        return file_time(name)
    return latest.isoformat()


def file_time(name: str) -> str | None:
    """The earliest change time a change file's name starts with, as ISO 8601 (as the ledger's
    export times are)."""
    try:
        return datetime.strptime(name[:16], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC).isoformat()
    except ValueError:
        return None


def still_there(location: str, names: set[str]) -> set[str]:
    """Which of the change files ``names`` are still in the stream folder ``location`` (a
    store's ``location``: ``<root>/<table>`` as a local folder or ``s3://``)."""
    if not names:
        return set()
    root, _, table = location.rstrip("/").rpartition("/")
    return {f.name for f in store_for(root, table).listing()} & names
