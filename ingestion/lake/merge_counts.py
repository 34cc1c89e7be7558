"""What a merge changed in a final table: inserted, updated and deleted rows."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from ingestion.config import names
from ingestion.dynamodb.tables import TableConfig


@dataclass(frozen=True)
class MergeCounts:
    table: str
    rows: int
    inserted: int
    updated: int
    deleted: int
    batches: tuple[str, ...] = ()  # the batches this merge applied


def current_snapshot(spark: SparkSession, table: str) -> int | None:
    if not spark.catalog.tableExists(names.final_table(table)):
        return None
    row = (
        spark.table(f"{names.final_table(table)}.snapshots")
        .orderBy(F.col("committed_at").desc())
        .select("snapshot_id")
        .first()
    )
    return int(row["snapshot_id"]) if row else None


def diff_counts(
    spark: SparkSession, table: TableConfig, before: int | None, after: int | None
) -> MergeCounts:
    """Inserted / updated / deleted rows between two snapshots of the final table."""
    name = names.final_table(table.name)
    if after is None:
        return MergeCounts(table.name, 0, 0, 0, 0)
    now = spark.sql(f"select * from {name} version as of {after}")
    rows = now.count()
    kept = before is not None and not (
        spark.table(f"{name}.snapshots").where(f"snapshot_id = {int(before)}").isEmpty()
    )
    if not kept:  # first build, or a full refresh re-created the table
        return MergeCounts(table.name, rows, rows, 0, 0)
    if before == after:
        return MergeCounts(table.name, rows, 0, 0, 0)
    keys = [k.column for k in table.keys]
    old = spark.sql(f"select * from {name} version as of {before}")
    joined = old.select(
        *keys, F.col("_ingested_at").alias("old_at"), F.lit(True).alias("in_old")
    ).join(
        now.select(*keys, F.col("_ingested_at").alias("new_at"), F.lit(True).alias("in_new")),
        on=keys,
        how="full_outer",
    )
    counts = joined.agg(
        F.sum(F.when(F.col("in_old").isNull(), 1).otherwise(0)).alias("inserted"),
        F.sum(F.when(F.col("in_new").isNull(), 1).otherwise(0)).alias("deleted"),
        F.sum(
            F.when(
                F.col("in_old") & F.col("in_new") & (F.col("old_at") != F.col("new_at")), 1
            ).otherwise(0)
        ).alias("updated"),
    ).first()
    assert counts is not None
    return MergeCounts(
        table.name,
        rows,
        int(counts["inserted"] or 0),
        int(counts["updated"] or 0),
        int(counts["deleted"] or 0),
    )
