"""A table's Iceberg metadata read without Spark: the catalog's pointer to the current metadata
file (Iceberg's JDBC catalog schema, table ``iceberg_tables``, in the SQLite file the target's
profile names) and that file's JSON."""

from __future__ import annotations

import importlib.util
import json
import os
import sqlite3
from pathlib import Path

from ingestion.config import names, settings
from ingestion.sources.locations import s3_client
from ingestion.sources.s3_uri import as_s3, is_s3, parse_s3_uri
from ingestion.spark import spark_config
from ingestion.spark.table_metadata import Metadata

WITHOUT_SPARK_TARGETS = ("local", "rehearsal")


def available() -> bool:
    """The path without Spark serves this process: a target whose catalog is a SQLite file, and the
    ``light`` extra installed."""
    return (
        settings.target() in WITHOUT_SPARK_TARGETS
        and os.environ.get("LAKEHOUSE_NO_LIGHT") != "1"
        and importlib.util.find_spec("duckdb") is not None
    )


def catalog_file() -> Path:
    """The SQLite file of the target's catalog (``spark.sql.catalog.lake.uri``)."""
    uri = spark_config.spark_conf().get(f"spark.sql.catalog.{names.CATALOG}.uri", "")
    return Path(uri.removeprefix("jdbc:sqlite:").removeprefix("file:"))


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
        # Schema V1 (every profile sets it) keeps views in the same table: tables only.
        rows = db.execute(
            query + " and coalesce(iceberg_type, 'TABLE') = 'TABLE'", namespaces
        ).fetchall()
    return [(str(n), str(t), str(m)) for n, t, m in rows]


def read_metadata(namespace: str, table: str) -> Metadata | None:
    location = metadata_location(namespace, table)
    if location is None:
        return None
    return Metadata(location, json.loads(_read(location)))


def _read(location: str) -> bytes:
    if is_s3(as_s3(location)):
        bucket, key = parse_s3_uri(as_s3(location))
        return bytes(s3_client().get_object(Bucket=bucket, Key=key)["Body"].read())
    return Path(location.removeprefix("file:")).read_bytes()


def size_of(location: str) -> int:
    """The size of a metadata file, in bytes."""
    return len(_read(location))
