"""An Iceberg table's metadata (snapshots with their summaries, properties, columns) as the
metadata file's JSON: read from this session's catalog through the JVM (``read``), or without
Spark from the file the embedded catalog's SQLite file points to (``FileReader``); a
``Reader`` is either, chosen once per job (``reader``).

``read`` costs one catalog look-up and no Spark job, where a metadata-table query
(``<table>.snapshots``, ``show tblproperties``) is a Spark job; the merge and staging read the
ledger, the snapshots and the kept types several times a merge (what that saved a `watch` tick:
docs/performance.md, "A `watch` tick, profiled"). It sees what those queries saw: the table
as the session's catalog holds it, the cache included (Iceberg's catalog cache; a commit of this
session refreshes it), or re-read from the catalog first with ``fresh``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sqlite3
import tempfile
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from pyspark.sql import SparkSession

from ingestion.config import names, settings
from ingestion.sources.locations import s3_client
from ingestion.sources.s3_uri import as_s3, is_s3, parse_s3_uri
from ingestion.spark import java_errors, spark_config

# Every read of a table's state this process made, by (what, table): its metadata (by its
# catalog name), its kept types, its ledger, its merge log rows. A test holds a merge to one
# of each (tests/merge/test_table_handle.py); nothing else reads it.
READS: Counter[tuple[str, str]] = Counter()


@dataclass(frozen=True)
class Snapshot:
    snapshot_id: int
    parent_id: int | None
    committed_at: datetime
    summary: dict[str, str]
    sequence_number: int = 0

    @property
    def operation(self) -> str:
        return self.summary.get("operation", "")


def _committed_at(millis: int) -> datetime:
    """Exact to the millisecond (no float rounding)."""
    return datetime.fromtimestamp(millis // 1000, UTC).replace(microsecond=millis % 1000 * 1000)


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
                _committed_at(int(s["timestamp-ms"])),
                {k: str(v) for k, v in (s.get("summary") or {}).items()},
                int(s.get("sequence-number") or 0),
            )
            for s in self.raw.get("snapshots") or []
        ]

    @property
    def current(self) -> Snapshot | None:
        current = self.raw.get("current-snapshot-id")
        return next((s for s in self.snapshots if s.snapshot_id == current), None)

    @property
    def newest(self) -> Snapshot | None:
        """The snapshot committed last (by time, then sequence number)."""
        return max(self.snapshots, key=lambda s: (s.committed_at, s.sequence_number), default=None)

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


def read(spark: SparkSession, name: str, fresh: bool = False) -> Metadata | None:
    """The metadata of the Iceberg table ``name`` (``catalog.namespace.table``) as this
    session's catalog holds it, re-read from the catalog first when ``fresh`` (the cached table
    refreshed in place, or loaded anew when another process created the table again); None
    when there is no such table."""
    READS[("metadata", name.replace("`", ""))] += 1
    return _loaded(spark, name, fresh)


def committed(spark: SparkSession, name: str) -> Metadata | None:
    """The metadata of ``name`` as this session's own last commit to it left it: the session
    catalog's cached table, which that commit updated in place, so no catalog look-up and no
    metadata file fetched (tests/spark/test_table_metadata.py moves the catalog's pointer away
    to show it) while Iceberg's catalog cache holds the table: 30 s after its last use; after
    that, a look-up that finds the same commit (decision 0016). The same call as ``read``
    without ``fresh``, counted apart, as ``("commit", name)``: it reads nothing another process
    wrote. Not after a commit that created or replaced the table: Iceberg's caching catalog
    drops a replaced table, and the next look-up is a read (``read``)."""
    READS[("commit", name.replace("`", ""))] += 1
    return _loaded(spark, name, fresh=False)


def _loaded(spark: SparkSession, name: str, fresh: bool) -> Metadata | None:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    try:
        table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, name)
    except Exception as exc:  # Spark's AnalysisException, as PySpark converts it
        if java_errors.missing(exc):
            return None
        raise
    operations = table.operations()
    try:
        current = operations.refresh() if fresh else operations.current()
    except Exception as exc:  # Iceberg's NoSuchTableException or IllegalStateException
        if not fresh:
            raise
        if java_errors.caused_by(exc, java_errors.NO_SUCH_TABLE):
            forget(spark, name)  # another process dropped it
            return None
        if not java_errors.caused_by(exc, java_errors.ILLEGAL_STATE):
            raise
        # Another process dropped the table and created it again since this session cached
        # it: the cached one cannot refresh into it (Iceberg's check that the table's UUID is
        # unchanged). Load it anew, as `refresh table` does; a table that still cannot be read
        # fails there, with its own error.
        forget(spark, name)
        return _loaded(spark, name, fresh=False)
    if current is None:  # the cached table's refresh found it dropped (an earlier fresh read)
        forget(spark, name)
        return None
    # Written by the JVM to a local file rather than returned: Py4J takes about 40 ms to return
    # a string of a few kilobytes (TCP's delayed acknowledgement), the file about 2 ms. The
    # driver's JVM always runs beside this process.
    with tempfile.TemporaryDirectory(prefix="lakehouse-metadata-") as folder:
        path = str(Path(folder) / "table.metadata.json")  # no .gz: written as plain JSON
        output = jvm.org.apache.iceberg.Files.localOutput(path)
        jvm.org.apache.iceberg.TableMetadataParser.overwrite(current, output)
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    return Metadata(str(current.metadataFileLocation()), raw)


def forget(spark: SparkSession, name: str) -> None:
    """Drop ``name`` from the session catalog's cache, without loading it (the next look-up
    reads the catalog)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    found = jvm.org.apache.iceberg.spark.Spark3Util.catalogAndIdentifier(spark._jsparkSession, name)
    found.catalog().invalidateTable(found.identifier())


# The metadata without Spark: the catalog's pointer to the current metadata file (Iceberg's JDBC
# catalog schema, table ``iceberg_tables``, in the SQLite file the target's profile names) and
# that file's JSON, for the targets whose catalog is a SQLite file.
WITHOUT_SPARK_TARGETS = ("local", "rehearsal")


def files() -> FileReader | None:
    """The reader without Spark, where it serves this process (a target whose catalog is a SQLite
    file, and the ``light`` extra installed); None where only a Spark session reads the catalog.
    A job that can avoid starting Spark asks it first (``reader``: the one for a job with a
    session)."""
    serves = (
        settings.target() in WITHOUT_SPARK_TARGETS
        and os.environ.get("LAKEHOUSE_NO_LIGHT") != "1"
        and importlib.util.find_spec("duckdb") is not None
    )
    return FileReader() if serves else None


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


def _read(location: str) -> bytes:
    if is_s3(as_s3(location)):
        bucket, key = parse_s3_uri(as_s3(location))
        return bytes(s3_client().get_object(Bucket=bucket, Key=key)["Body"].read())
    return Path(location.removeprefix("file:")).read_bytes()


def size_of(location: str) -> int:
    """The size of a metadata file, in bytes."""
    return len(_read(location))


class Reader(Protocol):
    """Where a job reads tables' metadata from: its Spark session's catalog, or the files."""

    def read(self, namespace: str, table: str, fresh: bool = False) -> Metadata | None: ...

    def unchanged(self, namespace: str, table: str, seen: Metadata | None) -> bool:
        """Whether ``seen`` is still the table's current metadata, told without reading it
        (False when this reader cannot tell)."""
        ...


@dataclass(frozen=True)
class SparkReader:
    """Through the session's catalog (``read``); ``fresh`` re-reads the catalog first."""

    spark: SparkSession

    def read(self, namespace: str, table: str, fresh: bool = False) -> Metadata | None:
        return read(self.spark, f"{names.CATALOG}.{namespace}.`{table}`", fresh=fresh)

    def unchanged(self, namespace: str, table: str, seen: Metadata | None) -> bool:
        return False  # only a read through the catalog would tell


@dataclass(frozen=True)
class FileReader:
    """From the metadata files, without a JVM (``files``): always as committed now."""

    def read(self, namespace: str, table: str, fresh: bool = False) -> Metadata | None:
        READS[("metadata", f"{names.CATALOG}.{namespace}.{table}")] += 1
        location = metadata_location(namespace, table)
        if location is None:
            return None
        return Metadata(location, json.loads(_read(location)))

    def unchanged(self, namespace: str, table: str, seen: Metadata | None) -> bool:
        """The catalog's pointer still names the file ``seen`` came from (None: still no
        table)."""
        location = metadata_location(namespace, table)
        return location == (seen.location if seen is not None else None)


def reader(spark: SparkSession | None) -> Reader:
    """The reader for a job: through Spark when it has a session, else from the files (the
    caller asked ``files`` first)."""
    return SparkReader(spark) if spark is not None else FileReader()
