"""The merge log (``lake.staging.dynamodb_lakehouse_merges``): which staged batches are merged.

A batch is new to the merge when the ledger holds it and the merge log does not; the merge
records it only after ``dbt run`` succeeded. A final table's history keeps rows of its own
(``<table>__history``); a plain ``dbt run`` records each model's (macros/merge_log.sql).
"""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from ingestion.catalog import duckdb_engine, ledger, table_metadata
from ingestion.config import names
from ingestion.dynamodb.values import sql_string

MERGE_LOG = names.merge_log_table()


def ensure_merge_log(spark: SparkSession) -> None:
    # As macros/merge_log.sql (dynamodb_create_merge_log) creates it for a plain `dbt run`.
    spark.sql(
        f"create table if not exists {MERGE_LOG} "
        "(table_name string, batch_id string, merged_at timestamp) using iceberg "
        "tblproperties ('format-version'='2', 'commit.retry.num-retries'='10')"
    )


def logged_names(table: str, history: bool = False) -> list[str]:
    """The names a final table's batches are recorded under: its own, and its history's
    (``history: true``), which keeps rows of its own (a plain ``dbt run`` records each model's
    after it, macros/merge_log.sql)."""
    return [table, names.history_table(table)] if history else [table]


def new_batches(spark: SparkSession, table: str, history: bool = False) -> list[str]:
    """The ledger's batches (commit order) that the merge log does not hold yet: for the final
    table, or with ``history`` for either the final table or its history."""
    # small: maintenance compacts it with the ledger
    merged = merged_under(spark, logged_names(table, history))
    return unmerged(ledger.entries(spark, table), merged)


def unmerged(entries: list[ledger.Entry], merged: set[str]) -> list[str]:
    """The ledger's batches (commit order) the merge log does not hold, whatever read the two:
    Spark (``new_batches``) or the metadata and DuckDB (``new_batches_without_spark``)."""
    return [e.batch_id for e in entries if e.batch_id and e.batch_id not in merged]


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
    """Take batches out of the merge log (the final table's rows and its history's), so the
    next merge applies them (again: a no-op for rows already merged, the latest change per key
    wins)."""
    if batches:
        ensure_merge_log(spark)
        listed = ", ".join(sql_string(b) for b in batches)
        spark.sql(
            f"delete from {MERGE_LOG} where table_name in ({_both(table)}) "
            f"and batch_id in ({listed})"
        )


def _both(table: str) -> str:
    return ", ".join(sql_string(n) for n in logged_names(table, history=True))


# The last read of each table's merged batches, by the merge log's metadata file: a new commit
# writes a new one, so an unchanged file means unchanged rows. A tick asks three times (its
# news, the drift check, the merge); the rows are read once (a Spark job of about 0.15 s).
_read: dict[str, tuple[str, frozenset[str]]] = {}


def merged_batches(spark: SparkSession, table: str) -> set[str]:
    """The batches of ``table`` the merge log holds (as this session's catalog sees the log)."""
    return merged_under(spark, [table])


def merged_under(spark: SparkSession, logged_as: list[str]) -> set[str]:
    """The batches the merge log holds under every name of ``logged_as`` (a final table's, and
    its history's), its metadata and rows read once for all of them."""
    table_metadata.READS[("merge log", logged_as[0])] += 1
    metadata = table_metadata.read(spark, MERGE_LOG)
    if metadata is None:  # no merge yet: created by the first (``ensure_merge_log``)
        return set()
    version = metadata.location
    found = {n: _read[n][1] for n in logged_as if n in _read and _read[n][0] == version}
    wanted = [n for n in logged_as if n not in found]
    if wanted:
        rows = (
            spark.table(MERGE_LOG)
            .where(F.col("table_name").isin(wanted))
            .select("table_name", "batch_id")
            .collect()
        )  # one row per merged batch
        for name in wanted:
            found[name] = frozenset(r["batch_id"] for r in rows if r["table_name"] == name)
            _read[name] = (version, found[name])
    return set.intersection(*(set(found[n]) for n in logged_as))


def forget_table(spark: SparkSession, table: str) -> None:
    """Every row of ``table`` (and of its history) out of the merge log (the table is removed
    or reset)."""
    if spark.catalog.tableExists(MERGE_LOG):
        spark.sql(f"delete from {MERGE_LOG} where table_name in ({_both(table)})")


def new_batches_without_spark(table: str, history: bool = False) -> list[str]:
    """``new_batches`` without Spark (``table_metadata.files``): the ledger and the merge log
    read from their metadata and data files."""
    merged = merged_without_spark(logged_names(table, history))
    return unmerged(ledger.entries(table_metadata.FileReader(), table), merged)


def merged_without_spark(logged_as: list[str]) -> set[str]:
    """``merged_under`` read with DuckDB: one query for every name of ``logged_as``."""
    table_metadata.READS[("merge log", logged_as[0])] += 1
    marks = ", ".join("?" for _ in logged_as)
    rows = duckdb_engine.query(
        names.STAGING,
        names.MERGE_LOG,
        f"select table_name, batch_id from {{table}} where table_name in ({marks})",
        list(logged_as),
    )
    return set.intersection(*({str(b) for t, b in rows if t == n} for n in logged_as))
