"""Maintenance that never breaks a running query: compaction, then expiry
(ingestion.maintenance.expiry).

Compaction: ``rewrite_data_files`` turns small files and files with position deletes into fewer,
bigger files with the deletes applied, then drops the delete files that no longer apply
(``remove-dangling-deletes``); ``rewrite_manifests`` once manifests pile up. These are ordinary
Iceberg commits: the files they replace stay on storage, still referenced by the older snapshots
a running query reads, until expiry removes snapshots older than the retention.
(``rewrite_position_delete_files`` is not used: Iceberg 1.10 fails on it for a table with an
array-of-struct column, "Invalid partition field parent", as `books` has.)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from ingestion.catalog import ledger, merge_log, table_metadata
from ingestion.config import clock, names
from ingestion.config.names import quote_table
from ingestion.dynamodb.entities import final_tables
from ingestion.dynamodb.tables import TableConfig
from ingestion.maintenance import expiry
from ingestion.merge import runner
from ingestion.spark import spark_config
from ingestion.staging import append

log = logging.getLogger(__name__)

MIN_INPUT_FILES = 5  # compact once this many small files (or files with deletes) pile up
MAX_MANIFESTS = 10  # rewrite manifests beyond this many
DEFAULT_RETENTION = timedelta(hours=24)  # longer than your longest Athena query
DEFAULT_KEEP_SNAPSHOTS = 5
ORPHAN_AGE = timedelta(days=3)
# How often a ``watch`` runs the expiry after compaction (the change log's retention, the ledger
# checkpoint, expiry, orphans, duplicate batches): each acts only on what is older than the
# retention (24 h) or the orphan age (3 days), or (the duplicate batches a killed ingest left) on
# copies of a committed batch that change no merge's result; run every few ticks it found
# nothing and cost a watch tick about 4 s (bench/freshness.py). Hourly, by the staging table's
# last maintenance (or its first commit), which a restarted watch sees too.
EXPIRY_EVERY = timedelta(hours=1)


@dataclass(frozen=True)
class Compaction:
    table: str
    data_files: tuple[int, int]  # live data files (before, after)
    delete_files: tuple[int, int]  # live position-delete files (before, after)
    rewritten_data_files: int
    seconds: float


def live_files(spark: SparkSession, table: str) -> tuple[int, int]:
    """(data files, delete files) of the table's current snapshot (metadata only)."""
    rows = (
        spark.table(f"{names.final_table(table)}.files")
        .groupBy("content")
        .count()
        .collect()  # at most three rows: data, position deletes, equality deletes
    )
    counts = {r["content"]: int(r["count"]) for r in rows}
    return counts.get(0, 0), counts.get(1, 0) + counts.get(2, 0)


def compact(spark: SparkSession, table: str) -> Compaction:
    started = time.monotonic()
    name = f"{names.FINAL}.{table}"
    if not spark.catalog.tableExists(f"{names.CATALOG}.{name}"):
        return Compaction(table, (0, 0), (0, 0), 0, 0.0)
    before = live_files(spark, table)
    target = quote_table(names.FINAL, table)  # table names are validated: no quote inside
    data = spark.sql(
        f"call {names.CATALOG}.system.rewrite_data_files(table => '{target}', options => map("
        f"'min-input-files', '{MIN_INPUT_FILES}', 'delete-file-threshold', '1', "
        # New files get a new sequence number, so the position deletes they absorbed no longer
        # apply to any live file and are dropped (with the default `true` they would still
        # "apply" to the rewritten files by sequence number and stay). A merge committing
        # meanwhile makes the rewrite fail its validation, never apply wrongly.
        "'use-starting-sequence-number', 'false', 'remove-dangling-deletes', 'true'))"
    ).first()
    counts = data.asDict() if data else {}
    after = live_files(spark, table)
    if after[1]:
        # Position deletes older than every live data file no longer apply to any row. In an
        # unpartitioned table Iceberg drops them table-wide on the NEXT merging commit (its
        # dangling-delete action skips such tables), so the deletes of the merges since the
        # previous compaction would stay until a later merge. A metadata-only delete of no row
        # (no `_version` is negative) is that commit: it removes them now.
        spark.sql(f"delete from {names.final_table(table)} where `_version` < 0")
        after = live_files(spark, table)
    result = Compaction(
        table,
        (before[0], after[0]),
        (before[1], after[1]),
        int(counts.get("rewritten_data_files_count") or 0),
        time.monotonic() - started,
    )
    log.info(
        "%s: data files %d -> %d, delete files %d -> %d (%.1fs)",
        name,
        *result.data_files,
        *result.delete_files,
        result.seconds,
    )
    return result


def summed(table: str, compactions: list[Compaction]) -> Compaction:
    """The compactions of a single-table design's entity tables, as one."""

    def total(name: str, i: int) -> int:
        return sum(getattr(c, name)[i] for c in compactions)

    return Compaction(
        table,
        (total("data_files", 0), total("data_files", 1)),
        (total("delete_files", 0), total("delete_files", 1)),
        sum(c.rewritten_data_files for c in compactions),
        sum(c.seconds for c in compactions),
    )


def rewrite_manifests(spark: SparkSession, table: str) -> int:
    """Rewrite the manifests of the final table when more than ``MAX_MANIFESTS``; returns how
    many were rewritten."""
    name = names.final_table(table)
    if spark.table(f"{name}.manifests").count() <= MAX_MANIFESTS:
        return 0
    target = quote_table(names.FINAL, table)
    row = spark.sql(f"call {names.CATALOG}.system.rewrite_manifests('{target}')").first()
    return int(row["rewritten_manifests_count"]) if row else 0


@dataclass(frozen=True)
class Report:
    table: str
    compaction: Compaction
    manifests_rewritten: int
    expired: tuple[expiry.Expiry, ...] = field(default=())
    seconds: float = 0.0
    pruned: int = 0  # superseded, merged changes removed from the staging change log
    expiry_due: datetime | None = None  # compaction only: when the rest is due (``watch``)

    def lines(self) -> list[str]:
        c = self.compaction
        rest = (
            f"retention and expiry next due {self.expiry_due:%Y-%m-%d %H:%M} UTC"
            if self.expiry_due
            else f"{self.pruned} superseded changes removed from staging"
        )
        out = [
            f"{self.table}: data files {c.data_files[0]} -> {c.data_files[1]}, delete files "
            f"{c.delete_files[0]} -> {c.delete_files[1]}, manifests rewritten "
            f"{self.manifests_rewritten}, {rest} ({self.seconds:.1f}s)"
        ]
        out += [
            f"  {e.table}: snapshots {e.snapshots[0]} -> {e.snapshots[1]}, "
            f"{e.files_deleted} files deleted with them, {e.orphans_deleted} orphan files removed"
            for e in self.expired
        ]
        return out


def maintain(
    spark: SparkSession,
    table: TableConfig,
    retention: timedelta = DEFAULT_RETENTION,
    keep_snapshots: int = DEFAULT_KEEP_SNAPSHOTS,
    now: datetime | None = None,
    expiry_every: timedelta | None = None,
) -> Report:
    """Compact the final table (and its history), carry the staging ledger forward, expire snapshots
    older than ``retention`` (keeping ``keep_snapshots``) and remove old orphan files, for the final
    table, its history, the staging change log and the merge log. With ``expiry_every`` (``watch``),
    only compact when the last maintenance is more recent than that."""
    started = time.monotonic()
    now = clock.utc(now) if now else clock.utc_now()  # a naive ``now`` is UTC
    finals = [f.name for f in final_tables(table)]  # a single-table design's: one per entity
    # and their histories (``history: true``, docs/history.md): compacted and expired alike
    kept = finals + [
        names.history_table(f)
        for f in finals
        if spark.catalog.tableExists(names.final_table(names.history_table(f)))
    ]
    compactions = [compact(spark, final) for final in kept]
    compaction = compactions[0] if len(compactions) == 1 else summed(table.name, compactions)
    manifests = sum(
        rewrite_manifests(spark, final)
        for final in kept
        if spark.catalog.tableExists(names.final_table(final))
    )
    due = expiry_due(spark, table.name, expiry_every) if expiry_every else None
    # A tenth of the period early counts as due: a watch maintains every few ticks, and with a
    # cadence close to the period (60 ticks of 60 s) an exact test would find it due seconds
    # after each maintaining tick, and run it every other time.
    if expiry_every and due is not None and due - expiry_every / 10 > now:
        return Report(
            table.name, compaction, manifests, seconds=time.monotonic() - started, expiry_due=due
        )
    cutoff, orphans = now - retention, now - ORPHAN_AGE
    expired, pruned = [], 0
    if spark.catalog.tableExists(names.staging_table(table.name)):
        merge_log.ensure_merge_log(spark)
        # A batch counts as merged once every final table fed by the change log holds it, and
        # every history too (``history: true``: the versions it still needs are in the log).
        recorded = [
            n for f in final_tables(table) for n in merge_log.logged_names(f.name, f.history)
        ]
        logged = spark.table(merge_log.MERGE_LOG).where(F.col("table_name").isin(recorded))
        merged_everywhere = (
            logged.groupBy("batch_id")
            .agg(F.countDistinct("table_name").alias("finals"))
            .where(F.col("finals") == len(recorded))
            .select("batch_id")
        )
        merged = {r["batch_id"] for r in merged_everywhere.collect()}  # one row per batch
        append.remove_duplicate_batches(spark, table.name)
        pruned = expiry.prune_change_log(
            spark, table.name, [k.column for k in table.keys], merged_everywhere, cutoff
        )
        # The checkpoint comes last and is never expired: it alone holds the ledger of the
        # commits expiry removes.
        checkpoint = expiry.checkpoint_ledger(spark, table.name, merged, cutoff)
        expired.append(
            expiry.expire(
                spark, names.STAGING, table.name, min(cutoff, checkpoint), keep_snapshots, orphans
            )
        )
        expired.append(
            expiry.expire(spark, names.STAGING, names.MERGE_LOG, cutoff, keep_snapshots, orphans)
        )
    for final in kept:
        if spark.catalog.tableExists(names.final_table(final)):
            expired.append(
                expiry.expire(spark, names.FINAL, final, cutoff, keep_snapshots, orphans)
            )
    return Report(
        table.name, compaction, manifests, tuple(expired), time.monotonic() - started, pruned
    )


def maintain_tables(
    tables: list[TableConfig],
    retention: timedelta,
    keep_snapshots: int,
    say: Callable[[str], None],
    check: bool = True,
) -> None:
    """``maintain`` over several tables: each one ``maintain``ed, then (``check``) the whole
    tables tested: a merge tests only the keys its batches touched."""
    spark = spark_config.build_spark("maintain")
    for table in tables:
        say("\n".join(maintain(spark, table, retention, keep_snapshots).lines()))
    if check:
        checked, left = runner.full_check(spark, tables)
        if checked:
            say(f"full check (dbt test of whole tables): {', '.join(checked)}: passed")
        for name in left:
            say(f"full check: {name} left out (no final table, or batches not merged yet)")


def expiry_due(spark: SparkSession, table: str, every: timedelta) -> datetime | None:
    """When the expiry after compaction is next due: ``every`` after the staging table's last
    maintenance, or after its first commit when it has none; None without a staging table."""
    metadata = table_metadata.read(spark, names.staging_table(table))
    snapshots = metadata.snapshots if metadata is not None else []
    maintained = [s.committed_at for s in snapshots if ledger.MAINTAINED in s.summary]
    since = max(maintained, default=None) or min((s.committed_at for s in snapshots), default=None)
    return since + every if since is not None else None


def metadata_bytes(spark: SparkSession, name: str) -> int:
    """Bytes of the table's current metadata: its metadata file, manifest list and manifests
    (what every query and commit reads first)."""
    current = spark.table(f"{name}.metadata_log_entries").orderBy(F.col("timestamp").desc()).first()
    snapshot = spark.table(f"{name}.snapshots").orderBy(F.col("committed_at").desc()).first()
    files = [current["file"]] if current else []
    if snapshot and snapshot["manifest_list"]:
        files.append(snapshot["manifest_list"])
    jvm = spark.sparkContext._jvm  # Hadoop's FileSystem: the same paths Spark reads (s3a://...)
    conf = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    size = 0
    for file in files:
        path = jvm.org.apache.hadoop.fs.Path(file)  # type: ignore[union-attr]
        size += path.getFileSystem(conf).getFileStatus(path).getLen()
    manifests = spark.table(f"{name}.manifests").agg(F.sum("length")).first()
    return size + int(manifests[0] or 0 if manifests else 0)


def health(spark: SparkSession, table: str) -> str | None:
    """One line on the final table's files, snapshots, metadata and last maintenance (metadata
    tables only), or None."""
    if not spark.catalog.tableExists(names.final_table(table)):
        return None
    name = names.final_table(table)
    files = (
        spark.table(f"{name}.files")
        .groupBy("content")
        .agg(F.count(F.lit(1)).alias("n"), F.sum("file_size_in_bytes").alias("bytes"))
        .collect()
    )  # at most three rows
    by_content = {r["content"]: (int(r["n"]), int(r["bytes"] or 0)) for r in files}
    data, size = by_content.get(0, (0, 0))
    deletes = sum(n for c, (n, _) in by_content.items() if c != 0)
    snaps = spark.table(f"{name}.snapshots")
    maintained = None
    if spark.catalog.tableExists(names.staging_table(table)):
        last = (
            spark.table(f"{names.staging_table(table)}.snapshots")
            .where(F.col("summary").getItem(ledger.MAINTAINED).isNotNull())
            .agg(F.max("committed_at"))
            .first()
        )
        maintained = last[0] if last else None
    average = size / data / 2**20 if data else 0.0
    return (
        f"{data} data files (average {average:.1f} MB), {deletes} delete files, "
        f"{snaps.count()} snapshots, metadata {metadata_bytes(spark, name) / 1024:.0f} KB, "
        f"last maintenance: {maintained or 'never'}"
    )
