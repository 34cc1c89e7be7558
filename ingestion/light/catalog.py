"""A table's Iceberg metadata read without Spark: the catalog's pointer to the current metadata
file (Iceberg's JDBC catalog schema, table ``iceberg_tables``, in the SQLite file the target's
profile names) and that file's JSON."""

from __future__ import annotations

import importlib.util
import json
import os
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ingestion.config import names, settings
from ingestion.sources.locations import s3_client
from ingestion.spark import spark_config

LIGHT_TARGETS = ("local", "rehearsal")


def available() -> bool:
    """The light path serves this process: a target whose catalog is a SQLite file, and the
    ``light`` extra installed."""
    return (
        settings.target() in LIGHT_TARGETS
        and os.environ.get("LAKEHOUSE_NO_LIGHT") != "1"
        and importlib.util.find_spec("duckdb") is not None
    )


def catalog_file() -> Path:
    """The SQLite file of the target's catalog (``spark.sql.catalog.lake.uri``)."""
    uri = spark_config.spark_conf().get(f"spark.sql.catalog.{names.CATALOG}.uri", "")
    return Path(uri.removeprefix("jdbc:sqlite:").removeprefix("file:"))


@dataclass(frozen=True)
class Snapshot:
    snapshot_id: int
    parent_id: int | None
    committed_at: datetime
    summary: dict[str, str]


@dataclass(frozen=True)
class Metadata:
    location: str  # the metadata file's own location
    raw: dict[str, Any]

    @property
    def snapshots(self) -> list[Snapshot]:
        return [
            Snapshot(
                int(s["snapshot-id"]),
                s.get("parent-snapshot-id"),
                datetime.fromtimestamp(int(s["timestamp-ms"]) / 1000, UTC),
                {k: str(v) for k, v in (s.get("summary") or {}).items()},
            )
            for s in self.raw.get("snapshots") or []
        ]

    @property
    def current(self) -> Snapshot | None:
        current = self.raw.get("current-snapshot-id")
        return next((s for s in self.snapshots if s.snapshot_id == current), None)

    @property
    def properties(self) -> dict[str, str]:
        return dict(self.raw.get("properties") or {})

    @property
    def columns(self) -> dict[str, str]:
        """Top-level column name -> Iceberg type (a nested type as its JSON) of the current
        schema."""
        current = self.raw.get("current-schema-id")
        schema = next(
            (s for s in self.raw.get("schemas") or [] if s.get("schema-id") == current),
            self.raw.get("schema") or {},
        )
        return {
            f["name"]: f["type"] if isinstance(f["type"], str) else json.dumps(f["type"])
            for f in schema.get("fields") or []
        }


def metadata_location(namespace: str, table: str) -> str | None:
    """The current metadata file of ``namespace.table``, or None when the catalog has no such
    table (or no catalog file yet)."""
    path = catalog_file()
    if not path.is_file():
        return None
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=60) as db:
        row = db.execute(
            "select metadata_location from iceberg_tables "
            "where table_namespace = ? and table_name = ?",
            (namespace, table),
        ).fetchone()
    return str(row[0]) if row else None


def tables(namespaces: tuple[str, ...]) -> list[tuple[str, str, str]]:
    """(namespace, table, current metadata file) of every table the catalog holds in
    ``namespaces``."""
    path = catalog_file()
    if not path.is_file():
        return []
    marks = ", ".join("?" for _ in namespaces)
    query = (
        "select table_namespace, table_name, metadata_location from iceberg_tables "
        f"where table_namespace in ({marks}) and metadata_location is not null"
    )
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=60) as db:
        try:  # the JDBC catalog's schema V1 keeps views in the same table: tables only
            rows = db.execute(
                query + " and coalesce(iceberg_type, 'TABLE') = 'TABLE'", namespaces
            ).fetchall()
        except sqlite3.OperationalError:  # schema V0: no views, no iceberg_type
            rows = db.execute(query, namespaces).fetchall()
    return [(str(n), str(t), str(m)) for n, t, m in rows]


def read_metadata(namespace: str, table: str) -> Metadata | None:
    location = metadata_location(namespace, table)
    if location is None:
        return None
    return Metadata(location, json.loads(_read(location)))


def _read(location: str) -> bytes:
    if location.startswith(("s3://", "s3a://")):
        bucket, _, key = location.split("://", 1)[1].partition("/")
        return bytes(s3_client().get_object(Bucket=bucket, Key=key)["Body"].read())
    return Path(location.removeprefix("file:")).read_bytes()


def size_of(location: str) -> int:
    """The size of a metadata file, in bytes."""
    return len(_read(location))
