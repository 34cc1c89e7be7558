"""Snapshot expiry and orphan-file removal that keep the ledger and never break a running query.

Expiry keeps every snapshot younger than the retention (default 24 hours: set it longer than your
longest Athena query) and at least the last N, so a query that started on an older snapshot still
finds its files. Orphan files (written by a job that died before its commit) are removed only
when older than 3 days, so a commit under way never loses its files.

The ledger lives in the staging table's snapshot summaries; before its snapshots expire, one
empty commit carries every entry forward (``dynamodb-lakehouse.ledger``), as ``rebuild`` does.
Stream batches that are merged and older than the retention are left out of it: their change
files were deleted long ago, and the merge log no longer needs them.

The staging change log keeps, per key, what a merge or a rebuild still needs (``prune_change_log``):
its latest change (a later, older change is compared against it, so a late change never brings a
deleted item back) and every row of the newest full export (its version re-baselines a full
build). A change superseded by a later one of its key, merged, and ingested before the retention
goes.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from ingestion.catalog import ledger
from ingestion.config import clock, names
from ingestion.config.names import quote, quote_table
from ingestion.dynamodb import change_order
from ingestion.sources.stream_files import still_there

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Expiry:
    table: str
    snapshots: tuple[int, int]  # before, after
    files_deleted: int
    orphans_deleted: int


def snapshot_count(spark: SparkSession, name: str) -> int:
    return spark.table(f"{name}.snapshots").count()


def _droppable(entry: ledger.Entry, merged: set[str], cutoff: datetime) -> bool:
    """A stream batch, merged, committed before the cutoff: its entry may leave the ledger."""
    return (
        entry.kind == ledger.STREAM
        and entry.batch_id in merged
        and bool(entry.committed_at)
        and _committed(entry) < clock.utc(cutoff)
    )


def _committed(entry: ledger.Entry) -> datetime:
    """When the entry's commit was made, in UTC (an entry's time may be naive:
    the local zone of the process that wrote it)."""
    moment = datetime.fromisoformat(entry.committed_at)
    return clock.from_spark(moment) if moment.tzinfo is None else clock.utc(moment)


def _files_still_there(droppable: list[ledger.Entry], table: str) -> list[ledger.Entry]:
    """The entries among ``droppable`` whose change files are not all gone (a failed delete, a
    kill before cleanup): they stay in the ledger, or the next ingest would stage those files
    again. The next ingest deletes such files unstaged; a later maintenance drops the entry."""
    by_location: dict[str, list[ledger.Entry]] = {}
    for entry in droppable:
        by_location.setdefault(entry.source.rsplit("#", 1)[0], []).append(entry)
    kept = []
    for location, group in by_location.items():
        try:
            there = still_there(location, set().union(*(e.file_names for e in group)))
        except Exception as exc:  # cannot tell: keep them all (dropping could stage twice)
            log.warning(
                "staging.%s: cannot list %s (%s): stream entries kept", table, location, exc
            )
            kept += group
            continue
        stay = [e for e in group if e.file_names & there]
        if stay:
            log.warning(
                "staging.%s: %d stream batch(es) kept in the ledger: %d of their files are "
                "still in %s (the next ingest deletes them without staging them)",
                table,
                len(stay),
                len(there),
                location,
            )
        kept += stay
    return kept


def checkpoint_ledger(
    spark: SparkSession,
    table: str,
    merged: set[str],
    cutoff: datetime,
    before_commit: Callable[[], None] | None = None,
) -> datetime:
    """One empty commit on the staging table carrying the ledger; returns the time expiry may
    expire before: the checkpoint's commit time, or earlier when a batch was committed between
    the ledger's read and the checkpoint (``before_commit`` runs there: the race test's other
    writer). The checkpoint does not hold such a batch, so its own commit must stay."""
    name = names.staging_table(table)
    spark.sql(f"refresh table {name}")  # another process's commits, not a cached snapshot
    entries = ledger.entries(spark, table)
    kept = [e for e in entries if not _droppable(e, merged, cutoff)]
    kept += _files_still_there([e for e in entries if _droppable(e, merged, cutoff)], table)
    position = {id(e): number for number, e in enumerate(entries)}
    kept.sort(key=lambda e: position[id(e)])  # commit order, as the ledger is read
    if before_commit is not None:
        before_commit()
    (
        spark.table(name)
        .limit(0)
        .writeTo(name)
        .option(f"snapshot-property.{ledger.LEDGER}", json.dumps([asdict(e) for e in kept]))
        .option(f"snapshot-property.{ledger.MAINTAINED}", "true")
        .append()
    )
    log.info(
        "staging.%s: ledger carried forward (%d of %d entries)", table, len(kept), len(entries)
    )
    snapshots = spark.table(f"{name}.snapshots")
    committed = (
        snapshots.where(F.col("summary").getItem(ledger.LEDGER).isNotNull())
        .agg(F.max("committed_at"))
        .first()
    )
    checkpoint = clock.from_spark(committed[0]) if committed and committed[0] else clock.utc(cutoff)
    # Compare-and-set after the fact: an append never conflicts, so a batch committed between
    # the read above and the checkpoint is in no checkpoint; expiry must stop before it.
    held = [e.source for e in entries]
    late = (
        snapshots.where(F.col("summary").getItem(ledger.SOURCE).isNotNull())
        .where(~F.col("summary").getItem(ledger.SOURCE).isin(held) if held else F.lit(True))
        .where(F.col("committed_at") <= F.lit(checkpoint))
        .agg(F.min("committed_at"), F.count(F.lit(1)))
        .first()
    )
    if late and late[1]:
        log.warning(
            "staging.%s: %d batch(es) committed while the ledger was carried forward: their "
            "commits are kept (expiry stops before them); the next maintenance carries them",
            table,
            late[1],
        )
        return min(checkpoint, clock.from_spark(late[0]))
    return checkpoint


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
    name = names.quote_table(names.CATALOG, namespace, table)
    target = quote_table(namespace, table)  # names are validated: no quote inside
    before = snapshot_count(spark, name)
    expired = spark.sql(
        f"call {names.CATALOG}.system.expire_snapshots(table => '{target}', "
        f"older_than => {clock.sql_timestamp(older_than)}, retain_last => {retain_last})"
    ).first()
    deleted = sum(int(v or 0) for v in (expired.asDict().values() if expired else []))
    orphans = spark.sql(
        f"call {names.CATALOG}.system.remove_orphan_files(table => '{target}', "
        f"older_than => {clock.sql_timestamp(orphans_older_than)})"
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


def prune_change_log(
    spark: SparkSession, table: str, keys: list[str], merged: DataFrame, cutoff: datetime
) -> int:
    """Delete the staged changes that are superseded by a later change of their key, merged
    (their ``_batch_id`` in ``merged``, one column ``batch_id``) and ingested before ``cutoff``;
    the newest full export's rows stay. One commit; returns the rows deleted."""
    name = names.staging_table(table)
    staged = spark.table(name)
    newest_full = (
        change_order.full_export_rows(staged)
        .orderBy(F.col("_version").desc())
        .select("_batch_id")
        .limit(1)
    )
    by_key = Window.partitionBy(*keys)
    order = change_order.change_order()
    superseded = (
        staged.withColumn("_latest", F.max(order).over(by_key))
        .where(order < F.col("_latest"))
        .where(F.col("_ingested_at") < F.lit(clock.utc(cutoff)))
        .join(merged.select(F.col("batch_id").alias("_batch_id")), "_batch_id", "left_semi")
        .join(newest_full, "_batch_id", "left_anti")
        .select(
            *keys,
            "_version",
            F.coalesce(F.col("_sequence"), F.lit("")).alias("_sequence"),
            "_ingested_at",
            "_batch_id",
            "_operation",
        )
        .distinct()
        # Materialised (on the executors): computed once, and no longer a plan over the table
        # the DELETE below rewrites.
        .localCheckpoint()
    )
    if superseded.isEmpty():
        return 0
    superseded.createOrReplaceTempView("lakehouse_superseded_changes")
    before = spark.table(name).count()
    # DELETE, not MERGE: Spark 3.5 cannot resolve a MERGE into a table that accepts any schema
    # (`write.spark.accept-any-schema`, which staging tables set).
    columns = [*keys, "_version", "_ingested_at", "_batch_id", "_operation"]
    spark.sql(
        f"delete from {name} where ({', '.join(quote(c) for c in columns)}, "
        "coalesce(`_sequence`, '')) in (select "
        f"{', '.join(quote(c) for c in columns)}, `_sequence` from lakehouse_superseded_changes)"
    )
    deleted = before - spark.table(name).count()
    log.info(
        "staging.%s: %d superseded, merged changes removed from the change log", table, deleted
    )
    return deleted
