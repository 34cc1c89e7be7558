"""The verify log, ``lake.staging.dynamodb_lakehouse_verifies``: one row per ``verify`` run, so
``status`` shows when a table was last proved equal (ingestion.maintenance.status)."""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import SparkSession

from ingestion.config import clock, names
from ingestion.dynamodb.values import sql_string

OUTCOMES = ("equal", "missing", "extra", "different", "duplicate", "not_comparable")

LOG_COLUMNS = (
    "table_name string, export_arn string, export_time timestamp, verified_at timestamp, "
    "equal boolean, items bigint, equal_items bigint, missing bigint, extra bigint, "
    "different bigint, not_comparable bigint, duplicate bigint"
)
# Columns added after the log's first release, last (so an older log, given them before a run
# is appended, has the same order; its earlier runs read null there).
ADDED_COLUMNS = {"duplicate": "bigint"}
COUNTED = ("equal", "missing", "extra", "different", "not_comparable", "duplicate")  # log order


def forget_table(spark: SparkSession, table: str) -> None:
    """Every verify run of ``table`` out of the verify log (the table is removed or reset)."""
    log_table = names.verify_log_table()
    if spark.catalog.tableExists(log_table):
        spark.sql(f"delete from {log_table} where table_name = {sql_string(table)}")


def record_run(
    spark: SparkSession,
    table: str,
    export_arn: str,
    export_time: str,
    equal: bool,
    items: int,
    counts: dict[str, int],
) -> None:
    """Append one run of ``verify`` (``export_time`` in ISO 8601, ``counts`` per outcome) to
    ``lake.staging.dynamodb_lakehouse_verifies`` (one commit)."""
    log_table = names.verify_log_table()
    spark.sql(
        f"create table if not exists {log_table} ({LOG_COLUMNS}) using iceberg "
        "tblproperties ('format-version'='2', 'commit.retry.num-retries'='10')"
    )
    for column, kind in ADDED_COLUMNS.items():
        if column not in spark.table(log_table).columns:
            try:
                spark.sql(f"alter table {log_table} add column `{column}` {kind}")
            except Exception:  # another verify added it first (two schedules at once)
                spark.sql(f"refresh table {log_table}")
                if column not in spark.table(log_table).columns:
                    raise
    row = (
        table,
        export_arn,
        datetime.fromisoformat(export_time),
        clock.utc_now(),
        equal,
        items,
        *(counts[o] for o in COUNTED),
    )
    spark.createDataFrame([row], LOG_COLUMNS).writeTo(log_table).append()
