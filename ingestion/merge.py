"""Run the dbt merge (`dbt run` + `dbt test`) and measure what it changed in each final table."""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from ingestion import faults, settings
from ingestion.naming import quote_table
from ingestion.tables import TableConfig

log = logging.getLogger(__name__)

FINAL_NAMESPACE = "lakehouse"


class DbtError(RuntimeError):
    """A dbt command failed."""


@dataclass(frozen=True)
class MergeCounts:
    table: str
    rows: int
    inserted: int
    updated: int
    deleted: int


def final_table(table: str) -> str:
    return quote_table("lake", FINAL_NAMESPACE, table)


def current_snapshot(spark: SparkSession, table: str) -> int | None:
    if not spark.catalog.tableExists(f"lake.{FINAL_NAMESPACE}.{table}"):
        return None
    row = (
        spark.table(f"{final_table(table)}.snapshots")
        .orderBy(F.col("committed_at").desc())
        .select("snapshot_id")
        .first()
    )
    return int(row["snapshot_id"]) if row else None


def diff_counts(
    spark: SparkSession, table: TableConfig, before: int | None, after: int | None
) -> MergeCounts:
    """Inserted / updated / deleted rows between two snapshots of the final table."""
    name = final_table(table.name)
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


def dbt_invoke(args: list[str]) -> None:
    """Run one dbt command in this process (it shares this process's SparkSession)."""
    from dbt.cli.main import dbtRunner

    settings.export_environment()
    project = settings.project_dir()
    full = [*args, "--project-dir", str(project), "--profiles-dir", str(project / "profiles")]
    log.info("dbt %s", " ".join(args))
    callbacks: list[Any] = []
    if os.environ.get("LAKEHOUSE_FAULT") == "during-merge":  # the crash tests (ingestion.faults)

        def on_event(event: Any) -> None:
            if "merge into" in str(getattr(event.data, "sql", "")).lower():
                faults.point("during-merge")

        callbacks.append(on_event)
    result = dbtRunner(callbacks=callbacks).invoke(full)
    if not result.success:
        detail = f": {result.exception}" if result.exception else ""
        raise DbtError(f"`dbt {' '.join(args)}` failed{detail} (see the dbt output above)")


def selector(tables: list[TableConfig]) -> list[str]:
    return ["--select", *[f"stg_dynamodb__{t.name}+" for t in tables]]


MERGE_LOG = "lake.staging.dynamodb_lakehouse_merges"


def ensure_merge_log(spark: SparkSession) -> None:
    spark.sql(
        f"create table if not exists {MERGE_LOG} "
        "(table_name string, batch_id string, merged_at timestamp) using iceberg "
        "tblproperties ('format-version'='2')"
    )


def new_batches(spark: SparkSession, table: str) -> list[str]:
    """The ledger's batches (commit order) that the merge log does not hold yet."""
    from ingestion import ledger

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


def run_merge(
    spark: SparkSession, tables: list[TableConfig], full_refresh: bool = False, test: bool = True
) -> tuple[list[MergeCounts], float]:
    """`dbt run` then `dbt test` for the tables' models; the counts of what changed.

    The batches to merge are chosen here, by commit order (ledger minus merge log), passed to
    dbt as a var, and recorded in the merge log only after `dbt run` succeeded: a crash in
    between re-applies them next time, which changes nothing (latest change per key wins).
    ``full_refresh`` rebuilds the final tables from the whole change log (after ``rebuild``);
    ``test=False`` skips `dbt test` (``watch`` runs it every few ticks, not on every one)."""
    import json

    started = time.monotonic()
    ensure_merge_log(spark)
    batches = {t.name: new_batches(spark, t.name) for t in tables}
    before = {t.name: current_snapshot(spark, t.name) for t in tables}
    # Nothing new for a table that exists: no dbt run for it (not even an empty commit).
    to_run = [t for t in tables if full_refresh or batches[t.name] or before[t.name] is None]
    if to_run:
        try:
            dbt_invoke(
                [
                    "run",
                    *selector(to_run),
                    *(["--full-refresh"] if full_refresh else []),
                    "--vars",
                    json.dumps({"dynamodb_batches": {t.name: batches[t.name] for t in to_run}}),
                ]
            )
        finally:
            # The changes a bucketed merge cached (merge_with_delete), in every outcome. dbt's
            # temporary views live in its own session, the cache in the shared state: clear that
            # (nothing else of this process is cached across a merge).
            spark.catalog.clearCache()
        faults.point("after-merge-commit")
        record_merged(spark, {t.name: batches[t.name] for t in to_run})
    else:
        log.info("nothing new to merge for %s", ", ".join(t.name for t in tables))
    after = {t.name: current_snapshot(spark, t.name) for t in tables}
    if test:
        dbt_invoke(["test", *selector(tables)])
    counts = [diff_counts(spark, t, before[t.name], after[t.name]) for t in tables]
    return counts, time.monotonic() - started
