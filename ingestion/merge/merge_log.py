"""The merge log (``lake.staging.dynamodb_lakehouse_merges``): which staged batches are merged.

A batch is new to the merge when the ledger holds it and the merge log does not; the merge
records it only after ``dbt run`` succeeded.
"""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from ingestion.config import names
from ingestion.dynamodb.values import sql_string
from ingestion.staging import ledger

MERGE_LOG = names.merge_log_table()


def ensure_merge_log(spark: SparkSession) -> None:
    spark.sql(
        f"create table if not exists {MERGE_LOG} "
        "(table_name string, batch_id string, merged_at timestamp) using iceberg "
        "tblproperties ('format-version'='2', 'commit.retry.num-retries'='10')"
    )


def new_batches(spark: SparkSession, table: str) -> list[str]:
    """The ledger's batches (commit order) that the merge log does not hold yet."""
    merged = {
        row["batch_id"]
        for row in spark.table(MERGE_LOG).where(F.col("table_name") == table).collect()
    }  # one row per merged batch: small (maintenance compacts it with the ledger)
    return [
        e.batch_id for e in ledger.entries(spark, table) if e.batch_id and e.batch_id not in merged
    ]


def record_merged(spark: SparkSession, batches: dict[str, list[str]]) -> None:
    rows = [(table, batch) for table, ids in batches.items() for batch in ids]
    if rows:
        (
            spark.createDataFrame(rows, "table_name string, batch_id string")
            .withColumn("merged_at", F.current_timestamp())
            .writeTo(MERGE_LOG)
            .append()
        )


def forget(spark: SparkSession, table: str, batches: list[str]) -> None:
    """Take batches out of the merge log, so the next merge applies them (again: a no-op for
    rows already merged, the latest change per key wins)."""
    if batches:
        ensure_merge_log(spark)
        listed = ", ".join(sql_string(b) for b in batches)
        spark.sql(
            f"delete from {MERGE_LOG} where table_name = {sql_string(table)} "
            f"and batch_id in ({listed})"
        )
