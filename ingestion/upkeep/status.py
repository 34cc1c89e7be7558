"""Where a table stands: its ledger, what is staged but not merged, the final table's size."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from ingestion.config import names
from ingestion.merge import merge_log
from ingestion.staging import chain, ledger
from ingestion.upkeep import maintenance


@dataclass(frozen=True)
class TableStatus:
    table: str
    entries: list[ledger.Entry]  # the ledger, in commit order
    pending: list[str]  # ids of the staged batches the merge log lacks
    unmerged_rows: int  # their rows
    final_rows: int  # 0 before the first merge
    health: str | None  # the final table's files and snapshots, and its last maintenance

    @property
    def last_applied(self) -> str:
        return max((e.end for e in self.entries if e.end), default="never")

    @property
    def gaps(self) -> list[chain.Window]:
        """Gaps left in the chain of exports with ``--allow-gap`` and not filled yet."""
        return chain.open_gaps(self.entries)


def table_status(spark: SparkSession, table: str) -> TableStatus:
    merge_log.ensure_merge_log(spark)
    pending = merge_log.new_batches(spark, table)
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
        health=maintenance.health(spark, table),
    )
