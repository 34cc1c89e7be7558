"""An Iceberg table's metadata (snapshots with their summaries, properties, columns) as the
metadata file's JSON: read from this session's catalog through the JVM (``read``), or from the
file itself without Spark (``ingestion.without_spark.iceberg_metadata``).

``read`` costs one catalog look-up and no Spark job, where a metadata-table query
(``<table>.snapshots``, ``show tblproperties``) is a Spark job; the merge and staging read the
ledger, the snapshots and the kept types several times a merge (what that saved a `watch` tick:
docs/performance.md, "A `watch` tick, profiled"). It sees what those queries saw: the table
as the session's catalog holds it, the cache included (Iceberg's catalog cache; a commit of this
session refreshes it), or re-read from the catalog first with ``fresh``.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

# What Spark says of a table or namespace that does not exist.
MISSING = ("TABLE_OR_VIEW_NOT_FOUND", "SCHEMA_NOT_FOUND", "NoSuchTableException")


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
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    try:
        table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, name)
    except Exception as exc:  # Spark's AnalysisException, as PySpark converts it
        if any(marker in str(exc) for marker in MISSING):
            return None
        raise
    operations = table.operations()
    try:
        current = operations.refresh() if fresh else operations.current()
    except Exception as exc:  # Iceberg's NoSuchTableException or IllegalStateException
        if fresh and "NoSuchTableException" in str(exc):
            _forget(spark, name)  # another process dropped it
            return None
        if not fresh or "UUID does not match" not in str(exc):
            raise
        # Another process dropped the table and created it again since this session cached
        # it: the cached one cannot refresh into it. Load it anew, as `refresh table` does.
        _forget(spark, name)
        return read(spark, name)
    if current is None:  # the cached table's refresh found it dropped (an earlier fresh read)
        _forget(spark, name)
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


def _forget(spark: SparkSession, name: str) -> None:
    """Drop ``name`` from the session catalog's cache, without loading it (the next look-up
    reads the catalog)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    found = jvm.org.apache.iceberg.spark.Spark3Util.catalogAndIdentifier(spark._jsparkSession, name)
    found.catalog().invalidateTable(found.identifier())
