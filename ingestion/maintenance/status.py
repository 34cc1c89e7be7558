"""Where a table stands: its ledger, what is staged but not merged, the final table's size."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from ingestion.catalog import duckdb_engine, ledger, merge_log, table_metadata
from ingestion.config import names
from ingestion.dynamodb.entities import final_tables
from ingestion.dynamodb.tables import load_tables
from ingestion.maintenance import compaction
from ingestion.staging import chain


@dataclass(frozen=True)
class TableStatus:
    table: str
    entries: list[ledger.Entry]  # the ledger, in commit order
    pending: list[str]  # ids of the staged batches the merge log lacks
    unmerged_rows: int  # their rows
    final_rows: int  # 0 before the first merge
    health: str | None  # the final table's files and snapshots, and its last maintenance
    last_verify: str | None = None  # the last `verify` run, in one line; None: never verified

    @property
    def last_applied(self) -> str:
        return max((e.end for e in self.entries if e.end), default="never")

    @property
    def gaps(self) -> list[chain.Window]:
        """Gaps left in the chain of exports with ``--allow-gap`` and not filled yet."""
        return chain.open_gaps(self.entries)


def keeps_history(table: str) -> bool:
    """Whether the final table ``table`` keeps a history (its entry's ``history``): a batch is
    then pending until the final table and its history both hold it."""
    return any(
        final.history
        for entry in load_tables().values()
        for final in final_tables(entry)
        if final.name == table
    )


def table_status(spark: SparkSession, table: str) -> TableStatus:
    merge_log.ensure_merge_log(spark)
    pending = merge_log.new_batches(spark, table, keeps_history(table))
    unmerged = (
        spark.table(names.staging_table(table)).where(F.col("_batch_id").isin(pending)).count()
        if pending
        else 0
    )
    final = names.final_table(table)
    final_rows = spark.table(final).count() if spark.catalog.tableExists(final) else 0
    return TableStatus(
        table=table,
        entries=ledger.entries(spark, table),
        pending=pending,
        unmerged_rows=unmerged,
        final_rows=final_rows,
        health=compaction.health(spark, table),
        last_verify=_last_verify(_spark_rows(spark, table)),
    )


# The last verify run's columns, as `status` reads them (ingestion.maintenance.verify.record).
_LAST_VERIFY = "select * from {table} where table_name = ? order by verified_at desc limit 1"


def _spark_rows(spark: SparkSession, table: str) -> list[tuple]:
    if not spark.catalog.tableExists(names.verify_log_table()):
        return []
    sql = _LAST_VERIFY.format(table=names.verify_log_table())
    return [tuple(r) for r in spark.sql(sql, args=[table]).collect()]  # one row at most


def _last_verify(rows: list[tuple]) -> str | None:
    """The last verify run in one line, from ``_LAST_VERIFY``'s row (none: never verified)."""
    if not rows:
        return None
    # The log's columns in order (verify_log.LOG_COLUMNS); a log older than the duplicate
    # column has one fewer.
    _, arn, _, at, equal, _, *counts = rows[0]
    labels = ("equal", "missing", "extra", "different", "not comparable", "duplicate")
    found = ", ".join(
        f"{n} {label}"
        for n, label in zip(counts, labels, strict=False)
        if label != "duplicate" or n  # shown when found (null in runs before the column)
    )
    verdict = "EQUAL" if equal else "NOT EQUAL"
    return f"{str(at)[:19]} against export {arn.rsplit('/', 1)[-1]}: {verdict} ({found})"


def status_without_spark(table: str) -> TableStatus:
    """``table_status`` without Spark (``catalog.table_metadata.files``): the ledger from the
    staging table's metadata, counts from DuckDB scans that honour delete files (equal to Spark's
    before ``maintain``)."""
    history = table_metadata.metadata_location(names.FINAL, names.history_table(table)) is not None
    pending = merge_log.new_batches_without_spark(table, history)
    unmerged = 0
    if pending:
        marks = ", ".join("?" for _ in pending)
        rows = duckdb_engine.query(
            names.STAGING,
            names.STAGING_OF.get(table, table),  # an entity table's: its entry's change log
            f"select count(*) from {{table}} where _batch_id in ({marks})",
            pending,
        )
        unmerged = int(rows[0][0]) if rows else 0
    final = duckdb_engine.query(names.FINAL, table, "select count(*) from {table}")
    return TableStatus(
        table=table,
        entries=ledger.entries(table_metadata.FileReader(), table),
        pending=pending,
        unmerged_rows=unmerged,
        final_rows=int(final[0][0]) if final else 0,
        health=health_without_spark(table),
        last_verify=_last_verify(
            duckdb_engine.query(names.STAGING, names.VERIFY_LOG, _LAST_VERIFY, [table])
        ),
    )


def health_without_spark(table: str) -> str | None:
    """``compaction.health`` from the final table's metadata: its current snapshot's summary
    (files, sizes), its snapshots, the metadata file's size, the last ``maintain``."""
    files = table_metadata.FileReader()
    final = files.read(names.FINAL, table)
    if final is None:
        return None
    summary = final.current.summary if final.current else {}
    data = int(summary.get("total-data-files", 0))
    deletes = int(summary.get("total-delete-files", 0))
    size = int(summary.get("total-files-size", 0))
    staging = files.read(names.STAGING, names.STAGING_OF.get(table, table))
    maintained = max(
        (s.committed_at for s in staging.snapshots if ledger.MAINTAINED in s.summary)
        if staging
        else (),
        default=None,
    )
    average = size / data / 2**20 if data else 0.0
    return (
        f"{data} data files (average {average:.1f} MB), {deletes} delete files, "
        f"{len(final.snapshots)} snapshots, metadata "
        f"{table_metadata.size_of(final.location) / 1024:.0f} KB, "
        f"last maintenance: {maintained.replace(tzinfo=None) if maintained else 'never'}"
    )
