"""Snapshot expiry and orphan-file removal that keep the ledger and never break a running query.

Expiry keeps every snapshot younger than the retention (default 24 hours: set it longer than your
longest Athena query) and at least the last N, so a query that started on an older snapshot still
finds its files. Orphan files (written by a job that died before its commit) are removed only
when older than 3 days, so a commit under way never loses its files.

The ledger lives in the staging table's snapshot summaries; before its snapshots expire, one
empty commit carries every entry forward (``dynamodb-lakehouse.ledger``), as ``rebuild`` does.
Stream batches that are merged and older than the retention are left out of it: their change
files were deleted long ago, and the merge log no longer needs them.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from datetime import datetime

from pyspark.sql import SparkSession

from ingestion import ledger
from ingestion.naming import quote_table

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Expiry:
    table: str
    snapshots: tuple[int, int]  # before, after
    files_deleted: int
    orphans_deleted: int


def snapshot_count(spark: SparkSession, name: str) -> int:
    return spark.table(f"{name}.snapshots").count()


def checkpoint_ledger(spark: SparkSession, table: str, merged: set[str], cutoff: datetime) -> int:
    """One empty commit on the staging table carrying the ledger; returns the entries carried."""
    entries = ledger.entries(spark, table)
    kept = [
        e
        for e in entries
        if not (
            e.kind == ledger.STREAM
            and e.batch_id in merged
            and e.committed_at
            and datetime.fromisoformat(e.committed_at) < cutoff
        )
    ]
    name = quote_table("lake", "staging", table)
    (
        spark.table(name)
        .limit(0)
        .writeTo(name)
        .option(f"snapshot-property.{ledger.LEDGER}", json.dumps([asdict(e) for e in kept]))
        .append()
    )
    log.info(
        "staging.%s: ledger carried forward (%d of %d entries)", table, len(kept), len(entries)
    )
    return len(kept)


def expire(
    spark: SparkSession,
    namespace: str,
    table: str,
    older_than: datetime,
    retain_last: int,
    orphans_older_than: datetime,
) -> Expiry:
    """Expire snapshots older than ``older_than`` (keeping the last ``retain_last``), then remove
    orphan files older than ``orphans_older_than``."""
    name = quote_table("lake", namespace, table)
    target = quote_table(namespace, table)  # names are validated: no quote inside
    before = snapshot_count(spark, name)
    expired = spark.sql(
        f"call lake.system.expire_snapshots(table => '{target}', "
        f"older_than => timestamp '{older_than:%Y-%m-%d %H:%M:%S.%f}', retain_last => {retain_last})"
    ).first()
    deleted = sum(int(v or 0) for v in (expired.asDict().values() if expired else []))
    orphans = spark.sql(
        f"call lake.system.remove_orphan_files(table => '{target}', "
        f"older_than => timestamp '{orphans_older_than:%Y-%m-%d %H:%M:%S.%f}')"
    ).count()
    after = snapshot_count(spark, name)
    log.info(
        "%s.%s: snapshots %d -> %d, %d files deleted, %d orphan files removed",
        namespace,
        table,
        before,
        after,
        deleted,
        orphans,
    )
    return Expiry(f"{namespace}.{table}", (before, after), deleted, orphans)
